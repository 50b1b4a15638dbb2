"""The authorization server as the resource server sees it: its metadata, found from its issuer
(RFC 8414 section 3, then OpenID Connect Discovery 1.0 section 4, the order basic/authorization
"Authorization Server Metadata Discovery" gives clients), and its signing keys (`jwks_uri`),
kept and fetched again when a token names a key they lack (a rotation) or they grow old.

The fetches are plain HTTPS GETs (the standard library's, in a worker thread): bounded in time
and size, never following a redirect to another scheme, never sending the client's token
anywhere ("Token Handling": a server MUST NOT transit tokens). While the authorization server
cannot be reached and no usable keys are at hand, every request is answered 503 with
Retry-After: nothing runs half-authorised.
"""

from __future__ import annotations

import asyncio
import collections
import hashlib
import json
import logging
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping
from typing import Any, Final
from urllib.parse import urlsplit

import anyio.to_thread

from .._errors import MrtrError
from ._oauth import (
    CLOCK_SKEW_SECONDS,
    Grant,
    ResourceServerSettings,
    TokenRefused,
    UnknownSigningKey,
    read_access_token,
)

__all__ = (
    "FETCH_TIMEOUT_SECONDS",
    "KEYS_MAX_AGE_SECONDS",
    "MAX_DOCUMENT_BYTES",
    "REFRESH_INTERVAL_SECONDS",
    "RETRY_AFTER_SECONDS",
    "AuthorizationServer",
    "AuthorizationServerUnavailable",
    "BearerAuthority",
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

_logger = logging.getLogger("mrtr_runtime")

Fetch = Callable[[str], dict[str, Any]]


class AuthorizationServerUnavailable(MrtrError):
    """The authorization server's metadata or keys cannot be had now; the message says why."""


def _fetch_json(url: str) -> dict[str, Any]:
    """GET `url` as JSON (blocking: run in a thread). Only https, or http to a loopback host
    (checked with the issuer); an object of at most MAX_DOCUMENT_BYTES, else the error says
    what came instead."""
    request = urllib.request.Request(url, headers={"Accept": "application/json"})  # noqa: S310
    try:
        with urllib.request.urlopen(request, timeout=FETCH_TIMEOUT_SECONDS) as response:  # noqa: S310
            if urlsplit(response.geturl()).scheme != urlsplit(url).scheme:
                raise AuthorizationServerUnavailable(f"{url} redirected to another scheme")
            body = response.read(MAX_DOCUMENT_BYTES + 1)
    except urllib.error.HTTPError as error:
        raise AuthorizationServerUnavailable(f"{url} answered HTTP {error.code}") from None
    except (urllib.error.URLError, OSError, ValueError) as error:
        reason = getattr(error, "reason", error)
        raise AuthorizationServerUnavailable(f"{url} cannot be reached: {reason}") from None
    if len(body) > MAX_DOCUMENT_BYTES:
        raise AuthorizationServerUnavailable(f"{url} sent more than {MAX_DOCUMENT_BYTES} bytes")
    try:
        document = json.loads(body)
    except ValueError:
        raise AuthorizationServerUnavailable(f"{url} did not send JSON") from None
    if not isinstance(document, dict):
        raise AuthorizationServerUnavailable(f"{url} did not send a JSON object")
    return document


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
    key they lack (at most once per REFRESH_INTERVAL_SECONDS). `fetch` and `clock` are the
    tests' to replace."""

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
        self._keys: dict[str, dict[str, Any]] | None = None
        #: Bumped whenever the keys are replaced: grants read with older keys are forgotten.
        self.generation = 0
        self._fetched_at = 0.0
        self._last_attempt: float | None = None
        self._lock = asyncio.Lock()

    async def _get(self, url: str) -> dict[str, Any]:
        return await anyio.to_thread.run_sync(self._fetch, url)

    async def _discover(self) -> str:
        """The issuer's `jwks_uri`, from the first metadata document found whose `issuer` is
        exactly this one (RFC 8414 section 3.3: MUST, or the document is not used)."""
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
            jwks_uri = metadata.get("jwks_uri")
            if (
                not isinstance(jwks_uri, str)
                or urlsplit(jwks_uri).scheme != urlsplit(self.issuer).scheme
            ):
                raise AuthorizationServerUnavailable(f"{url} names no usable jwks_uri")
            return jwks_uri
        raise AuthorizationServerUnavailable(
            "the authorization server's metadata cannot be had: " + "; ".join(problems)
        )

    async def _refresh(self) -> dict[str, dict[str, Any]]:
        self._last_attempt = self._clock()
        if self._jwks_uri is None:
            self._jwks_uri = await self._discover()
        keys = _keys_by_id(await self._get(self._jwks_uri), self._jwks_uri)
        self._keys, self._fetched_at = keys, self._clock()
        self.generation += 1
        return keys

    def _may_try(self) -> bool:
        return (
            self._last_attempt is None
            or self._clock() - self._last_attempt >= REFRESH_INTERVAL_SECONDS
        )

    async def keys(self) -> dict[str, dict[str, Any]]:
        """The keys at hand; fetched first when there are none or they are stale. Stale keys
        still serve while the authorization server is down (a rotation removes keys, an
        outage must not refuse every token), for at most twice their age."""
        now = self._clock()
        if self._keys is not None and now - self._fetched_at < KEYS_MAX_AGE_SECONDS:
            return self._keys
        async with self._lock:
            if self._keys is not None and self._clock() - self._fetched_at < KEYS_MAX_AGE_SECONDS:
                return self._keys
            if self._keys is not None and not self._may_try():
                return self._keys
            stale = self._keys
            try:
                return await self._refresh()
            except AuthorizationServerUnavailable:
                if stale is None or self._clock() - self._fetched_at >= 2 * KEYS_MAX_AGE_SECONDS:
                    raise
                _logger.warning("the authorization server's keys are stale and cannot be renewed")
                return stale

    async def keys_lacking(self, kid: str) -> dict[str, dict[str, Any]]:
        """The keys, fetched again because a token named `kid`, which they lack: at most once
        per REFRESH_INTERVAL_SECONDS, the requests meanwhile sharing one fetch."""
        async with self._lock:
            if self._keys is not None and kid in self._keys:
                return self._keys
            if not self._may_try():
                return self._keys or {}
            return await self._refresh()


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
    ) -> None:
        self.settings = settings
        self._wall_clock = wall_clock
        self.server = server or AuthorizationServer(settings.issuer)
        #: sha256 of a verified token -> its grant (at most MAX_REMEMBERED_TOKENS, oldest out).
        self._remembered: collections.OrderedDict[bytes, Grant] = collections.OrderedDict()
        self._generation = -1

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
                _logger.warning("refusing a request: %s", problem)
            return problem


def _bearer_token(authorization: str | None) -> str | None:
    """The token of `Authorization: Bearer <token>` (RFC 6750 section 2.1), else None."""
    if authorization is None:
        return None
    scheme, _, credentials = authorization.strip().partition(" ")
    credentials = credentials.strip()
    if scheme.lower() != "bearer" or not credentials or " " in credentials:
        return None
    return credentials
