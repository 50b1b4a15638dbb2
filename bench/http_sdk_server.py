"""The reference point over HTTP: the official SDK (mcp==2.3.0) serving `sdk_server.py`'s tools
on its Streamable HTTP transport in stateless mode with JSON responses.

    python http_sdk_server.py PORT

The same `MCPServer` and tools as the stdio reference (imported from `sdk_server.py`), run the
way the SDK documents: `server.run("streamable-http", stateless_http=True, json_response=True)`,
which serves `/mcp` on uvicorn (uvicorn picks httptools and uvloop when they are installed;
`envs.sdk_http_python` installs them, as the baked project's `http` extra does). Logging is at
WARNING, as in a production deployment: no access log, no per-request INFO lines.

Nothing else is tuned: this is what a user of the SDK writes.
"""

from __future__ import annotations

import logging
import sys

from sdk_server import server

if __name__ == "__main__":
    server.settings.log_level = "WARNING"  # uvicorn's level, and with it its access log
    logging.getLogger().setLevel(logging.WARNING)  # the SDK configured the root logger at INFO
    server.run(
        "streamable-http",
        host="127.0.0.1",
        port=int(sys.argv[1]),
        stateless_http=True,
        json_response=True,
    )
