"""The server's protocol core: a request in, a response out, no I/O of its own.

It decides each request's era -- 2026-07-28 when the request carries modern `params._meta`,
2025-11-25 once this process has been `initialize`d (basic/versioning "Backward
Compatibility": a dual-era server MAY serve both on one stdio process) -- then applies that
era's rules and calls the registry. The transport owns the pipes and hands us a `Peer` for
the few things that must travel the other way.
"""

from __future__ import annotations

import base64
import json
import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final, Protocol

from pydantic import BaseModel, ValidationError

from ._capabilities import ClientCapabilities
from ._context import Context, Era, InvalidInputResponse
from ._dispatch import Call, run_round
from ._jsonrpc import (
    INTERNAL_ERROR,
    INVALID_PARAMS,
    INVALID_REQUEST,
    METHOD_NOT_FOUND,
    UNSUPPORTED_PROTOCOL_VERSION,
    JSONObject,
    Notification,
    ProtocolError,
    Request,
    RequestId,
    error_response,
    success_response,
)
from ._legacy import run_legacy
from ._registry import (
    PromptDef,
    Registry,
    ResourceDef,
    ToolDef,
    describe_validation_error,
    structured_text,
)
from ._results import ToolError, ToolResult, text_content
from ._state import RequestStateCodec

__all__ = (
    "LEGACY_VERSIONS",
    "MODERN_VERSIONS",
    "Peer",
    "Server",
    "Session",
)

#: Served per request with `_meta` (basic/versioning).
MODERN_VERSIONS: Final = ("2026-07-28",)
#: Served after `initialize`, newest first; an unknown request gets the newest (2025-11-25
#: basic/lifecycle: the server "MUST respond with another protocol version it supports").
LEGACY_VERSIONS: Final = ("2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05")

META_PROTOCOL_VERSION: Final = "io.modelcontextprotocol/protocolVersion"
META_CLIENT_CAPABILITIES: Final = "io.modelcontextprotocol/clientCapabilities"
META_SERVER_INFO: Final = "io.modelcontextprotocol/serverInfo"

#: server/utilities/caching: list results carry `ttlMs` and `cacheScope`. The lists are fixed
#: for the life of the process, and hosts restart the process to pick up new tools.
LIST_TTL_MS: Final = 300_000

_MODERN_METHODS: Final = frozenset(
    {
        "server/discover",
        "tools/list",
        "tools/call",
        "prompts/list",
        "prompts/get",
        "resources/list",
        "resources/templates/list",
        "resources/read",
    }
)
_LEGACY_METHODS: Final = (_MODERN_METHODS - {"server/discover"}) | {"ping"}
_CACHEABLE: Final = frozenset(
    {"server/discover", "tools/list", "prompts/list", "resources/list", "resources/templates/list"}
)

_logger = logging.getLogger("mrtr_runtime")


class Peer(Protocol):
    """What the transport lets the core send back to the client."""

    async def notify(self, method: str, params: dict[str, Any]) -> None: ...

    async def request(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        """Legacy era only: a server-to-client request; raises `ClientRequestFailed`."""
        ...


@dataclass
class Session:
    """The little a stdio process remembers: whether, and how, a legacy client initialized it."""

    legacy_version: str | None = None
    legacy_capabilities: ClientCapabilities = field(default_factory=ClientCapabilities)


@dataclass(slots=True)
class _Scope:
    """The era, version and capabilities a single request is served under."""

    era: Era
    version: str
    capabilities: ClientCapabilities
    progress_token: str | int | None


def _plain_text(result: ToolResult) -> bool:
    return result.structured is None and all(
        block.get("type") == "text" and isinstance(block.get("text"), str) and len(block) == 2
        for block in result.content
    )


def _json_safe(value: Any) -> bool:
    try:
        json.dumps(value, allow_nan=False)
    except (TypeError, ValueError, RecursionError):
        return False
    return True


class Server:
    """A dual-era MCP server over a `Registry`; the transport calls `handle_request`."""

    def __init__(
        self,
        *,
        name: str,
        version: str,
        registry: Registry,
        state: RequestStateCodec,
        title: str | None = None,
        instructions: str | None = None,
    ) -> None:
        self.registry = registry
        self.state = state
        self.instructions = instructions
        self.info: dict[str, Any] = {"name": name, "version": version}
        if title is not None:
            self.info["title"] = title
        self._result_meta: Final = {META_SERVER_INFO: self.info}
        self.capabilities: dict[str, Any] = {"tools": {}, "prompts": {}, "resources": {}}

    # -- entry points -------------------------------------------------------------------

    async def handle_request(self, request: Request, session: Session, peer: Peer) -> JSONObject:
        """The response message for `request`. Never raises for anything a client sends."""
        try:
            result = await self._serve(request, session, peer)
        except ProtocolError as error:
            return error_response(request.id, error.code, error.message, error.data)
        except Exception:
            _logger.exception("internal error serving %s", request.method)
            return error_response(request.id, INTERNAL_ERROR, "Internal error")
        return success_response(request.id, result)

    def warm_up(self) -> None:
        """Load what `server/discover` did not need; raises if a tool module is broken."""
        self.registry.ensure_loaded()

    def handle_notification(self, notification: Notification) -> RequestId | None:
        """The id of a request to cancel, if `notification` asks for that; otherwise None.

        basic/patterns/cancellation: invalid or unknown cancellations SHOULD be ignored.
        """
        if notification.method != "notifications/cancelled":
            return None
        request_id = notification.params.get("requestId")
        if isinstance(request_id, str) or (
            isinstance(request_id, int) and not isinstance(request_id, bool)
        ):
            return request_id
        return None

    # -- era and version rules ----------------------------------------------------------

    async def _serve(self, request: Request, session: Session, peer: Peer) -> JSONObject:
        method, params = request.method, request.params
        meta = params.get("_meta")
        if method == "initialize" and not (
            isinstance(meta, dict) and META_PROTOCOL_VERSION in meta
        ):
            # With modern _meta the request is served by 2026-07-28 rules, which have no
            # initialize (basic/versioning): it falls through to -32601 below.
            return self._initialize(params, session)
        if method not in _MODERN_METHODS and method not in _LEGACY_METHODS:
            raise ProtocolError(METHOD_NOT_FOUND, f"Method not found: {method}")
        scope = self._scope(params, session)
        allowed = _MODERN_METHODS if scope.era == "modern" else _LEGACY_METHODS
        if method not in allowed:
            raise ProtocolError(METHOD_NOT_FOUND, f"Method not found in {scope.version}: {method}")
        result = await self._dispatch(method, params, scope, peer)
        if scope.era == "legacy":
            return result
        # basic/index: the result MUST include resultType; servers SHOULD put serverInfo in _meta.
        result.setdefault("resultType", "complete")
        result["_meta"] = {**result.get("_meta", {}), **self._result_meta}
        if method in _CACHEABLE or (method == "resources/read" and "contents" in result):
            # caching: results of retries carrying inputResponses/requestState MUST NOT be cached.
            retried = "inputResponses" in params or "requestState" in params
            result.setdefault("ttlMs", 0 if retried else LIST_TTL_MS)
            result.setdefault("cacheScope", "private" if retried else "public")
        return result

    def _scope(self, params: Mapping[str, Any], session: Session) -> _Scope:
        meta = params.get("_meta")
        meta = meta if isinstance(meta, dict) else None
        progress_token = meta.get("progressToken") if meta is not None else None
        if not isinstance(progress_token, str | int) or isinstance(progress_token, bool):
            progress_token = None
        modern = meta is not None and META_PROTOCOL_VERSION in meta
        if not modern and session.legacy_version is not None:
            return _Scope(
                "legacy", session.legacy_version, session.legacy_capabilities, progress_token
            )
        # basic/index: "A request missing any required field is malformed; the server MUST
        # reject it with JSON-RPC error code -32602".
        if meta is None or META_PROTOCOL_VERSION not in meta:
            raise ProtocolError(
                INVALID_PARAMS,
                f"Missing params._meta[{META_PROTOCOL_VERSION!r}]: 2026-07-28 requests carry "
                "their protocol version and client capabilities (2025-11-25 clients send "
                "initialize first)",
            )
        requested = meta[META_PROTOCOL_VERSION]
        if not isinstance(requested, str):
            raise ProtocolError(INVALID_PARAMS, f"{META_PROTOCOL_VERSION} must be a string")
        capabilities = meta.get(META_CLIENT_CAPABILITIES)
        if not isinstance(capabilities, dict):
            raise ProtocolError(
                INVALID_PARAMS, f"Missing or invalid params._meta[{META_CLIENT_CAPABILITIES!r}]"
            )
        if requested not in MODERN_VERSIONS:
            # basic/versioning: UnsupportedProtocolVersionError.
            raise ProtocolError(
                UNSUPPORTED_PROTOCOL_VERSION,
                f"Unsupported protocol version: {requested}",
                {"supported": list(MODERN_VERSIONS), "requested": requested},
            )
        return _Scope("modern", requested, ClientCapabilities(capabilities), progress_token)

    def _initialize(self, params: Mapping[str, Any], session: Session) -> JSONObject:
        requested = params.get("protocolVersion")
        capabilities = params.get("capabilities", {})
        if not isinstance(requested, str) or not isinstance(capabilities, dict):
            raise ProtocolError(
                INVALID_PARAMS,
                "initialize needs a string protocolVersion and a capabilities object",
            )
        version = requested if requested in LEGACY_VERSIONS else LEGACY_VERSIONS[0]
        session.legacy_version = version
        session.legacy_capabilities = ClientCapabilities(capabilities)
        result: JSONObject = {
            "protocolVersion": version,
            "capabilities": self.capabilities,
            "serverInfo": self.info,
        }
        if self.instructions:
            result["instructions"] = self.instructions
        return result

    # -- methods ------------------------------------------------------------------------

    async def _dispatch(
        self, method: str, params: Mapping[str, Any], scope: _Scope, peer: Peer
    ) -> JSONObject:
        if method == "server/discover":
            discover: JSONObject = {
                "supportedVersions": list(MODERN_VERSIONS),
                "capabilities": self.capabilities,
            }
            if self.instructions:
                discover["instructions"] = self.instructions
            return discover
        if method == "ping":
            return {}
        self.registry.ensure_loaded()
        if method.endswith("/list"):
            return self._list(method, params)
        call = self._call(method, params)
        if scope.era == "modern":
            return await run_round(
                call,
                params,
                codec=self.state,
                capabilities=scope.capabilities,
                make_context=lambda answers, token: self._context(scope, peer, answers, token),
            )
        return await run_legacy(
            call,
            params,
            capabilities=scope.capabilities,
            make_context=lambda answers, token: self._context(scope, peer, answers, token),
            ask=peer.request,
            unanswerable=self._unanswerable(method),
        )

    def _context(
        self, scope: _Scope, peer: Peer, answers: Mapping[str, Any], token: str | None
    ) -> Context:
        return Context(
            answers=answers,
            request_state=token,
            client_capabilities=scope.capabilities,
            protocol_version=scope.version,
            era=scope.era,
            progress_token=scope.progress_token,
            notify=peer.notify,
        )

    def _list(self, method: str, params: Mapping[str, Any]) -> JSONObject:
        # utilities/pagination: everything fits on one page, so any cursor is one we never issued.
        if params.get("cursor") is not None:
            raise ProtocolError(INVALID_PARAMS, "Invalid cursor")
        registry = self.registry
        if method == "tools/list":
            return {"tools": [dict(tool.wire) for tool in registry.tools.values()]}
        if method == "prompts/list":
            return {"prompts": [dict(prompt.wire) for prompt in registry.prompts.values()]}
        if method == "resources/list":
            return {"resources": [dict(resource.wire) for resource in registry.resources.values()]}
        return {"resourceTemplates": [dict(t.resource.wire) for t in registry.resource_templates]}

    def _call(self, method: str, params: Mapping[str, Any]) -> Call:
        if method == "tools/call":
            return self._tool_call(params)
        if method == "prompts/get":
            return self._prompt_call(params)
        return self._resource_call(params)

    @staticmethod
    def _unanswerable(method: str) -> Any:
        def for_tools(message: str) -> JSONObject:
            return ToolResult.error(message).to_wire()

        def for_others(message: str) -> JSONObject:
            raise ProtocolError(INVALID_REQUEST, message)

        return for_tools if method == "tools/call" else for_others

    # -- tools --------------------------------------------------------------------------

    def _tool_call(self, params: Mapping[str, Any]) -> Call:
        name = params.get("name")
        if not isinstance(name, str):
            raise ProtocolError(INVALID_PARAMS, "tools/call needs a string 'name'")
        tool = self.registry.tools.get(name)
        if tool is None:
            raise ProtocolError(INVALID_PARAMS, f"Unknown tool: {name}")
        arguments = params.get("arguments")
        if arguments is None:
            arguments = {}
        if not isinstance(arguments, dict):
            raise ProtocolError(INVALID_PARAMS, "tools/call 'arguments' must be an object")
        try:
            parsed: BaseModel | None = tool.parse_arguments(arguments)
            invalid = ""
        except ValidationError as error:
            parsed, invalid = None, describe_validation_error(error)

        async def run(context: Context) -> Any:
            if parsed is None:
                # server/tools: input validation errors are tool results the model can act on.
                return ToolResult.error(f"Invalid arguments for tool {name!r}: {invalid}")
            try:
                return await tool.call(parsed, context)
            except InvalidInputResponse:
                raise
            except ToolError as error:
                return ToolResult.error(str(error))
            except Exception as error:
                # The message may hold secrets from a library; the log gets the whole story.
                _logger.exception("tool %r raised", name)
                return ToolResult.error(
                    f"Tool {name!r} failed with {type(error).__name__}; see the server log."
                )

        return Call("tools/call", name, arguments, run, lambda outcome: _tool_result(tool, outcome))

    # -- prompts ------------------------------------------------------------------------

    def _prompt_call(self, params: Mapping[str, Any]) -> Call:
        name = params.get("name")
        if not isinstance(name, str):
            raise ProtocolError(INVALID_PARAMS, "prompts/get needs a string 'name'")
        prompt = self.registry.prompts.get(name)
        if prompt is None:
            raise ProtocolError(INVALID_PARAMS, f"Unknown prompt: {name}")
        arguments = params.get("arguments")
        if arguments is None:
            arguments = {}
        if not isinstance(arguments, dict):
            raise ProtocolError(INVALID_PARAMS, "prompts/get 'arguments' must be an object")
        try:
            parsed = prompt.signature.model.model_validate(arguments)
        except ValidationError as error:
            raise ProtocolError(
                INVALID_PARAMS,
                f"Invalid arguments for prompt {name!r}: {describe_validation_error(error)}",
            ) from None

        async def run(context: Context) -> Any:
            try:
                return await prompt.call(parsed, context)
            except InvalidInputResponse:
                raise
            except Exception as error:
                _logger.exception("prompt %r raised", name)
                raise ProtocolError(INTERNAL_ERROR, f"Prompt {name!r} failed") from error

        return Call(
            "prompts/get", name, arguments, run, lambda outcome: _prompt_result(prompt, outcome)
        )

    # -- resources ----------------------------------------------------------------------

    def _resource_call(self, params: Mapping[str, Any]) -> Call:
        uri = params.get("uri")
        if not isinstance(uri, str):
            raise ProtocolError(INVALID_PARAMS, "resources/read needs a string 'uri'")
        found = self.registry.find_resource(uri)
        if found is None:
            # server/resources: resource not found is -32602 in 2026-07-28 (no longer -32002).
            raise ProtocolError(INVALID_PARAMS, f"Resource not found: {uri}", {"uri": uri})
        resource, variables = found

        async def run(context: Context) -> Any:
            try:
                return await resource.call(variables, context)
            except InvalidInputResponse:
                raise
            except ValidationError as error:
                raise ProtocolError(
                    INVALID_PARAMS,
                    f"Invalid resource URI {uri}: {describe_validation_error(error)}",
                ) from None
            except Exception as error:
                _logger.exception("resource %r raised", uri)
                raise ProtocolError(INTERNAL_ERROR, f"Reading {uri} failed") from error

        return Call(
            "resources/read", uri, {}, run, lambda outcome: _resource_result(resource, uri, outcome)
        )


def _tool_result(tool: ToolDef, outcome: Any) -> JSONObject:
    if isinstance(outcome, ToolResult):
        result = outcome
    elif isinstance(outcome, str):
        result = ToolResult.text(outcome)
    elif outcome is None:
        result = ToolResult()
    else:
        structured = (
            outcome.model_dump(mode="json", by_alias=True)
            if isinstance(outcome, BaseModel)
            else outcome
        )
        if not _json_safe(structured):
            _logger.error(
                "tool %r returned a %s, which is not JSON", tool.name, type(outcome).__name__
            )
            return ToolResult.error(
                f"Tool {tool.name!r} returned a value that is not JSON"
            ).to_wire()
        result = ToolResult.text(structured_text(structured), structured=structured)
    if tool.output_model is not None and not result.is_error:
        # server/tools: with an outputSchema, servers MUST provide conforming structured results.
        try:
            tool.output_model.model_validate(result.structured)
        except ValidationError as error:
            _logger.error(
                "tool %r broke its outputSchema: %s", tool.name, describe_validation_error(error)
            )
            return ToolResult.error(
                f"Tool {tool.name!r} returned output that breaks its outputSchema"
            ).to_wire()
    wire = result.to_wire()
    # Only what a tool built by hand can hold a non-JSON value; plain text cannot, and the
    # hot path should not encode every result twice.
    if not _plain_text(result) and not _json_safe(wire):
        _logger.error("tool %r returned a result that is not JSON", tool.name)
        return ToolResult.error(f"Tool {tool.name!r} returned a value that is not JSON").to_wire()
    return wire


def _prompt_result(prompt: PromptDef, outcome: Any) -> JSONObject:
    if isinstance(outcome, str):
        messages: list[Any] = [{"role": "user", "content": text_content(outcome)}]
    elif isinstance(outcome, list) and all(
        isinstance(message, dict) and "role" in message and "content" in message
        for message in outcome
    ):
        messages = outcome
    else:
        _logger.error("prompt %r returned %s", prompt.name, type(outcome).__name__)
        raise ProtocolError(INTERNAL_ERROR, f"Prompt {prompt.name!r} returned no messages")
    result: JSONObject = {"messages": messages}
    if prompt.description:
        result["description"] = prompt.description
    return result


def _resource_result(resource: ResourceDef, uri: str, outcome: Any) -> JSONObject:
    content: JSONObject = {"uri": uri}
    if resource.mime_type:
        content["mimeType"] = resource.mime_type
    if isinstance(outcome, str):
        content["text"] = outcome
    elif isinstance(outcome, bytes):
        content["blob"] = base64.b64encode(outcome).decode("ascii")
    else:
        _logger.error("resource %r returned %s", uri, type(outcome).__name__)
        raise ProtocolError(INTERNAL_ERROR, f"Reading {uri} returned neither text nor bytes")
    return {"contents": [content]}
