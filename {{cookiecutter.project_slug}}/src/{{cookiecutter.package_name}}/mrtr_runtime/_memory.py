"""An in-process client for tests: a whole server, no subprocess and no pipes.

Requests reach the server as Python objects (so a test can reach paths the wire cannot, like a
10,000-deep argument); everything the server sends back goes through the stdio encoder and
the client's strict validator first (`_jsonrpc.encode`, `parse_json`, `message_problem`), so
a result that could not cross a real pipe fails here as it would there.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from itertools import count
from typing import Any, Literal, cast

from ._client_rounds import Callback, Callbacks, InvalidServerResponse, RoundsClient
from ._jsonrpc import (
    INTERNAL_ERROR,
    JSONObject,
    Notification,
    Request,
    RpcError,
    encode,
    error_response,
    message_problem,
    parse_json,
)
from ._router import Server, Session
from ._wire import (
    LEGACY_VERSIONS,
    META_CLIENT_CAPABILITIES,
    META_CLIENT_INFO,
    META_PROTOCOL_VERSION,
    MODERN_VERSIONS,
)

__all__ = ("MemoryClient",)

Era = Literal["modern", "legacy"]

CLIENT_INFO: Mapping[str, str] = {"name": "mrtr-memory-client", "version": "1.0"}

_logger = logging.getLogger("mrtr_runtime")


class MemoryClient(RoundsClient):
    """Speaks to `server` the way a client would, through its public `handle_request`.

    ``MemoryClient(server, elicitation=answers({...}))``. The callbacks (each
    ``async (params) -> full result``) answer MRTR rounds in the 2026-07-28 era and the
    server's real requests in the 2025-11-25 era. ``capabilities=None`` declares exactly the
    callbacks given. ``era="legacy"`` sends ``initialize`` before the first request (or call
    ``initialize(version)`` yourself).
    """

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
    ) -> None:
        if era not in ("modern", "legacy"):
            raise ValueError(f"era must be 'modern' or 'legacy', not {era!r}")
        self.server = server
        self.callbacks = Callbacks(elicitation, sampling, roots)
        self.capabilities: dict[str, Any] = dict(
            self.callbacks.capabilities() if capabilities is None else capabilities
        )
        self.era: Era = era
        #: Sent in every modern request's `_meta` (a test may pick an unsupported one).
        self.protocol_version = protocol_version
        self.session = Session()
        self.initialize_result: dict[str, Any] | None = None
        #: Notifications the server sent (progress etc.), in order.
        self.notifications: list[JSONObject] = []
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
        """One raw message in; the response out (None for notifications)."""
        if "id" not in message:
            # In process nothing is in flight between calls, so a cancellation has no target.
            self.server.handle_notification(
                Notification(message["method"], message.get("params", {}))
            )
            return None
        request = Request(message["id"], message["method"], message.get("params", {}))
        response = await self.server.handle_request(request, self.session, _Peer(self))
        return _over_the_wire(response, request)

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
        if response is None:  # pragma: no cover - a message with an id always gets a response
            raise RuntimeError("no response to a request")
        if "error" in response:
            error = response["error"]
            raise RpcError(error["code"], error["message"], error.get("data"))
        result: dict[str, Any] = response["result"]
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
