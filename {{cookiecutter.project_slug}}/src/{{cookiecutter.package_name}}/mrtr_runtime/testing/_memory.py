"""An in-process client for tests: a whole server, no subprocess and no pipes.

Requests reach the server as Python objects (so a test can reach paths the wire cannot, like a
10,000-deep argument); everything the server sends back goes through the stdio encoder and
the client's strict validator first (`_jsonrpc.encode`, `parse_json`, `message_problem`), so
a result that could not cross a real pipe fails here as it would there.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from itertools import count
from typing import Any, Literal, cast

from .._context import Cancellation, RequestCancelled
from .._jsonrpc import (
    INTERNAL_ERROR,
    JSONObject,
    Notification,
    Request,
    RequestId,
    RpcError,
    encode,
    error_response,
    message_problem,
    parse_json,
)
from .._router import Server, Session
from .._wings import WingMissing, missing_wing
from .._wire import (
    LEGACY_VERSIONS,
    META_CLIENT_CAPABILITIES,
    META_CLIENT_INFO,
    META_PROTOCOL_VERSION,
    META_SUBSCRIPTION_ID,
    MODERN_VERSIONS,
)
from ._rounds import (
    Callback,
    Callbacks,
    InvalidServerResponse,
    RoundsClient,
    declared_capabilities,
)

__all__ = ("MemoryClient", "Subscription")

Era = Literal["modern", "legacy"]

CLIENT_INFO: Mapping[str, str] = {"name": "mrtr-memory-client", "version": "1.0"}

_logger = logging.getLogger("mrtr_runtime")


class MemoryClient(RoundsClient):
    """Speaks to `server` the way a client would, through its public `handle_request`.

    ``MemoryClient(server, elicitation=answers({...}))``. The callbacks (each
    ``async (params) -> full result``) answer MRTR rounds in the 2026-07-28 era and the
    server's real requests in the 2025-11-25 era. ``capabilities=None`` declares exactly the
    callbacks given. ``era="legacy"`` sends ``initialize`` before the first request (or call
    ``initialize(version)`` yourself). ``tasks=True`` declares the tasks extension too: a call
    the server answers with a task is followed to its end (``tasks/get``, ``tasks/update``),
    polled every 50 ms at most: the server is in this process, and a test of a task tool should
    not sleep out the second a remote client waits between polls.
    """

    max_poll_seconds: float | None = 0.05

    def __init__(
        self,
        server: Server,
        *,
        capabilities: Mapping[str, Any] | None = None,
        elicitation: Callback | None = None,
        sampling: Callback | None = None,
        roots: Callback | None = None,
        era: Era = "modern",
        protocol_version: str = MODERN_VERSIONS[0],
        tasks: bool = False,
    ) -> None:
        if era not in ("modern", "legacy"):
            raise ValueError(f"era must be 'modern' or 'legacy', not {era!r}")
        if tasks and not server.serves_tasks:
            # Every call would run inline and `.task_id` stay None: say why, at the start.
            raise WingMissing(f"MemoryClient(tasks=True): {missing_wing('tasks')}")
        self.server = server
        self.callbacks = Callbacks(elicitation, sampling, roots)
        self.capabilities: dict[str, Any] = declared_capabilities(
            self.callbacks, capabilities, tasks
        )
        self.era: Era = era
        #: Sent in every modern request's `_meta` (a test may pick an unsupported one).
        self.protocol_version = protocol_version
        self.session = Session()
        self.initialize_result: dict[str, Any] | None = None
        #: Notifications the server sent (progress, log messages, list changes...), in order.
        self.notifications: list[JSONObject] = []
        #: Requests being served, so that `notifications/cancelled` reaches them.
        self._in_flight: dict[RequestId, tuple[Cancellation, asyncio.Task[JSONObject]]] = {}
        #: Set when a notification arrives (what `listen` waits on for its acknowledgment).
        self._arrival = asyncio.Event()
        #: Legacy era: the server's requests to this client ({"method", "params"}), in order.
        self.server_requests: list[JSONObject] = []
        self._callback_failures: list[Exception] = []
        self._initialized = False
        self._ids = count(1)

    async def initialize(self, protocol_version: str = LEGACY_VERSIONS[0]) -> dict[str, Any]:
        """2025-11-25 basic/lifecycle: from now on requests go out without `_meta`."""
        self._initialized = True
        self.era = "legacy"
        result = await self.request(
            "initialize",
            {
                "protocolVersion": protocol_version,
                "capabilities": self.capabilities,
                "clientInfo": dict(CLIENT_INFO),
            },
        )
        self.initialize_result = result
        return result

    async def send(self, message: JSONObject) -> JSONObject | None:
        """One raw message in; the response out (None for notifications and for a request
        cancelled with `notifications/cancelled` before it finished, which gets none)."""
        if "id" not in message:
            target = self.server.handle_notification(
                Notification(message["method"], message.get("params", {}))
            )
            running = self._in_flight.get(target) if target is not None else None
            if running is not None:
                # What the stdio transport does: the flag for handlers, then the task.
                running[0].cancel()
                running[1].cancel()
            return None
        request = Request(message["id"], message["method"], message.get("params", {}))
        cancellation = Cancellation()
        task = asyncio.create_task(
            self.server.handle_request(request, self.session, _Peer(self), cancellation)
        )
        self._in_flight[request.id] = (cancellation, task)
        try:
            await asyncio.wait({task})
        finally:
            del self._in_flight[request.id]
            if not task.done():  # the caller itself was cancelled: so is its request
                task.cancel()
        if cancellation.cancelled:
            # basic/utilities/cancellation: nothing is sent for a cancelled request.
            return None
        return _over_the_wire(task.result(), request)

    async def cancel(self, request_id: RequestId, reason: str | None = None) -> None:
        """Send `notifications/cancelled` for one of this client's requests."""
        params: dict[str, Any] = {"requestId": request_id}
        if reason is not None:
            params["reason"] = reason
        await self.send({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": params})

    @asynccontextmanager
    async def listen(self, notifications: Mapping[str, Any]) -> AsyncIterator[Subscription]:
        """Open a 2026-07-28 `subscriptions/listen` stream; it is cancelled on leaving the block.

        ``async with client.listen({"toolsListChanged": True}) as stream:`` -- then
        ``stream.acknowledged`` is the filter the server agreed to, and ``stream.notifications``
        what arrived on the stream so far. A refused stream raises RpcError.
        """
        request_id = next(self._ids)
        params = {"_meta": self._meta(), "notifications": dict(notifications)}
        message = {"jsonrpc": "2.0", "id": request_id, "method": "subscriptions/listen"}
        stream = asyncio.create_task(self.send({**message, "params": params}))
        try:
            acknowledged = self._acknowledgment(request_id)
            while acknowledged is None and not stream.done():
                self._arrival.clear()
                arrived = asyncio.create_task(self._arrival.wait())
                await asyncio.wait({stream, arrived}, return_when=asyncio.FIRST_COMPLETED)
                arrived.cancel()
                acknowledged = self._acknowledgment(request_id)
            if acknowledged is None:
                _raise_error(stream.result(), "subscriptions/listen")
                raise InvalidServerResponse("subscriptions/listen answered without acknowledging")
            yield Subscription(self, request_id, acknowledged, stream)
        finally:
            if not stream.done():
                await self.cancel(request_id, "the listening block ended")
            await asyncio.wait({stream})

    def _acknowledgment(self, request_id: RequestId) -> dict[str, Any] | None:
        for notification in self.notifications:
            if (
                notification["method"] == "notifications/subscriptions/acknowledged"
                and _subscription_id(notification) == request_id
            ):
                agreed: dict[str, Any] = notification["params"]["notifications"]
                return agreed
        return None

    async def request(self, method: str, params: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """Send a request and return its ``result``; raise RpcError for an error response.

        Modern era: `_meta` (protocolVersion, clientCapabilities, clientInfo) is added unless
        ``params`` has a `_meta` of its own, which is sent exactly as given.
        """
        if self.era == "legacy" and not self._initialized and method != "initialize":
            await self.initialize()
        payload = dict(params or {})
        modern = self.era == "modern" and method != "initialize"
        if modern and "_meta" not in payload:
            payload["_meta"] = self._meta()
        response = await self.send(
            {"jsonrpc": "2.0", "id": next(self._ids), "method": method, "params": payload}
        )
        result = _raise_error(response, method)
        meta = payload.get("_meta")
        if isinstance(meta, dict) and META_PROTOCOL_VERSION in meta and "resultType" not in result:
            # 2026-07-28 basic/index: "The result MUST include a resultType field".
            raise InvalidServerResponse(f"{method}: a 2026-07-28 result without resultType")
        return result

    def _meta(self) -> dict[str, Any]:
        return {
            META_PROTOCOL_VERSION: self.protocol_version,
            META_CLIENT_CAPABILITIES: self.capabilities,
            META_CLIENT_INFO: dict(CLIENT_INFO),
        }

    def _call_meta(self, meta: Mapping[str, Any]) -> dict[str, Any]:
        # call_tool(meta=...): the caller's keys on top of this client's own (request() sends
        # a caller's `_meta` exactly as given).
        return {**self._meta(), **meta} if self.era == "modern" else dict(meta)


def _raise_error(response: JSONObject | None, method: str) -> dict[str, Any]:
    """The result of `response`; raises RpcError for an error response."""
    if response is None:
        raise RequestCancelled(f"{method} was cancelled")
    if "error" in response:
        error = response["error"]
        raise RpcError(error["code"], error["message"], error.get("data"))
    result: dict[str, Any] = response["result"]
    return result


class Subscription:
    """A `subscriptions/listen` stream opened by `MemoryClient.listen`."""

    def __init__(
        self,
        client: MemoryClient,
        request_id: RequestId,
        acknowledged: dict[str, Any],
        stream: asyncio.Task[JSONObject | None],
    ) -> None:
        #: The subscription id: the JSON-RPC id of the listen request.
        self.id = request_id
        #: The filter the server agreed to honour (its acknowledgment's `notifications`).
        self.acknowledged = acknowledged
        self._client = client
        self._stream = stream

    @property
    def notifications(self) -> list[JSONObject]:
        """The notifications that carried this subscription's id, after its acknowledgment."""
        return [
            notification
            for notification in self._client.notifications
            if _subscription_id(notification) == self.id
            and notification["method"] != "notifications/subscriptions/acknowledged"
        ]

    async def closed(self) -> dict[str, Any]:
        """Wait for the server to end the stream; its answer to the listen request."""
        await asyncio.wait({self._stream})
        return _raise_error(self._stream.result(), "subscriptions/listen")


def _subscription_id(notification: JSONObject) -> object:
    meta = notification.get("params", {}).get("_meta", {})
    return meta.get(META_SUBSCRIPTION_ID) if isinstance(meta, dict) else None


def _over_the_wire(response: JSONObject, request: Request) -> JSONObject:
    """`response` as a client reading the server's stdout would get it, or an error."""
    try:
        data = encode(response)
    except (TypeError, ValueError, RecursionError):
        # What the stdio transport does with a response it cannot encode.
        _logger.exception("response to %s is not JSON", request.method)
        data = encode(error_response(request.id, INTERNAL_ERROR, "Internal error"))
    raw = parse_json(data[:-1])
    problem = message_problem(raw)
    if problem is not None:
        raise InvalidServerResponse(f"{request.method}: invalid response: {problem}")
    return cast(JSONObject, raw)


def _json_copy(value: JSONObject) -> JSONObject:
    """`value` as it comes out of the other end of a pipe: encoded, then decoded."""
    return cast(JSONObject, parse_json(encode(value)[:-1]))


class _Peer:
    """What the server may send back: notifications, and legacy-era requests to the client."""

    def __init__(self, client: MemoryClient) -> None:
        self._client = client

    async def notify(self, method: str, params: dict[str, Any]) -> None:
        message = {"jsonrpc": "2.0", "method": method, "params": params}
        self._client.notifications.append(_json_copy(message))
        self._client._arrival.set()

    async def request(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        client = self._client
        sent = _json_copy(params)
        client.server_requests.append({"method": method, "params": sent})
        try:
            answer = await client.callbacks.answer(method, sent)
            answer = _json_copy(answer)  # one a real client could not send: its error reply
        except RpcError as error:
            # What a client on the wire would do: answer our request with a JSON-RPC error.
            raise RpcError(error.code, error.message) from None
        except Exception as error:
            client._record_callback_failure(error)
            raise RpcError(
                INTERNAL_ERROR, f"client handler failed: {type(error).__name__}"
            ) from None
        return answer
