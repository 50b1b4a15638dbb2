"""FastMCP with `fastmcp-tasks` over HTTP: `fastmcp_tasks_server.py`'s server and tool on its
Streamable HTTP transport, stateless with JSON responses, as `http_fastmcp_server.py` runs the
stdio section's.

    python http_fastmcp_tasks_server.py PORT

The task engine (Docket) runs in the app's lifespan, its backend from `FASTMCP_DOCKET_URL`.
Logging is at WARNING, as in a production deployment. Nothing else is tuned.
"""

from __future__ import annotations

import sys

from fastmcp_tasks_server import server

if __name__ == "__main__":
    server.run(
        "http",
        host="127.0.0.1",
        port=int(sys.argv[1]),
        log_level="WARNING",
        stateless_http=True,
        json_response=True,
    )
