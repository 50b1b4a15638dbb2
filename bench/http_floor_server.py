"""The HTTP floor: `floor_server.py`'s answers behind uvicorn, the least an MCP server on this
HTTP stack costs.

    python http_floor_server.py PORT

Runs in the baked project's venv, on the same uvicorn, httptools and uvloop as the baked server,
with everything uvicorn lets one switch off switched off (logs, lifespan, proxy headers, the
Server and Date headers). A bare ASGI callable reads the body, hands it to `floor_server.Floor`
(the stdio floor's handler: no validation, HMAC `requestState`) and writes the JSON back. It
checks no header, so its figures are what uvicorn and the floor's JSON work cost together: the
gap between it and the baked server is the MCP work, the transport's rules and their plumbing.
Never use this as a server.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

import uvicorn
from floor_server import Floor

Message = MutableMapping[str, Any]

FLOOR = Floor()


async def app(
    scope: Message,
    receive: Callable[[], Awaitable[Message]],
    send: Callable[[Message], Awaitable[None]],
) -> None:
    if scope["type"] != "http":
        return
    body = b""
    more = True
    while more:
        message = await receive()
        body += message.get("body", b"")
        more = message.get("more_body", False)
    response = FLOOR.handle(json.loads(body))
    data = b"" if response is None else json.dumps(response, separators=(",", ":")).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(data)).encode())]
    await send(
        {
            "type": "http.response.start",
            "status": 202 if response is None else 200,
            "headers": headers,
        }
    )
    await send({"type": "http.response.body", "body": data})


if __name__ == "__main__":
    uvicorn.run(
        app,
        host="127.0.0.1",
        port=int(sys.argv[1]),
        log_level="warning",
        access_log=False,
        lifespan="off",
        proxy_headers=False,
        server_header=False,
        date_header=False,
    )
