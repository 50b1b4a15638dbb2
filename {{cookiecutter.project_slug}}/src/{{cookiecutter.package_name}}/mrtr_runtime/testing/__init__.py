"""Clients that drive a server in tests and scripts: in process, or a real one over stdio.

A tool test needs a server and a client::

    from my_server.app import build_server
    from my_server.mrtr_runtime.testing import MemoryClient, answers

    async def test_a_no_stops_the_tool():
        say_no = answers({"confirm": {"confirmed": False}, "target": {"name": "prod"}})
        client = MemoryClient(build_server(), elicitation=say_no)
        result = await client.call_tool("my_tool", {"item": "x"})

`MemoryClient(server, ...)` and `ClientSession.spawn(command, ...)` take the same callbacks
(``elicitation=``, ``sampling=``, ``roots=``) and offer the same ``call_tool`` /
``get_prompt`` / ``read_resource``, which drive every input round; ``request`` sends one raw
request. `answers` turns a mapping of input keys to answers into a callback; it must answer
every question a round asks, and fails loudly on a key it does not know.

Both keep every notification the server sent, in order, in ``notifications`` (log messages,
progress, list changes; `ClientSession` can also hand each to ``notification_handler``).
``MemoryClient.listen(filter)`` opens a 2026-07-28 ``subscriptions/listen`` stream for the
length of an ``async with`` block.
"""

from __future__ import annotations

from .._answers import Accepted, Cancelled, Declined
from .._jsonrpc import RpcError
from ._client import ClientSession, SessionClosed
from ._memory import MemoryClient, Subscription
from ._rounds import (
    InputHandler,
    InvalidServerResponse,
    Requester,
    TooManyRounds,
    UnexpectedInput,
    answers,
    call_tool_with_inputs,
    default_input_handler,
    request_with_inputs,
)

__all__ = (
    "Accepted",
    "Cancelled",
    "ClientSession",
    "Declined",
    "InputHandler",
    "InvalidServerResponse",
    "MemoryClient",
    "Requester",
    "RpcError",
    "SessionClosed",
    "Subscription",
    "TooManyRounds",
    "UnexpectedInput",
    "answers",
    "call_tool_with_inputs",
    "default_input_handler",
    "request_with_inputs",
)
