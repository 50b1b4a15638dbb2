"""mrtr_runtime: a small MCP server runtime with multi round-trip requests (SEP-2322).

Vendored from the mrtr-server cookiecutter template, runtime version 0.1.0. It is part of
this project now: change it if you must, but tools should need only what is exported here.

Serves MCP 2026-07-28 (stateless, per-request `_meta`) and, in the same process, 2025-11-25
(`initialize`) over stdio. Depends on anyio and pydantic only.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from ._capabilities import ClientCapabilities
from ._context import Cancelled, Context, InvalidInputResponse
from ._inputs import InputRequest, elicit_form, elicit_url, list_roots, sample
from ._keys import (
    KeyRing,
    Rotation,
    SigningConfigError,
    SigningKey,
    WeakSigningKey,
    codec_from_environment,
    default_previous_keys_file,
    new_signing_key_hex,
    parse_signing_key,
    rotate_key_file,
    write_key_file,
)
from ._registry import Registry, ToolAnnotations
from ._results import InputRequired, ToolError, ToolResult
from ._router import LEGACY_VERSIONS, MODERN_VERSIONS, Server
from ._state import Binding, InvalidRequestState, RequestStateCodec, RoundState, digest_arguments
from ._stdio import configure_logging, serve_stdio

if TYPE_CHECKING:
    from ._answers import ElicitResult, Root, RootsResult, SamplingResult
    from ._client import ClientSession, SessionClosed
    from ._client_rounds import (
        InputHandler,
        InvalidServerResponse,
        Requester,
        RpcError,
        TooManyRounds,
        call_tool_with_inputs,
        default_input_handler,
        request_with_inputs,
    )
    from ._memory import MemoryClient

__version__ = "0.1.0"

# Imported on first use (PEP 562). The client side is for tests and scripts: a serving process
# never needs it. The answer models are pydantic models: the first answer a server sends must
# not wait for pydantic, which comes with the tools.
_LAZY = {
    "ElicitResult": "._answers",
    "Root": "._answers",
    "RootsResult": "._answers",
    "SamplingResult": "._answers",
    "ClientSession": "._client",
    "SessionClosed": "._client",
    "InputHandler": "._client_rounds",
    "InvalidServerResponse": "._client_rounds",
    "Requester": "._client_rounds",
    "RpcError": "._client_rounds",
    "TooManyRounds": "._client_rounds",
    "call_tool_with_inputs": "._client_rounds",
    "default_input_handler": "._client_rounds",
    "request_with_inputs": "._client_rounds",
    "MemoryClient": "._memory",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module, __name__), name)
    globals()[name] = value
    return value


__all__ = (
    "LEGACY_VERSIONS",
    "MODERN_VERSIONS",
    "Binding",
    "Cancelled",
    "ClientCapabilities",
    "ClientSession",
    "Context",
    "ElicitResult",
    "InputHandler",
    "InputRequest",
    "InputRequired",
    "InvalidInputResponse",
    "InvalidRequestState",
    "InvalidServerResponse",
    "KeyRing",
    "MemoryClient",
    "Registry",
    "RequestStateCodec",
    "Requester",
    "Root",
    "RootsResult",
    "Rotation",
    "RoundState",
    "RpcError",
    "SamplingResult",
    "Server",
    "SessionClosed",
    "SigningConfigError",
    "SigningKey",
    "TooManyRounds",
    "ToolAnnotations",
    "ToolError",
    "ToolResult",
    "WeakSigningKey",
    "call_tool_with_inputs",
    "codec_from_environment",
    "configure_logging",
    "default_input_handler",
    "default_previous_keys_file",
    "digest_arguments",
    "elicit_form",
    "elicit_url",
    "list_roots",
    "new_signing_key_hex",
    "parse_signing_key",
    "request_with_inputs",
    "rotate_key_file",
    "sample",
    "serve_stdio",
    "write_key_file",
)
