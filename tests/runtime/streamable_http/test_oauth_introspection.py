"""Opaque access tokens (RFC 7662 token introspection): the resource server asks the authorization
server about a token it cannot read, as a client of its own, and holds the answer to every check a
JWT gets (active, issuer, audience = this server, expiry, not-before, scopes). Answers that grant
are kept a bounded time; a flood of made-up tokens is a bounded load on the authorization server.
The same flow against a real authorization server: tests/deployments/test_oauth_resource_server.py.
"""

from __future__ import annotations

import base64
import hashlib
import http.server
import json
import socket
import threading
import time
from collections import Counter
from collections.abc import Iterator, Mapping
from typing import Any, ClassVar
from urllib.parse import parse_qs, unquote_plus

import anyio
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_oauth import (
    ISSUER,
    KEYS,
    RESOURCE,
    SETTINGS,
    Clock,
    FakeAuthorizationServer,
    http_settings,
    serving,
    token,
)

from mrtr_runtime._redact import redact_secrets, treat_as_secret
from mrtr_runtime.http import _authorization_server as authorization_module
from mrtr_runtime.http._authorization_server import (
    INTROSPECTIONS_PER_SECOND,
    MAX_CONCURRENT_INTROSPECTIONS,
    REFRESH_INTERVAL_SECONDS,
    AuthorizationServer,
    AuthorizationServerUnavailable,
    BearerAuthority,
    Introspector,
)
from mrtr_runtime.http._oauth import (
    CLOCK_SKEW_SECONDS,
    Grant,
    IntrospectionClient,
    ResourceServerSettings,
    TokenRefused,
    read_introspection,
)
from mrtr_runtime.http._rules import oauth_refusal

Json = dict[str, Any]
CLIENT = IntrospectionClient("mcp-server", "s3cret:with/odd&chars", cache_seconds=60)
INTROSPECTING = ResourceServerSettings.from_values(
    issuer=ISSUER, resource=RESOURCE, scopes=["mcp"], introspection=CLIENT
)
ENDPOINT = ISSUER + "/token/introspection"
NOW = 1_800_000_000.0


def active(**changes: Any) -> Json:
    """An introspection response (RFC 7662 section 2.2) for a token of alice's, as
    oidc-provider sends one; `None` drops a member."""
    found: Json = {
        "active": True,
        "iss": ISSUER,
        "sub": "alice",
        "client_id": "claude-code",
        "aud": RESOURCE,
        "scope": "mcp deploy",
        "token_type": "Bearer",
        "iat": int(NOW) - 10,
        "exp": int(NOW) + 600,
    }
    found.update(changes)
    return {name: value for name, value in found.items() if value is not None}


# -- reading an answer --------------------------------------------------------------------------


def test_an_active_answer_grants_its_subject_client_and_scopes() -> None:
    grant = read_introspection(active(), INTROSPECTING, now=NOW)
    assert grant == Grant("alice", "claude-code", frozenset({"mcp", "deploy"}), NOW + 600)
    # The same principal a JWT with those claims gives: requestState and tasks stay bound to it.
    assert grant.principal == 'oauth:["alice","claude-code"]'


def test_an_answer_without_a_subject_is_refused_so_users_of_one_client_stay_apart() -> None:
    # RFC 7662 section 2.2 makes `sub` optional. Taking the client for the subject would make
    # alice and bob, signed in through one host, one principal: each could finish the other's
    # rounds and read the other's tasks. A client credentials token names its client as `sub`.
    for user in ("alice", "bob"):
        answer = active(sub=None, username=user)
        with pytest.raises(TokenRefused, match=r"names no subject \(sub\)"):
            read_introspection(answer, INTROSPECTING, now=NOW)
    machine = read_introspection(active(sub="claude-code"), INTROSPECTING, now=NOW)
    assert machine.principal == 'oauth:["claude-code","claude-code"]'


@pytest.mark.parametrize(
    ("changes", "why"),
    [
        ({"active": False}, "not active"),
        ({"active": "true"}, "not active"),
        ({"active": None}, "not active"),
        ({"iss": "https://evil.example.com"}, "another authorization server"),
        ({"token_type": "refresh_token"}, "not a bearer access token"),
        ({"token_type": 5}, "not a bearer access token"),
        ({"token_type": "DPoP"}, "not a bearer access token"),
        ({"token_type": "refresh"}, "not a bearer access token"),
        # ORY Hydra: a refresh token carries this server's audience and no token_type.
        ({"token_type": None, "token_use": "refresh_token"}, "not a bearer access token"),
        # Keycloak: typ says what kind of token it is.
        ({"token_type": None, "typ": "Refresh"}, "not a bearer access token"),
        ({"cnf": {"jkt": "0ZcOCORZNYy-DWpqq30jZyJGHTN0d2HglBV3uiguA4I"}}, "bound to a key"),
        (
            {
                "token_type": None,
                "cnf": {"x5t#S256": "bwcK0esc3ACC3DB2Y5_lESsXE8o9ltc05O89jdN-dg2"},
            },
            "bound to a key",
        ),
        ({"aud": "https://other.example.com/mcp"}, "another resource"),
        ({"aud": None}, "no audience"),
        ({"exp": int(NOW) - CLOCK_SKEW_SECONDS - 1}, "expired"),
        ({"exp": None}, "exp is not a time"),
        ({"exp": "soon"}, "exp is not a time"),
        ({"exp": str(int(NOW) + 600)}, "exp is not a time"),
        ({"exp": True}, "exp is not a time"),
        ({"exp": 10**400}, "exp is not a time"),
        ({"nbf": float("nan")}, "nbf is not a time"),
        ({"nbf": float("-inf")}, "nbf is not a time"),
        ({"exp": float("nan")}, "exp is not a time"),
        ({"exp": float("inf")}, "exp is not a time"),
        ({"nbf": int(NOW) + CLOCK_SKEW_SECONDS + 1}, "not valid yet"),
        ({"nbf": "later"}, "nbf is not a time"),
        ({"sub": 7}, "subject is not a string"),
        ({"sub": ""}, "subject is not a string"),
        ({"client_id": ""}, "client_id is not a string"),
    ],
)
def test_an_answer_failing_a_check_is_refused_saying_which(changes: Json, why: str) -> None:
    with pytest.raises(TokenRefused) as caught:
        read_introspection(active(**changes), INTROSPECTING, now=NOW)
    assert caught.value.status == 401 and caught.value.error == "invalid_token"
    assert why in caught.value.description


def test_an_inactive_answer_is_refused_whatever_else_it_says() -> None:
    # Section 2.2: an inactive token's other members mean nothing, grants least of all.
    with pytest.raises(TokenRefused, match="not active"):
        read_introspection(active(active=False, scope="mcp deploy admin"), INTROSPECTING, now=NOW)


def test_an_access_token_may_say_so_in_each_way_servers_say_it() -> None:
    for marks in (
        {"token_type": "Bearer"},
        {"token_type": "access_token"},  # not RFC 7662's value, but what some servers send
        {"token_type": None, "token_use": "access_token"},
        {"token_type": None, "typ": "Bearer"},
        {"token_type": None},  # saying nothing refuses nothing
    ):
        assert read_introspection(active(**marks), INTROSPECTING, now=NOW).subject == "alice"


def test_the_skew_is_allowed_both_ways() -> None:
    at_edge = active(exp=int(NOW) - CLOCK_SKEW_SECONDS, nbf=int(NOW) + CLOCK_SKEW_SECONDS)
    assert read_introspection(at_edge, INTROSPECTING, now=NOW).subject == "alice"


def test_an_answer_without_every_requests_scope_is_a_403() -> None:
    with pytest.raises(TokenRefused) as caught:
        read_introspection(active(scope="deploy"), INTROSPECTING, now=NOW)
    assert caught.value.status == 403 and caught.value.scopes == ("mcp",)


@settings(max_examples=300, deadline=None)
@given(
    st.dictionaries(
        st.sampled_from(["active", "iss", "sub", "client_id", "aud", "scope", "exp", "nbf"]),
        st.none()
        | st.booleans()
        | st.integers(-(2**70), 2**70)
        | st.floats()
        | st.text(max_size=30)
        | st.lists(st.text(max_size=10), max_size=3),
    )
)
def test_any_answer_is_a_grant_or_a_refusal(changes: Json) -> None:
    # An authorization server's odd answer never escapes as anything but TokenRefused.
    try:
        grant = read_introspection(active(**changes), INTROSPECTING, now=NOW)
    except TokenRefused:
        return
    assert isinstance(grant.subject, str) and grant.expires_at + CLOCK_SKEW_SECONDS >= NOW


# -- asking the authorization server -----------------------------------------------------------


class IntrospectingServer(FakeAuthorizationServer):
    """The fake authorization server with an introspection endpoint: `tokens` maps an opaque
    token to its answer (unknown: inactive); `posts` counts the questions; every post must
    authenticate as CLIENT."""

    def __init__(self, *, endpoint: bool = True) -> None:
        super().__init__(KEYS)
        self.endpoint = endpoint
        self.tokens: dict[str, Json] = {}
        self.posts: Counter[str] = Counter()

    def fetch(self, url: str) -> dict[str, Any]:
        found = super().fetch(url)
        if "issuer" in found and self.endpoint:
            found["introspection_endpoint"] = ENDPOINT
        return found

    def post(self, url: str, form: Mapping[str, str], client: IntrospectionClient) -> Json:
        assert url == ENDPOINT
        assert (client.client_id, client.client_secret) == (CLIENT.client_id, CLIENT.client_secret)
        assert form["token_type_hint"] == "access_token"
        self.posts[form["token"]] += 1
        if self.down:
            raise AuthorizationServerUnavailable(f"{url} cannot be reached: refused")
        return self.tokens.get(form["token"], {"active": False})


def introspecting(
    fake: IntrospectingServer, clock: Clock, wall: list[float], *, cache_seconds: int = 60
) -> BearerAuthority:
    client = IntrospectionClient(CLIENT.client_id, CLIENT.client_secret, cache_seconds)
    settings = ResourceServerSettings.from_values(
        issuer=ISSUER, resource=RESOURCE, scopes=["mcp"], introspection=client
    )
    server = AuthorizationServer(ISSUER, fetch=fake.fetch, clock=clock)
    introspector = Introspector(
        server, settings, client, post=fake.post, clock=clock, wall_clock=lambda: wall[0]
    )
    return BearerAuthority(settings, server, wall_clock=lambda: wall[0], introspector=introspector)


@pytest.mark.anyio
async def test_an_opaque_token_is_asked_about_once_then_again_after_the_cache() -> None:
    fake = IntrospectingServer()
    fake.tokens["opaque-1"] = active()
    clock, wall = Clock(), [NOW]
    authority = introspecting(fake, clock, wall)
    for _ in range(5):
        grant = await authority.authorise("Bearer opaque-1")
        assert isinstance(grant, Grant) and grant.subject == "alice"
    assert fake.posts["opaque-1"] == 1
    # Revoked at the authorization server: noticed once the kept answer is 60 s old.
    fake.tokens["opaque-1"] = {"active": False}
    clock.now += 59
    assert isinstance(await authority.authorise("Bearer opaque-1"), Grant)
    clock.now += 1
    revoked = await authority.authorise("Bearer opaque-1")
    assert isinstance(revoked, TokenRefused) and "not active" in revoked.description
    assert fake.posts["opaque-1"] == 2


@pytest.mark.anyio
async def test_a_kept_answer_never_outlives_its_token() -> None:
    fake = IntrospectingServer()
    fake.tokens["short"] = active(exp=int(NOW) + 5)
    clock, wall = Clock(), [NOW]
    authority = introspecting(fake, clock, wall)
    assert isinstance(await authority.authorise("Bearer short"), Grant)
    wall[0] += 5 + CLOCK_SKEW_SECONDS + 1
    expired = await authority.authorise("Bearer short")
    assert isinstance(expired, TokenRefused) and "expired" in expired.description
    assert fake.posts["short"] == 2


@pytest.mark.anyio
async def test_with_no_cache_every_request_asks() -> None:
    fake = IntrospectingServer()
    fake.tokens["opaque"] = active()
    authority = introspecting(fake, Clock(), [NOW], cache_seconds=0)
    for _ in range(3):
        assert isinstance(await authority.authorise("Bearer opaque"), Grant)
    assert fake.posts["opaque"] == 3


@pytest.mark.anyio
async def test_a_refused_answer_is_not_kept_and_garbage_is_never_sent() -> None:
    fake = IntrospectingServer()
    authority = introspecting(fake, Clock(), [NOW])
    for _ in range(3):
        verdict = await authority.authorise("Bearer made-up")
        assert isinstance(verdict, TokenRefused) and verdict.status == 401
    assert fake.posts["made-up"] == 3
    # Not a bearer token's characters, or too long: refused before anyone is asked.
    for bad in ("Bearer a\x00b", "Bearer a,b", "Bearer " + "a" * 8193, "Bearer =abc"):
        verdict = await authority.authorise(bad)
        assert isinstance(verdict, TokenRefused) and verdict.status == 401
    assert sum(fake.posts.values()) == 3


@pytest.mark.anyio
async def test_jwts_are_still_read_with_the_keys_and_never_sent() -> None:
    fake = IntrospectingServer()
    authority = introspecting(fake, Clock(), [time.time()])
    assert isinstance(await authority.authorise(f"Bearer {token()}"), Grant)
    forged = await authority.authorise("Bearer a.b.c")
    assert isinstance(forged, TokenRefused) and "not a signed JWT" in forged.description
    assert sum(fake.posts.values()) == 0


@pytest.mark.anyio
async def test_opaque_tokens_are_refused_unsent_when_no_client_is_configured() -> None:
    fake = IntrospectingServer()
    server = AuthorizationServer(ISSUER, fetch=fake.fetch, clock=Clock())
    verdict = await BearerAuthority(SETTINGS, server).authorise("Bearer opaque")
    assert isinstance(verdict, TokenRefused) and "not a signed JWT" in verdict.description
    assert sum(fake.posts.values()) == 0 and sum(fake.fetches.values()) == 0


@pytest.mark.anyio
async def test_metadata_without_an_introspection_endpoint_is_a_503_asked_again_later() -> None:
    fake = IntrospectingServer(endpoint=False)
    fake.tokens["opaque"] = active()
    clock = Clock()
    authority = introspecting(fake, clock, [NOW])
    for _ in range(5):
        verdict = await authority.authorise("Bearer opaque")
        assert isinstance(verdict, AuthorizationServerUnavailable)
        assert "names no usable introspection_endpoint" in str(verdict)
    assert fake.fetches[ISSUER + "/.well-known/oauth-authorization-server"] == 1
    fake.endpoint = True
    clock.now += REFRESH_INTERVAL_SECONDS
    assert isinstance(await authority.authorise("Bearer opaque"), Grant)


@pytest.mark.anyio
async def test_finding_the_endpoint_does_not_hold_back_the_first_fetch_of_keys() -> None:
    # Both come from one metadata document; a JWT right after an opaque token is still read.
    fake = IntrospectingServer()
    fake.tokens["opaque"] = active()
    authority = introspecting(fake, Clock(), [time.time()])
    fake.tokens["opaque"] = active(exp=int(time.time()) + 600)
    assert isinstance(await authority.authorise("Bearer opaque"), Grant)
    assert isinstance(await authority.authorise(f"Bearer {token()}"), Grant)


@pytest.mark.anyio
async def test_an_authorization_server_that_does_not_answer_is_a_503() -> None:
    fake = IntrospectingServer()
    fake.tokens["opaque"] = active()
    authority = introspecting(fake, Clock(), [NOW])
    fake.down = True
    verdict = await authority.authorise("Bearer opaque")
    assert isinstance(verdict, AuthorizationServerUnavailable)


class InFlight:
    """A question that takes `seconds`, counting how many are asked at once (`now`, `most`)."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.now = self.most = 0
        self._lock = threading.Lock()

    def __call__(self, url: str, form: Mapping[str, str], client: IntrospectionClient) -> Json:
        with self._lock:
            self.now += 1
            self.most = max(self.most, self.now)
        time.sleep(self.seconds)
        with self._lock:
            self.now -= 1
        return active(sub=form["token"])


@pytest.mark.anyio
async def test_introspections_in_flight_are_bounded_and_the_rest_wait_their_turn(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    fake = IntrospectingServer()
    asked = InFlight(0.05)
    monkeypatch.setattr(fake, "post", asked)
    # The rate bound is another test's: here only the turns bound.
    monkeypatch.setattr(authorization_module, "INTROSPECTIONS_PER_SECOND", 10_000)
    authority = introspecting(fake, Clock(), [NOW])
    verdicts: list[object] = []

    async def ask(number: int) -> None:
        verdicts.append(await authority.authorise(f"Bearer made-up-{number}"))

    # Ten times the bound, at once: all are answered, never more than the bound at a time.
    async with anyio.create_task_group() as group:
        for number in range(10 * MAX_CONCURRENT_INTROSPECTIONS):
            group.start_soon(ask, number)
    assert asked.most == MAX_CONCURRENT_INTROSPECTIONS
    assert len(verdicts) == 10 * MAX_CONCURRENT_INTROSPECTIONS
    assert all(isinstance(verdict, Grant) for verdict in verdicts)


@pytest.mark.anyio
async def test_questions_that_outlive_their_request_still_hold_their_turn(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Before: a question that took too long gave its turn back when its request got its 503,
    # while its thread went on asking: a slow authorization server saw 18 at once of a bound
    # of 8, and threads grew without end under a flood.
    monkeypatch.setattr(authorization_module, "FETCH_TIMEOUT_SECONDS", 0.1)
    fake = IntrospectingServer()
    asked = InFlight(1.5)  # longer than a request waits (FETCH_TIMEOUT_SECONDS and a second)
    monkeypatch.setattr(fake, "post", asked)
    monkeypatch.setattr(authorization_module, "INTROSPECTIONS_PER_SECOND", 10_000)
    authority = introspecting(fake, Clock(), [NOW])
    verdicts: list[object] = []

    async def ask(number: int) -> None:
        await anyio.sleep(number * 0.03)  # arriving while earlier ones give up
        verdicts.append(await authority.authorise(f"Bearer made-up-{number}"))

    async with anyio.create_task_group() as group:
        for number in range(10 * MAX_CONCURRENT_INTROSPECTIONS):
            group.start_soon(ask, number)
    assert asked.most <= MAX_CONCURRENT_INTROSPECTIONS
    assert len(verdicts) == 10 * MAX_CONCURRENT_INTROSPECTIONS
    assert any(isinstance(verdict, AuthorizationServerUnavailable) for verdict in verdicts)
    await anyio.sleep(1.6)  # the last threads end; every turn is back
    assert asked.now == 0
    assert authority.introspector is not None
    assert authority.introspector._turns._value == MAX_CONCURRENT_INTROSPECTIONS


@pytest.mark.anyio
async def test_new_tokens_are_asked_about_at_a_bounded_rate_and_known_ones_still_pass() -> None:
    fake = IntrospectingServer()
    fake.tokens["known"] = active()
    clock = Clock()
    authority = introspecting(fake, clock, [NOW])
    assert isinstance(await authority.authorise("Bearer known"), Grant)
    burst = 2 * INTROSPECTIONS_PER_SECOND
    # Ten times the burst of made-up tokens at one instant: the burst is asked, the rest 503.
    verdicts = [await authority.authorise(f"Bearer made-up-{n}") for n in range(10 * burst)]
    asked = sum(count for token, count in fake.posts.items() if token != "known")
    assert asked == burst - 1  # the known token's question came out of the same bucket
    unavailable = [v for v in verdicts if isinstance(v, AuthorizationServerUnavailable)]
    assert len(unavailable) == 10 * burst - (burst - 1)
    assert "new tokens a second" in str(unavailable[0])
    assert isinstance(await authority.authorise("Bearer known"), Grant)
    clock.now += 1
    await authority.authorise("Bearer made-up-later")
    assert fake.posts["made-up-later"] == 1
    answer = oauth_refusal(INTROSPECTING, unavailable[0])
    assert answer.status == 503 and dict(answer.headers)[b"retry-after"] == b"1"
    assert "too many new tokens" in answer.message


@pytest.mark.anyio
async def test_a_flood_of_made_up_tokens_never_holds_back_a_token_vouched_for_before() -> None:
    # Before: once its kept answer was stale (60 s, or at once with no cache), a user's token
    # waited in the same queue as the flood's, and got 503 for as long as the flood lasted.
    fake = IntrospectingServer()
    fake.tokens["alice"] = active()
    clock = Clock()
    authority = introspecting(fake, clock, [NOW], cache_seconds=0)
    assert isinstance(await authority.authorise("Bearer alice"), Grant)
    for second in range(10):
        clock.now += 1
        for number in range(10 * INTROSPECTIONS_PER_SECOND):
            await authority.authorise(f"Bearer flood-{second}-{number}")
        assert isinstance(await authority.authorise("Bearer alice"), Grant)
        newcomer = await authority.authorise(f"Bearer newcomer-{second}")
        assert isinstance(newcomer, AuthorizationServerUnavailable)
    assert fake.posts["alice"] == 11  # asked every time (no cache), never held back


# -- the request itself ---------------------------------------------------------------------------


class Endpoint(http.server.BaseHTTPRequestHandler):
    """An introspection endpoint checking client_secret_basic: /ok answers, /denied is 401."""

    seen: ClassVar[list[tuple[str, Json]]] = []

    def do_POST(self) -> None:
        length = int(self.headers["Content-Length"])
        form = {
            name: values[0] for name, values in parse_qs(self.rfile.read(length).decode()).items()
        }
        scheme, _, encoded = self.headers["Authorization"].partition(" ")
        user, _, password = base64.b64decode(encoded).decode().partition(":")
        Endpoint.seen.append(
            (scheme, {"id": unquote_plus(user), "secret": unquote_plus(password), **form})
        )
        status = 200 if self.path == "/ok" else 401
        body = json.dumps(active() if status == 200 else {"error": "invalid_client"}).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture
def endpoint() -> Iterator[str]:
    with serving(Endpoint) as base:
        yield base


class Dripping(http.server.BaseHTTPRequestHandler):
    """/drip sends one header line now and then for ever; /garbled a status line that is not
    one; /truncated a chunked body that stops; /deep JSON nested past any parser's depth."""

    def do_POST(self) -> None:
        # The question read first: closing with it unread makes the kernel reset the connection,
        # which can reach the client before the answer it is reading (a flake, not the case).
        self.rfile.read(int(self.headers.get("Content-Length", "0")))
        if self.path == "/garbled":
            self.wfile.write(b"HTTP/9 nonsense\r\n\r\n")
            return
        if self.path == "/deep":
            body = b"[" * 100_000 + b"]" * 100_000
            self.wfile.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n")
            self.wfile.write(b"Content-Length: %d\r\n\r\n" % len(body) + body)
            return
        if self.path == "/deep-error":
            body = b"[" * 100_000
            self.wfile.write(b"HTTP/1.1 400 Bad Request\r\nContent-Type: application/json\r\n")
            self.wfile.write(b"Content-Length: %d\r\n\r\n" % len(body) + body)
            return
        if self.path == "/truncated-error":
            self.wfile.write(
                b"HTTP/1.1 502 Bad Gateway\r\nTransfer-Encoding: chunked\r\n\r\n40\r\n{"
            )
            self.wfile.flush()
            return
        if self.path == "/truncated":
            self.wfile.write(b'HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\n{"a"')
            self.wfile.flush()
            return
        self.wfile.write(b"HTTP/1.1 200 OK\r\n")
        try:
            for number in range(60):
                self.wfile.write(b"X-Wait-%d: 1\r\n" % number)
                self.wfile.flush()
                time.sleep(0.1)
        except OSError:
            pass

    def log_message(self, format: str, *args: Any) -> None:
        pass


def test_an_answer_is_cut_off_at_its_deadline_and_garbage_is_unavailable_not_a_crash(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Before: a socket timeout bounded each read only, so a server sending a header line now
    # and then held the question (and its turn) for ever; and http.client's own errors and a
    # parser's RecursionError escaped as a 500.
    monkeypatch.setattr(authorization_module, "FETCH_TIMEOUT_SECONDS", 0.5)
    form = {"token": "opaque", "token_type_hint": "access_token"}
    with serving(Dripping) as base:
        started = time.monotonic()
        with pytest.raises(AuthorizationServerUnavailable, match=r"did not answer within 0\.5 s"):
            authorization_module._post_form(base + "/drip", form, CLIENT)
        assert time.monotonic() - started < 2
        for path, said in (
            ("/garbled", "cannot be reached"),
            ("/truncated", "cannot be reached"),
            ("/deep", "did not send JSON"),
            ("/deep-error", "answered HTTP 400"),
            ("/truncated-error", "answered HTTP 502"),
        ):
            with pytest.raises(AuthorizationServerUnavailable, match=said):
                authorization_module._post_form(base + path, form, CLIENT)


def test_a_connection_made_after_the_deadline_is_ended_at_once() -> None:
    # A connect or a TLS handshake can outlast the deadline: the watchdog has then fired on
    # no socket, and the one that comes after must not escape it.
    ours, theirs = socket.socketpair()
    try:
        authorization_module._FETCH.sockets, authorization_module._FETCH.fired = [], [True]
        authorization_module._track(ours)
        theirs.settimeout(2)
        assert theirs.recv(1) == b""  # ended: the other side reads end of stream
    finally:
        authorization_module._FETCH.sockets = authorization_module._FETCH.fired = None
        ours.close()
        theirs.close()


def test_the_client_secret_is_redacted_however_many_secrets_come_after() -> None:
    # Before: it was one of the 256 most recent run-time secrets, and some 86 deploys (three
    # credentials each) pushed it out of the log's redaction.
    secret = "introspection-secret-0123456789"
    client = IntrospectionClient("mcp-server", secret)
    settings = ResourceServerSettings.from_values(
        issuer=ISSUER, resource=RESOURCE, introspection=client
    )
    Introspector(AuthorizationServer(ISSUER), settings, client)
    treat_as_secret(*(f"run-time-credential-{number:04d}" for number in range(10 * 256)))
    said = redact_secrets(f"answered HTTP 400: invalid_client bad secret {secret}")
    assert secret not in said


@pytest.mark.anyio
async def test_a_silent_authorization_server_is_waited_for_once_not_once_per_place(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # An issuer with a path has three places its metadata may be; each silent for the whole
    # fetch bound, a request waited three bounds. Now the places share one.
    monkeypatch.setattr(authorization_module, "FETCH_TIMEOUT_SECONDS", 0.3)

    def silent(url: str) -> Json:
        time.sleep(1.0)
        raise AuthorizationServerUnavailable(f"{url} did not answer")

    server = AuthorizationServer(ISSUER + "/tenant", fetch=silent, clock=Clock())
    started = time.monotonic()
    with pytest.raises(AuthorizationServerUnavailable, match="did not come in time"):
        await server.introspection_endpoint()
    assert time.monotonic() - started < 1.5


@pytest.mark.anyio
async def test_an_outage_under_load_is_one_log_line_per_interval(
    caplog: pytest.LogCaptureFixture,
) -> None:
    fake = IntrospectingServer()
    fake.down = True
    wall = [NOW]
    authority = introspecting(fake, Clock(), wall)
    with caplog.at_level("WARNING", logger="mrtr_runtime"):
        for number in range(50):
            verdict = await authority.authorise(f"Bearer made-up-{number}")
            assert isinstance(verdict, AuthorizationServerUnavailable)
        wall[0] += REFRESH_INTERVAL_SECONDS
        await authority.authorise("Bearer made-up-later")
    lines = [record.getMessage() for record in caplog.records]
    assert len(lines) == 2, lines
    assert lines[0].startswith("refusing 1 request(s)")
    assert lines[1].startswith("refusing 50 request(s)")


def test_the_question_authenticates_this_server_by_client_secret_basic(endpoint: str) -> None:
    Endpoint.seen.clear()
    form = {"token": "opaque-1", "token_type_hint": "access_token"}
    answer = authorization_module._post_form(endpoint + "/ok", form, CLIENT)
    assert answer["active"] is True
    # RFC 6749 section 2.3.1: the id and secret are form-encoded before Basic joins them, so a
    # secret with ":" or "&" arrives whole.
    assert Endpoint.seen == [
        ("Basic", {"id": "mcp-server", "secret": CLIENT.client_secret, **form}),
    ]
    with pytest.raises(AuthorizationServerUnavailable, match="MRTR_OAUTH_CLIENT_SECRET right"):
        authorization_module._post_form(endpoint + "/denied", form, CLIENT)


# -- settings -------------------------------------------------------------------------------------


def test_the_environment_makes_an_introspecting_resource_server_or_says_what_is_missing() -> None:
    base = {"MRTR_OAUTH_ISSUER": ISSUER, "MRTR_OAUTH_RESOURCE": RESOURCE}
    made = http_settings(
        **base,
        MRTR_OAUTH_CLIENT_ID="mcp-server",
        MRTR_OAUTH_CLIENT_SECRET="s3cret",
        MRTR_OAUTH_INTROSPECTION_CACHE_SECONDS="0",
    )
    assert made.oauth is not None
    assert made.oauth.introspection == IntrospectionClient("mcp-server", "s3cret", 0)
    assert "s3cret" not in repr(made)
    defaulted = http_settings(
        **base, MRTR_OAUTH_CLIENT_ID="mcp-server", MRTR_OAUTH_CLIENT_SECRET="s3cret"
    )
    assert defaulted.oauth is not None and defaulted.oauth.introspection is not None
    assert defaulted.oauth.introspection.cache_seconds == 60
    assert http_settings(**base).oauth == ResourceServerSettings(ISSUER, RESOURCE)
    with pytest.raises(ValueError, match="needs both MRTR_OAUTH_CLIENT_ID"):
        http_settings(**base, MRTR_OAUTH_CLIENT_ID="mcp-server")
    with pytest.raises(ValueError, match="needs both MRTR_OAUTH_CLIENT_ID"):
        http_settings(**base, MRTR_OAUTH_CLIENT_SECRET="s3cret")
    with pytest.raises(ValueError, match="without MRTR_OAUTH_ISSUER"):
        http_settings(MRTR_OAUTH_CLIENT_ID="mcp-server", MRTR_OAUTH_CLIENT_SECRET="s3cret")
    with pytest.raises(ValueError, match="without MRTR_OAUTH_CLIENT_ID"):
        http_settings(**base, MRTR_OAUTH_INTROSPECTION_CACHE_SECONDS="30")
    for bad in ("3601", "-1", "1.5", "soon", "9" * 400):
        with pytest.raises(ValueError, match="from 0 to 3600"):
            http_settings(
                **base,
                MRTR_OAUTH_CLIENT_ID="mcp-server",
                MRTR_OAUTH_CLIENT_SECRET="s3cret",
                MRTR_OAUTH_INTROSPECTION_CACHE_SECONDS=bad,
            )


def test_the_principal_of_a_token_is_its_digest_only_in_memory() -> None:
    # What the introspector keeps is keyed by the token's sha256, never the token.
    fake = IntrospectingServer()
    fake.tokens["opaque"] = active()
    authority = introspecting(fake, Clock(), [NOW])
    assert isinstance(anyio.run(authority.authorise, "Bearer opaque"), Grant)
    assert authority.introspector is not None
    kept = list(authority.introspector._remembered)
    assert kept == [hashlib.sha256(b"opaque").digest()]
