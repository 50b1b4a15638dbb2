"""The rules of MCP's Streamable HTTP transport (2026-07-28 basic/transports/streamable-http),
as plain functions: headers and bodies in, verdicts out. `_app.py` applies them; nothing here
touches a socket, so every rule is tested without a server.

- who may talk to the endpoint: the `Host` and `Origin` checks against DNS rebinding
  ("Security & Endpoint"), the optional bearer token, and when serving without one deserves a
  warning;
- how big a request head has grown, however the reads split it (`HeadMeter`);
- the request metadata headers ("Request Metadata"): `MCP-Protocol-Version`, `Mcp-Method`,
  `Mcp-Name` and the `Mcp-Param-{Name}` headers a tool's `x-mcp-header` properties ask for, each
  compared with the body ("Server Validation"), Base64 sentinel values decoded ("Value
  Encoding");
- which requests are refused before their body is read, and with what (`refuse_request`,
  `refuse_post`, `oauth_refusal` for what the OAuth resource server refuses);
- which HTTP status a JSON-RPC error travels with;
- the protocol version header of a 2025-11-25 session's request (`legacy_version_problem`).
"""

from __future__ import annotations

import base64
import binascii
import decimal
import hmac
import ipaddress
import math
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Final
from urllib.parse import urlsplit

from .._errors import MrtrError
from .._jsonrpc import (
    INTERNAL_ERROR,
    INVALID_REQUEST,
    METHOD_NOT_FOUND,
    MISSING_REQUIRED_CLIENT_CAPABILITY,
    PARSE_ERROR,
    UNSUPPORTED_PROTOCOL_VERSION,
    Request,
    clip,
)
from .._wire import LEGACY_VERSIONS, META_PROTOCOL_VERSION
from ._authorization_server import (
    RETRY_AFTER_SECONDS,
    AuthorizationServerUnavailable,
    IntrospectionBusy,
)
from ._oauth import ResourceServerSettings, TokenRefused, challenge

__all__ = (
    "HEADER_MISMATCH",
    "AccessPolicy",
    "HeadMeter",
    "HeaderMismatch",
    "MirroredParam",
    "Refusal",
    "access_warning",
    "check_headers",
    "decode_header_value",
    "http_status",
    "legacy_version_problem",
    "login_accounts",
    "mirrored_params",
    "oauth_refusal",
    "parse_token_lines",
    "refuse_post",
    "refuse_request",
    "refuse_session_get",
    "too_many",
)

#: basic/transports/streamable-http "Server Validation": HeaderMismatch. Defined for HTTP only.
HEADER_MISMATCH: Final = -32020

#: "Standard Request Headers": the methods whose `Mcp-Name` mirrors `params.name` / `params.uri`;
#: tasks "Streamable HTTP: Routing Headers": tasks/get, tasks/update and tasks/cancel MUST set
#: it to `params.taskId` (so a load balancer can route a task's requests to where it lives).
_NAMED_BY: Final = {
    "tools/call": "name",
    "prompts/get": "name",
    "resources/read": "uri",
    "tasks/get": "taskId",
    "tasks/update": "taskId",
    "tasks/cancel": "taskId",
}
_SENTINEL: Final = re.compile(r"=\?base64\?(.*)\?=", re.DOTALL)
#: RFC 9110 section 5.5: a field value is visible ASCII, space and horizontal tab.
_FIELD_VALUE: Final = re.compile(r"[\t\x20-\x7e]*")
#: RFC 9110 section 5.6.2: a token, what an `x-mcp-header` name must be.
_TOKEN: Final = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")
#: A JSON number's integer forms: no sign but minus, no leading zeros, no exponent.
_DECIMAL: Final = re.compile(r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?", re.ASCII)
#: "Schema Extension": integers mirrored into headers stay within JavaScript's safe range.
_SAFE_INTEGER: Final = 2**53 - 1
_LOOPBACK_NAMES: Final = frozenset({"localhost"})
#: RFC 6454 section 6.2, the serialization of an origin as browsers send it: scheme "://" host,
#: then ":" port when it is not the scheme's default. Hosts are what a URL parser leaves of a
#: name (IDNA applied: letters, digits, "-", "_", ".") or a bracketed IPv6 address; nothing
#: else (userinfo, path, query, fragment, whitespace, non-ASCII) ever appears.
_ORIGIN: Final = re.compile(
    r"(?P<scheme>[a-z][a-z0-9+.-]*)://(?P<host>\[[0-9a-f:.]+\]|[a-z0-9_.-]+)"
    r"(?::(?P<port>0|[1-9][0-9]{0,4}))?",
    re.ASCII | re.IGNORECASE,
)
_DEFAULT_PORTS: Final = {"http": 80, "https": 443}
#: RFC 6454 section 7.3: what a privacy-sensitive context (a file, a sandbox) sends.
_OPAQUE_ORIGIN: Final = "null"


class HeaderMismatch(MrtrError):
    """A request whose headers are missing, malformed or disagree with its body: HTTP 400 with
    JSON-RPC error -32020 ("Server Validation")."""


# -- who may talk to the endpoint --------------------------------------------------------------


def _is_loopback(host: str) -> bool:
    name = host.strip("[]").lower()
    if name in _LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


def _host_name(host_header: str) -> str | None:
    """The name part of a `Host` header (`name[:port]`, `[v6][:port]`); None if malformed."""
    try:
        parsed = urlsplit(f"//{host_header}")
        parsed.port  # noqa: B018 -- raises ValueError for a port that is not a number
    except ValueError:
        return None
    if parsed.hostname is None or parsed.username is not None or parsed.path:
        return None
    return parsed.hostname


@dataclass(frozen=True, slots=True)
class _Origin:
    scheme: str
    host: str
    canonical: str  # RFC 6454 section 6.2: lower case, no default port


def _origin(value: str) -> _Origin | None:
    """A bare origin, or None for anything that is not one."""
    found = _ORIGIN.fullmatch(value)
    if found is None:
        return None
    scheme, host, port = found["scheme"].lower(), found["host"].lower(), found["port"]
    if host.startswith("["):
        try:
            ipaddress.IPv6Address(host[1:-1])
        except ValueError:
            return None
    if port is not None and int(port) > 65535:
        return None
    shown = "" if port is None or int(port) == _DEFAULT_PORTS.get(scheme) else f":{port}"
    return _Origin(scheme, host, f"{scheme}://{host}{shown}")


def _listed_origin(entry: str) -> str | None:
    """An origin as `MRTR_HTTP_ALLOWED_ORIGINS` may give it (a final "/" tolerated), canonical;
    `null` only when listed as such."""
    text = entry.strip().rstrip("/")
    if text.lower() == _OPAQUE_ORIGIN:
        return _OPAQUE_ORIGIN
    parsed = _origin(text)
    return parsed.canonical if parsed is not None else None


def _listed_host(entry: str) -> str:
    """A name as `MRTR_HTTP_ALLOWED_HOSTS` may give it (`name`, `name:port`, `name.`), compared
    as a Host header's name: the port and a final dot do not count."""
    name = _host_name(entry.strip()) or ""
    return name.rstrip(".")


@dataclass(frozen=True, slots=True)
class AccessPolicy:
    """Who may reach the endpoint.

    basic/transports/streamable-http "Security & Endpoint": servers MUST validate `Origin` to
    stop DNS rebinding, and answer an invalid one with 403. A browser page can aim at a local
    server only through a name it controls, so a server bound to a loopback address also
    accepts only loopback `Host` names; one bound elsewhere (a container, a replica behind a
    load balancer) accepts the names it is given, or any when given none. An `Origin` is
    accepted when it is a bare origin (RFC 6454 section 6.2, the only form browsers send) that is
    a loopback one or listed, or `null` when `null` is listed; requests without `Origin` (every
    non-browser client) pass.
    """

    loopback_only_hosts: bool
    allowed_hosts: frozenset[str] = frozenset()
    allowed_origins: frozenset[str] = frozenset()
    #: `MRTR_HTTP_TOKEN`: when set, every request needs `Authorization: Bearer <token>`.
    bearer_token: str | None = None
    #: `MRTR_HTTP_TOKENS_FILE`: (principal, token) pairs; any of them also lets a request in,
    #: and names who sent it (`bearer_principal`).
    named_tokens: tuple[tuple[str, str], ...] = ()

    @classmethod
    def for_bind_address(
        cls,
        host: str,
        *,
        allowed_hosts: Iterable[str] = (),
        allowed_origins: Iterable[str] = (),
        bearer_token: str | None = None,
        named_tokens: tuple[tuple[str, str], ...] = (),
    ) -> AccessPolicy:
        return cls(
            loopback_only_hosts=_is_loopback(host),
            allowed_hosts=frozenset(
                _listed_host(name) for name in allowed_hosts if _listed_host(name)
            ),
            allowed_origins=frozenset(
                listed for origin in allowed_origins if (listed := _listed_origin(origin))
            ),
            bearer_token=bearer_token or None,
            named_tokens=named_tokens,
        )

    def host_problem(self, host_header: str | None) -> str | None:
        """Why this `Host` is refused (HTTP 403), or None."""
        restricted = self.loopback_only_hosts or bool(self.allowed_hosts)
        if host_header is None:
            # HTTP/1.1 requires Host (RFC 9112 section 3.2); a restricted server needs one.
            return "Forbidden: missing Host header" if restricted else None
        name = _host_name(host_header)
        if name is None:
            return "Forbidden: malformed Host header"
        # A loopback name cannot be a rebinding attack: the attacker's page has a name of its own.
        if _is_loopback(name) or name.rstrip(".") in self.allowed_hosts:
            return None
        if restricted:
            return f"Forbidden: Host {clip(host_header)!r} is not served here"
        return None

    def origin_problem(self, origin: str | None) -> str | None:
        """Why this `Origin` is refused (HTTP 403), or None."""
        if origin is None:
            return None
        if origin == _OPAQUE_ORIGIN:
            if _OPAQUE_ORIGIN in self.allowed_origins:
                return None
            return "Forbidden: Origin 'null' is not allowed"
        parsed = _origin(origin)
        if parsed is None:
            # Userinfo (`http://evil.example:80@localhost`), a path, whitespace: no browser
            # sends these, and a lenient parse would find a loopback host in them.
            return f"Forbidden: Origin {clip(origin)!r} is not a bare origin (scheme://host[:port])"
        if parsed.canonical in self.allowed_origins:
            return None
        if parsed.scheme in ("http", "https") and _is_loopback(parsed.host):
            return None
        return f"Forbidden: Origin {clip(origin)!r} is not allowed"

    def authorised(self, authorization: str | None) -> bool:
        if self.bearer_token is None and not self.named_tokens:
            return True
        credentials = _bearer(authorization)
        if credentials is None:
            return False
        # Constant time: the comparison must not tell an attacker how much of a guess was right.
        unnamed = self.bearer_token is not None and hmac.compare_digest(
            credentials, self.bearer_token.encode()
        )
        return unnamed or self.bearer_principal(authorization) is not None

    def bearer_principal(self, authorization: str | None) -> str | None:
        """The principal named for the bearer token presented, or None (no named token)."""
        credentials = _bearer(authorization)
        if credentials is None:
            return None
        found = None
        for principal, token in self.named_tokens:
            # Every token is compared, so the time taken does not say which one matched.
            if hmac.compare_digest(credentials, token.encode()):
                found = principal
        return found


def _bearer(authorization: str | None) -> bytes | None:
    if authorization is None:
        return None
    scheme, _, credentials = authorization.strip().partition(" ")
    if scheme.lower() != "bearer":
        return None
    return credentials.strip().encode()


def parse_token_lines(text: str, *, source: str) -> tuple[tuple[str, str], ...]:
    """`principal:token` lines (blank lines and `#` comments skipped) as (principal, token)
    pairs; ValueError naming the line, never quoting a token, for anything else."""
    pairs: list[tuple[str, str]] = []
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        principal, colon, token = (part.strip() for part in line.partition(":"))
        where = f"{source} line {number}"
        if not colon or not principal or not token:
            raise ValueError(f"{where}: expected principal:token")
        if not token.isascii() or any(c.isspace() for c in token):
            raise ValueError(f"{where}: a token must be ASCII without spaces (an HTTP header)")
        if any(principal == known for known, _ in pairs):
            raise ValueError(f"{where}: principal {clip(principal)!r} is named twice")
        if any(hmac.compare_digest(token, known) for _, known in pairs):
            raise ValueError(f"{where}: the same token is given to two principals")
        pairs.append((principal, token))
    if not pairs:
        raise ValueError(f"{source} names no principal:token")
    return tuple(pairs)


#: Accounts a person logs in to: uids from the first one most systems give people (login.defs
#: UID_MIN), except the overflow uid `nobody`, with a shell that lets them in.
_FIRST_PERSON_UID: Final = 1000
_OVERFLOW_UID: Final = 65534
_NO_LOGIN_SHELLS: Final = frozenset(
    {"", "/bin/false", "/usr/bin/false", "/sbin/nologin", "/usr/sbin/nologin", "/bin/sync"}
)


def login_accounts(accounts: Iterable[tuple[int, str]], own_uid: int) -> int:
    """How many accounts other than `own_uid`, among (uid, shell) pairs from the passwd
    database, a person could log in to."""
    return len(
        {
            uid
            for uid, shell in accounts
            if uid != own_uid
            and _FIRST_PERSON_UID <= uid != _OVERFLOW_UID
            and shell.strip() not in _NO_LOGIN_SHELLS
        }
    )


def access_warning(
    policy: AccessPolicy, bind_host: str, other_accounts: Callable[[], int], token_variable: str
) -> str | None:
    """What to warn about when the endpoint serves without a bearer token: a bind beyond
    loopback serves whoever reaches the address; a loopback bind on a machine where others log
    in serves each of them, with this server's credentials (a loopback socket tells no user
    from another). None when a token is set (`MRTR_HTTP_TOKEN` or named ones), or nobody else
    is there. `other_accounts` (see `login_accounts`) is asked only for a loopback bind without
    a token."""
    if policy.bearer_token is not None or policy.named_tokens:
        return None
    if not policy.loopback_only_hosts:
        return (
            f"listening on {bind_host} with no {token_variable}: anyone who can reach this "
            "address can call the tools"
        )
    others = other_accounts()
    if others:
        return (
            f"listening on {bind_host} with no {token_variable} on a machine with {others} "
            "other login account(s): each of them can call the tools, with this server's "
            f"credentials; set {token_variable} to keep them out"
        )
    return None


# -- the request head ---------------------------------------------------------------------------

#: RFC 9112 section 2.1: a head ends at its first empty line (CRLF; a bare LF is read as one,
#: section 2.2, so the bound cannot be slipped past a parser that does).
_HEAD_END: Final = re.compile(rb"\n\r?\n")


class HeadMeter:
    """The size of one request head (request line, fields and the empty line after them), counted
    as it arrives, however the reads split it: one read with the head and body in it, or a byte
    at a time. Empty lines before the request line, which a server ignores (RFC 9112 section
    2.2), count as well: they are bytes the client makes the server read."""

    __slots__ = ("_begun", "_tail", "ended", "limit", "size")

    def __init__(self, limit: int, *, begun: bool = False) -> None:
        self.limit = limit
        #: The head's bytes so far.
        self.size = 0
        #: Whether the empty line that ends the head has arrived.
        self.ended = False
        # A byte other than CR/LF has arrived: from here an empty line ends the head.
        self._begun = begun
        # The last bytes of the head so far: its end may straddle two reads.
        self._tail = b""

    @property
    def over(self) -> bool:
        return self.size > self.limit

    def feed(self, data: bytes) -> int:
        """Count the next bytes of the connection: how many of them belong to the head (all of
        them unless it ends in `data`; none once it has ended)."""
        if self.ended:
            return 0
        start = 0
        if not self._begun:
            start = len(data) - len(data.lstrip(b"\r\n"))
            if start == len(data):
                self.size += start
                return start
            self._begun = True
        end = self._end_in(data, start)
        if end is None:
            self.size += len(data)
            self._tail = (self._tail + data[max(start, len(data) - 2) :])[-2:]
            return len(data)
        self.ended = True
        self.size += end
        return end

    def _end_in(self, data: bytes, start: int) -> int | None:
        if self._tail:
            joined = _HEAD_END.search(self._tail + data[start : start + 2])
            if joined is not None:
                return start + joined.end() - len(self._tail)
        found = _HEAD_END.search(data, start)
        return found.end() if found is not None else None


# -- request metadata headers -------------------------------------------------------------------


def decode_header_value(raw: str) -> str:
    """A header value as the body would carry it: optional whitespace around it removed (RFC 9110
    section 5.5), a `=?base64?...?=` value decoded ("Value Encoding"). Raises `HeaderMismatch`
    for characters no header value may hold or a Base64 payload that is not canonical Base64 of
    UTF-8 text."""
    value = raw.strip(" \t")
    if not _FIELD_VALUE.fullmatch(value):
        raise HeaderMismatch("contains characters not allowed in a header value")
    sentinel = _SENTINEL.fullmatch(value)
    if sentinel is None:
        return value
    payload = sentinel.group(1)
    try:
        decoded = base64.b64decode(payload, validate=True)
    except (binascii.Error, ValueError):
        raise HeaderMismatch("is not valid Base64") from None
    # b64decode accepts some non-canonical forms (bits set in the padding); a value has one
    # encoding, so anything that does not round-trip is malformed.
    if base64.b64encode(decoded).decode("ascii") != payload:
        raise HeaderMismatch("is not valid Base64") from None
    try:
        return decoded.decode("utf-8")
    except UnicodeDecodeError:
        raise HeaderMismatch("is not Base64 of UTF-8 text") from None


@dataclass(frozen=True, slots=True)
class MirroredParam:
    """A tool parameter marked `x-mcp-header` (basic/transports/streamable-http "Custom Headers
    from Tool Parameters"): where it sits in the arguments and the header that mirrors it."""

    path: tuple[str, ...]
    header: str  # lower-case `mcp-param-<name>`
    kind: str  # "string", "integer" or "boolean"


def mirrored_params(input_schema: Mapping[str, Any]) -> tuple[MirroredParam, ...]:
    """The `x-mcp-header` parameters of a tool's input schema: annotations reachable through
    `properties` keys only, on primitive types other than `number`, with token names ("Schema
    Extension"). A malformed annotation is left out: a client must reject such a tool anyway."""
    found: list[MirroredParam] = []

    def walk(schema: Mapping[str, Any], path: tuple[str, ...]) -> None:
        properties = schema.get("properties")
        if not isinstance(properties, Mapping):
            return
        for key, child in properties.items():
            if not isinstance(child, Mapping):
                continue
            name = child.get("x-mcp-header")
            kind = child.get("type")
            if (
                isinstance(name, str)
                and _TOKEN.fullmatch(name)
                and kind in ("string", "integer", "boolean")
            ):
                found.append(MirroredParam((*path, key), f"mcp-param-{name.lower()}", kind))
            walk(child, (*path, key))

    walk(input_schema, ())
    seen: set[str] = set()
    unique = []
    for param in found:
        if param.header not in seen:
            seen.add(param.header)
            unique.append(param)
    return tuple(unique)


_ABSENT: Final = object()


def _value_at(arguments: object, path: tuple[str, ...]) -> object:
    value = arguments
    for key in path:
        if not isinstance(value, Mapping) or key not in value:
            return _ABSENT
        value = value[key]
    return value


def _matches(kind: str, header_value: str, body_value: object) -> bool:
    if kind == "boolean":
        return isinstance(body_value, bool) and header_value == ("true" if body_value else "false")
    if kind == "integer":
        # "Server Validation": compare integers numerically (`42.0` and `42` are equal), but
        # only plain decimal text: `+42`, `4_2`, `0042` or other digits than ASCII would let a
        # proxy that reads the header see another value than the server acts on.
        if isinstance(body_value, bool) or not isinstance(body_value, int | float):
            return False
        if not _DECIMAL.fullmatch(header_value):
            return False
        number = decimal.Decimal(header_value)
        return abs(number) <= _SAFE_INTEGER and number == decimal.Decimal(body_value)
    return isinstance(body_value, str) and header_value == body_value


def _decoded(raw: str, header: str) -> str:
    try:
        return decode_header_value(raw)
    except HeaderMismatch as problem:
        raise HeaderMismatch(f"Header mismatch: {header} {problem}") from None


def check_headers(
    headers: Mapping[str, str],
    request: Request,
    mirrored: tuple[MirroredParam, ...] = (),
) -> None:
    """Raise `HeaderMismatch` unless the request metadata headers agree with `request`.

    `headers` has lower-case names (RFC 9110: names are case-insensitive; values are not).
    The protocol version header must name the body's `_meta` version; the version itself is
    judged by the router (an unknown one is UnsupportedProtocolVersionError, not a mismatch).
    """
    version = headers.get("mcp-protocol-version")
    if version is None:
        raise HeaderMismatch("Header mismatch: missing MCP-Protocol-Version header")
    meta = request.params.get("_meta")
    body_version = meta.get(META_PROTOCOL_VERSION) if isinstance(meta, dict) else None
    if isinstance(body_version, str) and version.strip(" \t") != body_version:
        raise HeaderMismatch(
            f"Header mismatch: MCP-Protocol-Version header {clip(version)!r} does not match "
            f"_meta {clip(body_version)!r}"
        )
    method = headers.get("mcp-method")
    if method is None:
        raise HeaderMismatch("Header mismatch: missing Mcp-Method header")
    if method.strip(" \t") != request.method:
        raise HeaderMismatch(
            f"Header mismatch: Mcp-Method header {clip(method)!r} does not match body method "
            f"{clip(request.method)!r}"
        )
    field = _NAMED_BY.get(request.method)
    if field is not None:
        body_name = request.params.get(field)
        raw_name = headers.get("mcp-name")
        # A tasks/* request without the header is served, by the body's taskId: the tasks
        # extension makes the header the client's duty ("Streamable HTTP: Routing Headers"),
        # for intermediaries routing a task's requests; the request is here already, and the
        # owner check decides who sees the task. Refusing it made every task of a client that
        # leaves it out (FastMCP 4.1.4) look failed while its work went on, which invites the
        # retry a deploy must not get. A header that disagrees with the body is refused.
        tolerated = raw_name is None and field == "taskId"
        if isinstance(body_name, str) and not tolerated:
            if raw_name is None:
                raise HeaderMismatch(f"Header mismatch: missing Mcp-Name header ({field})")
            name = _decoded(raw_name, "Mcp-Name")
            if name != body_name:
                raise HeaderMismatch(
                    f"Header mismatch: Mcp-Name header {clip(name)!r} does not match body "
                    f"{field} {clip(body_name)!r}"
                )
    arguments = request.params.get("arguments")
    for param in mirrored:
        body_value = _value_at(arguments, param.path)
        raw = headers.get(param.header)
        shown = f"Mcp-Param-{param.header.removeprefix('mcp-param-')}"
        if body_value is _ABSENT or body_value is None:
            # "Parameter value is null / not in arguments": the server MUST NOT expect the
            # header; one sent anyway mirrors nothing, but must still be a valid value.
            if raw is not None:
                _decoded(raw, shown)
            continue
        if raw is None:
            raise HeaderMismatch(f"Header mismatch: missing {shown} header")
        value = _decoded(raw, shown)
        if not _matches(param.kind, value, body_value):
            raise HeaderMismatch(
                f"Header mismatch: {shown} header {clip(value)!r} does not match the argument"
            )


def legacy_version_problem(header_version: str | None) -> str | None:
    """What is wrong with the `MCP-Protocol-Version` header of a 2025-11-25 session's request;
    None when it names a legacy version or is absent.

    2025-11-25 basic/transports "Protocol Version Header": the client sends the negotiated
    version on every request after initialize; with none, the server SHOULD assume 2025-03-26
    (a legacy version: the session's own is used); an invalid or unsupported one gets 400.
    """
    if header_version is None:
        return None
    version = header_version.strip(" \t")
    if version in LEGACY_VERSIONS:
        return None
    return (
        f"Bad Request: unsupported MCP-Protocol-Version {clip(version)!r} in a session; "
        f"sessions speak {', '.join(LEGACY_VERSIONS)}"
    )


# -- statuses -----------------------------------------------------------------------------------

#: Errors in the request itself rather than in what it asked for: HTTP 400. basic/index (a
#: malformed request; MissingRequiredClientCapabilityError), basic/versioning
#: (UnsupportedProtocolVersionError), basic/transports/streamable-http (HeaderMismatch).
_BAD_REQUEST_CODES: Final = frozenset(
    {
        PARSE_ERROR,
        INVALID_REQUEST,
        HEADER_MISMATCH,
        MISSING_REQUIRED_CLIENT_CAPABILITY,
        UNSUPPORTED_PROTOCOL_VERSION,
    }
)


@dataclass(frozen=True)
class Refusal:
    """A request refused before its body is read: its HTTP status, and the JSON-RPC error the
    body carries (`code` None: a plain-text body, for what is not the MCP endpoint at all)."""

    status: int
    message: str
    code: int | None = INVALID_REQUEST
    #: Headers beside the content type (`Allow`, `WWW-Authenticate`).
    headers: tuple[tuple[bytes, bytes], ...] = ()


def refuse_request(
    *,
    path_is_endpoint: bool,
    method: str,
    has_session: bool,
    access_problem: str | None,
    authorised: bool,
) -> Refusal | None:
    """The verdict on a request's head, in the order the checks must run: None to go on.

    Anything but the endpoint is 404. "Security & Endpoint": a Host or Origin that fails the
    DNS-rebinding checks is 403, before anything else is looked at. "Backward Compatibility":
    GET and DELETE without a 2025-11-25 session (its stream and its end need one) are 405, as is
    any other method. A bearer token required and not given is 401, with the challenge."""
    if not path_is_endpoint:
        return Refusal(404, "Not Found", code=None)
    if access_problem is not None:
        return Refusal(403, access_problem)
    if method != "POST" and (method not in ("GET", "DELETE") or not has_session):
        return Refusal(
            405, f"Method Not Allowed: {method}; POST only", headers=((b"allow", b"POST"),)
        )
    if not authorised:
        return Refusal(
            401,
            "Unauthorized: a valid bearer token is required",
            headers=((b"www-authenticate", b'Bearer realm="mcp"'),),
        )
    return None


def oauth_refusal(
    settings: ResourceServerSettings, problem: TokenRefused | AuthorizationServerUnavailable
) -> Refusal:
    """The answer to a request the OAuth resource server refuses (basic/authorization "Error
    Handling": 401 for a missing or invalid token, 403 for insufficient scope, each with the
    challenge); 503 with Retry-After while the authorization server cannot be reached, so a
    client retries the same token instead of asking its user to sign in again."""
    if isinstance(problem, IntrospectionBusy):
        return Refusal(
            503,
            "Service Unavailable: too many new tokens to check at once; retry later",
            headers=((b"retry-after", b"1"),),
        )
    if isinstance(problem, AuthorizationServerUnavailable):
        return Refusal(
            503,
            "Service Unavailable: the authorization server cannot be reached to check the "
            "token; retry later",
            headers=((b"retry-after", str(RETRY_AFTER_SECONDS).encode()),),
        )
    scopes = problem.scopes or settings.required_scopes
    header = challenge(
        settings,
        error=problem.error,
        description=problem.description if problem.error is not None else None,
        scopes=scopes,
    )
    word = "Forbidden" if problem.status == 403 else "Unauthorized"
    return Refusal(
        problem.status,
        f"{word}: {problem.description}",
        headers=((b"www-authenticate", header),),
    )


def too_many(message: str, wait_seconds: float) -> Refusal:
    """429 with Retry-After (RFC 6585 section 4): one principal past its own limits, while the
    server serves everyone else."""
    retry = str(max(1, math.ceil(wait_seconds))).encode("ascii")
    return Refusal(429, f"Too Many Requests: {message}", INTERNAL_ERROR, ((b"retry-after", retry),))


def refuse_post(*, content_type: str, accepts_json: bool) -> Refusal | None:
    """The verdict on a POST's media types ("Sending Messages": the body is JSON, and the client
    accepts a JSON answer): 415, 406, or None to go on."""
    if content_type.split(";", 1)[0].strip().lower() != "application/json":
        return Refusal(415, "Unsupported Media Type: send application/json")
    if not accepts_json:
        return Refusal(406, "Not Acceptable: accept application/json")
    return None


def refuse_session_get(
    *, accepts_event_stream: bool, version_problem: str | None
) -> Refusal | None:
    """The verdict on a 2025-11-25 session's GET ("Listening for Messages"): it accepts an event
    stream (else 406), and its MCP-Protocol-Version header names that era (else 400)."""
    if not accepts_event_stream:
        return Refusal(406, "Not Acceptable: accept text/event-stream")
    if version_problem is not None:
        return Refusal(400, version_problem)
    return None


def http_status(code: int, *, malformed: bool = False) -> int:
    """The HTTP status a JSON-RPC error response travels with.

    404 for -32601 ("Protocol Version Header": a method the server does not implement); 400 for
    the protocol-level errors above and for a request the router found malformed (a missing
    `_meta` field is -32602 with 400, basic/index); 200 for errors about what the request asked
    (an unknown tool, invalid arguments, a failing handler): the request itself was fine.
    """
    if code == METHOD_NOT_FOUND:
        return 404
    if malformed or code in _BAD_REQUEST_CODES:
        return 400
    return 200
