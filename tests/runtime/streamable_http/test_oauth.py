"""The HTTP transport as an OAuth 2.1 resource server (2026-07-28 basic/authorization): the
sans-IO rules of `http/_oauth.py` (metadata, challenges, reading a JWT access token), the keys
of `http/_authorization_server.py` with a fake authorization server, and the app's answers.
tests/deployments/test_oauth_resource_server.py runs the same against a real one (oidc-provider).
"""

from __future__ import annotations

import base64
import contextlib
import http.server
import json
import threading
import time
from collections import Counter
from collections.abc import Iterator, Mapping
from typing import Any

import anyio
import jwt
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from jwt.algorithms import ECAlgorithm, RSAAlgorithm
from test_http_app import Client

from mrtr_runtime import Context, Registry
from mrtr_runtime._config import Settings
from mrtr_runtime.http import _authorization_server as authorization_module
from mrtr_runtime.http._app import HttpApp, HttpSettings
from mrtr_runtime.http._authorization_server import (
    KEYS_MAX_AGE_SECONDS,
    REFRESH_INTERVAL_SECONDS,
    AuthorizationServer,
    AuthorizationServerUnavailable,
    BearerAuthority,
    metadata_urls,
)
from mrtr_runtime.http._oauth import (
    Grant,
    ResourceServerSettings,
    TokenRefused,
    UnknownSigningKey,
    challenge,
    metadata_document,
    read_access_token,
    scope_refusal,
)
from mrtr_runtime.http._rules import oauth_refusal
from mrtr_runtime.server import Server
from support import Json, make_server

ISSUER = "https://auth.example.com"
RESOURCE = "https://mcp.example.com/mcp"
SETTINGS = ResourceServerSettings.from_values(issuer=ISSUER, resource=RESOURCE, scopes=["mcp"])

RSA_KEY = rsa.generate_private_key(public_exponent=65537, key_size=2048)
OTHER_RSA_KEY = rsa.generate_private_key(public_exponent=65537, key_size=2048)
EC_KEY = ec.generate_private_key(ec.SECP256R1())


def public_jwk(private: Any, kid: str, **extra: str) -> dict[str, Any]:
    algorithm = RSAAlgorithm if isinstance(private, rsa.RSAPrivateKey) else ECAlgorithm
    jwk: dict[str, Any] = algorithm.to_jwk(private.public_key(), as_dict=True)
    return {**jwk, "kid": kid, "use": "sig", **extra}


KEYS = {"rsa-1": public_jwk(RSA_KEY, "rsa-1"), "ec-1": public_jwk(EC_KEY, "ec-1")}


def claims(**changes: Any) -> dict[str, Any]:
    now = int(time.time())
    found: dict[str, Any] = {
        "iss": ISSUER,
        "sub": "alice",
        "aud": RESOURCE,
        "client_id": "claude-code",
        "scope": "mcp deploy",
        "iat": now,
        "exp": now + 600,
    }
    found.update(changes)
    return {name: value for name, value in found.items() if value is not None}


def token(
    payload: Mapping[str, Any] | None = None,
    *,
    key: Any = RSA_KEY,
    kid: str | None = "rsa-1",
    algorithm: str = "RS256",
    typ: str | None = "at+jwt",
) -> str:
    headers: dict[str, Any] = {}
    if kid is not None:
        headers["kid"] = kid
    if typ is not None:
        headers["typ"] = typ
    return jwt.encode(dict(payload or claims()), key, algorithm=algorithm, headers=headers)


def refused(access_token: str, settings: ResourceServerSettings = SETTINGS) -> TokenRefused:
    with pytest.raises(TokenRefused) as caught:
        read_access_token(access_token, KEYS, settings)
    return caught.value


def b64(data: Mapping[str, Any]) -> str:
    return base64.urlsafe_b64encode(json.dumps(data).encode()).rstrip(b"=").decode()


# -- reading a token --------------------------------------------------------------------------


def test_a_valid_token_grants_its_subject_client_and_scopes() -> None:
    grant = read_access_token(token(), KEYS, SETTINGS)
    assert grant.subject == "alice"
    assert grant.client_id == "claude-code"
    assert grant.scopes == {"mcp", "deploy"}
    assert grant.principal == 'oauth:["alice","claude-code"]'
    ec_grant = read_access_token(token(key=EC_KEY, kid="ec-1", algorithm="ES256"), KEYS, SETTINGS)
    assert ec_grant.subject == "alice"


def test_the_principal_tells_subjects_and_clients_apart() -> None:
    principals = {
        read_access_token(token(claims(sub=sub, client_id=client)), KEYS, SETTINGS).principal
        for sub in ("alice", "bob")
        for client in ("claude-code", "vscode", None)
    }
    assert len(principals) == 6


@pytest.mark.parametrize(
    ("changes", "why"),
    [
        ({"exp": int(time.time()) - 120}, "expired"),
        # A year ahead: the list is made at collection, and a loaded run reaches this test
        # many minutes later (10 minutes ahead was once in the past by then).
        ({"nbf": int(time.time()) + 365 * 86400}, "not valid yet"),
        ({"iss": "https://evil.example.com"}, "another authorization server"),
        ({"aud": "https://other.example.com/mcp"}, "another resource"),
        ({"aud": ["https://a.example.com", "https://b.example.com"]}, "another resource"),
        ({"aud": None}, "no audience"),
        ({"exp": None}, "'exp'"),
        ({"sub": None}, "'sub'"),
        # RFC 9449: a DPoP-bound token is its key holder's only; this server cannot check it.
        ({"cnf": {"jkt": "0ZcOCORZNYy-DWpqq30jZyJGHTN0d2HglBV3uiguA4I"}}, "bound to a key"),
    ],
)
def test_a_token_with_a_claim_that_fails_is_refused_saying_which(
    changes: dict[str, Any], why: str
) -> None:
    # Signed with the right key: only the claim can be what refuses it.
    problem = refused(token(claims(**changes)))
    assert problem.status == 401
    assert problem.error == "invalid_token"
    assert why in problem.description


def test_the_audience_is_compared_as_a_canonical_uri() -> None:
    # basic/authorization "Canonical Server URI": uppercase scheme and host SHOULD be accepted.
    for audience in ("HTTPS://MCP.EXAMPLE.COM/mcp", "https://mcp.example.com:443/mcp/", RESOURCE):
        assert read_access_token(token(claims(aud=audience)), KEYS, SETTINGS).subject == "alice"
    listed = ["https://other.example.com", RESOURCE]
    assert read_access_token(token(claims(aud=listed)), KEYS, SETTINGS).subject == "alice"
    assert "another resource" in refused(token(claims(aud=RESOURCE + "/admin"))).description


@pytest.mark.parametrize(
    "audience",
    [
        "https://evil.example@mcp.example.com/mcp",
        "https://evil.example\\@mcp.example.com/mcp",
        RESOURCE + "#evil",
        RESOURCE + "?",
        RESOURCE + "//",
        "https://mcp.example.com/m\tcp",
        " " + RESOURCE,
        "https://mcp.example.com:99999/mcp",
        "https://[::1/mcp",
    ],
)
def test_an_audience_a_lenient_parser_would_read_as_this_server_is_not(audience: str) -> None:
    # A confused deputy: a token issued for a resource named so must not be taken here.
    assert "another resource" in refused(token(claims(aud=audience))).description


def test_claims_that_cannot_be_read_are_refused_not_raised() -> None:
    assert "exp is not a time" in refused(token(claims(exp=10**400))).description
    assert "client_id is not a string" in refused(token(claims(client_id=5))).description
    # RFC 6749 section 3.3: scopes are separated by spaces only.
    odd = read_access_token(token(claims(scope="mcp deploy\u00a0admin")), KEYS, SETTINGS)
    assert odd.scopes == {"mcp", "deploy\u00a0admin"}


def test_no_two_subject_and_client_pairs_share_a_principal() -> None:
    pairs = [("alice", "app1"), ("alice\nclient:app1", None), ("alice", None), ('a","b', "c")]
    principals = {
        read_access_token(token(claims(sub=sub, client_id=client)), KEYS, SETTINGS).principal
        for sub, client in pairs
    }
    assert len(principals) == len(pairs)


def test_an_unsigned_token_is_refused() -> None:
    header = b64({"alg": "none", "typ": "at+jwt", "kid": "rsa-1"})
    assert "'none'" in refused(f"{header}.{b64(claims())}.").description


def test_an_hmac_signed_with_the_public_key_is_refused() -> None:
    # Key confusion: the public key is public, so an HS256 "signature" with it proves nothing.
    public_pem = RSA_KEY.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    forged = ".".join([b64({"alg": "HS256", "typ": "at+jwt", "kid": "rsa-1"}), b64(claims())])
    import hashlib
    import hmac

    signature = hmac.new(public_pem, forged.encode(), hashlib.sha256).digest()
    forged += "." + base64.urlsafe_b64encode(signature).rstrip(b"=").decode()
    assert "'HS256'" in refused(forged).description


def test_a_token_signed_by_another_key_under_a_known_kid_is_refused() -> None:
    assert "does not verify" in refused(token(key=OTHER_RSA_KEY)).description


def test_a_key_signs_only_with_its_own_family_and_declared_algorithm() -> None:
    # An EC token naming the RSA key's kid, and a PS256 token for a key declared RS256.
    assert (
        "does not sign with ES256"
        in refused(token(key=EC_KEY, kid="rsa-1", algorithm="ES256")).description
    )
    declared = {"rsa-1": public_jwk(RSA_KEY, "rsa-1", alg="RS256")}
    with pytest.raises(TokenRefused, match="does not sign with PS256"):
        read_access_token(token(algorithm="PS256"), declared, SETTINGS)
    encryption = {"rsa-1": public_jwk(RSA_KEY, "rsa-1", use="enc")}
    with pytest.raises(TokenRefused, match="not a signing key"):
        read_access_token(token(), encryption, SETTINGS)


def test_only_jwt_access_tokens_are_taken() -> None:
    # RFC 9068 section 4: an ID token (typ JWT) signed by the same server is not an access token.
    for typ in ("JWT", None, "id_token+jwt"):
        assert "typ must be at+jwt" in refused(token(typ=typ)).description
    assert read_access_token(token(typ="application/at+jwt"), KEYS, SETTINGS).subject == "alice"


def test_plain_jwt_access_tokens_are_taken_only_when_asked_for_and_id_tokens_never() -> None:
    # Providers that predate RFC 9068 sign access tokens `typ: JWT`: opt-in, and then the
    # audience (this server, never a client id) is what keeps their ID tokens out.
    lenient = ResourceServerSettings.from_values(
        issuer=ISSUER, resource=RESOURCE, scopes=["mcp"], accept_plain_jwt=True
    )
    assert read_access_token(token(typ="JWT"), KEYS, lenient).subject == "alice"
    assert "typ must be at+jwt" in refused(token(typ="JWT")).description
    # RFC 7519 section 5.1: `typ` is optional, and some providers (Okta) send none.
    assert read_access_token(token(typ=None), KEYS, lenient).subject == "alice"
    assert "typ must be at+jwt" in refused(token(typ=None)).description
    id_token = token(claims(aud="claude-code"), typ="JWT")
    assert "another resource" in refused(id_token, lenient).description
    assert "typ must be at+jwt" in refused(token(typ="id_token+jwt"), lenient).description
    # Keycloak names the kind in its claims too: an ID token that a mapper gave this server's
    # audience says `"typ": "ID"` there, its access tokens `"Bearer"`.
    keycloak_id_token = token(claims(typ="ID"), typ="JWT")
    assert "not a bearer access token" in refused(keycloak_id_token, lenient).description
    assert read_access_token(token(claims(typ="Bearer"), typ="JWT"), KEYS, lenient).subject
    made = http_settings(
        MRTR_OAUTH_ISSUER=ISSUER, MRTR_OAUTH_RESOURCE=RESOURCE, MRTR_OAUTH_ACCEPT_PLAIN_JWT="1"
    )
    assert made.oauth is not None and made.oauth.accept_plain_jwt
    with pytest.raises(ValueError, match=r"must be 1 \(on\) or 0 \(off\)"):
        http_settings(
            MRTR_OAUTH_ISSUER=ISSUER,
            MRTR_OAUTH_RESOURCE=RESOURCE,
            MRTR_OAUTH_ACCEPT_PLAIN_JWT="yes",
        )


def test_a_token_naming_an_unknown_key_asks_for_the_keys_again() -> None:
    with pytest.raises(UnknownSigningKey):
        read_access_token(token(kid="rsa-2"), KEYS, SETTINGS)


def test_missing_scopes_are_a_403_naming_every_one_needed() -> None:
    # basic/authorization "Runtime Insufficient Scope Errors": all of them, in one challenge.
    narrow = ResourceServerSettings.from_values(
        issuer=ISSUER, resource=RESOURCE, scopes=["mcp", "admin", "audit"]
    )
    problem = refused(token(), narrow)
    assert (problem.status, problem.error) == (403, "insufficient_scope")
    assert problem.scopes == ("mcp", "admin", "audit")
    grant = read_access_token(token(), KEYS, SETTINGS)
    assert scope_refusal(grant, ["mcp", "deploy"]) is None
    assert scope_refusal(grant, ["deploy", "delete"]) is not None


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(position=st.integers(min_value=0), replacement=st.characters(codec="ascii"))
def test_a_token_changed_anywhere_is_never_taken_for_another_grant(
    position: int, replacement: str
) -> None:
    original = token()
    place = position % len(original)
    changed = original[:place] + replacement + original[place + 1 :]
    try:
        grant = read_access_token(changed, KEYS, SETTINGS)
    except (TokenRefused, UnknownSigningKey):
        return
    # Base64url's last character carries spare bits: the same bytes decode, the same grant.
    assert grant == read_access_token(original, KEYS, SETTINGS)


def test_a_header_nested_past_the_parsers_depth_is_refused_not_raised() -> None:
    # Older PyJWT releases (2.10 to 2.12, which the project's pin allows) let the parser's
    # RecursionError out: a 500 for anyone who sends such a token.
    header = b'{"alg":"RS256","typ":"at+jwt","x":' + b"[" * 5000 + b"]" * 5000 + b"}"
    nested = base64.urlsafe_b64encode(header).rstrip(b"=").decode() + "." + b64(claims()) + ".x"
    assert "not a signed JWT" in refused(nested).description


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=400))
def test_any_text_as_a_token_is_refused_cleanly(text: str) -> None:
    with pytest.raises((TokenRefused, UnknownSigningKey)):
        read_access_token(text, KEYS, SETTINGS)


# -- metadata, challenges, settings ------------------------------------------------------------


def test_the_metadata_names_this_resource_its_issuer_and_every_scope() -> None:
    # RFC 9728 section 3.1: the suffix goes between the host and the resource's path.
    assert SETTINGS.metadata_path == "/.well-known/oauth-protected-resource/mcp"
    assert SETTINGS.metadata_url == (
        "https://mcp.example.com/.well-known/oauth-protected-resource/mcp"
    )
    document = json.loads(metadata_document(SETTINGS, ["deploy", "mcp", "deploy"]))
    assert document == {
        "resource": RESOURCE,
        "authorization_servers": [ISSUER],
        "bearer_methods_supported": ["header"],
        "scopes_supported": ["mcp", "deploy"],
    }


def test_the_challenge_points_at_the_metadata_and_names_the_scopes() -> None:
    assert challenge(SETTINGS, scopes=["mcp"]) == (
        b'Bearer resource_metadata="https://mcp.example.com/.well-known/'
        b'oauth-protected-resource/mcp", scope="mcp"'
    )
    # RFC 6750 section 3: no error code when no token was presented.
    missing = oauth_refusal(SETTINGS, TokenRefused("no token", error=None))
    assert missing.status == 401
    assert b"error=" not in dict(missing.headers)[b"www-authenticate"]
    expired = oauth_refusal(SETTINGS, TokenRefused("the token has expired"))
    header = dict(expired.headers)[b"www-authenticate"].decode()
    assert 'error="invalid_token"' in header
    assert 'error_description="the token has expired"' in header


@given(st.text(min_size=1))
def test_a_challenge_is_one_ascii_header_whatever_the_description(description: str) -> None:
    value = challenge(SETTINGS, error="invalid_token", description=description).decode("ascii")
    assert "\r" not in value and "\n" not in value
    # Every quoted string closes where it should: no quote or backslash comes from the text.
    described = value.split('error_description="', 1)[1]
    assert described.endswith('"') and '"' not in described[:-1] and "\\" not in described


@pytest.mark.parametrize(
    ("issuer", "resource", "why"),
    [
        ("http://auth.example.com", RESOURCE, "must use https"),
        (ISSUER, "http://mcp.example.com/mcp", "must use https"),
        (ISSUER, "https://mcp.example.com/mcp#top", "no fragment"),
        ("https://auth.example.com?tenant=1", RESOURCE, "no query"),
        ("https://user:pw@auth.example.com", RESOURCE, "no user name"),
        ("auth.example.com", RESOURCE, "https:// URL"),
        (ISSUER, "https://mcp.example.com:99999/mcp", "not a URL"),
    ],
)
def test_settings_refuse_what_cannot_be_an_issuer_or_a_resource(
    issuer: str, resource: str, why: str
) -> None:
    with pytest.raises(ValueError, match=why):
        ResourceServerSettings.from_values(issuer=issuer, resource=resource)


def test_loopback_http_serves_local_development() -> None:
    local = ResourceServerSettings.from_values(
        issuer="http://127.0.0.1:9000", resource="http://localhost:8000/mcp"
    )
    assert local.metadata_url == "http://localhost:8000/.well-known/oauth-protected-resource/mcp"
    with pytest.raises(ValueError, match="scope token"):
        ResourceServerSettings.from_values(issuer=ISSUER, resource=RESOURCE, scopes=['a"b'])


def http_settings(**environ: str) -> HttpSettings:
    return HttpSettings.from_settings(Settings.from_environment(environ), host="127.0.0.1", port=1)


def test_the_environment_makes_a_resource_server_or_says_what_is_missing() -> None:
    made = http_settings(
        MRTR_OAUTH_ISSUER=ISSUER, MRTR_OAUTH_RESOURCE=RESOURCE, MRTR_OAUTH_SCOPES="mcp, tools"
    )
    assert made.oauth == ResourceServerSettings(ISSUER, RESOURCE, ("mcp", "tools"))
    assert http_settings().oauth is None
    with pytest.raises(ValueError, match="needs both"):
        http_settings(MRTR_OAUTH_ISSUER=ISSUER)
    with pytest.raises(ValueError, match="without MRTR_OAUTH_ISSUER"):
        http_settings(MRTR_OAUTH_SCOPES="mcp")
    with pytest.raises(ValueError, match="cannot be combined"):
        http_settings(MRTR_OAUTH_ISSUER=ISSUER, MRTR_OAUTH_RESOURCE=RESOURCE, MRTR_HTTP_TOKEN="t")


def test_tool_scopes_are_declared_as_scope_tokens() -> None:
    registry = Registry()
    with pytest.raises(TypeError, match="collection of scope names"):
        registry.tool(scopes="deploy")
    with pytest.raises(ValueError, match="not an OAuth scope token"):
        registry.tool(scopes=["has space"])


# -- the authorization server's keys --------------------------------------------------------------


class FakeAuthorizationServer:
    """Serves metadata and a JWK Set from dicts, counting fetches; `down` refuses them all."""

    def __init__(self, keys: Mapping[str, Json], *, oidc_only: bool = False) -> None:
        self.keys = dict(keys)
        self.oidc_only = oidc_only
        self.down = False
        self.fetches: Counter[str] = Counter()
        self.issuer = ISSUER

    def fetch(self, url: str) -> dict[str, Any]:
        self.fetches[url] += 1
        if self.down:
            raise AuthorizationServerUnavailable(f"{url} cannot be reached: refused")
        if url == ISSUER + "/jwks":
            return {"keys": list(self.keys.values())}
        oidc = url == ISSUER + "/.well-known/openid-configuration"
        rfc_8414 = url == ISSUER + "/.well-known/oauth-authorization-server"
        if (rfc_8414 and not self.oidc_only) or oidc:
            return {"issuer": self.issuer, "jwks_uri": ISSUER + "/jwks"}
        raise AuthorizationServerUnavailable(f"{url} answered HTTP 404")


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def authority_over(fake: FakeAuthorizationServer, clock: Clock | None = None) -> BearerAuthority:
    server = AuthorizationServer(ISSUER, fetch=fake.fetch, clock=clock or Clock())
    return BearerAuthority(SETTINGS, server)


def test_metadata_is_looked_for_as_rfc_8414_then_openid_connect_say() -> None:
    assert metadata_urls("https://auth.example.com/tenant/") == (
        "https://auth.example.com/.well-known/oauth-authorization-server/tenant",
        "https://auth.example.com/tenant/.well-known/openid-configuration",
        "https://auth.example.com/.well-known/openid-configuration/tenant",
    )


@pytest.mark.anyio
async def test_a_server_with_only_openid_discovery_is_found() -> None:
    fake = FakeAuthorizationServer(KEYS, oidc_only=True)
    grant = await authority_over(fake).authorise(f"Bearer {token()}")
    assert isinstance(grant, Grant)
    assert fake.fetches[ISSUER + "/.well-known/openid-configuration"] == 1


@pytest.mark.anyio
async def test_metadata_naming_another_issuer_is_not_used() -> None:
    # RFC 8414 section 3.3: the issuer in the document MUST be the one asked about (mix-up).
    fake = FakeAuthorizationServer(KEYS)
    fake.issuer = "https://evil.example.com"
    verdict = await authority_over(fake).authorise(f"Bearer {token()}")
    assert isinstance(verdict, AuthorizationServerUnavailable)
    assert "names the issuer 'https://evil.example.com'" in str(verdict)
    assert ISSUER + "/jwks" not in fake.fetches


@pytest.mark.anyio
async def test_keys_are_fetched_once_and_again_only_for_a_new_kid_at_most_so_often() -> None:
    fake = FakeAuthorizationServer({"rsa-1": KEYS["rsa-1"]})
    clock = Clock()
    authority = authority_over(fake, clock)
    for _ in range(5):
        assert isinstance(await authority.authorise(f"Bearer {token()}"), Grant)
    assert fake.fetches[ISSUER + "/jwks"] == 1
    # Invented kids: one fetch (the interval since the first has passed), then none until it
    # has passed again.
    clock.now += REFRESH_INTERVAL_SECONDS
    for number in range(10):
        verdict = await authority.authorise(f"Bearer {token(kid=f'made-up-{number}')}")
        assert isinstance(verdict, TokenRefused) and verdict.status == 401
    assert fake.fetches[ISSUER + "/jwks"] == 2
    clock.now += REFRESH_INTERVAL_SECONDS
    await authority.authorise(f"Bearer {token(kid='made-up-again')}")
    assert fake.fetches[ISSUER + "/jwks"] == 3


@pytest.mark.anyio
async def test_after_a_rotation_the_new_key_verifies_and_the_withdrawn_one_does_not() -> None:
    fake = FakeAuthorizationServer({"rsa-1": KEYS["rsa-1"]})
    clock = Clock()
    authority = authority_over(fake, clock)
    old = token()
    assert isinstance(await authority.authorise(f"Bearer {old}"), Grant)
    fake.keys = {"rsa-2": public_jwk(OTHER_RSA_KEY, "rsa-2")}
    clock.now += REFRESH_INTERVAL_SECONDS
    new = token(key=OTHER_RSA_KEY, kid="rsa-2")
    assert isinstance(await authority.authorise(f"Bearer {new}"), Grant)
    replayed = await authority.authorise(f"Bearer {old}")
    assert isinstance(replayed, TokenRefused) and replayed.status == 401
    assert "does not know" in replayed.description


@pytest.mark.anyio
async def test_garbage_and_a_down_server_cost_the_authorization_server_one_fetch_per_interval() -> (
    None
):
    fake = FakeAuthorizationServer(KEYS)
    fake.down = True
    clock = Clock()
    authority = authority_over(fake, clock)
    for _ in range(50):
        assert isinstance(await authority.authorise("Bearer not-a-jwt"), TokenRefused)
    assert sum(fake.fetches.values()) == 0
    for _ in range(50):
        verdict = await authority.authorise(f"Bearer {token()}")
        assert isinstance(verdict, AuthorizationServerUnavailable)
    # One attempt (the metadata URLs it tries), then the failure is the answer until the
    # interval has passed since the attempt ended.
    attempts = sum(fake.fetches.values())
    assert attempts == 2
    clock.now += REFRESH_INTERVAL_SECONDS
    await authority.authorise(f"Bearer {token()}")
    assert sum(fake.fetches.values()) == 2 * attempts


@pytest.mark.anyio
async def test_keys_past_twice_their_age_never_serve_even_between_attempts() -> None:
    fake = FakeAuthorizationServer(KEYS)
    clock = Clock()
    authority = authority_over(fake, clock)
    assert isinstance(await authority.authorise(f"Bearer {token()}"), Grant)
    fake.down = True
    clock.now += 2 * KEYS_MAX_AGE_SECONDS
    for _ in range(5):
        verdict = await authority.authorise(f"Bearer {token(claims(jti=str(_)))}")
        assert isinstance(verdict, AuthorizationServerUnavailable)


@pytest.mark.anyio
async def test_a_jwks_uri_over_plain_http_to_another_host_is_not_used() -> None:
    fake = FakeAuthorizationServer(KEYS)

    def fetch(url: str) -> dict[str, Any]:
        if url.endswith("oauth-authorization-server"):
            return {"issuer": ISSUER, "jwks_uri": "http://192.0.2.2/jwks"}
        return fake.fetch(url)

    server = AuthorizationServer(ISSUER, fetch=fetch, clock=Clock())
    verdict = await BearerAuthority(SETTINGS, server).authorise(f"Bearer {token()}")
    assert isinstance(verdict, AuthorizationServerUnavailable)
    assert "must use https" in str(verdict)


class SlowOrWandering(http.server.BaseHTTPRequestHandler):
    """/drip sends a byte now and then for ever; /away redirects to another port."""

    def do_GET(self) -> None:
        if self.path == "/away":
            self.send_response(302)
            self.send_header("Location", "http://127.0.0.1:9/jwks")
            self.end_headers()
            return
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        try:
            for _ in range(100):
                self.wfile.write(b" ")
                self.wfile.flush()
                time.sleep(0.1)
        except OSError:
            pass

    def log_message(self, format: str, *args: Any) -> None:
        pass


@contextlib.contextmanager
def serving(handler: type[http.server.BaseHTTPRequestHandler]) -> Iterator[str]:
    """`handler` served on a loopback port in a thread, for as long as the block runs: its
    base URL."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def test_a_fetch_is_bounded_in_time_and_stays_in_its_origin(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(authorization_module, "FETCH_TIMEOUT_SECONDS", 0.5)
    with serving(SlowOrWandering) as base:
        started = time.monotonic()
        with pytest.raises(AuthorizationServerUnavailable, match="did not answer within"):
            authorization_module._fetch_json(base + "/drip")
        assert time.monotonic() - started < 2
        with pytest.raises(AuthorizationServerUnavailable, match="another origin"):
            authorization_module._fetch_json(base + "/away")


@pytest.mark.anyio
async def test_an_unreachable_authorization_server_is_a_503_with_retry_after() -> None:
    fake = FakeAuthorizationServer(KEYS)
    fake.down = True
    verdict = await authority_over(fake).authorise(f"Bearer {token()}")
    assert isinstance(verdict, AuthorizationServerUnavailable)
    answer = oauth_refusal(SETTINGS, verdict)
    assert answer.status == 503
    assert dict(answer.headers)[b"retry-after"] == b"5"


@pytest.mark.anyio
async def test_keys_at_hand_serve_through_an_outage_until_twice_their_age() -> None:
    fake = FakeAuthorizationServer(KEYS)
    clock = Clock()
    authority = authority_over(fake, clock)
    assert isinstance(await authority.authorise(f"Bearer {token()}"), Grant)
    fake.down = True
    clock.now += KEYS_MAX_AGE_SECONDS + 1
    assert isinstance(await authority.authorise(f"Bearer {token()}"), Grant)
    clock.now += KEYS_MAX_AGE_SECONDS
    verdict = await authority.authorise(f"Bearer {token()}")
    assert isinstance(verdict, AuthorizationServerUnavailable)


@pytest.mark.anyio
async def test_a_token_verified_once_is_remembered_until_it_expires_or_the_keys_change(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    reads: Counter[str] = Counter()
    real_read = authorization_module.read_access_token

    def counted(access_token: str, *args: Any) -> Grant:
        reads[access_token] += 1
        return real_read(access_token, *args)

    monkeypatch.setattr(authorization_module, "read_access_token", counted)
    fake = FakeAuthorizationServer({"rsa-1": KEYS["rsa-1"]})
    clock = Clock()
    wall = [time.time()]
    server = AuthorizationServer(ISSUER, fetch=fake.fetch, clock=clock)
    authority = BearerAuthority(SETTINGS, server, wall_clock=lambda: wall[0])
    short = token(claims(exp=int(wall[0]) + 60))
    for _ in range(3):
        assert isinstance(await authority.authorise(f"Bearer {short}"), Grant)
    assert reads[short] == 1
    # A different token (one character of its signature changed) is read, and refused.
    forged = short[:-2] + ("A" if short[-2] != "A" else "B") + short[-1]
    assert isinstance(await authority.authorise(f"Bearer {forged}"), TokenRefused)
    # Past its exp (and the skew), the remembered grant is not used: the token is read again.
    wall[0] += 60 + 31
    await authority.authorise(f"Bearer {short}")
    assert reads[short] == 2
    # Keys fetched again (here: stale) forget every grant read with the old ones.
    other = token()
    await authority.authorise(f"Bearer {other}")
    clock.now += KEYS_MAX_AGE_SECONDS + 1
    await authority.authorise(f"Bearer {other}")
    assert reads[other] == 2


@pytest.mark.anyio
@pytest.mark.parametrize("header", [None, "", "Basic dXNlcjpwYXNz", "Bearer", "Bearer a b"])
async def test_a_request_without_a_bearer_token_gets_the_challenge(header: str | None) -> None:
    verdict = await authority_over(FakeAuthorizationServer(KEYS)).authorise(header)
    assert isinstance(verdict, TokenRefused)
    answer = oauth_refusal(SETTINGS, verdict)
    assert answer.status == 401
    # RFC 6750 section 3: no error code when no token was presented.
    assert dict(answer.headers)[b"www-authenticate"] == challenge(SETTINGS, scopes=["mcp"])


# -- the app -------------------------------------------------------------------------------------


def scoped_server(calls: Counter[str]) -> Server:
    registry = Registry()

    @registry.tool(scopes=["deploy"])
    async def deploy(stack: str) -> str:
        calls["deploy"] += 1
        return f"deployed {stack}"

    @registry.tool
    async def whoami(*, ctx: Context) -> str:
        calls["whoami"] += 1
        return "ok"

    return make_server(registry=registry)


def oauth_app(calls: Counter[str], fake: FakeAuthorizationServer) -> HttpApp:
    # Bound to every interface, as behind a load balancer: the Host is the public name.
    public = HttpSettings(host="0.0.0.0", oauth=SETTINGS)  # noqa: S104
    app = HttpApp(scoped_server(calls), public)
    app.authority = authority_over(fake)
    return app


def bearer(access_token: str) -> dict[str, str]:
    return {"authorization": f"Bearer {access_token}", "host": "mcp.example.com"}


@pytest.mark.anyio
async def test_the_endpoint_asks_for_a_token_and_the_metadata_says_where_to_get_one() -> None:
    calls: Counter[str] = Counter()
    client = Client(oauth_app(calls, FakeAuthorizationServer(KEYS)))
    refused_call = await client.rpc("tools/call", {"name": "whoami", "arguments": {}})
    assert refused_call.status == 401
    assert refused_call.headers["www-authenticate"] == challenge(SETTINGS, scopes=["mcp"]).decode()
    metadata = await client.post(b"", method="GET", path=SETTINGS.metadata_path)
    assert metadata.status == 200
    assert metadata.json()["scopes_supported"] == ["mcp", "deploy"]
    posted = await client.post(b"{}", path=SETTINGS.metadata_path)
    assert posted.status == 405
    assert calls == Counter()


@pytest.mark.anyio
async def test_a_tool_needing_a_scope_the_token_lacks_is_a_403_before_it_runs() -> None:
    calls: Counter[str] = Counter()
    client = Client(oauth_app(calls, FakeAuthorizationServer(KEYS)))
    narrow = token(claims(scope="mcp"))
    call = {"name": "deploy", "arguments": {"stack": "prod"}}
    forbidden = await client.rpc("tools/call", call, headers=bearer(narrow))
    assert forbidden.status == 403
    header = forbidden.headers["www-authenticate"]
    assert 'error="insufficient_scope"' in header and 'scope="deploy"' in header
    assert calls["deploy"] == 0
    allowed = await client.rpc("tools/call", call, headers=bearer(token()))
    assert allowed.status == 200
    assert allowed.json()["result"]["content"][0]["text"] == "deployed prod"
    other = await client.rpc(
        "tools/call", {"name": "whoami", "arguments": {}}, headers=bearer(narrow)
    )
    assert other.status == 200 and calls == Counter({"deploy": 1, "whoami": 1})


@pytest.mark.anyio
async def test_a_tool_is_listed_to_a_token_without_its_scope_so_the_host_can_step_up() -> None:
    # 2026-07-28 basic/authorization, step-up: the client learns a tool's scope from the 403 on
    # calling it and asks its user for it. A list without the tool would leave the host no call
    # to make and so no challenge to follow: the tool would be unreachable until a new login.
    calls: Counter[str] = Counter()
    client = Client(oauth_app(calls, FakeAuthorizationServer(KEYS)))
    listed = await client.rpc("tools/list", {}, headers=bearer(token(claims(scope="mcp"))))
    assert listed.status == 200
    assert "deploy" in [tool["name"] for tool in listed.json()["result"]["tools"]]
    assert calls == Counter()


@pytest.mark.anyio
async def test_a_refused_token_runs_nothing_and_says_why() -> None:
    calls: Counter[str] = Counter()
    client = Client(oauth_app(calls, FakeAuthorizationServer(KEYS)))
    expired = token(claims(exp=int(time.time()) - 120))
    answer = await client.rpc(
        "tools/call", {"name": "whoami", "arguments": {}}, headers=bearer(expired)
    )
    assert answer.status == 401
    assert "expired" in answer.json()["error"]["message"]
    assert calls == Counter()


@pytest.mark.anyio
async def test_an_outage_with_no_keys_is_a_503_and_runs_nothing() -> None:
    calls: Counter[str] = Counter()
    fake = FakeAuthorizationServer(KEYS)
    fake.down = True
    client = Client(oauth_app(calls, fake))
    answer = await client.rpc(
        "tools/call", {"name": "whoami", "arguments": {}}, headers=bearer(token())
    )
    assert answer.status == 503
    assert answer.headers["retry-after"] == "5"
    assert calls == Counter()


@pytest.mark.anyio
async def test_a_slow_authorization_server_does_not_stop_the_event_loop() -> None:
    # The fetch runs in a worker thread: the event loop keeps serving meanwhile.
    fake = FakeAuthorizationServer(KEYS)
    slow = fake.fetch

    def fetch(url: str) -> dict[str, Any]:
        time.sleep(0.2)
        return slow(url)

    server = AuthorizationServer(ISSUER, fetch=fetch)
    authority = BearerAuthority(SETTINGS, server)
    ticks = 0

    async def tick() -> None:
        nonlocal ticks
        for _ in range(10):
            await anyio.sleep(0.01)
            ticks += 1

    async with anyio.create_task_group() as group:
        group.start_soon(tick)
        verdicts = [await authority.authorise(f"Bearer {token()}")]
    assert isinstance(verdicts[0], Grant)
    assert ticks == 10
