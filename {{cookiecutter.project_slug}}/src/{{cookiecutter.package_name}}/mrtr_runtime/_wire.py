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
    "LOG_LEVELS",
    "META_CLIENT_CAPABILITIES",
    "META_CLIENT_INFO",
    "META_LOG_LEVEL",
    "META_PROTOCOL_VERSION",
    "META_SERVER_INFO",
    "META_SUBSCRIPTION_ID",
    "MODERN_VERSIONS",
    "SAMPLE",
    "TASKS_EXTENSION",
    "TASK_METHODS",
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
#: server/utilities/logging: the per-request level; without it no `notifications/message`.
META_LOG_LEVEL: Final = "io.modelcontextprotocol/logLevel"
#: basic/patterns/subscriptions: on every message of a `subscriptions/listen` stream.
META_SUBSCRIPTION_ID: Final = "io.modelcontextprotocol/subscriptionId"

#: server/utilities/logging "Log Levels" (RFC 5424 severities), least severe first.
LOG_LEVELS: Final = (
    "debug",
    "info",
    "notice",
    "warning",
    "error",
    "critical",
    "alert",
    "emergency",
)

# basic/patterns/mrtr: the three requests an `inputRequests` value may be.
ELICIT: Final = "elicitation/create"
SAMPLE: Final = "sampling/createMessage"
LIST_ROOTS: Final = "roots/list"
INPUT_METHODS: Final = frozenset({ELICIT, SAMPLE, LIST_ROOTS})

#: The tasks extension (SEP-2663, `io.modelcontextprotocol/tasks`): its identifier in
#: `capabilities.extensions`, and the methods it adds (2026-07-28 only).
TASKS_EXTENSION: Final = "io.modelcontextprotocol/tasks"
TASK_METHODS: Final = frozenset({"tasks/get", "tasks/update", "tasks/cancel"})
#: The skills extension (SEP-2640): its methods, against 2026-07-28 (`_skills`).
SKILLS_EXTENSION: Final = "io.modelcontextprotocol/skills"
SKILL_METHODS: Final = frozenset({"skills/list", "skills/get", "resources/directory/read"})
