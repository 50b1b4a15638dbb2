"""A reference for the profile, not a benchmarked server: what asyncio itself costs.

The least an asyncio stdio server can do for `tools/call echo`: `connect_read_pipe` /
`connect_write_pipe` protocols (the fds stay registered, writes go straight out), handlers run
eagerly inside `data_received` (a coroutine that never suspends finishes on its first `send`),
no validation, no era rules. `--tasks` runs each request as an `asyncio.Task` instead, as a real
server must for handlers that do suspend. `profile.py` compares it with `floor_server.py` and
the baked server to show how much of the gap to the floor is the event loop and how much is
the runtime. Answers only `server/discover` and `tools/call` echo.
"""

from __future__ import annotations

import asyncio
import functools
import json
import os
import sys
from typing import Any

META = {"io.modelcontextprotocol/serverInfo": {"name": "asyncio-floor", "version": "0"}}


async def handle(message: dict[str, Any]) -> dict[str, Any]:
    if message.get("method") == "server/discover":
        return {
            "resultType": "complete",
            "supportedVersions": ["2026-07-28"],
            "capabilities": {"tools": {}},
            "ttlMs": 0,
            "cacheScope": "private",
            "_meta": META,
        }
    text = message["params"]["arguments"]["text"]
    return {
        "content": [{"type": "text", "text": text}],
        "isError": False,
        "resultType": "complete",
        "_meta": META,
    }


class Wire(asyncio.Protocol):
    def __init__(self, out: asyncio.WriteTransport, done: asyncio.Future[None]) -> None:
        self.buffer = b""
        self.out = out
        self.done = done
        self.eager = "--tasks" not in sys.argv
        self.tasks: set[asyncio.Task[dict[str, Any]]] = set()

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        *lines, self.buffer = self.buffer.split(b"\n")
        for line in lines:
            message = json.loads(line)
            if "id" not in message:
                continue
            request_id = message["id"]
            coroutine = handle(message)
            if self.eager:
                try:
                    coroutine.send(None)
                except StopIteration as finished:
                    self.reply(request_id, finished.value)
                    continue
                raise RuntimeError("a handler suspended; run with --tasks")
            task = asyncio.get_running_loop().create_task(coroutine)
            self.tasks.add(task)
            task.add_done_callback(functools.partial(self.finish, request_id=request_id))

    def finish(self, task: asyncio.Task[dict[str, Any]], *, request_id: object) -> None:
        self.tasks.discard(task)
        self.reply(request_id, task.result())

    def reply(self, request_id: object, result: dict[str, Any]) -> None:
        message = {"jsonrpc": "2.0", "id": request_id, "result": result}
        self.out.write(json.dumps(message, separators=(",", ":")).encode() + b"\n")

    def eof_received(self) -> bool:
        if not self.done.done():
            self.done.set_result(None)
        return False


async def main() -> None:
    loop = asyncio.get_running_loop()
    out, _ = await loop.connect_write_pipe(asyncio.Protocol, os.fdopen(1, "wb", 0))
    done: asyncio.Future[None] = loop.create_future()
    await loop.connect_read_pipe(lambda: Wire(out, done), os.fdopen(0, "rb", 0))
    await done


if __name__ == "__main__":
    asyncio.run(main())
