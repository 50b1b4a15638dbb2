"""An in-process client for tests: a whole server, no subprocess and no pipes."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from itertools import count
from typing import Any

from ._jsonrpc import JSONObject, Notification, Request, RpcError
from ._router import Server, Session
from ._wire import META_CLIENT_CAPABILITIES, META_PROTOCOL_VERSION

__all__ = ("DEFAULT_CAPABILITIES", "MemoryClient")

DEFAULT_CAPABILITIES: Mapping[str, Any] = {
    "elicitation": {"form": {}, "url": {}},
    "sampling": {},
    "roots": {},
}

ClientHandler = Callable[[dict[str, Any]], Awaitable[dict[str, Any]]]


class MemoryClient:
    """Speaks to `server` the way a client would, through its public `handle_request`.

    Modern by default: each request gets `_meta` with `protocol_version` and `capabilities`.
    After `initialize()`, requests go out without `_meta` and are served as 2025-11-25;
    the server's own requests (elicitation, sampling, roots) go to `client_handlers`.
    """

    def __init__(
        self,
        server: Server,
        *,
        capabilities: Mapping[str, Any] | None = None,
        protocol_version: str = "2026-07-28",
        client_handlers: Mapping[str, ClientHandler] | None = None,
    ) -> None:
        self.server = server
        self.capabilities = dict(DEFAULT_CAPABILITIES if capabilities is None else capabilities)
        self.protocol_version = protocol_version
        self.client_handlers = dict(client_handlers or {})
        self.session = Session()
        self.notifications: list[JSONObject] = []
        self.server_requests: list[JSONObject] = []
        self._legacy = False
        self._ids = count(1)

    async def initialize(self, protocol_version: str = "2025-11-25") -> dict[str, Any]:
        result = await self.request(
            "initialize",
            {
                "protocolVersion": protocol_version,
                "capabilities": self.capabilities,
                "clientInfo": {"name": "memory-client", "version": "0"},
            },
        )
        self._legacy = True
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
        return await self.server.handle_request(request, self.session, _Peer(self))

    async def request(self, method: str, params: Mapping[str, Any] | None = None) -> dict[str, Any]:
        payload = dict(params or {})
        if not self._legacy and method != "initialize" and "_meta" not in payload:
            payload["_meta"] = {
                META_PROTOCOL_VERSION: self.protocol_version,
                META_CLIENT_CAPABILITIES: self.capabilities,
            }
        response = await self.send(
            {"jsonrpc": "2.0", "id": next(self._ids), "method": method, "params": payload}
        )
        if response is None:  # pragma: no cover - a message with an id always gets a response
            raise RuntimeError("no response to a request")
        if "error" in response:
            error = response["error"]
            raise RpcError(error["code"], error["message"], error.get("data"))
        result: dict[str, Any] = response["result"]
        return result


class _Peer:
    """What the server may send back: notifications, and legacy-era requests to the client."""

    def __init__(self, client: MemoryClient) -> None:
        self._client = client

    async def notify(self, method: str, params: dict[str, Any]) -> None:
        self._client.notifications.append({"jsonrpc": "2.0", "method": method, "params": params})

    async def request(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        self._client.server_requests.append({"method": method, "params": params})
        handler = self._client.client_handlers.get(method)
        if handler is None:
            raise RpcError(-32601, f"Method not found: {method}")
        try:
            return await handler(params)
        except RpcError as error:
            # What a client on the wire would do: answer our request with a JSON-RPC error.
            raise RpcError(error.code, error.message) from None
