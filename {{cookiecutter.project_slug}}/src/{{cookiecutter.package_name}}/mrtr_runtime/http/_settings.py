"""How the HTTP wing listens and what it bounds: `HttpSettings`, read from the MRTR_HTTP_* and
MRTR_OAUTH_* variables (through `Settings`), with the defaults a server gets without them.
"""

from __future__ import annotations

import importlib.util
import logging
import os
import stat
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final
from urllib.parse import urlsplit

from .._config import CLIENT_REQUEST_TIMEOUT_SECONDS, Settings
from .._jsonrpc import MAX_LINE_BYTES
from .._permissions import open_to_others
from ._limits import DEFAULT_CALLS_PER_PRINCIPAL, DEFAULT_RATE_PER_PRINCIPAL
from ._oauth import INTROSPECTION_CACHE_SECONDS, IntrospectionClient, ResourceServerSettings
from ._rules import AccessPolicy, parse_token_lines

__all__ = (
    "BODY_TIMEOUT_SECONDS",
    "DEFAULT_MAX_SESSIONS",
    "DEFAULT_SESSION_IDLE_SECONDS",
    "ENDPOINT",
    "ENV_CALLS_PER_PRINCIPAL",
    "ENV_RATE_PER_PRINCIPAL",
    "ENV_SESSIONS_PER_PRINCIPAL",
    "ENV_TOKEN",
    "HEAD_TIMEOUT_SECONDS",
    "MAX_BODY_BYTES",
    "MAX_CONNECTIONS",
    "MAX_HEAD_BYTES",
    "MAX_IN_FLIGHT",
    "MAX_PARKED",
    "MAX_WAITING",
    "SHUTDOWN_MARGIN_SECONDS",
    "HttpSettings",
)

ENDPOINT: Final = "/mcp"
#: Sessions open at once (MRTR_HTTP_MAX_SESSIONS). A host opens one per start and many never
#: send DELETE, so sessions pile up until the idle bound ends them; a thousand is a large team's
#: worth, each a few kilobytes when quiet. At the bound the longest-idle session with nothing
#: running is ended to make room; when every one is busy, `initialize` gets 503 + Retry-After.
DEFAULT_MAX_SESSIONS: Final = 1000
#: A session unused this long is ended (MRTR_HTTP_SESSION_IDLE_SECONDS); its client gets 404
#: next and, as "Session Management" 4. requires, initializes again. An hour outlasts a
#: person's pause; a session with a request running or a stream open is never idle.
DEFAULT_SESSION_IDLE_SECONDS: Final = 3600
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
#: Past the grace (how long a stopping server gives requests in flight: uvicorn's graceful
#: shutdown), the last answers get at most this long to reach their clients before the process
#: ends. Together the bound on a stop, from the signal to the exit.
SHUTDOWN_MARGIN_SECONDS: Final = 2.0

#: With OAuth, what part of the session table one principal may hold by default: any number
#: of users may sign in, so no count splits it; a tenth lets ten heavy users fill it while one
#: user (or one stolen token) cannot lock everyone else out.
OAUTH_SESSION_SHARE: Final = 0.1

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
ENV_INTROSPECTION_CACHE: Final = "MRTR_OAUTH_INTROSPECTION_CACHE_SECONDS"

_logger = logging.getLogger("mrtr_runtime")


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
            ENV_INTROSPECTION_CACHE,
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
        at most, the whole table. With OAuth the principals are whoever the identity provider
        signs in, known only as they come: OAUTH_SESSION_SHARE of the table each."""
        if self.max_sessions_per_principal is not None:
            return min(self.max_sessions_per_principal, self.max_sessions)
        if self.oauth is not None:
            return max(1, int(self.max_sessions * OAUTH_SESSION_SHARE))
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


def _oauth_settings(settings: Settings) -> ResourceServerSettings | None:
    """The resource server `settings` ask for, or None; ValueError for half of one, for one
    beside a shared token (two ways to let a request in would make either one's checks
    pointless), or for a missing `oauth` extra."""
    if not settings.oauth_issuer and not settings.oauth_resource:
        if settings.oauth_scopes or settings.oauth_client_id or settings.oauth_client_secret:
            raise ValueError("MRTR_OAUTH_SCOPES or _CLIENT_* is set without MRTR_OAUTH_ISSUER")
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
        introspection=_introspection_client(settings),
    )
    if urlsplit(resource_server.resource).path.rstrip("/") != ENDPOINT:
        _logger.info(
            "MRTR_OAUTH_RESOURCE's path is not %s: a proxy in front must map it there", ENDPOINT
        )
    return resource_server


def _introspection_client(settings: Settings) -> IntrospectionClient | None:
    """This server's client for introspecting opaque tokens, or None (JWTs only); ValueError
    for half of one."""
    if not settings.oauth_client_id and not settings.oauth_client_secret:
        if settings.oauth_introspection_cache_seconds is not None:
            raise ValueError(f"{ENV_INTROSPECTION_CACHE} is set without MRTR_OAUTH_CLIENT_ID")
        return None
    if not settings.oauth_client_id or not settings.oauth_client_secret:
        raise ValueError(
            "introspecting opaque tokens needs both MRTR_OAUTH_CLIENT_ID and "
            "MRTR_OAUTH_CLIENT_SECRET (this server's client at the authorization server)"
        )
    cache = settings.oauth_introspection_cache_seconds
    return IntrospectionClient(
        client_id=settings.oauth_client_id,
        client_secret=settings.oauth_client_secret,
        cache_seconds=INTROSPECTION_CACHE_SECONDS if cache is None else cache,
    )


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
