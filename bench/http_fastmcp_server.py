"""The other pick over HTTP: FastMCP 4.x (fastmcp==4.2.3) serving `fastmcp_server.py`'s tools
on its Streamable HTTP transport in stateless mode with JSON responses.

    python http_fastmcp_server.py PORT

The same `FastMCP` server and tools as over stdio (imported from `fastmcp_server.py`), run the
way FastMCP documents: `server.run("http", stateless_http=True, json_response=True)`, which
serves `/mcp` on uvicorn (`fastmcp/server/mixins/transport.py`, `run_http_async`; uvicorn picks
httptools and uvloop when they are installed, and `envs.fastmcp_http_python` installs the baked
venv's versions). Logging is at WARNING, as in a production deployment: no access log, no
per-request INFO lines. Its MRTR state is sealed under a per-process key, which is what
FastMCP does without `request_state_security=`: one process, as measured here, needs no more.

Nothing else is tuned: this is what a user of FastMCP writes.
"""

from __future__ import annotations

import sys

from fastmcp_server import server

if __name__ == "__main__":
    server.run(
        "http",
        host="127.0.0.1",
        port=int(sys.argv[1]),
        log_level="WARNING",  # FastMCP's loggers and uvicorn's, and with it its access log
        stateless_http=True,
        json_response=True,
    )
