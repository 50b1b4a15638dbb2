"""MCP's Streamable HTTP transport as an ASGI app: 2026-07-28, and 2025-11-25 beside it.

A thin shell like `../_stdio.py`: it reads one POST, applies `_rules` (who may ask, whether the
headers agree with the body), hands the request to the same `Server` the stdio transport uses,
and writes the reply as JSON, or as an SSE stream when the request's handler sends notifications
first (progress, log messages, a listen's notices). For 2026-07-28 (basic/transports/
streamable-http) closing the connection cancels the request ("Cancellation"), and every request
stands alone: no sessions, nothing kept between requests, so any number of replicas sharing one
signing key serve one conversation (basic/patterns/mrtr).

2025-11-25 clients (basic/transports "Streamable HTTP" of that revision) are served on the same
endpoint, as 2026-07-28 basic/versioning "Backward Compatibility" allows a dual-era server: an
`initialize` without modern `_meta` opens a session (`_sessions`), named by `Mcp-Session-Id`;
requests in it get the legacy era, and the legacy bridge asks the client with real
server-to-client requests on the request's SSE stream, whose answers the client POSTs back. GET
opens the session's own stream, DELETE ends it, and each stream can be resumed with
`Last-Event-ID`; with `MRTR_HTTP_SSE_POLL_SECONDS` the server closes a stream's connection after
that long, with `retry`, and the client resumes it so (SSE polling). A request carrying modern
`_meta` is modern whatever headers it has.

The HTTP server itself is uvicorn: `_uvicorn.serve_http` runs this app on it (the optional `http`
extra). Nothing here is imported when serving stdio.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import importlib.util
import logging
import os
import stat
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, MutableMapping
from dataclasses import dataclass
from typing import Any, Final
from urllib.parse import urlsplit

from .._config import CLIENT_REQUEST_TIMEOUT_SECONDS, Settings
from .._context import MAYBE_CARRIED_OUT, SHUTDOWN_GRACE_SECONDS, Cancellation
from .._jsonrpc import (
    INTERNAL_ERROR,
    INVALID_REQUEST,
    MAX_LINE_BYTES,
    InvalidMessage,
    JSONObject,
    Notification,
    Request,
    Response,
    RpcError,
    encode,
    error_response,
    parse_json,
    parse_message,
)
from .._legacy import client_result
from .._permissions import open_to_others
from .._router import Server, Session
from .._task_store import TaskStoreUnavailable
from .._wire import META_PROTOCOL_VERSION
from ._authorization_server import BearerAuthority
from ._limits import DEFAULT_CALLS_PER_PRINCIPAL, DEFAULT_RATE_PER_PRINCIPAL, PrincipalLimits
from ._oauth import Grant, ResourceServerSettings, metadata_document, scope_refusal
from ._rules import (
    HEADER_MISMATCH,
    AccessPolicy,
    HeaderMismatch,
    MirroredParam,
    Refusal,
    check_headers,
    http_status,
    legacy_version_problem,
    mirrored_params,
    oauth_refusal,
    parse_token_lines,
    refuse_post,
    refuse_request,
    refuse_session_get,
    too_many,
)
from ._sessions import (
    DEFAULT_MAX_SESSIONS,
    DEFAULT_SESSION_IDLE_SECONDS,
    STANDALONE,
    EventLog,
    LegacySession,
    SessionTable,
    parse_event_id,
)

__all__ = (
    "ENDPOINT",
    "MAX_BODY_BYTES",
    "MAX_CONNECTIONS",
    "MAX_IN_FLIGHT",
    "MAX_PARKED",
    "MAX_WAITING",
    "ConnectionRefusal",
    "HttpApp",
    "HttpSettings",
)

ENDPOINT: Final = "/mcp"
#: The largest request body accepted (413 beyond): the stdio transport's line limit.
MAX_BODY_BYTES: Final = MAX_LINE_BYTES
#: Requests served at once per process; as on stdio, a few more wait for a place ...
MAX_IN_FLIGHT: Final = 64
#: ... and past these the answer is 503 with Retry-After, which load balancers understand.
MAX_WAITING: Final = 4 * MAX_IN_FLIGHT
#: 2025-11-25 calls waiting for their client's answer (an elicitation open on a user's screen)
#: give their place back meanwhile, so that they never keep everyone else waiting; at most this
#: many at once (each a task and its stream's log), past which a waiting call keeps its place.
MAX_PARKED: Final = 1024
#: Connections held open at once: enough for every request running or waiting plus idle
#: keep-alive ones, and a bound on the bodies read at once. The first this many are served; a
#: connection opened while they are all open gets one 503 (`ConnectionRefusal`) and is closed.
MAX_CONNECTIONS: Final = MAX_IN_FLIGHT + MAX_WAITING + 128
#: A request's head (request line and headers) must arrive within this, and be at most this
#: big: 408 or 431 and the connection closed after (uvicorn bounds neither).
HEAD_TIMEOUT_SECONDS: Final = 10.0
MAX_HEAD_BYTES: Final = 64 * 1024
#: A body must arrive within this (408 after): a client trickling bytes holds no connection long.
BODY_TIMEOUT_SECONDS: Final = 30.0
#: basic/transports/streamable-http "Receiving Messages": an SSE comment this often keeps a quiet
#: stream (a listen, a long tool) from being closed by proxies and idle timeouts.
KEEPALIVE_SECONDS: Final = 15.0
ENV_TOKEN: Final = "MRTR_HTTP_TOKEN"  # noqa: S105 -- the variable's name, not a secret
ENV_TOKENS_FILE: Final = "MRTR_HTTP_TOKENS_FILE"
ENV_ALLOWED_ORIGINS: Final = "MRTR_HTTP_ALLOWED_ORIGINS"
ENV_ALLOWED_HOSTS: Final = "MRTR_HTTP_ALLOWED_HOSTS"
ENV_MAX_CONNECTIONS: Final = "MRTR_HTTP_MAX_CONNECTIONS"
ENV_MAX_SESSIONS: Final = "MRTR_HTTP_MAX_SESSIONS"
ENV_SESSION_IDLE: Final = "MRTR_HTTP_SESSION_IDLE_SECONDS"
ENV_SESSIONS_PER_PRINCIPAL: Final = "MRTR_HTTP_MAX_SESSIONS_PER_PRINCIPAL"
ENV_SSE_POLL: Final = "MRTR_HTTP_SSE_POLL_SECONDS"
ENV_RATE_PER_PRINCIPAL: Final = "MRTR_HTTP_RATE_PER_PRINCIPAL"
ENV_CALLS_PER_PRINCIPAL: Final = "MRTR_HTTP_CALLS_PER_PRINCIPAL"
ENV_ACCEPT_PLAIN_JWT: Final = "MRTR_OAUTH_ACCEPT_PLAIN_JWT"
#: Liveness and readiness, for load balancers and orchestrators: outside the MCP endpoint, never
#: behind authorization, and saying nothing but whether (and, when not ready, why not).
LIVE_PATH: Final = "/healthz"
READY_PATH: Final = "/readyz"
#: A readiness check (the task store's answer) must come within this, else "not ready".
READY_TIMEOUT_SECONDS: Final = 2.0
#: 2025-11-25 "Sending Messages" 6.: the `retry` (milliseconds) sent before the server closes a
#: stream's connection early (a newer connection took the stream over, or it was held for
#: `MRTR_HTTP_SSE_POLL_SECONDS`); the client waits this long, then resumes with `Last-Event-ID`.
RETRY_MILLISECONDS: Final = 1000

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]

_logger = logging.getLogger("mrtr_runtime")
_JSON: Final = (b"content-type", b"application/json")
_SSE_HEADERS: Final = [
    (b"content-type", b"text/event-stream"),
    (b"cache-control", b"no-cache"),
    # "Receiving Messages": servers SHOULD ask reverse proxies not to buffer SSE.
    (b"x-accel-buffering", b"no"),
]
_KEEPALIVE: Final = b":\n\n"
_RETRY_SOON: Final = (b"retry-after", b"1")


def _error_body(code: int, message: str, request_id: object = None, data: object = None) -> bytes:
    """A JSON-RPC error response; without an id when the request's is unknown (2026-07-28
    schema: JSONRPCErrorResponse.id is optional)."""
    body: JSONObject = error_response(None, code, message, data)
    if request_id is None:
        del body["id"]
    else:
        body["id"] = request_id
    return encode(body)


async def _respond(
    send: Send,
    status: int,
    body: bytes = b"",
    headers: list[tuple[bytes, bytes]] | None = None,
) -> None:
    fields = [
        *(headers if headers is not None else [_JSON]),
        (b"content-length", str(len(body)).encode("ascii")),
    ]
    await send({"type": "http.response.start", "status": status, "headers": fields})
    await send({"type": "http.response.body", "body": body})


async def _refuse(send: Send, refusal: Refusal) -> None:
    """A `_rules` refusal, sent: a JSON-RPC error body (plain text off the endpoint)."""
    if refusal.code is None:
        body = refusal.message.encode("utf-8")
        headers = [(b"content-type", b"text/plain"), *refusal.headers]
        await _respond(send, refusal.status, body, headers)
        return
    await _respond(
        send, refusal.status, _error_body(refusal.code, refusal.message), [_JSON, *refusal.headers]
    )


def _headers(scope: Scope) -> dict[str, str]:
    """Header names lower-cased (ASGI already does), repeated fields joined as RFC 9110 says."""
    found: dict[str, str] = {}
    for raw_name, raw_value in scope["headers"]:
        name = raw_name.decode("latin-1").lower()
        value = raw_value.decode("latin-1")
        found[name] = f"{found[name]}, {value}" if name in found else value
    return found


def _access_problem(policy: AccessPolicy, host: str | None, origin: str | None) -> str | None:
    if len(host or "") + len(origin or "") > _CACHED_ACCESS_CHARS:
        # Never kept: a cache of client-chosen strings must not hold megabytes.
        return _judge_access(policy, host, origin)
    return _judged_access(policy, host, origin)


def _judge_access(policy: AccessPolicy, host: str | None, origin: str | None) -> str | None:
    return policy.host_problem(host) or policy.origin_problem(origin)


# A client sends the same Host and Origin on every request: judge each short pair once.
_judged_access: Final = functools.lru_cache(maxsize=1024)(_judge_access)
_CACHED_ACCESS_CHARS: Final = 512


def _accepts(accept: str | None, media_type: str) -> bool:
    if accept is not None and len(accept) > _CACHED_ACCESS_CHARS:
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


class _Exchange:
    """One request's way back: the `Peer` its handler sees. Notifications turn the response into
    an SSE stream; after a disconnect nothing more is sent ("Cancellation": the server MUST NOT
    send further messages for a cancelled request)."""

    __slots__ = ("_keepalive", "closed", "send", "sse_allowed", "streaming")

    def __init__(self, send: Send, *, sse_allowed: bool) -> None:
        self.send = send
        self.sse_allowed = sse_allowed
        self.streaming = False
        self.closed = False
        self._keepalive: asyncio.Task[None] | None = None

    async def notify(self, method: str, params: dict[str, Any]) -> None:
        if self.closed or not self.sse_allowed:
            return
        await self._event(encode({"jsonrpc": "2.0", "method": method, "params": params}))

    async def request(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        # "Receiving Messages": the server MUST NOT send requests on the stream; MRTR carries
        # them in results instead. Only the 2025-11-25 bridge asks, and it never runs here.
        raise RuntimeError("no server-to-client requests over Streamable HTTP 2026-07-28")

    async def _event(self, line: bytes, *, last: bool = False) -> None:
        if not self.streaming:
            self.streaming = True
            await self.send({"type": "http.response.start", "status": 200, "headers": _SSE_HEADERS})
            if not last:
                self._keepalive = asyncio.get_running_loop().create_task(self._keep_alive())
        await self.send(
            {
                "type": "http.response.body",
                "body": b"event: message\ndata: " + line.rstrip(b"\n") + b"\n\n",
                "more_body": not last,
            }
        )

    async def _keep_alive(self) -> None:
        while not self.closed:
            await asyncio.sleep(KEEPALIVE_SECONDS)
            if not self.closed:
                await self.send(
                    {"type": "http.response.body", "body": _KEEPALIVE, "more_body": True}
                )

    def stop_keepalive(self) -> None:
        if self._keepalive is not None:
            self._keepalive.cancel()

    async def finish(self, message: JSONObject, status: int) -> None:
        if self.closed:
            return
        line = encode(message)
        # Claimed before the first await: whoever finishes first (the handler, or a stopping
        # server answering for it) writes the one last message.
        self.closed = True
        if self.streaming:
            await self._event(line, last=True)
        else:
            await _respond(self.send, status, line)


@dataclass(frozen=True, slots=True)
class HttpSettings:
    """How `serve_http` listens, and the bounds and access rules of the app."""

    host: str = "127.0.0.1"
    port: int = 8000
    allowed_hosts: tuple[str, ...] = ()
    allowed_origins: tuple[str, ...] = ()
    bearer_token: str | None = None
    #: (principal, token) pairs from `MRTR_HTTP_TOKENS_FILE`: requestState binds to the principal.
    bearer_tokens: tuple[tuple[str, str], ...] = ()
    max_body_bytes: int = MAX_BODY_BYTES
    max_in_flight: int = MAX_IN_FLIGHT
    max_waiting: int = MAX_WAITING
    max_connections: int = MAX_CONNECTIONS
    head_timeout_seconds: float = HEAD_TIMEOUT_SECONDS
    max_head_bytes: int = MAX_HEAD_BYTES
    #: 2025-11-25 sessions: how many at once, and how long one may go unused.
    max_sessions: int = DEFAULT_MAX_SESSIONS
    session_idle_seconds: float = DEFAULT_SESSION_IDLE_SECONDS
    #: How many of them one principal may hold; None: its fair share (`session_share`).
    max_sessions_per_principal: int | None = None
    #: 2025-11-25 SSE polling: a stream's connection is closed (with `retry`) after this many
    #: seconds and the client resumes it by GET with `Last-Event-ID`; None holds it open.
    sse_poll_seconds: float | None = None
    #: How long a legacy server-to-client request waits for the client's answer.
    client_request_timeout: float = CLIENT_REQUEST_TIMEOUT_SECONDS
    #: Legacy calls waiting for their client's answer without holding a place (MAX_PARKED).
    max_parked: int = MAX_PARKED
    #: OAuth 2.1 resource server (basic/authorization): whose access tokens are accepted, and
    #: this server's canonical URI; None: no OAuth (the bearer tokens above, or nothing).
    oauth: ResourceServerSettings | None = None
    #: What one principal may take (`_limits`): requests a second, tool calls at once.
    rate_per_principal: int = DEFAULT_RATE_PER_PRINCIPAL
    calls_per_principal: int = DEFAULT_CALLS_PER_PRINCIPAL

    @classmethod
    def from_environment(cls, environ: Mapping[str, str], *, host: str, port: int) -> HttpSettings:
        """``from_settings(Settings.from_environment(environ), ...)``."""
        return cls.from_settings(Settings.from_environment(environ), host=host, port=port)

    @classmethod
    def from_settings(cls, settings: Settings, *, host: str, port: int) -> HttpSettings:
        """The access rules from `MRTR_HTTP_TOKEN`, `MRTR_HTTP_TOKENS_FILE` (a file of
        `principal:token` lines, owner-only), `MRTR_HTTP_ALLOWED_ORIGINS` and
        `MRTR_HTTP_ALLOWED_HOSTS` (comma-separated lists); the connection bound from
        `MRTR_HTTP_MAX_CONNECTIONS` (a whole number from 1, default MAX_CONNECTIONS); the
        2025-11-25 session bounds from `MRTR_HTTP_MAX_SESSIONS` and
        `MRTR_HTTP_SESSION_IDLE_SECONDS` (whole numbers from 1); how long a 2025-11-25 stream's
        connection is held before the client is told to poll, from `MRTR_HTTP_SSE_POLL_SECONDS`
        (a whole number from 1; unset holds it open); the wait for a legacy client's answer
        from `MRTR_CLIENT_REQUEST_TIMEOUT_SECONDS`, as `settings` read them. A value they
        refused raises ValueError (the CLI exits 2)."""
        settings.refuse(
            ENV_TOKEN,
            ENV_MAX_CONNECTIONS,
            ENV_MAX_SESSIONS,
            ENV_SESSION_IDLE,
            ENV_SSE_POLL,
            ENV_SESSIONS_PER_PRINCIPAL,
            ENV_RATE_PER_PRINCIPAL,
            ENV_CALLS_PER_PRINCIPAL,
            ENV_ACCEPT_PLAIN_JWT,
        )
        return cls(
            host=host,
            port=port,
            allowed_hosts=settings.http_allowed_hosts,
            allowed_origins=settings.http_allowed_origins,
            bearer_token=settings.http_token,
            bearer_tokens=_read_tokens_file(settings.http_tokens_file),
            max_connections=settings.http_max_connections or MAX_CONNECTIONS,
            max_sessions=settings.http_max_sessions or DEFAULT_MAX_SESSIONS,
            session_idle_seconds=settings.http_session_idle_seconds or DEFAULT_SESSION_IDLE_SECONDS,
            max_sessions_per_principal=settings.http_max_sessions_per_principal,
            sse_poll_seconds=settings.http_sse_poll_seconds,
            client_request_timeout=settings.client_request_timeout,
            oauth=_oauth_settings(settings),
            rate_per_principal=settings.http_rate_per_principal or DEFAULT_RATE_PER_PRINCIPAL,
            calls_per_principal=settings.http_calls_per_principal or DEFAULT_CALLS_PER_PRINCIPAL,
        )

    def session_share(self) -> int:
        """How many 2025-11-25 sessions one principal may hold: the setting, else an equal
        split of the table among the principals the server knows (each token of
        `MRTR_HTTP_TOKENS_FILE`, and everyone holding the shared `MRTR_HTTP_TOKEN`, or no
        token, as one more), so that all of them at their share still fit; with one principal
        at most, the whole table."""
        if self.max_sessions_per_principal is not None:
            return min(self.max_sessions_per_principal, self.max_sessions)
        principals = {principal for principal, _ in self.bearer_tokens}
        known = len(principals) + (1 if self.bearer_token is not None else 0)
        if known > 1:
            return max(1, self.max_sessions // known)
        return self.max_sessions

    def policy(self) -> AccessPolicy:
        return AccessPolicy.for_bind_address(
            self.host,
            allowed_hosts=self.allowed_hosts,
            allowed_origins=self.allowed_origins,
            bearer_token=self.bearer_token,
            named_tokens=self.bearer_tokens,
        )


class ConnectionRefusal:
    """The ASGI app a connection past the bound gets instead of `HttpApp`: one JSON-RPC 503 with
    Retry-After, and the connection closed. It refuses only the excess: connections are counted
    as they open, so the first `limit` are served however many arrive at once."""

    def __init__(self, limit: int) -> None:
        self.body = _error_body(
            INTERNAL_ERROR, f"Server busy: {limit} connections open at once; retry later"
        )

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            headers = [_JSON, _RETRY_SOON, (b"connection", b"close")]
            await _respond(send, 503, self.body, headers)


def _oauth_settings(settings: Settings) -> ResourceServerSettings | None:
    """The resource server `settings` ask for, or None; ValueError for half of one, for one
    beside a shared token (two ways to let a request in would make either one's checks
    pointless), or for a missing `oauth` extra."""
    if not settings.oauth_issuer and not settings.oauth_resource:
        if settings.oauth_scopes:
            raise ValueError("MRTR_OAUTH_SCOPES is set without MRTR_OAUTH_ISSUER")
        return None
    if not settings.oauth_issuer or not settings.oauth_resource:
        raise ValueError(
            "OAuth needs both MRTR_OAUTH_ISSUER (the authorization server) and "
            "MRTR_OAUTH_RESOURCE (this server's canonical URI, e.g. https://mcp.example.com/mcp)"
        )
    if settings.http_token is not None or settings.http_tokens_file is not None:
        raise ValueError(
            "MRTR_OAUTH_ISSUER cannot be combined with MRTR_HTTP_TOKEN or MRTR_HTTP_TOKENS_FILE: "
            "unset the shared tokens"
        )
    if importlib.util.find_spec("jwt") is None:
        raise ValueError(
            "MRTR_OAUTH_ISSUER needs PyJWT, the project's `oauth` extra: "
            "pip install -e '.[http,oauth]'"
        )
    resource_server = ResourceServerSettings.from_values(
        issuer=settings.oauth_issuer,
        resource=settings.oauth_resource,
        scopes=settings.oauth_scopes,
        accept_plain_jwt=settings.oauth_accept_plain_jwt,
    )
    if urlsplit(resource_server.resource).path.rstrip("/") != ENDPOINT:
        _logger.info(
            "MRTR_OAUTH_RESOURCE's path is not %s: a proxy in front must map it there", ENDPOINT
        )
    return resource_server


def _read_tokens_file(path: str | None, *, platform: str = os.name) -> tuple[tuple[str, str], ...]:
    """The named tokens of MRTR_HTTP_TOKENS_FILE. `platform` (an ``os.name``): on Windows its
    mode is not checked, the profile's ACLs protect it (``_permissions``); Python reports
    every file there as 0o666, which the rule below would always refuse."""
    if path is None:
        return ()
    try:
        with open(path, encoding="utf-8") as file:
            bits = stat.S_IMODE(os.fstat(file.fileno()).st_mode)
            if open_to_others(bits, 0o077, platform=platform):
                # The same rule as for signing-key files: a secret others can read is shared.
                raise ValueError(f"{ENV_TOKENS_FILE} {path} is readable by others; chmod 600 it")
            text = file.read()
    except (OSError, UnicodeDecodeError) as error:
        raise ValueError(f"{ENV_TOKENS_FILE} {path} cannot be read: {error}") from None
    return parse_token_lines(text, source=ENV_TOKENS_FILE)


def _subject_key(grant: Grant) -> str:
    """What an OAuth caller's limits are counted by: its subject, whichever client it uses."""
    return "oauth-subject:" + grant.subject


def _principal(scope: Scope, bearer: str | None) -> str | None:
    """Who is asking, as far as anything in front of the router can say; None for nobody.

    A named bearer token, and an ASGI authorization layer in front of the app that sets
    `scope["user"]` (Starlette's convention: `is_authenticated` and `identity` or
    `display_name`) or a string `scope["auth"]`. Each is prefixed with where it came from, so a
    token named "alice" is never the user "alice".
    """
    parts = [] if bearer is None else [f"token:{bearer}"]
    user = scope.get("user")
    if user is not None and getattr(user, "is_authenticated", False) is True:
        identity = getattr(user, "identity", None) or getattr(user, "display_name", None)
        if isinstance(identity, str) and identity:
            parts.append(f"user:{identity}")
    auth = scope.get("auth")
    if isinstance(auth, str) and auth:
        parts.append(f"auth:{auth}")
    return "\n".join(parts) if parts else None


class HttpApp:
    """The ASGI application: `server` at `ENDPOINT`, under `settings`' rules and bounds.

    `clock` is the 2025-11-25 sessions' (their idle bound); tests pass their own.
    """

    def __init__(
        self,
        server: Server,
        settings: HttpSettings | None = None,
        *,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.server = server
        self.settings = settings or HttpSettings()
        self.policy = self.settings.policy()
        #: The OAuth resource server, when `settings.oauth` makes this server one.
        self.authority = (
            None if self.settings.oauth is None else BearerAuthority(self.settings.oauth)
        )
        #: What each principal may take (none is limited when nobody is named).
        self.limits = PrincipalLimits(
            self.settings.rate_per_principal, self.settings.calls_per_principal
        )
        self._clock = clock
        #: 2025-11-25 sessions; 2026-07-28 requests never touch it.
        self.sessions = SessionTable(
            max_sessions=self.settings.max_sessions,
            idle_seconds=self.settings.session_idle_seconds,
            max_per_principal=self.settings.session_share(),
            clock=clock,
        )
        #: What the router is handed for a 2026-07-28 request: never initialized, never written.
        #: Every method that writes a Session (initialize, logging/setLevel, resources/
        #: subscribe) is legacy-only, and their requests go to `_legacy_post`; one made per
        #: request would cost more than the rest of the routing.
        self._stateless = Session()
        self._running = 0
        self._waiting = 0
        self._places: asyncio.Semaphore | None = None
        #: Legacy calls that gave their place back while their client answers (`_Place.lend`).
        self.parked = 0
        self._mirrored: dict[str, tuple[object, tuple[MirroredParam, ...]]] = {}
        #: Set once the server is stopping: nothing more starts, and no one waits for a place.
        self._stopping = False
        #: The tasks of requests waiting for a place, so that stopping can answer them at once.
        self._queued: set[asyncio.Task[Any]] = set()
        #: Requests being served, so that stopping answers each one still open (`abandon_open`).
        self._open: dict[_Exchange | _LegacyExchange, tuple[Request, Cancellation]] = {}
        self._tasks_loop: asyncio.Task[None] | None = None
        self._sweeper: asyncio.Task[None] | None = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            await self._http(scope, receive, send)
        elif scope["type"] == "lifespan":
            await self._lifespan(receive, send)

    # -- lifespan -------------------------------------------------------------------------------

    async def _lifespan(self, receive: Receive, send: Send) -> None:
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                try:
                    # The tools load before the first request, not during it.
                    self.server.warm_up()
                except Exception as error:
                    _logger.exception("the tools could not be loaded; stopping")
                    await send({"type": "lifespan.startup.failed", "message": str(error)})
                    return
                # The task engine's background loop: resumes tasks whose worker died (here
                # or on another replica) and forgets expired ones, for the server's life.
                self._tasks_loop = asyncio.get_running_loop().create_task(self.server.tasks.run())
                self._sweeper = asyncio.get_running_loop().create_task(self._sweep_sessions())
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                # basic/patterns/subscriptions "Graceful Closure": open listens end first.
                self.server.end_subscriptions()
                if self._sweeper is not None:
                    self._sweeper.cancel()
                self.end_sessions()
                await self._stop_tasks()
                await send({"type": "lifespan.shutdown.complete"})
                return

    async def _sweep_sessions(self) -> None:
        """End idle 2025-11-25 sessions even when no legacy request comes to notice them (each
        one also does): their listeners and logs go with them."""
        period = min(self.sessions.idle_seconds / 4, 60.0)
        while True:
            await asyncio.sleep(period)
            for ended in self.sessions.expire():
                self._end_session(ended)

    async def _stop_tasks(self) -> None:
        """Running tasks stop with the server and keep their records (`working`), their leases
        given up, so a server holding the same store resumes them at once. Those past their
        point of no return get SHUTDOWN_GRACE_SECONDS to finish, as on stdio; any still
        running then stays `working` and is taken over by the rule for such tasks (run
        again only if the tool is idempotent)."""
        if self._tasks_loop is not None:
            self._tasks_loop.cancel()
            self._tasks_loop = None
        finishing = self.server.stop_tasks()
        await self.server.release_tasks(SHUTDOWN_GRACE_SECONDS)
        if finishing:
            await asyncio.wait(finishing, timeout=SHUTDOWN_GRACE_SECONDS)
        self.server.abandon_tasks()

    # -- one request ----------------------------------------------------------------------------

    async def _http(self, scope: Scope, receive: Receive, send: Send) -> None:
        # Every verdict on the head is a sans-IO rule (`_rules.refuse_request`, `refuse_post`,
        # `_oauth`); here the facts they judge are gathered, and what they refuse is sent.
        authority = self.authority
        if authority is not None and scope["path"] == authority.settings.metadata_path:
            await self._resource_metadata(authority, scope["method"], send)
            return
        if scope["path"] in (LIVE_PATH, READY_PATH):
            # The DNS-rebinding checks hold here too: a page must not read a local server.
            headers = _headers(scope)
            problem = _access_problem(self.policy, headers.get("host"), headers.get("origin"))
            if problem is not None:
                await _refuse(send, Refusal(403, problem, None))
                return
            await self._health(scope["path"], scope["method"], send)
            return
        path_is_endpoint = scope["path"] == ENDPOINT
        headers = _headers(scope) if path_is_endpoint else {}
        method = scope["method"]
        authorization = headers.get("authorization")
        access_problem = (
            _access_problem(self.policy, headers.get("host"), headers.get("origin"))
            if path_is_endpoint
            else None
        )
        refusal = refuse_request(
            path_is_endpoint=path_is_endpoint,
            method=method,
            has_session="mcp-session-id" in headers,
            access_problem=access_problem,
            authorised=self.policy.authorised(authorization),
        )
        if refusal is None and method == "POST":
            refusal = refuse_post(
                content_type=headers.get("content-type", ""),
                accepts_json=_accepts(headers.get("accept"), "application/json"),
            )
        grant: Grant | None = None
        if refusal is None and self.authority is not None:
            verdict = await self.authority.authorise(authorization)
            if isinstance(verdict, Grant):
                grant = verdict
            else:
                refusal = oauth_refusal(self.authority.settings, verdict)
        if refusal is not None:
            await _refuse(send, refusal)
            return
        if method != "POST":
            principal = self._principal_of(scope, authorization, grant)
            limited = principal if grant is None else _subject_key(grant)
            if await self._past_rate(limited, send):
                return
            if method == "GET":
                await self._get(headers, principal, receive, send)
            else:
                await self._delete(headers, principal, send)
            return
        accept = headers.get("accept")
        try:
            async with asyncio.timeout(BODY_TIMEOUT_SECONDS):
                body = await self._read_body(headers, receive, send)
        except TimeoutError:
            await _respond(
                send,
                408,
                _error_body(INVALID_REQUEST, "Request Timeout: the body did not arrive in time"),
                [_JSON, (b"connection", b"close")],
            )
            return
        if body is None:
            return
        if self._stopping:
            await self._refuse_stopping(send)
            return
        try:
            message = parse_message(parse_json(body))
        except InvalidMessage as error:
            await _respond(
                send, 400, _error_body(error.code, error.message, error.request_id, error.data)
            )
            return
        if grant is not None and self.authority is not None:
            missing = scope_refusal(grant, self._scopes_needed(message))
            if missing is not None:
                await _refuse(send, oauth_refusal(self.authority.settings, missing))
                return
        principal = self._principal_of(scope, authorization, grant)
        # What one principal may take is counted by who it is: an OAuth subject whatever
        # client it registers (a user with ten clients is one user). A client's answer to the
        # server's own request (2025-11-25) is never refused: it is the end of a call.
        limited = principal if grant is None else _subject_key(grant)
        if not isinstance(message, Response) and await self._past_rate(limited, send):
            return
        if not (isinstance(message, Request) and message.method == "tools/call"):
            await self._post(message, headers, accept, principal, receive, send)
            return
        if not self.limits.enter_call(limited):
            calls = self.limits.calls
            await _refuse(
                send,
                too_many(
                    f"you have {calls} tool calls running, the most one principal may "
                    f"({ENV_CALLS_PER_PRINCIPAL}); retry when one has finished",
                    1.0,
                ),
            )
            return
        try:
            await self._post(message, headers, accept, principal, receive, send)
        finally:
            self.limits.leave_call(limited)

    async def _past_rate(self, principal: str | None, send: Send) -> bool:
        """Whether `principal` sends faster than its share (then the 429 is sent here)."""
        wait = self.limits.admit(principal, self._clock())
        if wait is None:
            return False
        rate = self.limits.rate
        await _refuse(
            send,
            too_many(
                f"more than {rate} requests a second from you ({ENV_RATE_PER_PRINCIPAL})", wait
            ),
        )
        return True

    async def _health(self, path: str, method: str, send: Send) -> None:
        """Liveness (`/healthz`: this process answers) and readiness (`/readyz`: it can serve a
        request now: the signing key signs and verifies, the task store answers). Open to any
        caller, like a load balancer's; they say nothing but the verdict and, when not ready,
        which part is not."""
        if method != "GET":
            await _refuse(
                send, Refusal(405, "Method Not Allowed: GET only", None, ((b"allow", b"GET"),))
            )
            return
        problem = None if path == LIVE_PATH else await self._readiness_problem()
        body: dict[str, object] = {"status": "ok" if problem is None else "unavailable"}
        if problem is not None:
            body["reason"] = problem
        headers = [_JSON, (b"cache-control", b"no-store")]
        await _respond(send, 200 if problem is None else 503, encode(body), headers)

    async def _readiness_problem(self) -> str | None:
        """Which part is not ready, in fixed words (the details, which may name hosts, go to
        the log only: anyone may ask this)."""
        if self._stopping:
            return "stopping"
        if not self.server.signing_works():
            return "the signing key cannot sign and verify a requestState"
        try:
            async with asyncio.timeout(READY_TIMEOUT_SECONDS):
                await self.server.tasks.check_store()
        except TimeoutError:
            return f"the task store did not answer within {READY_TIMEOUT_SECONDS:g} s"
        except (TaskStoreUnavailable, RpcError) as error:
            detail = error.message if isinstance(error, RpcError) else str(error)
            _logger.warning("not ready: the task store cannot be used: %s", detail)
            return "the task store cannot be used (see the server log)"
        return None

    def _principal_of(
        self, scope: Scope, authorization: str | None, grant: Grant | None
    ) -> str | None:
        if grant is not None:
            return grant.principal
        return _principal(scope, self.policy.bearer_principal(authorization))

    def _scopes_needed(self, message: Request | Notification | Response) -> tuple[str, ...]:
        """The scopes a tools/call needs beyond every request's: its tool's (`tool(scopes=)`).
        An unknown tool needs none here: the router answers it as unknown."""
        if not isinstance(message, Request) or message.method != "tools/call":
            return ()
        name = message.params.get("name")
        try:
            self.server.registry.ensure_loaded()
        except RpcError:
            return ()  # the router answers the tools that failed to load
        tool = self.server.registry.tools.get(name) if isinstance(name, str) else None
        return () if tool is None else tool.scopes

    async def _resource_metadata(self, authority: BearerAuthority, method: str, send: Send) -> None:
        """RFC 9728 section 3: the Protected Resource Metadata, for anyone (no token: it is
        how a client learns where to get one)."""
        if method != "GET":
            await _refuse(
                send,
                Refusal(405, "Method Not Allowed: GET only", None, ((b"allow", b"GET"),)),
            )
            return
        with contextlib.suppress(RpcError):  # listed as far as they loaded; calls say the rest
            self.server.registry.ensure_loaded()
        tools = self.server.registry.tools.values()
        tool_scopes = [scope for tool in tools for scope in tool.scopes]
        body = metadata_document(authority.settings, tool_scopes)
        await _respond(send, 200, body, [_JSON, (b"cache-control", b"max-age=300")])

    async def _post(
        self,
        message: Request | Notification | Response,
        headers: dict[str, str],
        accept: str | None,
        principal: str | None,
        receive: Receive,
        send: Send,
    ) -> None:
        """A POST's message, read and parsed: to its era, and there to its answer."""
        # The one header the 2026-07-28 path looks up for the other era: a session's requests,
        # and an initialize, are 2025-11-25 unless they carry modern _meta.
        session_id = headers.get("mcp-session-id")
        if (
            session_id is not None
            or (isinstance(message, Request) and message.method == "initialize")
        ) and not _modern(message):
            await self._legacy_post(message, session_id, headers, accept, principal, receive, send)
            return
        if isinstance(message, Notification):
            # "Sending Messages": an accepted notification gets 202 and no body. None is defined
            # for clients over HTTP in 2026-07-28 (cancelling is closing the stream).
            await _respond(send, 202, headers=[])
            return
        if isinstance(message, Response):
            await _respond(
                send,
                400,
                _error_body(INVALID_REQUEST, "Invalid request: a client sends no responses here"),
            )
            return
        places = await self._take_place(send)
        if places is None:
            return
        try:
            await self._serve(message, headers, accept, receive, send, principal)
        finally:
            self._running -= 1
            places.release()

    async def _take_place(self, send: Send) -> asyncio.Semaphore | None:
        """One of the `max_in_flight` places to run a request in (give it back with
        `_running -= 1; places.release()`), waiting among `max_waiting` others for it; None
        when refused (503, answered here)."""
        settings = self.settings
        if self._running >= settings.max_in_flight and self._waiting >= settings.max_waiting:
            await _respond(
                send,
                503,
                _error_body(
                    INTERNAL_ERROR,
                    f"Server busy: {self._running} requests running and {self._waiting} "
                    "waiting; retry later",
                ),
                [_JSON, _RETRY_SOON],
            )
            return None
        places = self._places
        if places is None:
            places = self._places = asyncio.Semaphore(self.settings.max_in_flight)
        self._waiting += 1
        waiting = asyncio.current_task() if places.locked() else None
        if waiting is not None:
            self._queued.add(waiting)
        try:
            await places.acquire()
        except asyncio.CancelledError:
            # Only a stopping server cancels a request still waiting (`stop_waiting`, or
            # uvicorn at the end of its grace): it never started, so it can be sent again.
            if waiting is None:
                raise
            waiting.uncancel()
            await self._refuse_stopping(send)
            return None
        finally:
            self._waiting -= 1
            if waiting is not None:
                self._queued.discard(waiting)
        self._running += 1
        return places

    async def _refuse_stopping(self, send: Send) -> None:
        await _respond(
            send,
            503,
            _error_body(
                INTERNAL_ERROR, "Server stopping: the request was not started; send it again"
            ),
            [_JSON, _RETRY_SOON],
        )

    # -- stopping (called by the HTTP server that runs the app) ----------------------------------

    def stop_waiting(self) -> None:
        """Start nothing more: requests waiting for a place are answered 503 now, not cut off,
        and the 2025-11-25 sessions' GET streams end (nothing on them awaits an answer)."""
        self._stopping = True
        for task in self._queued:
            task.cancel()
        for session in self.sessions:
            standalone = session.attached.get(STANDALONE)
            if standalone is not None:
                standalone.end_soon()

    def end_sessions(self) -> int:
        """End every 2025-11-25 session (the server is stopping); how many there were."""
        sessions = list(self.sessions)
        for session in sessions:
            self._end_session(session)
        return len(sessions)

    async def abandon_open(self) -> int:
        """Answer every request still open with the stopping error; how many there were.

        For requests whose handler ignores its cancellation (a thread blocked in I/O, a handler
        awaiting a thread it cannot leave): the client gets its 503 all the same.
        """
        open_now = list(self._open.items())
        for exchange, (request, cancellation) in open_now:
            await exchange.finish(_stopping_error(request, cancellation), 503)
        return len(open_now)

    async def _read_body(
        self, headers: Mapping[str, str], receive: Receive, send: Send
    ) -> bytes | None:
        limit = self.settings.max_body_bytes
        declared = headers.get("content-length", "")
        if declared.isdigit() and int(declared) > limit:
            await self._too_large(send)
            return None
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                return None
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > limit:
                await self._too_large(send)
                return None
            chunks.append(chunk)
            if not message.get("more_body", False):
                return b"".join(chunks)

    async def _too_large(self, send: Send) -> None:
        limit = self.settings.max_body_bytes
        await _respond(
            send,
            413,
            _error_body(INVALID_REQUEST, f"Content Too Large: at most {limit} bytes per request"),
        )

    async def _serve(
        self,
        message: Request,
        headers: Mapping[str, str],
        accept: str | None,
        receive: Receive,
        send: Send,
        principal: str | None = None,
    ) -> None:
        try:
            check_headers(headers, message, self._mirrored_for(message))
        except HeaderMismatch as mismatch:
            await _respond(send, 400, _error_body(HEADER_MISMATCH, str(mismatch), message.id))
            return
        await self._answer(message, accept, receive, send, principal)

    def _mirrored_for(self, request: Request) -> tuple[MirroredParam, ...]:
        if request.method != "tools/call":
            return ()
        name = request.params.get("name")
        tool = self.server.registry.tools.get(name) if isinstance(name, str) else None
        if tool is None:
            return ()
        schema = tool.wire.get("inputSchema")
        cached = self._mirrored.get(name) if isinstance(name, str) else None
        if cached is not None and cached[0] is schema:
            return cached[1]
        params = mirrored_params(schema) if isinstance(schema, Mapping) else ()
        self._mirrored[str(name)] = (schema, params)
        return params

    async def _answer(
        self,
        request: Request,
        accept: str | None,
        receive: Receive,
        send: Send,
        principal: str | None = None,
    ) -> None:
        exchange = _Exchange(send, sse_allowed=_accepts(accept, "text/event-stream"))
        cancellation = Cancellation()
        serving = asyncio.current_task()
        if serving is None:  # an ASGI server always runs the app in a task
            raise RuntimeError("HttpApp must run inside an asyncio task")
        watcher = _DisconnectWatch(receive, exchange, cancellation, serving)
        self._open[exchange] = (request, cancellation)
        try:
            message, malformed = await self.server.reply(
                request, self._stateless, exchange, cancellation, principal
            )
        except asyncio.CancelledError:
            # Either the client went away, or the server is stopping and this request outlived
            # the grace period (uvicorn cancels it). Either way the handler must stop, a
            # worker thread too (it polls ctx.cancelled), and the task ends quietly.
            serving.uncancel()
            # As on stdio, nothing is left unanswered (a closed exchange sends nothing).
            await exchange.finish(_stopping_error(request, cancellation), 503)
            return
        finally:
            del self._open[exchange]
            watcher.cancel()
            exchange.stop_keepalive()
        if exchange.closed:
            # The handler finished anyway (it ignored the cancellation): nothing is sent.
            if serving.cancelling():
                serving.uncancel()
            return
        error = message.get("error")
        status = 200 if error is None else http_status(error["code"], malformed=malformed)
        try:
            await exchange.finish(message, status)
        except (TypeError, ValueError):
            # A handler's result that is not JSON: the stdio transport answers the same way.
            _logger.exception("a result for %s could not be encoded", request.method)
            await exchange.finish(error_response(request.id, INTERNAL_ERROR, "Internal error"), 200)

    # -- 2025-11-25 sessions ---------------------------------------------------------------------

    def _end_session(self, session: LegacySession) -> None:
        """End `session`: its running requests cancelled, its streams closed, its listener
        closed; its id answers 404 from now on ("Session Management" 3.)."""
        self.sessions.end(session)
        for running in list(session.running.values()):
            running.cancel()
        for answer in session.pending.values():
            answer.cancel()
        for stream in list(session.attached.values()):
            stream.end_soon()
        listener = session.state.listener
        if listener is not None:
            listener.close()

    def _live_session(self, session_id: str, principal: str | None) -> LegacySession | None:
        for ended in self.sessions.expire():
            self._end_session(ended)
        return self.sessions.find(session_id, principal)

    async def _legacy_post(
        self,
        message: Request | Notification | Response,
        session_id: str | None,
        headers: Mapping[str, str],
        accept: str | None,
        principal: str | None,
        receive: Receive,
        send: Send,
    ) -> None:
        request_id = message.id if isinstance(message, Request) else None
        problem = legacy_version_problem(headers.get("mcp-protocol-version"))
        if problem is not None:
            await _respond(send, 400, _error_body(INVALID_REQUEST, problem, request_id))
            return
        if isinstance(message, Request) and message.method == "initialize":
            # "Session Management" 1.: the session starts with initialize; a header it carries
            # names nothing yet (a client starting over after a 404 may still send the old one).
            await self._open_session(message, principal, send)
            return
        session = None if session_id is None else self._live_session(session_id, principal)
        if session is None:
            # "Session Management" 3. and 4.: an ended (or unknown) session is 404, and the
            # client starts over with initialize. The id is never logged.
            await _respond(
                send,
                404,
                _error_body(
                    INVALID_REQUEST,
                    "Session not found: it ended or was never opened; send initialize again",
                    request_id,
                ),
            )
            return
        if isinstance(message, Response):
            # "Sending Messages" 4.: the client's answer to our request; it never waits for a
            # place (the request it answers holds one), so a full server cannot deadlock.
            waiting = session.pending.get(message.id) if isinstance(message.id, str) else None
            if waiting is not None and not waiting.done():
                waiting.set_result(message)
            await _respond(send, 202, headers=[])
            return
        if isinstance(message, Notification):
            cancelled = self.server.handle_notification(message)
            running = session.running.get(cancelled) if cancelled is not None else None
            if running is not None:
                # basic/utilities/cancellation: the client's notifications/cancelled, the only
                # way to cancel here ("Sending Messages" 6.: disconnection is not cancellation).
                running.cancel()
            await _respond(send, 202, headers=[])
            return
        if message.id in session.running:
            await _respond(
                send, 400, _error_body(INVALID_REQUEST, "Request id is already in use", message.id)
            )
            return
        places = await self._take_place(send)
        if places is None:
            return
        place = _Place(self, places)
        self.sessions.acquire(session)
        try:
            await self._legacy_request(session, message, accept, principal, receive, send, place)
        finally:
            self.sessions.release(session)
            place.give_back()

    async def _open_session(self, request: Request, principal: str | None, send: Send) -> None:
        session, ended, refused_by = self.sessions.open(principal)
        for old in ended:
            self._end_session(old)
        if session is None:
            # At a bound with every session that counts busy: none can be ended for this one.
            table = self.sessions
            if refused_by == "principal":
                why = (
                    f"you hold {table.held_by(principal)} sessions, your share of "
                    f"{table.max_per_principal} ({ENV_SESSIONS_PER_PRINCIPAL}; by default an "
                    "equal split among the principals with tokens), each with a request running "
                    "or waiting for its user; end one (DELETE) or retry later"
                )
            else:
                why = (
                    f"{len(table)} sessions open ({ENV_MAX_SESSIONS}={table.max_sessions}), "
                    "each with a request running; retry later"
                )
            await _respond(
                send,
                503,
                _error_body(INTERNAL_ERROR, f"Server busy: {why}", request.id),
                [_JSON, _RETRY_SOON],
            )
            return
        # The session's own stream is what its listener notifies (list changes, resource
        # updates: "Listening for Messages" 4., messages unrelated to any request).
        standalone = _LegacyExchange(self, session, session.logs[STANDALONE], sse=True)
        message, _ = await self.server.reply(request, session.state, standalone, None, principal)
        if "error" in message:
            self.sessions.end(session)
            await _respond(send, 200, encode(message))
            return
        await _respond(
            send, 200, encode(message), [_JSON, (b"mcp-session-id", session.id.encode("ascii"))]
        )

    async def _legacy_request(
        self,
        session: LegacySession,
        request: Request,
        accept: str | None,
        principal: str | None,
        receive: Receive,
        send: Send,
        place: _Place,
    ) -> None:
        """One request of a 2025-11-25 session, on an SSE stream of its own when the client
        takes one ("Sending Messages" 5.): the priming event first, then what the request
        sends (notifications, the legacy bridge's requests), then its response. The client
        closing the connection detaches the stream and the request keeps running; its
        messages wait in the stream's log for a GET with `Last-Event-ID`."""
        serving = asyncio.current_task()
        if serving is None:  # an ASGI server always runs the app in a task
            raise RuntimeError("HttpApp must run inside an asyncio task")
        log = session.open_stream()
        sse = _accepts(accept, "text/event-stream")
        exchange = _LegacyExchange(self, session, log, sse=sse, send=send, place=place)
        cancellation = Cancellation()
        session.running[request.id] = _Running(cancellation, serving)
        watch: asyncio.Task[None] | None = None
        stream = _SseStream(send)
        if sse:
            session.attached[log.key] = stream
            holding = _hold_post(receive, session, log, stream, self.settings.sse_poll_seconds)
            watch = asyncio.get_running_loop().create_task(holding)
        try:
            await self._legacy_reply(session, request, exchange, cancellation, principal, serving)
        finally:
            if watch is not None and stream.polling and not watch.done():
                # A poll is writing its last bytes (`_poll`): they end the response, so they
                # are let through rather than cut off.
                await asyncio.wait({watch})
            elif watch is not None:
                watch.cancel()

    async def _legacy_reply(
        self,
        session: LegacySession,
        request: Request,
        exchange: _LegacyExchange,
        cancellation: Cancellation,
        principal: str | None,
        serving: asyncio.Task[Any],
    ) -> None:
        self._open[exchange] = (request, cancellation)
        try:
            message, _ = await self.server.reply(
                request, session.state, exchange, cancellation, principal
            )
        except asyncio.CancelledError:
            # Cancelled by the client (notifications/cancelled), by DELETE, or by a stopping
            # server past its grace (uvicorn cancels the task).
            serving.uncancel()
            if self._stopping and not session.ended:
                await exchange.finish(_stopping_error(request, cancellation), 503)
            else:
                # basic/utilities/cancellation: no response for a cancelled request.
                await exchange.end()
            return
        finally:
            del self._open[exchange]
            session.running.pop(request.id, None)
        if cancellation.cancelled:
            await exchange.end()  # it ignored its cancellation: its answer is dropped
            return
        try:
            await exchange.finish(message, 200)
        except (TypeError, ValueError):
            _logger.exception("a result for %s could not be encoded", request.method)
            await exchange.finish(error_response(request.id, INTERNAL_ERROR, "Internal error"), 200)

    async def _get(
        self, headers: Mapping[str, str], principal: str | None, receive: Receive, send: Send
    ) -> None:
        """2025-11-25 "Listening for Messages": the session's own stream; with `Last-Event-ID`,
        any of its streams resumed after that event ("Resumability and Redelivery" 2.)."""
        refusal = refuse_session_get(
            accepts_event_stream=_accepts(headers.get("accept"), "text/event-stream"),
            version_problem=legacy_version_problem(headers.get("mcp-protocol-version")),
        )
        if refusal is not None:
            await _refuse(send, refusal)
            return
        session = self._live_session(headers["mcp-session-id"], principal)
        if session is None:
            await _respond(
                send,
                404,
                _error_body(INVALID_REQUEST, "Session not found: it ended or was never opened"),
            )
            return
        if self._stopping:
            await self._refuse_stopping(send)
            return
        resumed = headers.get("last-event-id")
        replay: list[bytes] = []
        if resumed is None:
            log = session.logs[STANDALONE]
            if session.attached.get(STANDALONE) is not None:
                # One GET stream per session (as the TypeScript SDK answers): a second would
                # split its messages, which go on one stream only ("Multiple Connections" 2.).
                await _respond(
                    send,
                    409,
                    _error_body(
                        INVALID_REQUEST,
                        "Conflict: this session's GET stream is already open; close it first, "
                        "or resume it with Last-Event-ID",
                    ),
                )
                return
            replay.append(_priming(log))
        else:
            found = parse_event_id(resumed)
            log_of = session.logs.get(found[0]) if found is not None else None
            if found is None or log_of is None:
                await _respond(
                    send,
                    400,
                    _error_body(
                        INVALID_REQUEST,
                        "Bad Request: Last-Event-ID names no stream this session still holds",
                    ),
                )
                return
            log = log_of
            # "MUST NOT replay messages that would have been delivered on a different
            # stream": only this log's events after the one named.
            replay = log.after(found[1])
            previous = session.attached.pop(log.key, None)
            if previous is not None:
                # The client resumed, so the older connection is dead or abandoned.
                previous.end_soon(retry=True)
            if not replay:
                replay.append(_priming(log))
        stream = _SseStream(send)
        self.sessions.acquire(session)
        try:
            if log.ended:
                # Its request is over: the replay holds its end, and nothing more comes.
                await stream.start(b"".join(replay))
                await stream.close()
                session.forget_stream(log.key)
                return
            session.attached[log.key] = stream
            await stream.start(b"".join(replay))
            await _hold(receive, stream, self.settings.sse_poll_seconds, session, log)
        finally:
            if session.attached.get(log.key) is stream:
                del session.attached[log.key]
            self.sessions.release(session)

    async def _delete(self, headers: Mapping[str, str], principal: str | None, send: Send) -> None:
        """2025-11-25 "Session Management" 5.: the client ends its session."""
        session = self._live_session(headers["mcp-session-id"], principal)
        if session is None:
            await _respond(
                send,
                404,
                _error_body(INVALID_REQUEST, "Session not found: it ended or was never opened"),
            )
            return
        self._end_session(session)
        await _respond(send, 200, headers=[])


def _stopping_error(request: Request, cancellation: Cancellation) -> JSONObject:
    """The answer for a request the server stops: cancelled before its point of no return, it
    did nothing and can be sent again; past it, it may have been carried out."""
    if cancellation.cancel_unless_committed():
        outcome = "the request was not finished; send it again"
    else:
        outcome = f"the request was not finished, but {MAYBE_CARRIED_OUT}"
    return error_response(request.id, INTERNAL_ERROR, f"Server stopping: {outcome}")


class _DisconnectWatch:
    """basic/patterns/cancellation: over HTTP, the client closing the connection IS the cancel.
    Once it closes, the handler sees `ctx.cancelled`, its task is cancelled, nothing more is sent.

    The watching task starts one turn of the loop after the request does: most requests are
    answered before that, and then no task is made, cancelled and unwound at all.
    """

    __slots__ = ("_start", "_task", "cancellation", "exchange", "receive", "serving")

    def __init__(
        self,
        receive: Receive,
        exchange: _Exchange,
        cancellation: Cancellation,
        serving: asyncio.Task[Any],
    ) -> None:
        self.receive = receive
        self.exchange = exchange
        self.cancellation = cancellation
        self.serving = serving
        self._task: asyncio.Task[None] | None = None
        self._start = asyncio.get_running_loop().call_soon(self._begin)

    def _begin(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._watch())

    async def _watch(self) -> None:
        while (await self.receive())["type"] != "http.disconnect":
            pass
        self.exchange.closed = True
        self.cancellation.cancel()
        self.serving.cancel()

    def cancel(self) -> None:
        self._start.cancel()
        if self._task is not None:
            self._task.cancel()


# -- 2025-11-25: streams, and the Peer of a session's request --------------------------------------


def _modern(message: Request | Notification | Response) -> bool:
    """2026-07-28 basic/versioning "Backward Compatibility": a message carrying modern
    per-request `_meta` is served statelessly, whatever session header it has."""
    if isinstance(message, Response):
        return False
    meta = message.params.get("_meta")
    return isinstance(meta, dict) and META_PROTOCOL_VERSION in meta


def _priming(log: EventLog) -> bytes:
    """2025-11-25 "Sending Messages" 6.: an event id and empty data, so that the client can
    resume from the very start of the stream."""
    return b"id: %s\ndata: \n\n" % log.next_id().encode("ascii")


class _SseStream:
    """One connection carrying a session's stream: a POST's response, or a GET's.

    A POST's starts when its request first sends something, the priming event first; a
    request that sends nothing before its response is answered as plain JSON
    (the client "MUST support both these cases"), so quick requests cost no stream.
    """

    __slots__ = ("_keepalive", "closed", "ending", "polling", "retry", "send", "started")

    def __init__(self, send: Send) -> None:
        self.send = send
        self.started = False
        #: Nothing more is sent on it (ended by the server, or the client went away).
        self.closed = False
        #: Set when the server wants it ended (`end_soon`) or it ended.
        self.ending = asyncio.Event()
        self.retry = False
        #: The server is closing it for SSE polling (`_poll`).
        self.polling = False
        self._keepalive: asyncio.Task[None] | None = None

    async def start(self, first: bytes, *, more: bool = True) -> None:
        # Claimed before the first await: a second writer never starts it twice.
        self.started = True
        await self.send({"type": "http.response.start", "status": 200, "headers": _SSE_HEADERS})
        await self.send({"type": "http.response.body", "body": first, "more_body": more})
        if more:
            self._keepalive = asyncio.get_running_loop().create_task(self._keep_alive())

    async def _keep_alive(self) -> None:
        while not self.closed:
            await asyncio.sleep(KEEPALIVE_SECONDS)
            await self.write(_KEEPALIVE)

    async def write(self, frame: bytes) -> None:
        if self.closed:
            return
        if not self.started:
            await self.start(frame)
            return
        await self.send({"type": "http.response.body", "body": frame, "more_body": True})

    async def close(self, last: bytes = b"") -> None:
        """The last bytes, and the response ends; with `retry` set, the client is told to
        come back ("Sending Messages" 6.: SHOULD send `retry` before closing early)."""
        if self.closed:
            return
        self.closed = True
        self.ending.set()
        if self._keepalive is not None:
            self._keepalive.cancel()
        if self.retry:
            last = b"retry: %d\n\n" % RETRY_MILLISECONDS + last
        if not self.started:
            await self.start(last, more=False)
            return
        await self.send({"type": "http.response.body", "body": last, "more_body": False})

    def end_soon(self, *, retry: bool = False) -> None:
        """Ask whoever holds the connection (`_hold`) to close it."""
        self.retry = retry
        self.ending.set()

    def gone(self) -> None:
        """The client closed the connection."""
        self.closed = True
        self.ending.set()
        if self._keepalive is not None:
            self._keepalive.cancel()


async def _disconnected(receive: Receive) -> None:
    while (await receive())["type"] != "http.disconnect":
        pass


async def _hold(
    receive: Receive,
    stream: _SseStream,
    poll: float | None = None,
    session: LegacySession | None = None,
    log: EventLog | None = None,
) -> None:
    """Keep `stream`'s connection until the client closes it or the server ends the stream;
    with `poll`, at most that many seconds (`_poll`)."""
    watching = asyncio.get_running_loop().create_task(_disconnected(receive))
    ending = asyncio.get_running_loop().create_task(stream.ending.wait())
    try:
        done, _ = await asyncio.wait(
            {watching, ending}, timeout=poll, return_when=asyncio.FIRST_COMPLETED
        )
    finally:
        watching.cancel()
        ending.cancel()
    if watching in done and not watching.cancelled():
        stream.gone()
    elif not done and session is not None and log is not None:
        await _poll(stream, session, log)
    else:
        await stream.close()


async def _poll(stream: _SseStream, session: LegacySession, log: EventLog) -> None:
    """2025-11-25 "Sending Messages" 6.: "After the server has sent an SSE event with an event
    ID to the client, the server MAY close the connection (without terminating the SSE stream)
    at any time ... it SHOULD send an SSE event with a standard retry field before closing".

    The stream is detached first, so that what its request sends from now on waits in the log
    for the client's GET with `Last-Event-ID` (a request that finishes while detached keeps its
    response there, `LegacySession.close_stream`). A stream that has sent nothing yet gets its
    priming event first: the client needs an event id to resume from.
    """
    if stream.closed:
        return  # its request's response took it meanwhile
    if session.attached.get(log.key) is stream:
        del session.attached[log.key]
    stream.polling = True
    if stream.started:
        stream.retry = True
        await stream.close()
        return
    # The priming event, then `retry`, and the response ends.
    stream.closed = True
    stream.ending.set()
    await stream.start(_priming(log) + b"retry: %d\n\n" % RETRY_MILLISECONDS, more=False)


async def _hold_post(
    receive: Receive,
    session: LegacySession,
    log: EventLog,
    stream: _SseStream,
    poll: float | None = None,
) -> None:
    """A legacy POST's stream: when its connection goes, the stream is detached and its
    request keeps running ("Sending Messages" 6.: disconnection SHOULD NOT be interpreted as
    the client cancelling its request); what it sends waits in the log. With `poll`, the
    server closes the connection itself after that many seconds (`_poll`)."""
    try:
        await _hold(receive, stream, poll, session, log)
    finally:
        if session.attached.get(log.key) is stream:
            del session.attached[log.key]


class _Running:
    """A session's request being served: how to cancel it."""

    __slots__ = ("cancellation", "task")

    def __init__(self, cancellation: Cancellation, task: asyncio.Task[Any]) -> None:
        self.cancellation = cancellation
        self.task = task

    def cancel(self) -> None:
        # The flag first: a handler in a worker thread sees it although the task's
        # cancellation cannot reach it.
        self.cancellation.cancel()
        self.task.cancel()


class _Place:
    """A request's place among `max_in_flight` (`HttpApp._take_place`), which a 2025-11-25
    call lends back while its client answers. Given back once: a call cancelled while it
    waits to take its place again holds none, and gives none back."""

    __slots__ = ("app", "held", "places")

    def __init__(self, app: HttpApp, places: asyncio.Semaphore) -> None:
        self.app = app
        self.places = places
        self.held = True

    def give_back(self) -> None:
        if self.held:
            self.held = False
            self.app._running -= 1
            self.places.release()

    async def take_again(self) -> None:
        await self.places.acquire()
        self.held = True
        self.app._running += 1


class _LegacyExchange:
    """The `Peer` of one 2025-11-25 request (or, for the standalone stream, of the session's
    listener): its messages are events of its stream, logged for replay and written to the
    connection attached to the stream, if any."""

    __slots__ = ("app", "log", "place", "send", "session", "sse")

    def __init__(
        self,
        app: HttpApp,
        session: LegacySession,
        log: EventLog,
        *,
        sse: bool,
        send: Send | None = None,
        place: _Place | None = None,
    ) -> None:
        self.app = app
        self.session = session
        self.log = log
        self.sse = sse
        self.send = send
        #: The request's place among the `max_in_flight` (None: the standalone stream's).
        self.place = place

    async def _emit(self, data: bytes) -> None:
        stream = self.session.attached.get(self.log.key)
        if stream is not None and not stream.started:
            # The stream's first message: the priming event before it, its id the lower.
            priming = _priming(self.log)
            await stream.write(priming + self.log.record(data))
            return
        frame = self.log.record(data)
        if stream is not None:
            await stream.write(frame)

    async def notify(self, method: str, params: dict[str, Any]) -> None:
        if self.sse and not self.log.ended and not self.session.ended:
            await self._emit(encode({"jsonrpc": "2.0", "method": method, "params": params}))

    async def request(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        """2025-11-25 "Sending Messages" 6.: the server MAY send requests on the request's
        stream; the client POSTs the response (`_legacy_post`)."""
        if not self.sse:
            # Without a stream there is no way to the client: the bridge refuses the call.
            raise RpcError(INVALID_REQUEST, "no event stream (Accept: text/event-stream)")
        session = self.session
        request_id = session.client_request_id()
        answer: asyncio.Future[Response] = asyncio.get_running_loop().create_future()
        session.pending[request_id] = answer
        timeout = self.app.settings.client_request_timeout
        try:
            await self._emit(
                encode({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params})
            )
            try:
                async with self._lent_place(), asyncio.timeout(timeout):
                    response = await answer
            except TimeoutError:
                reason = f"no answer within {timeout:g} s"
                _logger.warning("the client gave %s to %s", reason, method)
                await self._withdraw(request_id, reason)
                raise RpcError(INTERNAL_ERROR, reason) from None
            except asyncio.CancelledError:
                # The request that asked was cancelled: the question is moot, so the client
                # is told to stop asking its user (basic/utilities/cancellation).
                with contextlib.suppress(Exception):
                    await self._withdraw(request_id, "the request that needed it was cancelled")
                raise
        finally:
            del session.pending[request_id]
        return client_result(response)

    @contextlib.asynccontextmanager
    async def _lent_place(self) -> AsyncIterator[None]:
        """While the client answers (a person, for an elicitation), the request's place goes
        to whoever waits for one: 64 users each looking at a confirmation must not keep every
        other request, of either era, waiting for as long as they look."""
        place, app = self.place, self.app
        if place is None or not place.held or app.parked >= app.settings.max_parked:
            yield
            return
        place.give_back()
        app.parked += 1
        try:
            yield
        except BaseException:
            # Cancelled, or no answer in time: what is left (unwinding, a refusal) needs no
            # place, and waiting for one would only delay the end.
            app.parked -= 1
            raise
        app.parked -= 1
        await place.take_again()

    async def _withdraw(self, request_id: str, reason: str) -> None:
        if not self.log.ended and not self.session.ended:
            params = {"requestId": request_id, "reason": reason}
            await self._emit(
                encode({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": params})
            )

    async def finish(self, message: JSONObject, status: int) -> None:
        """The request's response: the stream's last event (or the JSON body), kept for a
        resuming GET when no connection is attached to take it."""
        if self.log.ended:
            return
        data = encode(message)
        self.log.ended = True
        if not self.sse:
            # No stream, so nothing to resume: its log goes now (kept, one per request, it
            # would grow with every JSON-only request for the session's life).
            self.session.close_stream(self.log, delivered=True)
            if self.send is not None:
                await _respond(self.send, status, data)
            return
        stream = self.session.attached.pop(self.log.key, None)
        if stream is not None and not stream.started and not stream.closed:
            # Nothing was sent before the response: plain JSON ("Sending Messages" 5.).
            stream.closed = True
            stream.ending.set()
            await _respond(self.send or stream.send, status, data)
            self.session.close_stream(self.log, delivered=True)
            return
        frame = self.log.record(data)
        delivered = stream is not None and not stream.closed
        if stream is not None:
            await stream.close(frame)
        self.session.close_stream(self.log, delivered=delivered)

    async def end(self) -> None:
        """The request ends with no response (it was cancelled)."""
        if self.log.ended:
            return
        self.log.ended = True
        if not self.sse:
            self.session.close_stream(self.log, delivered=True)
            if self.send is not None:
                await _respond(self.send, 202, headers=[])
            return
        stream = self.session.attached.pop(self.log.key, None)
        if stream is not None:
            await stream.close()
        self.session.close_stream(self.log, delivered=True)
