"""MCP's wire names, defined once for the server and the clients: versions, `_meta` keys, methods.

Plain constants: no imports, nothing that could point up the floors.
"""

from __future__ import annotations

from typing import Final

__all__ = (
    "ELICIT",
    "INPUT_METHODS",
    "LEGACY_VERSIONS",
    "LIST_ROOTS",
    "META_CLIENT_CAPABILITIES",
    "META_CLIENT_INFO",
    "META_PROTOCOL_VERSION",
    "META_SERVER_INFO",
    "MODERN_VERSIONS",
    "SAMPLE",
)

#: Served per request with `_meta` (basic/versioning).
MODERN_VERSIONS: Final = ("2026-07-28",)
#: Served after `initialize`, newest first; an unknown request gets the newest (2025-11-25
#: basic/lifecycle: the server "MUST respond with another protocol version it supports").
LEGACY_VERSIONS: Final = ("2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05")

# 2026-07-28 basic/index: what every request's `params._meta` carries, and what results carry.
META_PROTOCOL_VERSION: Final = "io.modelcontextprotocol/protocolVersion"
META_CLIENT_CAPABILITIES: Final = "io.modelcontextprotocol/clientCapabilities"
META_CLIENT_INFO: Final = "io.modelcontextprotocol/clientInfo"
META_SERVER_INFO: Final = "io.modelcontextprotocol/serverInfo"

# basic/patterns/mrtr: the three requests an `inputRequests` value may be.
ELICIT: Final = "elicitation/create"
SAMPLE: Final = "sampling/createMessage"
LIST_ROOTS: Final = "roots/list"
INPUT_METHODS: Final = frozenset({ELICIT, SAMPLE, LIST_ROOTS})
