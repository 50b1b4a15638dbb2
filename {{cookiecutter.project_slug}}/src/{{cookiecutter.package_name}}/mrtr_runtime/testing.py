"""Clients that drive a server in tests and scripts: in process, or a real one over stdio."""

from __future__ import annotations

from ._client import ClientSession, SessionClosed
from ._client_rounds import (
    InputHandler,
    InvalidServerResponse,
    Requester,
    TooManyRounds,
    call_tool_with_inputs,
    default_input_handler,
    request_with_inputs,
)
from ._jsonrpc import RpcError
from ._memory import MemoryClient

__all__ = (
    "ClientSession",
    "InputHandler",
    "InvalidServerResponse",
    "MemoryClient",
    "Requester",
    "RpcError",
    "SessionClosed",
    "TooManyRounds",
    "call_tool_with_inputs",
    "default_input_handler",
    "request_with_inputs",
)
