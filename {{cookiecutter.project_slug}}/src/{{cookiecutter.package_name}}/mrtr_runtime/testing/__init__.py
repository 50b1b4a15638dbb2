"""Clients that drive a server in tests and scripts: in process, or a real one over stdio or HTTP.

A tool test needs a server, a client and the answers a person would give::

    from my_server.app import build_server
    from my_server.mrtr_runtime.testing import Declined, MemoryClient, answers

    async def test_a_no_stops_the_tool():
        client = MemoryClient(build_server(), elicitation=answers({"confirm": Declined()}))
        result = await client.call_tool("my_tool", {"item": "x"})
        assert result.structured == {"status": "declined"}

`MemoryClient(server, ...)`, `ClientSession.spawn(command, ...)` (stdio) and
`ClientSession.connect(url, ...)` (Streamable HTTP, 2026-07-28, in a project generated with the
HTTP wing; ``token=`` for a bearer token) take the same callbacks (``elicitation=``,
``sampling=``, ``roots=``) and offer the same ``call_tool`` / ``get_prompt`` /
``read_resource``, which drive every input round. ``call_tool`` returns a `ToolCallResult`
(``.text``, ``.structured``, ``.is_error``, ``.content``, ``.progress``, ``.task_id``,
``.rounds``, ``.asked``); ``get_prompt`` / ``read_resource`` return the wire's result dict;
``request`` sends one raw request and returns its result dict.
`answers` turns a mapping of input keys to answers into a callback; it must answer every
question a round asks, and fails loudly on a key it does not know. A JSON-RPC error raises
`RpcError`; a server that keeps asking raises `TooManyRounds`, quoting what the server said
when it asked again. A `ClientSession` answered -32022 sends the request once more in the
newest version both sides speak (``protocol_versions=`` sets its own, newest first).

All keep every notification the server sent, in order, in ``notifications`` (log messages,
progress, list changes; `ClientSession` can also hand each to ``notification_handler``).
``MemoryClient.listen(filter)`` opens a 2026-07-28 ``subscriptions/listen`` stream for the
length of an ``async with`` block.
"""

from __future__ import annotations

from .._answers import Cancelled, Declined
from .._jsonrpc import RpcError
from ._client import ClientSession
from ._memory import MemoryClient
from ._result import ToolCallResult
from ._rounds import TooManyRounds, answers

__all__ = (
    "Cancelled",
    "ClientSession",
    "Declined",
    "MemoryClient",
    "RpcError",
    "TooManyRounds",
    "ToolCallResult",
    "answers",
)
