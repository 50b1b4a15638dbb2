"""What one principal may take over HTTP (`http/_limits.py`: 429 with Retry-After while others
are served), and the liveness and readiness endpoints (`/healthz`, `/readyz`)."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterator

import anyio
import pytest
import redis
import redis_server
from hypothesis import given
from hypothesis import strategies as st
from test_http_app import Client

from mrtr_runtime import Context, Registry
from mrtr_runtime._config import Settings
from mrtr_runtime._task_store import (
    MemoryTaskStore,
    RoundRecord,
    TaskRecord,
    TaskStore,
    TaskStoreUnavailable,
)
from mrtr_runtime.http import _app as http_app
from mrtr_runtime.http._app import HttpApp, HttpSettings
from mrtr_runtime.http._limits import PrincipalLimits
from mrtr_runtime.server import Server
from support import make_codec
from task_tools import Flags, build

# -- the buckets, sans-IO -----------------------------------------------------------------------


def test_a_principal_may_burst_twice_its_rate_then_waits_for_the_next_token() -> None:
    limits = PrincipalLimits(rate=5, calls=1)
    admitted = [limits.admit("alice", 100.0) is None for _ in range(11)]
    assert admitted == [True] * 10 + [False]
    wait = limits.admit("alice", 100.0)
    assert wait == pytest.approx(0.2)
    # Another principal has its own bucket; nobody (no authentication) is never limited.
    assert limits.admit("bob", 100.0) is None
    assert all(limits.admit(None, 100.0) is None for _ in range(1000))
    # A token comes back every 1/rate seconds.
    assert limits.admit("alice", 100.2) is None
    assert limits.admit("alice", 100.2) is not None


@given(
    st.lists(st.floats(min_value=0, max_value=5, allow_nan=False), min_size=1, max_size=200),
    st.integers(min_value=1, max_value=20),
)
def test_no_schedule_of_requests_gets_more_than_the_burst_and_the_rate(
    gaps: list[float], rate: int
) -> None:
    limits = PrincipalLimits(rate=rate, calls=1)
    now, admitted = 0.0, 0
    for gap in gaps:
        now += gap
        if limits.admit("p", now) is None:
            admitted += 1
    assert admitted <= 2 * rate + rate * now + 1e-6


def test_memory_is_bounded_whatever_number_of_principals_arrive() -> None:
    limits = PrincipalLimits(rate=1, calls=1, max_tracked=100)
    for number in range(1000):
        limits.admit(f"p{number}", 0.0)
    assert len(limits._buckets) == 100


def test_running_calls_are_counted_per_principal() -> None:
    limits = PrincipalLimits(rate=1, calls=2)
    assert limits.enter_call("alice") and limits.enter_call("alice")
    assert not limits.enter_call("alice")
    assert limits.enter_call("bob")
    limits.leave_call("alice")
    assert limits.enter_call("alice")
    assert limits.running("alice") == 2
    assert all(limits.enter_call(None) for _ in range(100))


def test_the_limits_are_settings() -> None:
    settings = HttpSettings.from_settings(
        Settings.from_environment(
            {"MRTR_HTTP_RATE_PER_PRINCIPAL": "7", "MRTR_HTTP_CALLS_PER_PRINCIPAL": "3"}
        ),
        host="127.0.0.1",
        port=1,
    )
    assert (settings.rate_per_principal, settings.calls_per_principal) == (7, 3)
    with pytest.raises(ValueError, match="MRTR_HTTP_RATE_PER_PRINCIPAL must be a whole number"):
        HttpSettings.from_settings(
            Settings.from_environment({"MRTR_HTTP_RATE_PER_PRINCIPAL": "0"}),
            host="127.0.0.1",
            port=1,
        )


# -- the app -------------------------------------------------------------------------------------

TOKENS = (("alice", "alice-token-0123456789"), ("bob", "bob-token-0123456789abc"))


class Gate:
    def __init__(self) -> None:
        self.open = anyio.Event()
        self.entered = 0
        self.both_in = anyio.Event()


def gated_registry(gate: Gate, calls: Counter[str]) -> Registry:
    registry = Registry()

    @registry.tool
    async def wait_for_gate(*, ctx: Context) -> str:
        gate.entered += 1
        if gate.entered == 2:
            gate.both_in.set()
        await gate.open.wait()
        return "through"

    @registry.tool
    async def ping() -> str:
        calls["ping"] += 1
        return "pong"

    return registry


def bearer(name: str) -> dict[str, str]:
    return {"authorization": f"Bearer {dict(TOKENS)[name]}"}


def limited_app(
    registry: Registry, *, rate: int = 50, calls: int = 16, now: list[float]
) -> HttpApp:
    server = Server(name="limits", version="1", registry=registry, signing=make_codec())
    settings = HttpSettings(
        bearer_tokens=TOKENS, rate_per_principal=rate, calls_per_principal=calls
    )
    return HttpApp(server, settings, clock=lambda: now[0])


@pytest.mark.anyio
async def test_one_principal_past_its_rate_gets_429_while_another_is_served() -> None:
    calls: Counter[str] = Counter()
    now = [1000.0]
    client = Client(limited_app(gated_registry(Gate(), calls), rate=2, now=now))
    ping = {"name": "ping", "arguments": {}}
    statuses = [
        (await client.rpc("tools/call", ping, headers=bearer("alice"))).status for _ in range(5)
    ]
    assert statuses == [200, 200, 200, 200, 429]
    refused = await client.rpc("tools/call", ping, headers=bearer("alice"))
    assert refused.status == 429
    assert refused.headers["retry-after"] == "1"
    assert "MRTR_HTTP_RATE_PER_PRINCIPAL" in refused.json()["error"]["message"]
    assert (await client.rpc("tools/call", ping, headers=bearer("bob"))).status == 200
    assert calls["ping"] == 5  # the refused ones ran nothing
    now[0] += 0.5
    assert (await client.rpc("tools/call", ping, headers=bearer("alice"))).status == 200


@pytest.mark.anyio
async def test_one_principal_past_its_running_calls_gets_429_while_another_is_served() -> None:
    gate, calls = Gate(), Counter[str]()
    client = Client(limited_app(gated_registry(gate, calls), calls=2, now=[0.0]))
    waiting = {"name": "wait_for_gate", "arguments": {}}
    answers = []

    async def call(name: str) -> None:
        answers.append((await client.rpc("tools/call", waiting, headers=bearer(name))).status)

    async with anyio.create_task_group() as group:
        group.start_soon(call, "alice")
        group.start_soon(call, "alice")
        await gate.both_in.wait()
        third = await client.rpc("tools/call", waiting, headers=bearer("alice"))
        assert third.status == 429
        assert "MRTR_HTTP_CALLS_PER_PRINCIPAL" in third.json()["error"]["message"]
        # Bob is served, and alice's other requests (not tool calls) too.
        ping = {"name": "ping", "arguments": {}}
        assert (await client.rpc("tools/call", ping, headers=bearer("bob"))).status == 200
        assert (await client.rpc("tools/list", headers=bearer("alice"))).status == 200
        gate.open.set()
    assert answers == [200, 200]
    # The places were given back: alice calls again.
    assert (await client.rpc("tools/call", waiting, headers=bearer("alice"))).status == 200


class FlakyStore(MemoryTaskStore):
    """A task store that can be made to fail, as a Redis that went away would."""

    def __init__(self) -> None:
        super().__init__()
        self.broken = False
        #: Reads are served, writes fail (a full disk, a file turned read-only).
        self.read_only = False

    async def load(self, task_id: str) -> TaskRecord | None:
        if self.broken:
            raise TaskStoreUnavailable("the Redis server at redis://db:6379 cannot be reached")
        return await super().load(task_id)

    async def claim_round(self, claim: RoundRecord, now: float) -> RoundRecord:
        if self.broken or self.read_only:
            raise TaskStoreUnavailable("the task store /srv/tasks.db: attempt to write a readonly")
        return await super().claim_round(claim, now)


@pytest.fixture
def no_ready_cache(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every probe checks the store (a verdict of "works" otherwise stands a second)."""
    monkeypatch.setattr(http_app, "READY_CACHE_SECONDS", 0.0)


@pytest.mark.anyio
@pytest.mark.usefixtures("no_ready_cache")
async def test_readiness_follows_the_task_store_and_liveness_does_not() -> None:
    store = FlakyStore()

    async def opener() -> FlakyStore:
        return store

    server = Server(
        name="ready", version="1", registry=Registry(), signing=make_codec(), task_store=opener
    )
    # Behind a token: the health endpoints still answer without one.
    client = Client(HttpApp(server, HttpSettings(bearer_tokens=TOKENS)))
    ready = await client.post(b"", method="GET", path="/readyz")
    assert (ready.status, ready.json()) == (200, {"status": "ok"})
    store.broken = True
    down = await client.post(b"", method="GET", path="/readyz")
    assert down.status == 503
    assert down.json()["status"] == "unavailable"
    # Fixed words: anyone may ask, and a store's error may name hosts (or worse).
    assert down.json()["reason"] == "the task store cannot be used (see the server log)"
    live = await client.post(b"", method="GET", path="/healthz")
    assert (live.status, json.loads(live.body)) == (200, {"status": "ok"})
    store.broken = False
    assert (await client.post(b"", method="GET", path="/readyz")).status == 200
    assert (await client.post(b"{}", path="/readyz")).status == 405


@pytest.mark.anyio
@pytest.mark.usefixtures("no_ready_cache")
async def test_a_task_store_that_reads_but_cannot_write_is_not_ready() -> None:
    store = FlakyStore()

    async def opener() -> FlakyStore:
        return store

    server = Server(
        name="ready", version="1", registry=Registry(), signing=make_codec(), task_store=opener
    )
    client = Client(HttpApp(server, HttpSettings()))
    assert (await client.post(b"", method="GET", path="/readyz")).status == 200
    store.read_only = True
    down = await client.post(b"", method="GET", path="/readyz")
    assert down.status == 503
    assert down.json()["reason"] == "the task store cannot be used (see the server log)"
    store.read_only = False
    assert (await client.post(b"", method="GET", path="/readyz")).status == 200


@pytest.fixture
def redis_url() -> Iterator[str]:
    """A real redis-server of this test alone (the test demotes it to a replica, so it is not
    the session's shared one); the test fails (never skips) when there is none."""
    try:
        binary = redis_server.find_redis_server()
        with redis_server.running_redis(binary) as running:
            yield running.url
    except redis_server.RedisUnavailableError as exc:
        pytest.fail(f"the Redis task store cannot be tested: {exc}", pytrace=False)


@pytest.mark.anyio
@pytest.mark.usefixtures("no_ready_cache")
async def test_a_redis_demoted_to_a_read_only_replica_is_not_ready(redis_url: str) -> None:
    # REPLICAOF makes the server a replica (of a master that is not there): it still answers
    # every read, and refuses every write (READONLY), as a failed-over primary does.
    from mrtr_runtime.redis import open_redis_store

    async def opener() -> TaskStore:
        return await open_redis_store(redis_url, namespace="ready", max_tasks=10)

    server = Server(
        name="ready", version="1", registry=Registry(), signing=make_codec(), task_store=opener
    )
    client = Client(HttpApp(server, HttpSettings()))
    admin = redis.Redis.from_url(redis_url)
    try:
        assert (await client.post(b"", method="GET", path="/readyz")).status == 200
        admin.execute_command("REPLICAOF", "127.0.0.1", "1")
        down = await client.post(b"", method="GET", path="/readyz")
        assert down.status == 503
        assert down.json()["reason"] == "the task store cannot be used (see the server log)"
        admin.execute_command("REPLICAOF", "NO", "ONE")
        assert (await client.post(b"", method="GET", path="/readyz")).status == 200
    finally:
        admin.close()
        await (await server.tasks.store()).close()


class CountingStore(FlakyStore):
    def __init__(self) -> None:
        super().__init__()
        self.writes = 0

    async def claim_round(self, claim: RoundRecord, now: float) -> RoundRecord:
        self.writes += 1
        await anyio.sleep(0.05)  # a store that takes a moment: the probes meet
        return await super().claim_round(claim, now)


@pytest.mark.anyio
async def test_a_flood_of_readiness_probes_writes_to_the_store_about_once_a_second() -> None:
    # Anyone may probe, and each check writes: 200 probes at once share one check, and a
    # verdict of "works" stands a second; a failure is never kept.
    store = CountingStore()

    async def opener() -> CountingStore:
        return store

    server = Server(
        name="ready", version="1", registry=Registry(), signing=make_codec(), task_store=opener
    )
    client = Client(HttpApp(server, HttpSettings()))
    statuses: list[int] = []

    async def probe() -> None:
        statuses.append((await client.post(b"", method="GET", path="/readyz")).status)

    async with anyio.create_task_group() as group:
        for _ in range(200):
            group.start_soon(probe)
    assert statuses == [200] * 200 and store.writes == 1
    for _ in range(50):
        await probe()
    assert store.writes == 1  # within the second
    store.read_only = True
    await anyio.sleep(http_app.READY_CACHE_SECONDS)
    assert (await client.post(b"", method="GET", path="/readyz")).status == 503
    assert (await client.post(b"", method="GET", path="/readyz")).status == 503
    assert store.writes == 3  # each failing probe checked again


@pytest.mark.anyio
async def test_a_probe_refused_by_the_round_bound_still_finds_the_store_working() -> None:
    # MRTR_TASK_MAX_ROUND_BYTES_PER_OWNER below one probe's record (a few replicas' probes
    # share its owner): the store answered the write with a refusal, so it works.
    async def opener() -> MemoryTaskStore:
        return MemoryTaskStore(max_round_bytes_per_owner=100)

    server = Server(
        name="ready", version="1", registry=Registry(), signing=make_codec(), task_store=opener
    )
    client = Client(HttpApp(server, HttpSettings()))
    ready = await client.post(b"", method="GET", path="/readyz")
    assert (ready.status, ready.json()) == (200, {"status": "ok"})


@pytest.mark.anyio
async def test_readiness_is_false_when_the_key_cannot_sign() -> None:
    server = Server(name="ready", version="1", registry=Registry(), signing=make_codec())

    def broken(*args: object, **kwargs: object) -> str:
        raise ValueError("the key is gone")

    server.signing.mint = broken  # type: ignore[method-assign]
    client = Client(HttpApp(server, HttpSettings()))
    answer = await client.post(b"", method="GET", path="/readyz")
    assert answer.status == 503
    assert "signing key" in answer.json()["reason"]


@pytest.mark.anyio
async def test_the_health_endpoints_keep_the_dns_rebinding_rules() -> None:
    server = Server(name="ready", version="1", registry=Registry(), signing=make_codec())
    client = Client(HttpApp(server, HttpSettings()))  # bound to loopback
    for path in ("/healthz", "/readyz"):
        page = await client.post(
            b"", method="GET", path=path, headers={"host": "evil.example", "origin": None}
        )
        assert page.status == 403
        foreign = await client.post(
            b"", method="GET", path=path, headers={"origin": "https://evil.example"}
        )
        assert foreign.status == 403
        assert (await client.post(b"", method="GET", path=path)).status == 200


@pytest.mark.anyio
async def test_one_principal_s_tasks_take_their_share_of_the_workers_and_another_s_start() -> None:
    flags = Flags()
    server = Server(name="share", version="1", registry=build(flags), signing=make_codec())
    server.tasks.max_running_per_owner = 1
    client = Client(HttpApp(server, HttpSettings(bearer_tokens=TOKENS)))
    tasks_on = {"extensions": {"io.modelcontextprotocol/tasks": {}}}
    slow = {"name": "slow", "arguments": {"seconds": 0.3}}
    created = []
    for name in ("alice", "alice", "bob"):
        reply = await client.rpc("tools/call", slow, headers=bearer(name), capabilities=tasks_on)
        created.append(reply.json()["result"]["resultType"])
    assert created == ["task", "task", "task"]
    await anyio.sleep(0.1)
    # Alice's second waits for her first; bob's started at once beside it.
    assert flags.running == 2
    # 0.3 s each: alice's second ends by ~0.6 s, after her first.
    await anyio.sleep(1.5)
    assert flags.runs["slow"] == 3 and flags.running == 0
    assert flags.most_running == 2


@pytest.mark.anyio
async def test_one_principal_holds_at_most_its_share_of_the_listen_streams() -> None:
    from mrtr_runtime._subscriptions import (
        MAX_LISTENS,
        MAX_LISTENS_PER_PRINCIPAL,
        Listener,
        Subscriptions,
    )

    async def notify(method: str, params: dict[str, object]) -> None:
        return None

    subscriptions = Subscriptions()
    for _ in range(MAX_LISTENS_PER_PRINCIPAL):
        subscriptions.open_listen(Listener(notify, lists=()), "alice")
    for _ in range(10 * MAX_LISTENS_PER_PRINCIPAL):
        with pytest.raises(OverflowError, match="the most one principal may"):
            subscriptions.open_listen(Listener(notify, lists=()), "alice")
    subscriptions.open_listen(Listener(notify, lists=()), "bob")
    # Nobody in particular (one user's own server) may hold them all.
    for _ in range(MAX_LISTENS - MAX_LISTENS_PER_PRINCIPAL - 1):
        subscriptions.open_listen(Listener(notify, lists=()), None)
    assert len(subscriptions.listens) == MAX_LISTENS
