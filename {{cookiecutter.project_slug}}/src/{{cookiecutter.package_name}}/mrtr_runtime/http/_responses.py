"""What every answer over HTTP is made of, in both eras: the ASGI callables' types, a JSON-RPC
error body, a plain response, a `_rules` refusal sent, the Accept check, and the answer for a
request the server stops. Stateless: `_app` (2026-07-28, and the endpoint) and `_legacy_era`
(2025-11-25 sessions) both build on it.
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any, Final, Protocol

from .._context import MAYBE_CARRIED_OUT, Cancellation
from .._jsonrpc import INTERNAL_ERROR, JSONObject, Request, encode, error_response
from ._rules import Refusal

__all__ = (
    "JSON_CONTENT",
    "KEEPALIVE_COMMENT",
    "KEEPALIVE_SECONDS",
    "RETRY_MILLISECONDS",
    "RETRY_SOON",
    "SSE_HEADERS",
    "Message",
    "OpenExchange",
    "Receive",
    "Scope",
    "Send",
    "accepts",
    "error_body",
    "refuse",
    "respond",
    "stopping_error",
)

#: basic/transports/streamable-http "Receiving Messages": an SSE comment this often keeps a quiet
#: stream (a listen, a long tool) from being closed by proxies and idle timeouts.
KEEPALIVE_SECONDS: Final = 15.0
#: 2025-11-25 "Sending Messages" 6.: the `retry` (milliseconds) sent before the server closes a
#: stream's connection early (a newer connection took the stream over, or it was held for
#: `MRTR_HTTP_SSE_POLL_SECONDS`); the client waits this long, then resumes with `Last-Event-ID`.
RETRY_MILLISECONDS: Final = 1000

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]


class OpenExchange(Protocol):
    """A request's way back, in either era: what a stopping server answers a request with."""

    async def finish(self, message: JSONObject, status: int) -> None: ...


JSON_CONTENT: Final = (b"content-type", b"application/json")
SSE_HEADERS: Final = [
    (b"content-type", b"text/event-stream"),
    (b"cache-control", b"no-cache"),
    # "Receiving Messages": servers SHOULD ask reverse proxies not to buffer SSE.
    (b"x-accel-buffering", b"no"),
]
KEEPALIVE_COMMENT: Final = b":\n\n"
RETRY_SOON: Final = (b"retry-after", b"1")


def error_body(code: int, message: str, request_id: object = None, data: object = None) -> bytes:
    """A JSON-RPC error response; without an id when the request's is unknown (2026-07-28
    schema: JSONRPCErrorResponse.id is optional)."""
    body: JSONObject = error_response(None, code, message, data)
    if request_id is None:
        del body["id"]
    else:
        body["id"] = request_id
    return encode(body)


async def respond(
    send: Send,
    status: int,
    body: bytes = b"",
    headers: list[tuple[bytes, bytes]] | None = None,
) -> None:
    fields = [
        *(headers if headers is not None else [JSON_CONTENT]),
        (b"content-length", str(len(body)).encode("ascii")),
    ]
    await send({"type": "http.response.start", "status": status, "headers": fields})
    await send({"type": "http.response.body", "body": body})


async def refuse(send: Send, refusal: Refusal) -> None:
    """A `_rules` refusal, sent: a JSON-RPC error body (plain text off the endpoint)."""
    if refusal.code is None:
        body = refusal.message.encode("utf-8")
        headers = [(b"content-type", b"text/plain"), *refusal.headers]
        await respond(send, refusal.status, body, headers)
        return
    await respond(
        send,
        refusal.status,
        error_body(refusal.code, refusal.message),
        [JSON_CONTENT, *refusal.headers],
    )


#: Longer Accept headers are judged each time, never kept (a cache of client-chosen strings
#: must not hold megabytes).
_CACHED_ACCEPT_CHARS: Final = 512


def accepts(accept: str | None, media_type: str) -> bool:
    if accept is not None and len(accept) > _CACHED_ACCEPT_CHARS:
        return _judge_accept(accept, media_type)
    return _judged_accept(accept, media_type)


def _judge_accept(accept: str | None, media_type: str) -> bool:
    if accept is None:
        return True
    kind = media_type.split("/", 1)[0]
    for item in accept.split(","):
        offered = item.split(";", 1)[0].strip().lower()
        if offered in (media_type, f"{kind}/*", "*/*"):
            return True
    return False


# Cached for the same reason: a client sends one Accept header on every request.
_judged_accept: Final = functools.lru_cache(maxsize=256)(_judge_accept)


def stopping_error(request: Request, cancellation: Cancellation) -> JSONObject:
    """The answer for a request the server stops: cancelled before its point of no return, it
    did nothing and can be sent again; past it, it may have been carried out."""
    if cancellation.cancel_unless_committed():
        outcome = "the request was not finished; send it again"
    else:
        outcome = f"the request was not finished, but {MAYBE_CARRIED_OUT}"
    return error_response(request.id, INTERNAL_ERROR, f"Server stopping: {outcome}")
