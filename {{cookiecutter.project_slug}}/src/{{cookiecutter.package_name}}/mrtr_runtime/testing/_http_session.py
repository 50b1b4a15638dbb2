"""`ClientSession` over 2026-07-28 Streamable HTTP (the HTTP wing): what
``ClientSession.connect(url, ...)`` opens.

basic/transports/streamable-http: every request its own POST with the request metadata
headers, the reply JSON or an SSE stream of the request's notifications ending with its
response, cancellation by closing that connection (`_http` reads it, within bounds). A
2026-07-28 result without ``resultType``, a request or a stray response on a stream, and an
event that is not a JSON-RPC message are recorded in ``protocol_violations``. "Custom Headers
from Tool Parameters": a -32020 HeaderMismatch on ``tools/call`` reads ``tools/list`` for the
tool's schema and sends the call once more with the headers it asks for.

A project generated without the HTTP wing has neither this module nor `_http`; `_client` loads
this one by name (`_wings`), never by an import.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from typing import Any, cast

import anyio

from .._jsonrpc import (
    InvalidMessage,
    Request,
    Response,
    encode,
    message_problem,
    parse_json,
    parse_message,
)
from .._wire import META_PROTOCOL_VERSION
from ._client import (
    DEFAULT_CLIENT_INFO,
    VIOLATION_EXCERPT,
    ClientSession,
    NotificationHandler,
    SessionClosed,
    body_exception_as_itself,
    result_of,
)
from ._http import (
    HEADER_MISMATCH,
    Endpoint,
    HttpConnectionError,
    HttpProtocolError,
    HttpResponse,
    Limits,
    SseParser,
    metadata_headers,
    parse_endpoint,
    post,
    read_body,
)
from ._rounds import Callback, Callbacks, InvalidServerResponse, declared_capabilities

__all__ = ("HttpClientSession", "connect")

logger = logging.getLogger(__name__)

#: tools/list pages read to find a tool's schema after -32020.
MAX_TOOL_PAGES = 100
#: 2026-07-28 basic/transports/streamable-http "Sending Messages": the client MUST accept both.
ACCEPT = "application/json, text/event-stream"
#: After the body of a `connect` block: how long its notifications may take to be delivered.
DELIVERY_GRACE_SECONDS = 1.0


class HttpClientSession(ClientSession):
    """A `ClientSession` whose requests are POSTs to one endpoint. Open it with `connect`."""

    def __init__(
        self,
        endpoint: Endpoint,
        headers: Mapping[str, str],
        limits: Limits,
        *,
        capabilities: Mapping[str, Any],
        client_info: Mapping[str, Any],
        callbacks: Callbacks,
        notification_handler: NotificationHandler | None,
        protocol_versions: Sequence[str] | None,
    ) -> None:
        super().__init__(
            None,
            era="modern",
            capabilities=capabilities,
            client_info=client_info,
            callbacks=callbacks,
            notification_handler=notification_handler,
            close_timeout=0.0,
            protocol_versions=protocol_versions,
        )
        self._endpoint = endpoint
        self._headers = dict(headers)
        self._limits = limits
        #: Each tool's inputSchema from the tools/list results seen, for the Mcp-Param
        #: headers its x-mcp-header properties ask for.
        self.tool_schemas: dict[str, Mapping[str, Any]] = {}

    async def _exchange(
        self,
        message: dict[str, Any],
        timeout: float | None,  # noqa: ASYNC109 - request()'s bound, passed on
    ) -> dict[str, Any]:
        with anyio.fail_after(timeout):
            response = await self._http_request(message)
        if response is None:  # pragma: no cover - only a notification gets no response
            raise InvalidServerResponse(f"{message['method']}: no response")
        return result_of(response)

    async def notify(self, method: str, params: Mapping[str, Any] | None = None) -> None:
        message: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
        if params is not None:
            message["params"] = dict(params)
        # "Sending Messages": 202 when accepted; else an error status, whose JSON-RPC error
        # (if the body has one) is raised.
        refused = await self._http_request(message)
        if refused is not None:
            result_of(refused)

    async def send_raw(self, line: bytes) -> None:
        raise RuntimeError("send_raw writes to a stdio server's stdin; this session is HTTP")

    async def _http_request(self, message: dict[str, Any]) -> dict[str, Any] | None:
        """POST one message; the response to it (None for an accepted notification)."""
        method = cast(str, message["method"])
        response = await self._http_exchange(message)
        if response is None:
            return None
        error = response.get("error")
        params = cast("Mapping[str, Any]", message.get("params") or {})
        name = params.get("name")
        if (
            method == "tools/call"
            and isinstance(error, Mapping)
            and error.get("code") == HEADER_MISMATCH
            and isinstance(name, str)
            and await self._learn_tool_schema(name)
        ):
            # "Custom Headers from Tool Parameters": on HeaderMismatch the client SHOULD call
            # tools/list for the tool's inputSchema, then retry with the headers it asks for.
            return await self._http_exchange(message)
        result = response.get("result")
        if method == "tools/list" and isinstance(result, Mapping):
            self._remember_tools(cast("Mapping[str, Any]", result))
        return response

    def _remember_tools(self, result: Mapping[str, Any]) -> None:
        tools = result.get("tools")
        for tool in tools if isinstance(tools, list) else []:
            if isinstance(tool, Mapping) and isinstance(tool.get("name"), str):
                schema = tool.get("inputSchema")
                if isinstance(schema, Mapping):
                    self.tool_schemas[tool["name"]] = cast("Mapping[str, Any]", schema)

    async def _learn_tool_schema(self, name: str) -> bool:
        """Read tools/list (every page, at most MAX_TOOL_PAGES) until `name` is in it; whether
        its schema is new (if not, a retry would send the same headers again)."""
        before = self.tool_schemas.get(name)
        self.tool_schemas.pop(name, None)
        cursor: object = None
        for _ in range(MAX_TOOL_PAGES):
            page = await self.request("tools/list", {} if cursor is None else {"cursor": cursor})
            cursor = page.get("nextCursor")
            if name in self.tool_schemas or not isinstance(cursor, str):
                break
        found = self.tool_schemas.get(name)
        return found is not None and found != before

    async def _http_exchange(self, message: dict[str, Any]) -> dict[str, Any] | None:
        method = cast(str, message["method"])
        params = cast("Mapping[str, Any]", message.get("params") or {})
        meta = params.get("_meta")
        version = meta.get(META_PROTOCOL_VERSION) if isinstance(meta, Mapping) else None
        name = params.get("name")
        schema = self.tool_schemas.get(name) if isinstance(name, str) else None
        fields = {"Content-Type": "application/json", "Accept": ACCEPT}
        fields.update(
            metadata_headers(
                method,
                params,
                version if isinstance(version, str) else self.protocol_version,
                schema if method == "tools/call" else None,
            )
        )
        fields.update(self._headers)
        try:
            async with post(self._endpoint, fields, encode(message), self._limits) as response:
                if "id" not in message and response.status == 202:
                    return None  # "Sending Messages": an accepted notification
                return await self._http_reply(response, message.get("id"), method, self._limits)
        except HttpConnectionError as error:
            raise SessionClosed(f"{method}: {error}") from None
        except HttpProtocolError as error:
            raise InvalidServerResponse(f"{method}: {error}") from None

    async def _http_reply(
        self, response: HttpResponse, request_id: object, method: str, limits: Limits
    ) -> dict[str, Any]:
        kind = response.media_type
        if kind == "text/event-stream" and response.status == 200:
            return await self._http_events(response, request_id, method, limits)
        if kind == "application/json":
            data = await read_body(response, limits.max_body_bytes)
            return self._http_response(data, request_id, method, response.status)
        excerpt = b""
        async for piece in response.body:
            excerpt = piece[:VIOLATION_EXCERPT]
            break
        raise InvalidServerResponse(
            f"{method}: HTTP {response.status} with {kind or 'no content type'}: {excerpt!r}"
        )

    def _http_response(
        self, data: bytes, request_id: object, method: str, status: int
    ) -> dict[str, Any]:
        """A JSON body: the response to `request_id`, or an error response without an id
        (what a server sends for a request it refused before reading it: 401, 403, 413)."""
        refusal = idless_error(data)
        if refusal is not None:
            return refusal
        message = self._http_message(data, method)
        if message is None or "method" in message:
            raise InvalidServerResponse(f"{method}: HTTP {status}: the body is no response")
        if message.get("id") == request_id:
            self._check_result(message, method)
            return message
        raise InvalidServerResponse(f"{method}: HTTP {status}: a response to another id")

    def _http_message(self, data: bytes, method: str) -> dict[str, Any] | None:
        try:
            raw = parse_json(data.rstrip(b"\r\n"))
        except InvalidMessage:
            self._http_violation(method, data, "not JSON")
            return None
        problem = message_problem(raw)
        if problem is not None:
            self._http_violation(method, data, problem)
            return None
        return cast("dict[str, Any]", raw)

    async def _http_events(
        self, response: HttpResponse, request_id: object, method: str, limits: Limits
    ) -> dict[str, Any]:
        """basic/transports/streamable-http "Receiving Messages": the request's notifications,
        then its response, which ends what this client reads of the stream."""
        parser = SseParser(limits.max_event_bytes)
        notifications = 0
        async for piece in response.body:
            for data in parser.feed(piece):
                message = self._http_message(data, method)
                if message is None:
                    continue
                kind = parse_message(message)
                if isinstance(kind, Response):
                    if message.get("id") == request_id:
                        self._check_result(message, method)
                        return message
                    self._http_violation(method, data, "a response to another request")
                elif isinstance(kind, Request):
                    # "The server MUST NOT send independent JSON-RPC requests on this stream":
                    # MRTR carries them in results. There is no way to answer one: dropped.
                    self._http_violation(method, data, "server-initiated request on the stream")
                else:
                    notifications += 1
                    if notifications > limits.max_notifications:
                        raise InvalidServerResponse(
                            f"{method}: more than {limits.max_notifications} notifications "
                            "before the response"
                        )
                    self._on_notification(message)
        raise SessionClosed(f"{method}: the server ended its event stream without a response")

    def _check_result(self, message: Mapping[str, Any], method: str) -> None:
        result = message.get("result")
        if isinstance(result, Mapping) and "resultType" not in result:
            # 2026-07-28 basic/index: "The result MUST include a resultType field".
            self._http_violation(method, b"", "result without resultType")

    def _http_violation(self, method: str, data: bytes, reason: str) -> None:
        excerpt = data[:VIOLATION_EXCERPT]
        suffix = "..." if len(data) > VIOLATION_EXCERPT else ""
        self.protocol_violations.append(f"HTTP reply to {method}: {reason}: {excerpt!r}{suffix}")
        logger.warning("protocol violation in the HTTP reply to %s: %s", method, reason)


@asynccontextmanager
async def connect(
    url: str,
    *,
    token: str | None = None,
    headers: Mapping[str, str] | None = None,
    capabilities: Mapping[str, Any] | None = None,
    elicitation: Callback | None = None,
    sampling: Callback | None = None,
    roots: Callback | None = None,
    notification_handler: NotificationHandler | None = None,
    client_info: Mapping[str, Any] = DEFAULT_CLIENT_INFO,
    tasks: bool = False,
    protocol_versions: Sequence[str] | None = None,
    limits: Limits | None = None,
) -> AsyncIterator[HttpClientSession]:
    """``ClientSession.connect``: a session with the endpoint at ``url`` (see there)."""
    endpoint = parse_endpoint(url)
    extra = dict(headers or {})
    if token is not None:
        extra["Authorization"] = f"Bearer {token}"
    callbacks = Callbacks(elicitation, sampling, roots)
    session = HttpClientSession(
        endpoint,
        extra,
        limits or Limits(),
        capabilities=declared_capabilities(callbacks, capabilities, tasks),
        client_info=client_info,
        callbacks=callbacks,
        notification_handler=notification_handler,
        protocol_versions=protocol_versions,
    )
    session._stdout_done.set()  # no pipe to read: close() has nothing to wait for
    session._stderr_done.set()
    try:
        async with body_exception_as_itself(), anyio.create_task_group() as task_group:
            session._task_group = task_group
            task_group.start_soon(session._deliver_notifications)
            try:
                yield session
            finally:
                session._notify_send.close()
                with anyio.move_on_after(DELIVERY_GRACE_SECONDS, shield=True):
                    await session._notifications_done.wait()
                task_group.cancel_scope.cancel()
    finally:
        session._notify_send.close()
        session._notify_receive.close()


def idless_error(data: bytes) -> dict[str, Any] | None:
    """An error response without an id (2026-07-28 schema: JSONRPCErrorResponse.id is
    optional; a server sends one for a request it refused before reading it), else None."""
    try:
        raw = parse_json(data.rstrip(b"\r\n"))
    except InvalidMessage:
        return None
    if not isinstance(raw, dict) or "id" in raw or raw.get("jsonrpc") != "2.0":
        return None
    error = raw.get("error")
    if set(raw) != {"jsonrpc", "error"} or not isinstance(error, dict):
        return None
    code, message = error.get("code"), error.get("message")
    if isinstance(code, int) and not isinstance(code, bool) and isinstance(message, str):
        return cast("dict[str, Any]", raw)
    return None
