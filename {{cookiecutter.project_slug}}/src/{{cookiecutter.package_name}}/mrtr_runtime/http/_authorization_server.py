"""The authorization server as the resource server sees it: its metadata, found from its issuer
(RFC 8414 section 3, then OpenID Connect Discovery 1.0 section 4, the order basic/authorization
"Authorization Server Metadata Discovery" gives clients), and its signing keys (`jwks_uri`),
kept and fetched again when a token names a key they lack (a rotation) or they grow old; and,
for opaque tokens, its introspection endpoint (RFC 7662), asked as a client of its own.

The fetches are plain HTTPS GETs and POSTs (the standard library's, in a worker thread):
bounded in time and size, never following a redirect to another origin. A client's token goes
to one place only, the introspection endpoint of the issuer that made it ("Token Handling": a
server MUST NOT pass tokens through to anyone else). While the authorization server cannot be
reached and nothing at hand can decide, every request is answered 503 with Retry-After: nothing
runs half-authorised.
"""

from __future__ import annotations

import asyncio
import base64
import collections
import contextlib
import hashlib
import http.client
import json
import logging
import math
import socket
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping
from typing import Any, Final
from urllib.parse import quote_plus, urlencode, urlsplit

import anyio.to_thread

from .._errors import MrtrError
from .._redact import treat_as_secret
from ._limits import PrincipalLimits
from ._oauth import (
    CLOCK_SKEW_SECONDS,
    Grant,
    IntrospectionClient,
    ResourceServerSettings,
    TokenRefused,
    UnknownSigningKey,
    https_uri_problem,
    is_jwt,
    opaque_token_problem,
    read_access_token,
    read_introspection,
    token_header,
)

__all__ = (
    "FETCH_TIMEOUT_SECONDS",
    "INTROSPECTIONS_PER_SECOND",
    "KEYS_MAX_AGE_SECONDS",
    "MAX_CONCURRENT_INTROSPECTIONS",
    "MAX_DOCUMENT_BYTES",
    "REFRESH_INTERVAL_SECONDS",
    "RETRY_AFTER_SECONDS",
    "AuthorizationServer",
    "AuthorizationServerUnavailable",
    "BearerAuthority",
    "IntrospectionBusy",
    "Introspector",
)

#: One fetch of a metadata document or a key set must finish within this.
FETCH_TIMEOUT_SECONDS: Final = 5.0
#: A metadata document or a key set bigger than this is refused (real ones are a few KB).
MAX_DOCUMENT_BYTES: Final = 256 * 1024
#: Keys are fetched again when this old, so a key the authorization server withdrew stops
#: verifying within this even if no token with a new key comes to notice the rotation.
KEYS_MAX_AGE_SECONDS: Final = 900.0
#: A token naming an unknown key fetches the keys again at most this often: unknown key ids
#: are free to invent, and must not turn this server into a load on the authorization server.
REFRESH_INTERVAL_SECONDS: Final = 5.0
#: The Retry-After of a 503 while the authorization server cannot be reached.
RETRY_AFTER_SECONDS: Final = 5
#: Tokens already verified, kept so that a client's next request with the same token costs a
#: hash instead of a signature check (a client uses one token for many requests): at most
#: this many, each until its `exp`, all forgotten when the keys change.
MAX_REMEMBERED_TOKENS: Final = 4096
#: Introspections in flight at once, counted until each one's thread is done (one that took
#: too long is answered 503 but holds its turn until its fetch is cut off). More wait for a
#: turn, within FETCH_TIMEOUT_SECONDS, then 503.
MAX_CONCURRENT_INTROSPECTIONS: Final = 8
#: Introspections started a second (in bursts of twice that): opaque tokens are free to
#: invent, and no principal is known before the answer, so no per-principal limit applies.
#: Past it, a token not already vouched for is answered 503 with Retry-After; tokens the
#: server already holds an answer for are served as before.
INTROSPECTIONS_PER_SECOND: Final = 20

_logger = logging.getLogger("mrtr_runtime")

#: The one key of the introspection rate bound: every token never seen before shares it.
_NEW_TOKENS: Final = "new tokens"

Fetch = Callable[[str], dict[str, Any]]
Post = Callable[[str, Mapping[str, str], IntrospectionClient], dict[str, Any]]


class AuthorizationServerUnavailable(MrtrError):
    """The authorization server's metadata or keys cannot be had now; the message says why."""


class IntrospectionBusy(AuthorizationServerUnavailable):
    """More new tokens than INTROSPECTIONS_PER_SECOND: this one was not asked about."""


class _SameOrigin(urllib.request.HTTPRedirectHandler):
    """Follows a redirect only within the origin asked: the keys that decide who may call the
    tools come from the authorization server, never from where it points elsewhere."""

    def redirect_request(
        self,
        req: urllib.request.Request,
        fp: Any,
        code: int,
        msg: str,
        headers: Any,
        newurl: str,
    ) -> urllib.request.Request | None:
        asked, told = urlsplit(req.full_url), urlsplit(newurl)
        if (asked.scheme, asked.netloc) != (told.scheme, told.netloc):
            raise AuthorizationServerUnavailable(
                f"{req.full_url} redirected to another origin ({told.scheme}://{told.netloc})"
            )
        return super().redirect_request(req, fp, code, msg, headers, newurl)


#: The sockets of the fetch running in this thread, for its watchdog (`_exchange`).
_FETCH: Final = threading.local()


class _TrackedHTTP(http.client.HTTPConnection):
    def connect(self) -> None:
        super().connect()
        _track(self.sock)


class _TrackedHTTPS(http.client.HTTPSConnection):
    def connect(self) -> None:
        super().connect()
        _track(self.sock)


def _track(sock: socket.socket | None) -> None:
    """Hands a fetch's new connection to its watchdog; past the deadline (a connect or a TLS
    handshake can outlast it), ends it at once."""
    sockets: list[socket.socket] | None = getattr(_FETCH, "sockets", None)
    if sockets is None or sock is None:
        return
    sockets.append(sock)
    if getattr(_FETCH, "fired", None):
        with contextlib.suppress(OSError):
            sock.shutdown(socket.SHUT_RDWR)


class _HTTPHandler(urllib.request.HTTPHandler):
    def http_open(self, req: urllib.request.Request) -> http.client.HTTPResponse:
        return self.do_open(_TrackedHTTP, req)


class _HTTPSHandler(urllib.request.HTTPSHandler):
    def https_open(self, req: urllib.request.Request) -> http.client.HTTPResponse:
        return self.do_open(_TrackedHTTPS, req, context=self._context)  # type: ignore[attr-defined]


_OPENER: Final = urllib.request.build_opener(_SameOrigin, _HTTPHandler, _HTTPSHandler)


def _cut(sockets: list[socket.socket], fired: list[bool]) -> None:
    """The watchdog's work: end the fetch's connections, whatever read they are blocked in."""
    fired.append(True)
    for sock in sockets:
        with contextlib.suppress(OSError):
            sock.shutdown(socket.SHUT_RDWR)


def _fetch_json(url: str) -> dict[str, Any]:
    """GET `url` as JSON (blocking: run in a thread), as `_exchange` bounds it."""
    request = urllib.request.Request(url, headers={"Accept": "application/json"})  # noqa: S310
    return _exchange(request, url)


def _post_form(url: str, form: Mapping[str, str], client: IntrospectionClient) -> dict[str, Any]:
    """POST `form` to `url` as this server's own client, by `client_secret_basic` (RFC 6749
    section 2.3.1: the id and secret form-encoded, then Basic), and read JSON back (blocking:
    run in a thread), as `_exchange` bounds it."""
    pair = f"{quote_plus(client.client_id)}:{quote_plus(client.client_secret)}"
    request = urllib.request.Request(  # noqa: S310 -- https, or http on loopback, checked
        url,
        data=urlencode(form).encode("ascii"),
        method="POST",
        headers={
            "Accept": "application/json",
            "Content-Type": "application/x-www-form-urlencoded",
            "Authorization": "Basic " + base64.b64encode(pair.encode("utf-8")).decode("ascii"),
        },
    )
    return _exchange(request, url)


def _exchange(request: urllib.request.Request, url: str) -> dict[str, Any]:
    """`request`'s answer as JSON: redirects only within its origin, the whole exchange within
    FETCH_TIMEOUT_SECONDS (a watchdog cuts the connection then, whatever it is waiting for: a
    socket timeout bounds each read only, so a server sending a byte now and then would never
    meet it), an object of at most MAX_DOCUMENT_BYTES; else the error says what came."""
    sockets: list[socket.socket] = []
    fired: list[bool] = []
    watchdog = threading.Timer(FETCH_TIMEOUT_SECONDS, _cut, (sockets, fired))
    watchdog.daemon = True
    _FETCH.sockets, _FETCH.fired = sockets, fired
    watchdog.start()
    chunks: list[bytes] = []
    size = 0
    try:
        with _OPENER.open(request, timeout=FETCH_TIMEOUT_SECONDS) as response:
            while size <= MAX_DOCUMENT_BYTES:
                chunk = response.read1(16384)
                if not chunk:
                    break
                chunks.append(chunk)
                size += len(chunk)
    except urllib.error.HTTPError as error:
        raise AuthorizationServerUnavailable(
            f"{url} answered HTTP {error.code}{_oauth_error(request, error)}"
        ) from None
    except (urllib.error.URLError, OSError, ValueError, http.client.HTTPException) as error:
        # HTTPException: a garbled status line, a truncated chunked body, too many headers.
        if fired:
            raise AuthorizationServerUnavailable(
                f"{url} did not answer within {FETCH_TIMEOUT_SECONDS:g} s"
            ) from None
        reason = getattr(error, "reason", error)
        said = str(reason) or type(reason).__name__
        raise AuthorizationServerUnavailable(f"{url} cannot be reached: {said}") from None
    finally:
        watchdog.cancel()
        _FETCH.sockets = _FETCH.fired = None
    if fired:
        # Cut off mid-body, a read ends as if the answer had: what came is not all of it.
        raise AuthorizationServerUnavailable(
            f"{url} did not answer within {FETCH_TIMEOUT_SECONDS:g} s"
        )
    if size > MAX_DOCUMENT_BYTES:
        raise AuthorizationServerUnavailable(f"{url} sent more than {MAX_DOCUMENT_BYTES} bytes")
    try:
        document = json.loads(b"".join(chunks))
    except (ValueError, RecursionError):
        raise AuthorizationServerUnavailable(f"{url} did not send JSON") from None
    if not isinstance(document, dict):
        raise AuthorizationServerUnavailable(f"{url} did not send a JSON object")
    return document


def _oauth_error(request: urllib.request.Request, error: urllib.error.HTTPError) -> str:
    """What an OAuth endpoint's error response says (RFC 6749 section 5.2: `error`,
    `error_description`), shortened and printable, for the log; "" when it says nothing."""
    try:
        body = json.loads(error.read(4096))
    except (OSError, ValueError, RecursionError, http.client.HTTPException):
        body = None  # an error page, cut short, or nested past the parser's depth
    said = ""
    if isinstance(body, dict):
        parts = [body.get("error"), body.get("error_description")]
        said = ": " + " ".join(str(part)[:200] for part in parts if isinstance(part, str))
        said = "".join(char if char.isprintable() else "?" for char in said).rstrip(": ")
    if request.get_method() == "POST" and error.code in (400, 401):
        # invalid_client: this server's own credentials are what is wrong.
        said += " (are MRTR_OAUTH_CLIENT_ID and MRTR_OAUTH_CLIENT_SECRET right?)"
    return said


def metadata_urls(issuer: str) -> tuple[str, ...]:
    """Where the issuer's metadata may be, in order: RFC 8414 section 3.1 (the well-known
    suffix inserted before the issuer's path), then OpenID Connect Discovery (appended to it;
    for an issuer with a path, also inserted, as some providers serve it)."""
    parts = urlsplit(issuer)
    base = f"{parts.scheme}://{parts.netloc}"
    path = parts.path.rstrip("/")
    urls = [f"{base}/.well-known/oauth-authorization-server{path}"]
    urls.append(f"{base}{path}/.well-known/openid-configuration")
    if path:
        urls.append(f"{base}/.well-known/openid-configuration{path}")
    return tuple(urls)


def _keys_by_id(document: Mapping[str, Any], url: str) -> dict[str, dict[str, Any]]:
    """The signing keys of a JWK Set (RFC 7517 section 5) by `kid`; keys without one get their
    position (a set of one key needs no `kid`)."""
    listed = document.get("keys")
    if not isinstance(listed, list):
        raise AuthorizationServerUnavailable(f"{url} is not a JWK Set (no 'keys' list)")
    keys: dict[str, dict[str, Any]] = {}
    for position, key in enumerate(listed):
        if not isinstance(key, dict) or key.get("use", "sig") != "sig":
            continue
        kid = key.get("kid")
        keys[kid if isinstance(kid, str) else f"#{position}"] = key
    return keys


class AuthorizationServer:
    """The issuer's keys, fetched on first use and again when stale or when a token names a
    key they lack. Whatever the reason, the authorization server is asked at most once per
    REFRESH_INTERVAL_SECONDS, counted from when the last attempt ended (a failure too: while it
    is down, requests after a failed attempt are answered at once instead of each waiting for
    a fetch), one fetch at a time; while one runs, usable keys at hand answer the others, and
    requests with nothing at hand wait for it (the metadata, then the keys: each at most
    FETCH_TIMEOUT_SECONDS and a second).
    `fetch` and `clock` are the tests' to replace."""

    def __init__(
        self,
        issuer: str,
        *,
        fetch: Fetch = _fetch_json,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.issuer = issuer
        self._fetch = fetch
        self._clock = clock
        self._jwks_uri: str | None = None
        self._introspection_endpoint: str | None = None
        #: Why the metadata's endpoints cannot be used, by name (while they cannot).
        self._unusable: dict[str, str] = {}
        self._keys: dict[str, dict[str, Any]] | None = None
        #: Bumped whenever the keys are replaced: grants read with older keys are forgotten.
        self.generation = 0
        self._fetched_at = 0.0
        self._attempt_ended: float | None = None
        self._last_failure: AuthorizationServerUnavailable | None = None
        self._lock = asyncio.Lock()

    async def _get(self, url: str) -> dict[str, Any]:
        # The fetch bounds itself; this bounds the wait for it too (a thread cannot be
        # interrupted, but nobody waits on it past the bound).
        try:
            with anyio.fail_after(FETCH_TIMEOUT_SECONDS + 1):
                return await anyio.to_thread.run_sync(self._fetch, url, abandon_on_cancel=True)
        except TimeoutError:
            raise AuthorizationServerUnavailable(f"{url} did not answer in time") from None

    async def _discover(self) -> None:
        """The issuer's `jwks_uri` and `introspection_endpoint`, from the first metadata
        document found whose `issuer` is exactly this one (RFC 8414 section 3.3: MUST, or the
        document is not used); an endpoint that is missing or unusable stays None, with why.
        All the places it may be are tried within one FETCH_TIMEOUT_SECONDS (and a second):
        requests waiting on a silent authorization server wait that long, not once per place."""
        try:
            with anyio.fail_after(FETCH_TIMEOUT_SECONDS + 1):
                await self._read_metadata()
        except TimeoutError:
            raise AuthorizationServerUnavailable(
                f"the authorization server's metadata ({self.issuer}) did not come in time"
            ) from None

    async def _read_metadata(self) -> None:
        problems: list[str] = []
        for url in metadata_urls(self.issuer):
            try:
                metadata = await self._get(url)
            except AuthorizationServerUnavailable as error:
                problems.append(str(error))
                continue
            if metadata.get("issuer") != self.issuer:
                raise AuthorizationServerUnavailable(
                    f"{url} names the issuer {str(metadata.get('issuer'))[:200]!r}, "
                    f"not {self.issuer!r} (RFC 8414 section 3.3)"
                )
            self._jwks_uri = self._endpoint(metadata, "jwks_uri", url)
            self._introspection_endpoint = self._endpoint(metadata, "introspection_endpoint", url)
            return
        raise AuthorizationServerUnavailable(
            "the authorization server's metadata cannot be had: " + "; ".join(problems)
        )

    def _endpoint(self, metadata: Mapping[str, Any], name: str, url: str) -> str | None:
        value = metadata.get(name)
        problem = (
            f"no {name}"
            if not isinstance(value, str)
            else https_uri_problem(name, value, query_allowed=True)
        )
        if problem is None and isinstance(value, str):
            self._unusable.pop(name, None)
            return value
        self._unusable[name] = f"{url} names no usable {name}: {problem}"
        return None

    def _usable(self) -> dict[str, dict[str, Any]] | None:
        """The keys at hand while they may still serve (twice their age: an outage must not
        refuse every token, a withdrawn key must not verify for ever), else None."""
        if self._keys is not None and self._clock() - self._fetched_at < 2 * KEYS_MAX_AGE_SECONDS:
            return self._keys
        return None

    def _may_try(self) -> bool:
        ended = self._attempt_ended
        return ended is None or self._clock() - ended >= REFRESH_INTERVAL_SECONDS

    async def _refresh(self) -> dict[str, dict[str, Any]]:
        """Fetch the keys (under the lock), or raise why not; either way the attempt's end
        starts the interval before the next."""
        try:
            if self._jwks_uri is None:
                await self._discover()
            jwks_uri = self._jwks_uri
            if jwks_uri is None:
                raise AuthorizationServerUnavailable(self._unusable["jwks_uri"])
            keys = _keys_by_id(await self._get(jwks_uri), jwks_uri)
        except AuthorizationServerUnavailable as error:
            self._last_failure = error
            raise
        finally:
            self._attempt_ended = self._clock()
        self._keys, self._fetched_at, self._last_failure = keys, self._clock(), None
        self.generation += 1
        return keys

    async def _renewed(
        self, wanted: Callable[[dict[str, dict[str, Any]]], bool]
    ) -> dict[str, dict[str, Any]]:
        """Keys for which `wanted` holds, fetched if need be and allowed; else the usable keys
        at hand; else AuthorizationServerUnavailable."""
        usable = self._usable()
        if usable is not None and (wanted(usable) or self._lock.locked() or not self._may_try()):
            return usable
        async with self._lock:
            usable = self._usable()
            if usable is not None and (wanted(usable) or not self._may_try()):
                return usable
            if not self._may_try():
                raise self._last_failure or AuthorizationServerUnavailable(
                    "the authorization server was asked moments ago; retry later"
                )
            try:
                return await self._refresh()
            except AuthorizationServerUnavailable:
                usable = self._usable()
                if usable is None:
                    raise
                _logger.warning(
                    "the authorization server's keys cannot be renewed; using those at hand"
                )
                return usable

    async def keys(self) -> dict[str, dict[str, Any]]:
        """The keys, fetched first when there are none or they are older than
        KEYS_MAX_AGE_SECONDS (older ones serve while the authorization server is down, up to
        twice that age)."""
        return await self._renewed(
            lambda _: self._clock() - self._fetched_at < KEYS_MAX_AGE_SECONDS
        )

    async def keys_lacking(self, kid: str) -> dict[str, dict[str, Any]]:
        """The keys, fetched again because a token named `kid`, which they lack."""
        return await self._renewed(lambda keys: kid in keys)

    async def introspection_endpoint(self) -> str:
        """The issuer's introspection endpoint (RFC 8414 section 2), found on first use and
        looked for again (at most once per REFRESH_INTERVAL_SECONDS) while the metadata names
        none; AuthorizationServerUnavailable saying why meanwhile."""
        found = self._introspection_endpoint
        if found is not None:
            return found
        async with self._lock:
            found = self._introspection_endpoint
            if found is not None:
                return found
            if not self._may_try():
                raise self._last_failure or AuthorizationServerUnavailable(
                    self._unusable.get(
                        "introspection_endpoint",
                        "the authorization server was asked moments ago; retry later",
                    )
                )
            try:
                await self._discover()
                found = self._introspection_endpoint
                if found is None:
                    raise AuthorizationServerUnavailable(self._unusable["introspection_endpoint"])
            except AuthorizationServerUnavailable as error:
                # Only a failed attempt starts the interval: one that found the endpoint must
                # not hold back the first fetch of the keys (a JWT may come next).
                self._last_failure, self._attempt_ended = error, self._clock()
                raise
            return found


class Introspector:
    """Opaque tokens, read by asking the authorization server (RFC 7662 section 2) as this
    server's own client. An answer that grants is kept for `cache_seconds` at most (section
    4: so a revocation is noticed within that) and never past the token's `exp`; one that
    does not is never kept (made-up tokens must not push out good ones). At most
    MAX_CONCURRENT_INTROSPECTIONS at once, and INTROSPECTIONS_PER_SECOND started. `post` and
    the clocks are the tests' to replace."""

    def __init__(
        self,
        server: AuthorizationServer,
        settings: ResourceServerSettings,
        client: IntrospectionClient,
        *,
        post: Post = _post_form,
        clock: Callable[[], float] = time.monotonic,
        wall_clock: Callable[[], float] = time.time,
    ) -> None:
        self.server = server
        self.settings = settings
        self.client = client
        self._post = post
        self._clock = clock
        self._wall_clock = wall_clock
        #: sha256 of a token -> its grant and when (monotonic) it must be asked about again.
        self._remembered: collections.OrderedDict[bytes, tuple[Grant, float]] = (
            collections.OrderedDict()
        )
        self._turns = asyncio.Semaphore(MAX_CONCURRENT_INTROSPECTIONS)
        #: Threads of its own: a slow authorization server never starves the shared pool.
        self._threads = anyio.CapacityLimiter(MAX_CONCURRENT_INTROSPECTIONS)
        #: The rate bound on new tokens: the per-principal limiter's bucket, with one key.
        self._starts = PrincipalLimits(rate=INTROSPECTIONS_PER_SECOND, calls=1, max_tracked=1)
        #: Tokens it vouched for before (sha256 -> their exp): asked about again when their
        #: answer is stale, they skip the rate bound, so that a flood of made-up tokens holds
        #: back only tokens never seen.
        self._vouched: collections.OrderedDict[bytes, float] = collections.OrderedDict()
        # Should the authorization server ever echo the secret in an error, the log redacts it.
        treat_as_secret(client.client_secret, for_good=True)

    def _recalled(self, digest: bytes) -> Grant | None:
        kept = self._remembered.get(digest)
        if kept is None:
            return None
        grant, until = kept
        if self._clock() < until and self._wall_clock() <= grant.expires_at + CLOCK_SKEW_SECONDS:
            return grant
        del self._remembered[digest]
        return None

    async def _ask(self, endpoint: str, form: Mapping[str, str]) -> dict[str, Any]:
        """The endpoint's answer, in a thread that holds a turn until it ends: whoever ends
        first, the thread or a waiter giving up before it started, gives the turn back, once."""
        loop = asyncio.get_running_loop()
        claimed = threading.Lock()

        def post() -> dict[str, Any]:
            if not claimed.acquire(blocking=False):
                raise AuthorizationServerUnavailable(f"{endpoint} was not asked in time")
            try:
                return self._post(endpoint, form, self.client)
            finally:
                with contextlib.suppress(RuntimeError):  # the loop closed: nothing to free
                    loop.call_soon_threadsafe(self._turns.release)

        try:
            # The wait for a turn counts too: a queue behind a slow server ends in a 503.
            with anyio.fail_after(FETCH_TIMEOUT_SECONDS + 1):
                await self._turns.acquire()
                try:
                    return await anyio.to_thread.run_sync(
                        post, abandon_on_cancel=True, limiter=self._threads
                    )
                except BaseException:
                    if claimed.acquire(blocking=False):  # the thread never started
                        self._turns.release()
                    raise
        except TimeoutError:
            raise AuthorizationServerUnavailable(f"{endpoint} did not answer in time") from None

    def _seen_before(self, digest: bytes) -> bool:
        expires_at = self._vouched.get(digest)
        return expires_at is not None and self._wall_clock() <= expires_at + CLOCK_SKEW_SECONDS

    async def grant(self, token: str, digest: bytes) -> Grant:
        """The grant of the opaque `token` (`digest`: its sha256); TokenRefused saying why
        not, AuthorizationServerUnavailable when it cannot be asked or does not answer."""
        problem = opaque_token_problem(token)
        if problem is not None:
            raise TokenRefused(problem)
        known = self._recalled(digest)
        if known is not None:
            return known
        endpoint = await self.server.introspection_endpoint()
        wait = None if self._seen_before(digest) else self._starts.admit(_NEW_TOKENS, self._clock())
        if wait is not None:
            raise IntrospectionBusy(
                f"more than {INTROSPECTIONS_PER_SECOND} new tokens a second to introspect"
            )
        answer = await self._ask(endpoint, {"token": token, "token_type_hint": "access_token"})
        grant = read_introspection(answer, self.settings, now=self._wall_clock())
        self._vouched[digest] = grant.expires_at
        self._vouched.move_to_end(digest)
        if len(self._vouched) > MAX_REMEMBERED_TOKENS:
            self._vouched.popitem(last=False)
        if self.client.cache_seconds > 0:
            self._remembered[digest] = (grant, self._clock() + self.client.cache_seconds)
            if len(self._remembered) > MAX_REMEMBERED_TOKENS:
                self._remembered.popitem(last=False)
        return grant


class BearerAuthority:
    """The resource server: a request's `Authorization` header in; out, the `Grant` it
    carries, or why not: TokenRefused (401 or 403), AuthorizationServerUnavailable (503).
    `wall_clock` (seconds since the epoch) is what a remembered grant's expiry is checked
    against; tests pass their own."""

    def __init__(
        self,
        settings: ResourceServerSettings,
        server: AuthorizationServer | None = None,
        *,
        wall_clock: Callable[[], float] = time.time,
        introspector: Introspector | None = None,
    ) -> None:
        self.settings = settings
        self._wall_clock = wall_clock
        self.server = server or AuthorizationServer(settings.issuer)
        #: Opaque tokens' reader, when the settings name this server's client for it.
        self.introspector = introspector
        if introspector is None and settings.introspection is not None:
            self.introspector = Introspector(self.server, settings, settings.introspection)
        #: sha256 of a verified token -> its grant (at most MAX_REMEMBERED_TOKENS, oldest out).
        self._remembered: collections.OrderedDict[bytes, Grant] = collections.OrderedDict()
        self._generation = -1
        self._warned_at = -math.inf
        self._unwarned = 0

    def _recalled(self, digest: bytes) -> Grant | None:
        """The grant of a token verified before with the keys at hand, while it has not
        expired; None otherwise. Only a token hashing to the same sha256 finds it."""
        if self._generation != self.server.generation:
            self._remembered.clear()
            self._generation = self.server.generation
            return None
        grant = self._remembered.get(digest)
        if grant is None:
            return None
        if self._wall_clock() > grant.expires_at + CLOCK_SKEW_SECONDS:
            del self._remembered[digest]
            return None
        return grant

    def _remember(self, digest: bytes, grant: Grant) -> Grant:
        if self._generation == self.server.generation:
            self._remembered[digest] = grant
            if len(self._remembered) > MAX_REMEMBERED_TOKENS:
                self._remembered.popitem(last=False)
        return grant

    async def authorise(
        self, authorization: str | None
    ) -> Grant | TokenRefused | AuthorizationServerUnavailable:
        token = _bearer_token(authorization)
        if token is None:
            return TokenRefused(
                "a bearer token from the authorization server is required", error=None
            )
        digest = hashlib.sha256(token.encode()).digest()
        try:
            if self.introspector is not None and not is_jwt(token):
                return await self.introspector.grant(token, digest)
            # Garbage is refused before it costs a fetch.
            token_header(token, accept_plain_jwt=self.settings.accept_plain_jwt)
            keys = await self.server.keys()
            known = self._recalled(digest)
            if known is not None:
                return known
            try:
                return self._remember(digest, read_access_token(token, keys, self.settings))
            except UnknownSigningKey as unknown:
                keys = await self.server.keys_lacking(str(unknown))
                self._recalled(digest)  # the keys may have changed: forget older grants
                return self._remember(digest, read_access_token(token, keys, self.settings))
        except UnknownSigningKey:
            return TokenRefused("the token is signed with a key this server does not know")
        except (TokenRefused, AuthorizationServerUnavailable) as problem:
            if isinstance(problem, AuthorizationServerUnavailable):
                self._warn(problem)
            return problem

    def _warn(self, problem: AuthorizationServerUnavailable) -> None:
        """One log line per REFRESH_INTERVAL_SECONDS at most, with how many it stands for:
        an outage under load must not become a line per request."""
        now = self._wall_clock()
        self._unwarned += 1
        if now - self._warned_at < REFRESH_INTERVAL_SECONDS:
            return
        _logger.warning("refusing %d request(s): %s", self._unwarned, problem)
        self._warned_at, self._unwarned = now, 0


def _bearer_token(authorization: str | None) -> str | None:
    """The token of `Authorization: Bearer <token>` (RFC 6750 section 2.1), else None."""
    if authorization is None:
        return None
    scheme, _, credentials = authorization.strip().partition(" ")
    credentials = credentials.strip()
    if scheme.lower() != "bearer" or not credentials or " " in credentials:
        return None
    return credentials
