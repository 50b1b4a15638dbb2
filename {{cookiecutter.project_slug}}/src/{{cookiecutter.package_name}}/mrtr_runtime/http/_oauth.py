"""The OAuth 2.1 resource server's rules (2026-07-28 basic/authorization), as plain functions:
a token and the authorization server's keys in, a grant or the reason for a refusal out.
Nothing here fetches anything: `_authorization_server.py` brings the keys, `_rules.oauth_refusal`
turns a reason into an answer, and `_app.py` sends it.

- the Protected Resource Metadata document (RFC 9728) and the path it is served at;
- the `WWW-Authenticate` challenge of a 401 or a 403 (RFC 6750 section 3, with the
  `resource_metadata` parameter of RFC 9728 section 5.1 and the `scope` that basic/authorization
  "Scope Selection Strategy" makes a SHOULD);
- reading a JWT access token (RFC 9068) into a `Grant`: signature by one of the authorization
  server's keys, with an asymmetric algorithm the key is for; issuer; audience, which must be
  this server's canonical URI ("Token Handling": RFC 8707 section 2); expiry and not-before;
  the scopes every request needs. JOSE is PyJWT's (the `oauth` extra), never written here;
- reading an introspection response (RFC 7662 section 2.2) into a `Grant` with the same checks,
  for opaque tokens, which only the authorization server can read.
"""

from __future__ import annotations

import ipaddress
import json
import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final
from urllib.parse import urlsplit

from .._errors import MrtrError

__all__ = (
    "ACCESS_TOKEN_TYPES",
    "CLOCK_SKEW_SECONDS",
    "SIGNING_ALGORITHMS",
    "Grant",
    "IntrospectionClient",
    "ResourceServerSettings",
    "TokenRefused",
    "UnknownSigningKey",
    "canonical_uri",
    "challenge",
    "https_uri_problem",
    "is_jwt",
    "metadata_document",
    "opaque_token_problem",
    "read_access_token",
    "read_introspection",
    "scope_refusal",
    "token_header",
)

#: The algorithms an access token may be signed with: asymmetric only. A resource server holds
#: no secret shared with the authorization server, and "none" or an HMAC "signed" with a public
#: key (key confusion) must never verify.
SIGNING_ALGORITHMS: Final = (
    "RS256",
    "RS384",
    "RS512",
    "PS256",
    "PS384",
    "PS512",
    "ES256",
    "ES384",
    "ES512",
    "EdDSA",
)
#: RFC 9068 section 4: a resource server MUST check `typ` is one of these, so that an ID token
#: or any other JWT the authorization server signs is never taken for an access token.
ACCESS_TOKEN_TYPES: Final = ("at+jwt", "application/at+jwt")
#: What `accept_plain_jwt` adds: the `typ` of providers that predate RFC 9068 (Keycloak,
#: Microsoft Entra ID, Auth0's default profile), or none at all (Okta; RFC 7519 makes `typ`
#: optional). Their ID tokens look the same; the audience check (this server's URI, never a
#: client id) is then what keeps an ID token out.
PLAIN_JWT_TYPE: Final = "jwt"
#: How far the server's clock may be from the authorization server's, for exp and nbf.
CLOCK_SKEW_SECONDS: Final = 30
#: RFC 9728 section 3: the well-known suffix, inserted before the resource's path.
METADATA_SUFFIX: Final = "/.well-known/oauth-protected-resource"
#: Which key families sign with which algorithms (a JWK's `kty`).
_FAMILIES: Final = {
    "RSA": ("RS256", "RS384", "RS512", "PS256", "PS384", "PS512"),
    "EC": ("ES256", "ES384", "ES512"),
    "OKP": ("EdDSA",),
}
#: RFC 6750 section 3: what a scope token and an error description may contain.
_SCOPE_TOKEN: Final = re.compile(r"[\x21\x23-\x5b\x5d-\x7e]+")
#: RFC 6750 section 2.1: what a bearer token may be (b64token); anything else is refused
#: before it costs the authorization server an introspection.
_BEARER_TOKEN: Final = re.compile(r"[A-Za-z0-9\-._~+/]+=*")
#: Longer tokens are refused unread (real opaque tokens are tens of characters, JWTs a few KB).
MAX_TOKEN_LENGTH: Final = 8192
#: How long an introspection's answer is trusted by default (RFC 7662 section 4: caching
#: trades load on the authorization server against how late a revocation is noticed).
INTROSPECTION_CACHE_SECONDS: Final = 60
_DESCRIPTION_UNSAFE: Final = re.compile(r"[^\x20\x21\x23-\x5b\x5d-\x7e]")


class TokenRefused(MrtrError):
    """A bearer token this server does not accept: 401 `invalid_token` (RFC 6750 section 3.1),
    or 403 `insufficient_scope`; `description` says why, never quoting the token. `error` None:
    no token was presented (a challenge without an error code, section 3)."""

    def __init__(
        self,
        description: str,
        *,
        status: int = 401,
        error: str | None = "invalid_token",
        scopes: tuple[str, ...] = (),
    ) -> None:
        super().__init__(description)
        self.description = description
        self.status = status
        self.error = error
        #: For 403: the scopes the request needs (the challenge's `scope`).
        self.scopes = scopes


class UnknownSigningKey(MrtrError):
    """The token names a key (`kid`) the keys at hand do not have: fetch them again (the
    authorization server may have rotated), then read the token once more."""


def canonical_uri(uri: str) -> str:
    """`uri` as compared: scheme and host lowercased (basic/authorization "Canonical Server
    URI": implementations SHOULD accept uppercase ones), a default port dropped, one trailing
    slash left off. ValueError for a port that is not one."""
    parts = urlsplit(uri.strip())
    scheme = parts.scheme.lower()
    host = (parts.hostname or "").lower()
    if ":" in host:
        host = f"[{host}]"
    port = parts.port
    default = {"http": 80, "https": 443}.get(scheme)
    netloc = host if port is None or port == default else f"{host}:{port}"
    path = parts.path[:-1] if parts.path.endswith("/") else parts.path
    query = f"?{parts.query}" if parts.query else ""
    return f"{scheme}://{netloc}{path}{query}"


def _is_loopback_host(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def https_uri_problem(name: str, value: str, *, query_allowed: bool) -> str | None:
    """Why `value` cannot be an issuer or a resource URI, or None. OAuth 2.1 section 1.5: https,
    but for loopback addresses, where http serves local development."""
    try:
        parts = urlsplit(value)
        parts.port  # noqa: B018 -- raises ValueError on a port out of range
    except ValueError:
        return f"{name} {value!r} is not a URL"
    if parts.scheme not in ("https", "http") or not parts.hostname:
        return f"{name} {value!r} must be an https:// URL"
    if parts.scheme == "http" and not _is_loopback_host(parts.hostname):
        return f"{name} {value!r} must use https (http only on a loopback address)"
    if parts.fragment or "#" in value:
        return f"{name} {value!r} must have no fragment"
    if parts.username is not None or parts.password is not None:
        return f"{name} {value!r} must have no user name or password"
    if parts.query and not query_allowed:
        return f"{name} {value!r} must have no query"
    return None


@dataclass(frozen=True, slots=True)
class IntrospectionClient:
    """How this server asks the authorization server about an opaque token (RFC 7662): as a
    client of its own (section 2.1: the protected resource MUST authenticate), by
    `client_secret_basic`; answers trusted for `cache_seconds` at most (never past the
    token's `exp`)."""

    client_id: str
    client_secret: str = field(repr=False)
    cache_seconds: int = INTROSPECTION_CACHE_SECONDS


@dataclass(frozen=True, slots=True)
class ResourceServerSettings:
    """Who issues the tokens this server accepts, and what this server is called in them.

    `issuer` is the authorization server's issuer identifier (its metadata is found from it:
    RFC 8414, then OpenID Connect Discovery); `resource` is this server's canonical URI, the
    audience its tokens must carry (`https://mcp.example.com/mcp`); `required_scopes` are the
    scopes every request needs (tools may need more).
    """

    issuer: str
    resource: str
    required_scopes: tuple[str, ...] = ()
    #: `MRTR_OAUTH_ACCEPT_PLAIN_JWT`: take `typ: JWT` access tokens too (see PLAIN_JWT_TYPE).
    accept_plain_jwt: bool = False
    #: `MRTR_OAUTH_CLIENT_ID` and `MRTR_OAUTH_CLIENT_SECRET`: opaque tokens are introspected
    #: with these; None: only JWT access tokens are accepted.
    introspection: IntrospectionClient | None = None

    @classmethod
    def from_values(
        cls,
        *,
        issuer: str,
        resource: str,
        scopes: Iterable[str] = (),
        accept_plain_jwt: bool = False,
        introspection: IntrospectionClient | None = None,
    ) -> ResourceServerSettings:
        """Checked settings: ValueError saying what is wrong with any of them."""
        issuer = issuer.strip()
        resource = resource.strip()
        for name, value, query_allowed in (
            ("MRTR_OAUTH_ISSUER", issuer, False),
            # RFC 8707 section 2: an absolute URI without a fragment; SHOULD NOT have a query.
            ("MRTR_OAUTH_RESOURCE", resource, False),
        ):
            problem = https_uri_problem(name, value, query_allowed=query_allowed)
            if problem is not None:
                raise ValueError(problem)
        required = tuple(dict.fromkeys(scope for scope in scopes if scope))
        for scope in required:
            if not _SCOPE_TOKEN.fullmatch(scope):
                raise ValueError(f"scope {scope!r} is not a scope token (RFC 6749 section 3.3)")
        return cls(
            issuer=issuer,
            resource=canonical_uri(resource),
            required_scopes=required,
            accept_plain_jwt=accept_plain_jwt,
            introspection=introspection,
        )

    @property
    def metadata_path(self) -> str:
        """RFC 9728 section 3.1: the well-known suffix inserted between the host and the
        resource's path (`/mcp` -> `/.well-known/oauth-protected-resource/mcp`)."""
        return METADATA_SUFFIX + urlsplit(self.resource).path.rstrip("/")

    @property
    def metadata_url(self) -> str:
        parts = urlsplit(self.resource)
        return f"{parts.scheme}://{parts.netloc}{self.metadata_path}"


def metadata_document(settings: ResourceServerSettings, tool_scopes: Iterable[str]) -> bytes:
    """RFC 9728 section 2: the Protected Resource Metadata, as served. `scopes_supported` is
    what every request needs and what any tool needs beyond it; the authorization server is
    the one issuer this server trusts ("Authorization Server Discovery")."""
    scopes = list(dict.fromkeys([*settings.required_scopes, *sorted(set(tool_scopes))]))
    document: dict[str, Any] = {
        "resource": settings.resource,
        "authorization_servers": [settings.issuer],
        # "Token Requirements": the Authorization header, and nothing else.
        "bearer_methods_supported": ["header"],
    }
    if scopes:
        document["scopes_supported"] = scopes
    return json.dumps(document, separators=(",", ":")).encode("utf-8")


def _quoted(value: str) -> str:
    return '"' + _DESCRIPTION_UNSAFE.sub("?", value) + '"'


def challenge(
    settings: ResourceServerSettings,
    *,
    error: str | None = None,
    description: str | None = None,
    scopes: Iterable[str] = (),
) -> bytes:
    """The `WWW-Authenticate` value: `Bearer resource_metadata="...", scope="..."`, with
    `error` and `error_description` when a token was presented (RFC 6750 section 3: a request
    without credentials gets no error code)."""
    parts = [f"resource_metadata={_quoted(settings.metadata_url)}"]
    wanted = " ".join(dict.fromkeys(scopes))
    if wanted:
        parts.append(f"scope={_quoted(wanted)}")
    if error is not None:
        parts.append(f"error={_quoted(error)}")
    if description:
        parts.append(f"error_description={_quoted(description)}")
    return ("Bearer " + ", ".join(parts)).encode("ascii")


@dataclass(frozen=True, slots=True)
class Grant:
    """What a verified access token lets its bearer do, and who the bearer is."""

    subject: str
    client_id: str | None
    scopes: frozenset[str]
    #: The token's `exp`, seconds since the epoch.
    expires_at: float

    @property
    def principal(self) -> str:
        """Who asks, wherever the runtime keeps one (requestState binding, task ownership,
        budgets): the subject, and the client acting for it, so that a task started from one
        application is not another's to read."""
        # JSON: no subject or client, whatever characters they hold, reads as another pair.
        return "oauth:" + json.dumps([self.subject, self.client_id], separators=(",", ":"))


def _signing_key(header: Mapping[str, Any], keys: Mapping[str, Mapping[str, Any]]) -> Any:
    """The PyJWK the header's `kid` names, for the header's algorithm; TokenRefused when the
    algorithm is not one the key signs with; UnknownSigningKey when no key is named so."""
    import jwt

    algorithm = header.get("alg")
    if algorithm not in SIGNING_ALGORITHMS:
        raise TokenRefused(f"signing algorithm {str(algorithm)[:16]!r} is not accepted")
    kid = header.get("kid")
    if kid is None and len(keys) == 1:
        kid = next(iter(keys))
    if not isinstance(kid, str) or kid not in keys:
        raise UnknownSigningKey(str(kid)[:64])
    jwk = keys[kid]
    use = jwk.get("use")
    if use is not None and use != "sig":
        raise TokenRefused("the token's key is not a signing key")
    declared = jwk.get("alg")
    family = _FAMILIES.get(str(jwk.get("kty")), ())
    if algorithm not in family or (declared is not None and declared != algorithm):
        raise TokenRefused(f"the token's key does not sign with {algorithm}")
    try:
        return jwt.PyJWK(dict(jwk), algorithm=algorithm)
    except jwt.PyJWKError as error:
        raise TokenRefused(f"the token's key cannot be used: {error}") from None


def _scopes_of(claims: Mapping[str, Any]) -> frozenset[str]:
    """RFC 9068 section 2.2.3: `scope`, space-separated; some providers send a `scp` list."""
    # RFC 6749 section 3.3: scopes are separated by spaces (0x20), and nothing else.
    scope = claims.get("scope")
    if isinstance(scope, str):
        return frozenset(item for item in scope.split(" ") if item)
    listed = claims.get("scp")
    if isinstance(listed, list) and all(isinstance(item, str) for item in listed):
        return frozenset(listed)
    if isinstance(listed, str):
        return frozenset(item for item in listed.split(" ") if item)
    return frozenset()


#: What an audience may contain: visible ASCII, no backslash (parsers disagree on what it is).
_AUDIENCE_TEXT: Final = re.compile(r"[!-\[\]-~]+")


def _names_resource(audience: object, resource: str) -> bool:
    """Whether one `aud` value names `resource`: the same URI once its scheme and host are
    lowercased, a default port dropped and one trailing slash ignored (basic/authorization
    "Canonical Server URI"), and nothing else. A value with whitespace, a backslash, a user
    part, a query or a fragment names something else, whatever a lenient parser makes of it."""
    if not isinstance(audience, str) or not _AUDIENCE_TEXT.fullmatch(audience):
        return False
    if "#" in audience or "?" in audience or "@" in audience:
        return False
    try:
        named = canonical_uri(audience)
    except ValueError:
        return False
    return named == resource


def _audience_problem(claims: Mapping[str, Any], resource: str) -> str | None:
    audience = claims.get("aud")
    listed = [audience] if isinstance(audience, str) else audience
    if not isinstance(listed, list) or not listed:
        return "the token names no audience"
    if any(_names_resource(item, resource) for item in listed):
        return None
    return "the token was issued for another resource, not this server"


def token_header(token: str, *, accept_plain_jwt: bool = False) -> dict[str, Any]:
    """The JOSE header of what claims to be a JWT access token, checked as far as it can be
    without keys (well-formed, `typ` at+jwt, or JWT with `accept_plain_jwt`, an accepted
    algorithm); TokenRefused otherwise. Checked before any key is fetched: garbage never
    costs the authorization server a fetch."""
    import jwt

    try:
        header: dict[str, Any] = jwt.get_unverified_header(token)
    except (jwt.InvalidTokenError, RecursionError, ValueError, TypeError):
        # RecursionError: a header nested past the parser's depth (older PyJWT lets it out).
        raise TokenRefused("the token is not a signed JWT") from None
    token_type = header.get("typ")
    kind = token_type.lower() if isinstance(token_type, str) else None
    plain = accept_plain_jwt and kind in (PLAIN_JWT_TYPE, None)
    if kind not in ACCESS_TOKEN_TYPES and not plain:
        raise TokenRefused("the token is not a JWT access token (typ must be at+jwt, RFC 9068)")
    algorithm = header.get("alg")
    if algorithm not in SIGNING_ALGORITHMS:
        raise TokenRefused(f"signing algorithm {str(algorithm)[:16]!r} is not accepted")
    return header


def read_access_token(
    token: str, keys: Mapping[str, Mapping[str, Any]], settings: ResourceServerSettings
) -> Grant:
    """The grant a JWT access token carries, once every check has passed; TokenRefused saying
    which did not, or UnknownSigningKey (see there). `keys` are the authorization server's
    JWKs by `kid`."""
    import jwt

    key = _signing_key(token_header(token, accept_plain_jwt=settings.accept_plain_jwt), keys)
    try:
        claims: dict[str, Any] = jwt.decode(
            token,
            key=key,
            algorithms=[key.algorithm_name],
            issuer=settings.issuer,
            leeway=CLOCK_SKEW_SECONDS,
            options={"require": ["exp", "iss", "sub"], "verify_aud": False},
        )
    except jwt.ExpiredSignatureError:
        raise TokenRefused("the token has expired") from None
    except jwt.ImmatureSignatureError:
        raise TokenRefused("the token is not valid yet") from None
    except jwt.InvalidIssuerError:
        raise TokenRefused("the token was issued by another authorization server") from None
    except jwt.InvalidSignatureError:
        raise TokenRefused("the token's signature does not verify") from None
    except jwt.MissingRequiredClaimError as error:
        raise TokenRefused(f"the token has no {error.claim!r} claim") from None
    except jwt.InvalidTokenError as error:
        raise TokenRefused(f"the token is not valid: {error}") from None
    except (RecursionError, OverflowError, TypeError, ValueError):
        # Claims older PyJWT releases let out as these (an exp of 1e400 or a list).
        raise TokenRefused("the token's claims cannot be read") from None
    return _grant_of(claims, settings)


def _time_of(claims: Mapping[str, Any], name: str) -> float | None:
    """A NumericDate claim (RFC 7519 section 2: a JSON number of seconds), None when absent;
    TokenRefused for anything else (a string, a bool, NaN, an infinity, a number too big)."""
    value = claims.get(name)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TokenRefused(f"the token's {name} is not a time")
    try:
        seconds = float(value)
    except OverflowError:
        seconds = math.nan
    if not math.isfinite(seconds):
        raise TokenRefused(f"the token's {name} is not a time")
    return seconds


def _grant_of(claims: Mapping[str, Any], settings: ResourceServerSettings) -> Grant:
    """The grant of a token's claims, whichever way they were had (a verified JWT, an
    introspection): for this resource, of a subject (the user, or the client itself for a
    client credentials token: never absent, or every user of one client would be one
    principal), not bound to a key this server cannot check, with an expiry, and with every
    request's scopes."""
    problem = _audience_problem(claims, settings.resource)
    if problem is not None:
        raise TokenRefused(problem)
    for member, wanted in _ACCESS_TOKEN_MARKS.items():
        said = claims.get(member)
        if said is not None and (not isinstance(said, str) or said.lower() not in wanted):
            raise TokenRefused("the token is not a bearer access token")
    if claims.get("cnf") is not None:
        # RFC 8705 and RFC 9449: a token bound to a certificate or a DPoP key is only its
        # holder's; taken as a bare bearer token, anyone who copied it could use it.
        raise TokenRefused("the token is bound to a key (cnf), which this server cannot check")
    client = claims.get("client_id")
    if client is None:
        client = claims.get("azp")
    if client is not None and (not isinstance(client, str) or not client):
        raise TokenRefused("the token's client_id is not a string")
    subject = claims.get("sub")
    if subject is None:
        raise TokenRefused("the token names no subject (sub)")
    if not isinstance(subject, str) or not subject:
        raise TokenRefused("the token's subject is not a string")
    expires_at = _time_of(claims, "exp")
    if expires_at is None:
        raise TokenRefused("the token's exp is not a time")
    grant = Grant(
        subject=subject, client_id=client, scopes=_scopes_of(claims), expires_at=expires_at
    )
    missing = scope_refusal(grant, settings.required_scopes)
    if missing is not None:
        raise missing
    return grant


def is_jwt(token: str) -> bool:
    """Whether `token` has a JWS's shape (three parts joined by dots, RFC 7515 section 7.1):
    such a token is read here with the authorization server's keys; any other is opaque, and
    only the authorization server can say what it grants (introspection)."""
    return token.count(".") == 2


def opaque_token_problem(token: str) -> str | None:
    """Why `token` cannot be an opaque access token, before anyone is asked about it."""
    if len(token) > MAX_TOKEN_LENGTH:
        return f"the token is longer than {MAX_TOKEN_LENGTH} characters"
    if not _BEARER_TOKEN.fullmatch(token):
        return "the token has characters a bearer token cannot (RFC 6750 section 2.1)"
    return None


#: How a token's claims or its introspection may say what kind of token it is, and what an
#: access token presented as a bearer token says there: RFC 7662's `token_type` ("Bearer";
#: some servers say "access_token"); `token_use` (ORY Hydra, whose refresh tokens carry this
#: server's audience too); `typ` (Keycloak's claims: "Bearer", or "Refresh", "ID"). A member
#: that says anything else refuses the token; one that is absent says nothing.
_ACCESS_TOKEN_MARKS: Final = {
    "token_type": ("bearer", "access_token"),
    "token_use": ("access_token",),
    "typ": ("bearer",),
}


def read_introspection(
    response: Mapping[str, Any], settings: ResourceServerSettings, *, now: float
) -> Grant:
    """The grant an introspection response (RFC 7662 section 2.2) describes, once the same
    checks as a JWT's have passed: active; from this issuer (when it says); a bearer access
    token by every member that says what kind (a refresh token is no access token); for this
    resource (`aud` and `sub` are optional in RFC 7662 but required here: basic/authorization
    "Token Handling" has a server accept only tokens issued for it, and a principal needs a
    subject); not bound to a key; not expired and not before its `nbf` (30 s of skew); every
    request's scopes. TokenRefused saying which failed. `now`: seconds since the epoch."""
    if response.get("active") is not True:
        # Section 2.2: nothing else about an inactive token may be told, or trusted.
        raise TokenRefused(
            "the authorization server says the token is not active "
            "(expired, revoked, or never issued)"
        )
    issuer = response.get("iss")
    if issuer is not None and issuer != settings.issuer:
        raise TokenRefused("the token was issued by another authorization server")
    grant = _grant_of(response, settings)
    if now > grant.expires_at + CLOCK_SKEW_SECONDS:
        raise TokenRefused("the token has expired")
    not_before = _time_of(response, "nbf")
    if not_before is not None and now + CLOCK_SKEW_SECONDS < not_before:
        raise TokenRefused("the token is not valid yet")
    return grant


def scope_refusal(grant: Grant, needed: Iterable[str]) -> TokenRefused | None:
    """basic/authorization "Runtime Insufficient Scope Errors": the 403 for a grant without
    every scope `needed`, naming all of them in one challenge, or None."""
    wanted = tuple(dict.fromkeys(needed))
    if all(scope in grant.scopes for scope in wanted):
        return None
    missing = " ".join(scope for scope in wanted if scope not in grant.scopes)
    return TokenRefused(
        f"this needs the scope {missing}",
        status=403,
        error="insufficient_scope",
        scopes=wanted,
    )
