"""MCP's Streamable HTTP transport as an ASGI app: 2026-07-28, and 2025-11-25 beside it.

A thin shell like `../_stdio.py`: it reads one POST, applies `_rules` (who may ask, whether the
headers agree with the body), hands the request to the same `Server` the stdio transport uses,
and writes the reply as JSON, or as an SSE stream when the request's handler sends notifications
first (progress, log messages, a listen's notices). For 2026-07-28 (basic/transports/
streamable-http) closing the connection cancels the request ("Cancellation"), and every request
stands alone: no sessions, nothing kept between requests, so any number of replicas sharing one
signing key serve one conversation (basic/patterns/mrtr).

2025-11-25 clients are served on the same endpoint (`_legacy_era`): an `initialize` without
modern `_meta`, and every request naming a session, go there. A request carrying modern `_meta`
is modern whatever headers it has. Both eras share this app's places, its open requests and its
stop.

The HTTP server itself is uvicorn: `_uvicorn.serve_http` runs this app on it (the optional `http`
extra). Nothing here is imported when serving stdio.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import time
from collections.abc import Callable, Mapping
from typing import Any, Final

from .._context import SHUTDOWN_GRACE_SECONDS, Cancellation
from .._jsonrpc import (
    INTERNAL_ERROR,
    INVALID_REQUEST,
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
from .._router import Server, Session
from .._task_store import TaskStoreUnavailable
from .._wire import META_PROTOCOL_VERSION
from ._authorization_server import BearerAuthority
from ._legacy_era import LegacyEra
from ._limits import PrincipalLimits
from ._oauth import Grant, metadata_document, scope_refusal
from ._responses import (
    JSON_CONTENT,
    KEEPALIVE_COMMENT,
    KEEPALIVE_SECONDS,
    RETRY_SOON,
    SSE_HEADERS,
    OpenExchange,
    Receive,
    Scope,
    Send,
    accepts,
    error_body,
    refuse,
    respond,
    stopping_error,
)
from ._rules import (
    HEADER_MISMATCH,
    AccessPolicy,
    HeaderMismatch,
    MirroredParam,
    Refusal,
    check_headers,
    http_status,
    mirrored_params,
    oauth_refusal,
    refuse_post,
    refuse_request,
    too_many,
)
from ._settings import (
    BODY_TIMEOUT_SECONDS,
    ENDPOINT,
    ENV_CALLS_PER_PRINCIPAL,
    ENV_RATE_PER_PRINCIPAL,
    ENV_TOKEN,
    MAX_BODY_BYTES,
    MAX_CONNECTIONS,
    MAX_IN_FLIGHT,
    MAX_PARKED,
    MAX_WAITING,
    HttpSettings,
)

__all__ = (
    "BODY_TIMEOUT_SECONDS",
    "ENDPOINT",
    "ENV_TOKEN",
    "MAX_BODY_BYTES",
    "MAX_CONNECTIONS",
    "MAX_IN_FLIGHT",
    "MAX_PARKED",
    "MAX_WAITING",
    "ConnectionRefusal",
    "HttpApp",
    "HttpSettings",
)

#: Liveness and readiness, for load balancers and orchestrators: outside the MCP endpoint, never
#: behind authorization, and saying nothing but whether (and, when not ready, why not).
LIVE_PATH: Final = "/healthz"
READY_PATH: Final = "/readyz"
#: A readiness check (the task store's answer) must come within this, else "not ready".
READY_TIMEOUT_SECONDS: Final = 2.0
#: How long the task store's verdict stands for further readiness probes.
READY_CACHE_SECONDS: Final = 1.0

_logger = logging.getLogger("mrtr_runtime")


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
            await self.send({"type": "http.response.start", "status": 200, "headers": SSE_HEADERS})
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
                    {"type": "http.response.body", "body": KEEPALIVE_COMMENT, "more_body": True}
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
            await respond(self.send, status, line)


class ConnectionRefusal:
    """The ASGI app a connection past the bound gets instead of `HttpApp`: one JSON-RPC 503 with
    Retry-After, and the connection closed. It refuses only the excess: connections are counted
    as they open, so the first `limit` are served however many arrive at once."""

    def __init__(self, limit: int) -> None:
        self.body = error_body(
            INTERNAL_ERROR, f"Server busy: {limit} connections open at once; retry later"
        )

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            headers = [JSON_CONTENT, RETRY_SOON, (b"connection", b"close")]
            await respond(send, 503, self.body, headers)


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
        #: The 2025-11-25 era: its sessions (2026-07-28 requests never touch them).
        self.legacy = LegacyEra(self, clock)
        self.sessions = self.legacy.sessions
        #: What the router is handed for a 2026-07-28 request: never initialized, never written.
        #: Every method that writes a Session (initialize, logging/setLevel, resources/
        #: subscribe) is legacy-only, and their requests go to `LegacyEra.post`; one made per
        #: request would cost more than the rest of the routing.
        self._stateless = Session()
        self._running = 0
        self._waiting = 0
        self._places: asyncio.Semaphore | None = None
        #: Legacy calls that gave their place back while their client answers (`_Place.lend`).
        self.parked = 0
        self._mirrored: dict[str, tuple[object, tuple[MirroredParam, ...]]] = {}
        #: Set once the server is stopping: nothing more starts, and no one waits for a place.
        self.stopping = False
        #: The tasks of requests waiting for a place, so that stopping can answer them at once.
        self._queued: set[asyncio.Task[Any]] = set()
        #: Requests being served, so that stopping answers each one still open (`abandon_open`).
        self.open_requests: dict[OpenExchange, tuple[Request, Cancellation]] = {}
        self._tasks_loop: asyncio.Task[None] | None = None
        #: The task store's readiness check running now, and until when its last "works"
        #: stands (monotonic time).
        self._store_check: asyncio.Task[str | None] | None = None
        self._store_ok_until = 0.0
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
                # The store's background loop: resumes tasks whose worker died (here or on
                # another replica) and forgets expired records, for the server's life.
                self._tasks_loop = asyncio.get_running_loop().create_task(self.server.background())
                self._sweeper = asyncio.get_running_loop().create_task(self.legacy.sweep())
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
                await refuse(send, Refusal(403, problem, None))
                return
            await self._health(scope["path"], scope["method"], send)
            return
        path_is_endpoint = scope["path"] == ENDPOINT
        headers = _headers(scope) if path_is_endpoint else {}
        method = scope["method"]
        authorization = headers.get("authorization")
        refusal, grant = await self._judge_head(path_is_endpoint, method, headers)
        if refusal is not None:
            await refuse(send, refusal)
            return
        if method == "POST":
            await self._serve_post(scope, headers, grant, receive, send)
            return
        principal = self._principal_of(scope, authorization, grant)
        limited = principal if grant is None else _subject_key(grant)
        if await self._past_rate(limited, send):
            return
        if method == "GET":
            await self.legacy.get(headers, principal, receive, send)
        else:
            await self.legacy.delete(headers, principal, send)

    async def _judge_head(
        self, path_is_endpoint: bool, method: str, headers: dict[str, str]
    ) -> tuple[Refusal | None, Grant | None]:
        """The head's refusal, if any, and the OAuth grant its access token carries."""
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
                accepts_json=accepts(headers.get("accept"), "application/json"),
            )
        if refusal is not None or self.authority is None:
            return refusal, None
        verdict = await self.authority.authorise(authorization)
        if isinstance(verdict, Grant):
            return None, verdict
        return oauth_refusal(self.authority.settings, verdict), None

    async def _serve_post(
        self,
        scope: Scope,
        headers: dict[str, str],
        grant: Grant | None,
        receive: Receive,
        send: Send,
    ) -> None:
        """A POST whose head passed: its body, its message, then the message served."""
        try:
            async with asyncio.timeout(BODY_TIMEOUT_SECONDS):
                body = await self._read_body(headers, receive, send)
        except TimeoutError:
            await respond(
                send,
                408,
                error_body(INVALID_REQUEST, "Request Timeout: the body did not arrive in time"),
                [JSON_CONTENT, (b"connection", b"close")],
            )
            return
        if body is None:
            return
        if self.stopping:
            await self.refuse_stopping(send)
            return
        try:
            message = parse_message(parse_json(body))
        except InvalidMessage as error:
            await respond(
                send, 400, error_body(error.code, error.message, error.request_id, error.data)
            )
            return
        if grant is not None and self.authority is not None:
            missing = scope_refusal(grant, self._scopes_needed(message))
            if missing is not None:
                await refuse(send, oauth_refusal(self.authority.settings, missing))
                return
        principal = self._principal_of(scope, headers.get("authorization"), grant)
        # What one principal may take is counted by who it is: an OAuth subject whatever
        # client it registers (a user with ten clients is one user). A client's answer to the
        # server's own request (2025-11-25) is never refused: it is the end of a call.
        limited = principal if grant is None else _subject_key(grant)
        if not isinstance(message, Response) and await self._past_rate(limited, send):
            return
        accept = headers.get("accept")
        if not (isinstance(message, Request) and message.method == "tools/call"):
            await self._post(message, headers, accept, principal, receive, send)
            return
        if not self.limits.enter_call(limited):
            calls = self.limits.calls
            await refuse(
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
        await refuse(
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
            await refuse(
                send, Refusal(405, "Method Not Allowed: GET only", None, ((b"allow", b"GET"),))
            )
            return
        problem = None if path == LIVE_PATH else await self._readiness_problem()
        body: dict[str, object] = {"status": "ok" if problem is None else "unavailable"}
        if problem is not None:
            body["reason"] = problem
        headers = [JSON_CONTENT, (b"cache-control", b"no-store")]
        await respond(send, 200 if problem is None else 503, encode(body), headers)

    async def _readiness_problem(self) -> str | None:
        """Which part is not ready, in fixed words (the details, which may name hosts, go to
        the log only: anyone may ask this)."""
        if self.stopping:
            return "stopping"
        if not self.server.signing_works():
            return "the signing key cannot sign and verify a requestState"
        # The store's check writes, and anyone may ask: probes that come while one check runs
        # share it, and a store found working is not checked again for READY_CACHE_SECONDS,
        # so a flood of probes is about one write a second. A failure is never kept: the
        # next probe checks again.
        if time.monotonic() < self._store_ok_until:
            return None
        check = self._store_check
        if check is None or check.done():
            check = self._store_check = asyncio.get_running_loop().create_task(
                self._store_problem()
            )
        problem = await asyncio.shield(check)
        if problem is None:
            self._store_ok_until = time.monotonic() + READY_CACHE_SECONDS
        return problem

    async def _store_problem(self) -> str | None:
        try:
            async with asyncio.timeout(READY_TIMEOUT_SECONDS):
                await self.server.records.check()
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
            await refuse(
                send,
                Refusal(405, "Method Not Allowed: GET only", None, ((b"allow", b"GET"),)),
            )
            return
        with contextlib.suppress(RpcError):  # listed as far as they loaded; calls say the rest
            self.server.registry.ensure_loaded()
        tools = self.server.registry.tools.values()
        tool_scopes = [scope for tool in tools for scope in tool.scopes]
        body = metadata_document(authority.settings, tool_scopes)
        await respond(send, 200, body, [JSON_CONTENT, (b"cache-control", b"max-age=300")])

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
            await self.legacy.post(message, session_id, headers, accept, principal, receive, send)
            return
        if isinstance(message, Notification):
            # "Sending Messages": an accepted notification gets 202 and no body. None is defined
            # for clients over HTTP in 2026-07-28 (cancelling is closing the stream).
            await respond(send, 202, headers=[])
            return
        if isinstance(message, Response):
            await respond(
                send,
                400,
                error_body(INVALID_REQUEST, "Invalid request: a client sends no responses here"),
            )
            return
        places = await self.take_place(send)
        if places is None:
            return
        try:
            await self._serve(message, headers, accept, receive, send, principal)
        finally:
            self.release_place(places)

    async def take_place(self, send: Send) -> asyncio.Semaphore | None:
        """One of the `max_in_flight` places to run a request in (give it back with
        `release_place`), waiting among `max_waiting` others for it; None when refused (503,
        answered here)."""
        settings = self.settings
        if self._running >= settings.max_in_flight and self._waiting >= settings.max_waiting:
            await respond(
                send,
                503,
                error_body(
                    INTERNAL_ERROR,
                    f"Server busy: {self._running} requests running and {self._waiting} "
                    "waiting; retry later",
                ),
                [JSON_CONTENT, RETRY_SOON],
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
            await self.refuse_stopping(send)
            return None
        finally:
            self._waiting -= 1
            if waiting is not None:
                self._queued.discard(waiting)
        self._running += 1
        return places

    def release_place(self, places: asyncio.Semaphore) -> None:
        """Give back a place `take_place` gave (a legacy call lends its place so too)."""
        self._running -= 1
        places.release()

    async def retake_place(self, places: asyncio.Semaphore) -> None:
        """Take a lent place back (a legacy call whose client answered)."""
        await places.acquire()
        self._running += 1

    async def refuse_stopping(self, send: Send) -> None:
        await respond(
            send,
            503,
            error_body(
                INTERNAL_ERROR, "Server stopping: the request was not started; send it again"
            ),
            [JSON_CONTENT, RETRY_SOON],
        )

    # -- stopping (called by the HTTP server that runs the app) ----------------------------------

    def stop_waiting(self) -> None:
        """Start nothing more: requests waiting for a place are answered 503 now, not cut off,
        and the 2025-11-25 sessions' GET streams end (nothing on them awaits an answer)."""
        self.stopping = True
        for task in self._queued:
            task.cancel()
        self.legacy.end_streams_soon()

    def end_sessions(self) -> int:
        """End every 2025-11-25 session (the server is stopping); how many there were."""
        return self.legacy.end_all()

    async def abandon_open(self) -> int:
        """Answer every request still open with the stopping error; how many there were.

        For requests whose handler ignores its cancellation (a thread blocked in I/O, a handler
        awaiting a thread it cannot leave): the client gets its 503 all the same.
        """
        open_now = list(self.open_requests.items())
        for exchange, (request, cancellation) in open_now:
            await exchange.finish(stopping_error(request, cancellation), 503)
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
        await respond(
            send,
            413,
            error_body(INVALID_REQUEST, f"Content Too Large: at most {limit} bytes per request"),
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
            await respond(send, 400, error_body(HEADER_MISMATCH, str(mismatch), message.id))
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
        exchange = _Exchange(send, sse_allowed=accepts(accept, "text/event-stream"))
        cancellation = Cancellation()
        serving = asyncio.current_task()
        if serving is None:  # an ASGI server always runs the app in a task
            raise RuntimeError("HttpApp must run inside an asyncio task")
        watcher = _DisconnectWatch(receive, exchange, cancellation, serving)
        self.open_requests[exchange] = (request, cancellation)
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
            await exchange.finish(stopping_error(request, cancellation), 503)
            return
        finally:
            del self.open_requests[exchange]
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


def _modern(message: Request | Notification | Response) -> bool:
    """2026-07-28 basic/versioning "Backward Compatibility": a message carrying modern
    per-request `_meta` is served statelessly, whatever session header it has."""
    if isinstance(message, Response):
        return False
    meta = message.params.get("_meta")
    return isinstance(meta, dict) and META_PROTOCOL_VERSION in meta


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
        self.cancellation.cancel_running(self.serving)

    def cancel(self) -> None:
        self._start.cancel()
        if self._task is not None:
            self._task.cancel()
