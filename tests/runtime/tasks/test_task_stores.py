"""The task stores' contract, held against every store: memory, SQLite and a real Redis.

The task engine builds every transition (claim, renewal, answers, cancel, result) from four
atomic operations, so each store must offer exactly them: create at most once per once-key,
compare-and-swap on the version (of many concurrent writers exactly one wins), the tasks whose
lease lapsed, purge; never an expired task; bounds on unexpired tasks, in all and per owner,
with a clear error. The SQLite store is also raced by two OS processes on one file, and held to
the key file's rules (0600 file, 0700 directory, no symlink, nothing other users can write; no
directory tree made for a configured path). Redis is a real
``redis-server`` (``redis_server.py``: installed from Debian's package when missing; a machine
where it cannot be had FAILS these tests, with the reason).
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import sqlite3
import stat
import subprocess
import sys
import textwrap
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread
import pytest
import redis_server
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import mrtr_runtime
from mrtr_runtime import _sqlite_store
from mrtr_runtime._config import Settings
from mrtr_runtime._sqlite_store import SqliteTaskStore, open_sqlite_store
from mrtr_runtime._task_backends import TASKS_FILE_NAME, task_backend
from mrtr_runtime._task_store import (
    ROUND_PURGE_SECONDS,
    MemoryTaskStore,
    RoundRecord,
    TaskRecord,
    TaskStore,
    TaskStoreFull,
    TaskStoreUnavailable,
    new_task_id,
)
from mrtr_runtime.redis import RedisTaskStore

pytestmark = pytest.mark.anyio

STORES = ("memory", "sqlite", "redis")
Opener = Callable[..., Awaitable[TaskStore]]


@pytest.fixture(scope="session")
def redis_url() -> Iterator[str]:
    """A real redis-server of this session; the test fails (never skips) when there is none."""
    try:
        binary = redis_server.find_redis_server()
        with redis_server.running_redis(binary) as running:
            yield running.url
    except redis_server.RedisUnavailableError as exc:
        pytest.fail(f"the Redis task store cannot be tested: {exc}", pytrace=False)


def settings_for(
    url: str,
    max_tasks: int | None = None,
    max_per_owner: int | None = None,
    max_bytes_per_owner: int | None = None,
    max_round_bytes_per_owner: int | None = None,
) -> Settings:
    environ = {"MRTR_TASK_STORE": url}
    if max_round_bytes_per_owner is not None:
        environ["MRTR_TASK_MAX_ROUND_BYTES_PER_OWNER"] = str(max_round_bytes_per_owner)
    if max_tasks is not None:
        environ["MRTR_TASK_MAX_STORED"] = str(max_tasks)
    if max_per_owner is not None:
        environ["MRTR_TASK_MAX_PER_OWNER"] = str(max_per_owner)
    if max_bytes_per_owner is not None:
        environ["MRTR_TASK_MAX_BYTES_PER_OWNER"] = str(max_bytes_per_owner)
    return Settings.from_environment(environ)


@pytest.fixture(params=STORES)
async def open_store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Opener]:
    """``await open_store(max_tasks=..., max_per_owner=...)``: a fresh, empty store of the
    parametrized kind, opened the way a server opens it (MRTR_TASK_STORE through the opener);
    closed afterwards."""
    kind: str = request.param
    url = {
        "memory": "memory:",
        "sqlite": f"sqlite://{tmp_path / 'state' / 'tasks.db'}",
        "redis": request.getfixturevalue("redis_url") if kind == "redis" else "",
    }[kind]
    namespace = f"test-{uuid.uuid4().hex}"  # one Redis, a clean namespace per test
    opened: list[TaskStore] = []

    async def open_one(
        max_tasks: int | None = None,
        max_per_owner: int | None = None,
        max_bytes_per_owner: int | None = None,
        max_round_bytes_per_owner: int | None = None,
    ) -> TaskStore:
        settings = settings_for(
            url, max_tasks, max_per_owner, max_bytes_per_owner, max_round_bytes_per_owner
        )
        backend = task_backend(settings, None, namespace=namespace)
        assert backend.kind == kind
        store = await backend.open()
        opened.append(store)
        return store

    yield open_one
    for store in opened:
        await store.close()


def make_record(
    *,
    status: str = "working",
    ttl: float | None = 3600.0,
    lease_expires: float = 0.0,
    task_id: str | None = None,
    **changes: Any,
) -> TaskRecord:
    now = time.time()
    record = TaskRecord(
        task_id=task_id or new_task_id(),
        owner="owner-digest",
        method="tools/call",
        target="deploy",
        arguments={"stack": "prod", "parameters": {"Size": 3}},
        answers={"confirm": {"action": "accept", "content": {"confirmed": True}}},
        state={"step": 1},
        status=status,  # type: ignore[arg-type]
        created_at=now,
        updated_at=now,
        expires_at=None if ttl is None else now + ttl,
        ttl_ms=None if ttl is None else int(ttl * 1000),
        poll_interval_ms=1000,
        lease_expires=lease_expires,
    )
    return dataclasses.replace(record, **changes)


# -- create, load, swap ------------------------------------------------------------------------


async def test_a_created_task_loads_back_exactly(open_store: Opener) -> None:
    store = await open_store()
    record = make_record(
        status_message="Deploying… ünïcode ✓",
        input_requests={"confirm.1": {"method": "elicitation/create", "params": {"x": [1, 2.5]}}},
        asked={"confirm.1": ("confirm", "elicitation/create")},
        keys_issued=1,
        result={"content": [{"type": "text", "text": "done"}], "isError": False},
        cancel_requested=True,
        committed=True,
        lease_owner="worker-a",
        attempts=2,
    )
    assert await store.create(record) == record
    assert await store.load(record.task_id) == record
    assert await store.load(new_task_id()) is None


async def test_a_task_id_is_stored_once(open_store: Opener) -> None:
    store = await open_store()
    record = make_record()
    await store.create(record)
    with pytest.raises(ValueError, match="already stored"):
        await store.create(make_record(task_id=record.task_id))


async def test_swap_takes_only_the_successor_of_the_stored_version(open_store: Opener) -> None:
    store = await open_store()
    record = await store.create(make_record())
    working = record.evolve(status_message="step 2")
    assert await store.swap(working)
    assert not await store.swap(working)  # its predecessor is no longer the stored one
    assert not await store.swap(record.evolve(status_message="stale"))
    assert not await store.swap(make_record().evolve())  # an unknown task
    done = working.evolve(status="completed", result={"content": []})
    assert await store.swap(done)
    assert await store.load(record.task_id) == done


async def test_of_many_concurrent_swaps_of_one_version_exactly_one_wins(
    open_store: Opener,
) -> None:
    store = await open_store()
    record = await store.create(make_record())
    wins: list[str] = []

    async def claim(worker: str, base: TaskRecord) -> None:
        if await store.swap(base.evolve(lease_owner=worker, lease_expires=time.time() + 15)):
            wins.append(worker)

    for round_number in range(3):
        wins.clear()

        async with anyio.create_task_group() as group:
            for number in range(40):
                group.start_soon(claim, f"worker-{round_number}-{number}", record)
        assert len(wins) == 1, wins
        stored = await store.load(record.task_id)
        assert stored is not None
        assert stored.lease_owner == wins[0]
        assert stored.version == record.version + 1
        record = stored


async def test_fifty_concurrent_creates_with_one_once_key_make_one_task(
    open_store: Opener,
) -> None:
    store = await open_store()
    records = [make_record() for _ in range(50)]
    returned: list[TaskRecord] = []

    async def create(record: TaskRecord) -> None:
        returned.append(await store.create(record, once_key="flight-key-hex"))

    async with anyio.create_task_group() as group:
        for record in records:
            group.start_soon(create, record)
    winners = {record.task_id for record in returned}
    assert len(returned) == 50
    assert len(winners) == 1
    (winner,) = winners
    assert [await store.load(record.task_id) is not None for record in records].count(True) == 1
    assert await store.load(winner) in records
    # Another key is another task.
    other = await store.create(make_record(), once_key="another-flight")
    assert other.task_id != winner


@pytest.fixture(params=["sqlite", "redis"])
async def two_replicas(
    request: pytest.FixtureRequest, tmp_path: Path
) -> AsyncIterator[tuple[TaskStore, TaskStore]]:
    """Two stores opened separately on one location: what two processes or replicas hold."""
    url = (
        f"sqlite://{tmp_path / 'tasks.db'}"
        if request.param == "sqlite"
        else request.getfixturevalue("redis_url")
    )
    namespace = f"test-{uuid.uuid4().hex}"
    first, second = [
        await task_backend(settings_for(url), None, namespace=namespace).open() for _ in range(2)
    ]
    yield first, second
    await first.close()
    await second.close()


async def test_two_replicas_claiming_one_task_at_once_make_one_claim_and_one_task(
    two_replicas: tuple[TaskStore, TaskStore],
) -> None:
    stores = two_replicas
    records = [make_record() for _ in range(20)]
    created: list[TaskRecord] = []

    async def create(number: int) -> None:
        store = stores[number % 2]
        created.append(await store.create(records[number], once_key="one-flight"))

    async with anyio.create_task_group() as group:
        for number in range(20):
            group.start_soon(create, number)
    assert len({record.task_id for record in created}) == 1
    task = created[0]
    wins: list[str] = []

    async def claim(number: int) -> None:
        claimed = task.evolve(lease_owner=f"replica-{number}", lease_expires=time.time() + 15)
        if await stores[number % 2].swap(claimed):
            wins.append(f"replica-{number}")

    async with anyio.create_task_group() as group:
        for number in range(20):
            group.start_soon(claim, number)
    assert len(wins) == 1
    for store in stores:
        seen = await store.load(task.task_id)
        assert seen is not None
        assert seen.lease_owner == wins[0]


# -- round records (single use: `_once`) --------------------------------------------------------


def round_claim(
    holder: str,
    *,
    key: str = "round-key",
    lease: float = 15.0,
    owner: str = "owner-a",
    ttl: float = 600.0,
) -> RoundRecord:
    now = time.time()
    return RoundRecord(
        key=key, expires_at=now + ttl, holder=holder, lease_expires=now + lease, owner=owner
    )


#: One claim's bytes as the stores count them (round_claim's, with a key of KEY_LENGTH).
KEY_LENGTH = 64


def round_key_of(number: int) -> str:
    return f"{number:0{KEY_LENGTH}d}"


async def test_an_owner_at_its_round_bytes_bound_starts_no_new_round_and_others_do(
    open_store: Opener,
) -> None:
    # MRTR_TASK_MAX_ROUND_BYTES_PER_OWNER: room for 10 claims (their times' digits vary by a
    # few bytes: half a claim spare); 100 are tried (10x the bound).
    size = len(round_claim("run", key=round_key_of(0)).to_json())
    store = await open_store(max_round_bytes_per_owner=10 * size + size // 2)
    stored = []
    refusals = []
    for number in range(100):
        try:
            stored.append(
                await store.claim_round(round_claim("run", key=round_key_of(number)), time.time())
            )
        except TaskStoreFull as error:
            refusals.append(str(error))
    assert len(stored) == 10 and len(refusals) == 90
    assert "MRTR_TASK_MAX_ROUND_BYTES_PER_OWNER" in refusals[0]
    assert await store.round_bytes("owner-a") == sum(len(held.to_json()) for held in stored)
    # Every round it has is still answered (a replay is never refused), settled or running.
    settled = stored[0].evolve(holder=None, outcome={"result": {"content": []}})
    assert await store.swap_round(settled)
    assert await store.claim_round(round_claim("again", key=round_key_of(0)), time.time()) == (
        settled
    )
    assert (
        await store.claim_round(round_claim("again", key=round_key_of(1)), time.time())
        == (stored[1])
    )
    # Another owner is not held back by it.
    other = await store.claim_round(
        round_claim("run", key=round_key_of(500), owner="owner-b"), time.time()
    )
    assert other.holder == "run" and await store.round_bytes("owner-b") == len(other.to_json())


async def test_an_owners_expired_rounds_give_their_room_back(open_store: Opener) -> None:
    size = len(round_claim("run", key=round_key_of(0)).to_json())
    store = await open_store(max_round_bytes_per_owner=3 * size + size // 2)
    for number in range(3):
        await store.claim_round(round_claim("run", key=round_key_of(number), ttl=0.3), time.time())
    with pytest.raises(TaskStoreFull):
        await store.claim_round(round_claim("run", key=round_key_of(3)), time.time())
    # Once they expired, and a second after the refusal's own look (an owner at its bound
    # has its expired records forgotten at most once a second: it is a scan).
    await anyio.sleep(ROUND_PURGE_SECONDS + 0.2)
    # No purge has run: the claim itself forgets what expired of its owner first.
    fresh = await store.claim_round(round_claim("run", key=round_key_of(3)), time.time())
    assert fresh.holder == "run"
    assert await store.round_bytes("owner-a") == len(fresh.to_json())


async def test_a_rounds_outcome_counts_against_its_owner(open_store: Opener) -> None:
    store = await open_store()
    mine = await store.claim_round(round_claim("run"), time.time())
    before = await store.round_bytes("owner-a")
    assert before == len(mine.to_json())
    settled = mine.evolve(holder=None, outcome={"result": {"text": "x" * 5000}})
    assert await store.swap_round(settled)
    assert await store.round_bytes("owner-a") == len(settled.to_json())
    released = settled.evolve(outcome=None)
    assert await store.swap_round(released)
    assert await store.round_bytes("owner-a") == len(released.to_json())


async def test_a_round_is_claimed_by_exactly_one_of_fifty_concurrent_claims(
    open_store: Opener,
) -> None:
    store = await open_store()
    returned: list[RoundRecord] = []

    async def claim(number: int) -> None:
        returned.append(await store.claim_round(round_claim(f"run-{number}"), time.time()))

    async with anyio.create_task_group() as group:
        for number in range(50):
            group.start_soon(claim, number)
    holders = {record.holder for record in returned}
    assert len(holders) == 1  # every claim got the one stored record back
    (holder,) = holders
    assert await store.load_round("round-key") == returned[0]
    assert holder is not None and holder.startswith("run-")


async def test_a_settled_round_is_never_claimed_again(open_store: Opener) -> None:
    store = await open_store()
    mine = await store.claim_round(round_claim("run-a"), time.time())
    outcome = {"result": {"content": [{"type": "text", "text": "done ✓"}]}}
    settled = mine.evolve(holder=None, outcome=outcome)
    assert await store.swap_round(settled)
    assert not await store.swap_round(settled)  # its predecessor is gone
    later = time.time() + 100  # long after any lease
    again = await store.claim_round(round_claim("run-b"), later)
    assert again == settled


async def test_a_released_or_lapsed_round_is_taken_by_the_next_claim(open_store: Opener) -> None:
    store = await open_store()
    mine = await store.claim_round(round_claim("run-a"), time.time())
    released = mine.evolve(holder=None, lease_expires=0.0)
    assert await store.swap_round(released)
    taken = await store.claim_round(round_claim("run-b"), time.time())
    assert taken.holder == "run-b" and taken.version == released.version + 1
    # A claim whose lease lapsed (its process died) before its point of no return: taken.
    lapsed = await store.claim_round(round_claim("run-c", key="other", lease=-1), time.time())
    assert lapsed.holder == "run-c"
    assert (await store.claim_round(round_claim("run-d", key="other"), time.time())).holder == (
        "run-d"
    )


async def test_a_lapsed_round_past_its_point_of_no_return_is_kept(open_store: Opener) -> None:
    store = await open_store()
    mine = await store.claim_round(round_claim("run-a", lease=-1), time.time())
    committed = mine.evolve(committed=True)
    assert await store.swap_round(committed)
    held = await store.claim_round(round_claim("run-b"), time.time())
    assert held == committed  # nobody knows whether it acted: never run again


async def test_an_expired_round_is_gone(open_store: Opener) -> None:
    store = await open_store()
    now = time.time()
    old = RoundRecord(key="old", expires_at=now + 0.05, outcome={"result": {}}, owner="owner-a")
    await store.claim_round(old, now)
    await anyio.sleep(0.1)
    assert await store.load_round("old") is None
    fresh = await store.claim_round(round_claim("run-b", key="old"), time.time())
    assert fresh.holder == "run-b"  # an expired record holds nothing: its key is free
    brief = RoundRecord(key="brief", expires_at=time.time() + 0.05, outcome={"result": {}})
    await store.claim_round(brief, time.time())
    await anyio.sleep(0.1)
    await store.purge(time.time())
    assert await store.load_round("brief") is None
    assert await store.load_round("old") == fresh  # purge forgets only what expired


async def test_two_replicas_claiming_one_round_make_one_claim(
    two_replicas: tuple[TaskStore, TaskStore],
) -> None:
    stores = two_replicas
    returned: list[RoundRecord] = []

    async def claim(number: int) -> None:
        store = stores[number % 2]
        returned.append(await store.claim_round(round_claim(f"replica-{number}"), time.time()))

    async with anyio.create_task_group() as group:
        for number in range(20):
            group.start_soon(claim, number)
    assert len({record.holder for record in returned}) == 1
    assert await stores[0].load_round("round-key") == await stores[1].load_round("round-key")


@settings(max_examples=200, suppress_health_check=[HealthCheck.too_slow])
@given(
    committed=st.booleans(),
    outcome=st.one_of(
        st.none(),
        st.fixed_dictionaries({"task": st.text(min_size=1)}),
        st.fixed_dictionaries({"result": st.dictionaries(st.text(), st.integers())}),
    ),
    lease=st.floats(-1e9, 1e9),
    holder=st.one_of(st.none(), st.text()),
    owner=st.text(),
)
def test_a_round_record_survives_its_json_exactly(
    committed: bool, outcome: Any, lease: float, holder: str | None, owner: str
) -> None:
    record = RoundRecord("k", 1e9, holder, lease, committed, outcome, owner, version=7)
    assert RoundRecord.from_json(record.to_json(), 7, owner) == record
    # The owner is kept beside the JSON, never in it: 0.8.0 to 0.11.0 read these records.
    assert set(json.loads(record.to_json())) == {
        "key",
        "expires_at",
        "holder",
        "lease_expires",
        "committed",
        "outcome",
    }


# -- runnable, leases, expiry, purge -----------------------------------------------------------


async def test_runnable_lists_working_tasks_whose_lease_lapsed(open_store: Opener) -> None:
    store = await open_store()
    now = time.time()
    unclaimed = await store.create(make_record())
    leased = await store.create(make_record(lease_expires=now + 30, lease_owner="a"))
    lapsed = await store.create(make_record(lease_expires=now - 1, lease_owner="dead"))
    await store.create(make_record(status="input_required"))
    await store.create(make_record(status="completed", result={"content": []}))
    await store.create(make_record(status="failed", error={"code": -32603, "message": "x"}))
    assert set(await store.runnable(now, 10)) == {unclaimed.task_id, lapsed.task_id}
    assert len(await store.runnable(now, 1)) == 1
    assert await store.runnable(now, 0) == []
    # The lease lapses: another worker may take it over.
    assert leased.task_id in await store.runnable(now + 31, 10)
    # A claim takes it off the list; finishing keeps it off for good.
    claimed = unclaimed.evolve(lease_owner="b", lease_expires=now + 15)
    assert await store.swap(claimed)
    assert unclaimed.task_id not in await store.runnable(now, 10)
    assert await store.swap(claimed.evolve(status="completed", result={"content": []}))
    assert unclaimed.task_id not in await store.runnable(now + 3600, 10)
    # input_required -> working (answers arrived) makes it runnable again.
    back = await store.create(make_record(status="input_required"))
    assert await store.swap(back.evolve(status="working"))
    assert back.task_id in await store.runnable(now, 10)


async def test_an_expired_task_is_never_returned(open_store: Opener) -> None:
    store = await open_store()
    short = await store.create(make_record(ttl=0.4), once_key="short-lived")
    kept = await store.create(make_record(ttl=None))
    assert await store.load(short.task_id) == short
    await anyio.sleep(0.6)
    assert await store.load(short.task_id) is None
    assert await store.load(kept.task_id) == kept
    assert short.task_id not in await store.runnable(time.time(), 10)
    assert not await store.swap(short.evolve(status="completed"))
    # Its once-key names no task any more: the same key makes a new one.
    again = await store.create(make_record(), once_key="short-lived")
    assert again.task_id != short.task_id
    assert await store.create(make_record(), once_key="short-lived") == again


async def test_purge_forgets_the_expired_tasks_and_their_once_keys(open_store: Opener) -> None:
    store = await open_store()
    now = time.time()
    soon = [await store.create(make_record(ttl=60), once_key=f"soon-{n}") for n in range(3)]
    late = await store.create(make_record(ttl=3600))
    never = await store.create(make_record(ttl=None))
    assert await store.purge(now) == 0
    assert await store.purge(now + 120) == 3
    assert await store.purge(now + 120) == 0
    for record in soon:
        assert await store.load(record.task_id) is None
    assert await store.load(late.task_id) == late
    assert await store.load(never.task_id) == never
    fresh = await store.create(make_record(), once_key="soon-0")
    assert fresh.task_id not in {record.task_id for record in soon}


async def test_the_bound_holds_at_ten_times_its_size(open_store: Opener) -> None:
    store = await open_store(max_tasks=50)
    stored = 0
    refusals: list[str] = []

    async def create() -> None:
        nonlocal stored
        try:
            await store.create(make_record())
            stored += 1
        except TaskStoreFull as exc:
            refusals.append(str(exc))

    async with anyio.create_task_group() as group:
        for _ in range(500):
            group.start_soon(create)
    assert stored == 50
    assert len(refusals) == 450
    # One sentence: the bound, the variable that sets it, when a task can start again.
    assert set(refusals) == {
        "the task store holds 50 tasks, its bound of unexpired tasks (MRTR_TASK_MAX_STORED), "
        "so no new task can start until one of them expires"
    }
    # A replay of a stored once-key is no new task: it is answered even when the store is full.


async def test_one_owner_cannot_fill_the_store_at_ten_times_its_own_bound(
    open_store: Opener,
) -> None:
    store = await open_store(max_tasks=1000, max_per_owner=20)
    stored = 0
    refusals: list[str] = []

    async def create() -> None:
        nonlocal stored
        try:
            await store.create(make_record(owner="greedy"))
            stored += 1
        except TaskStoreFull as exc:
            refusals.append(str(exc))

    async with anyio.create_task_group() as group:
        for _ in range(200):
            group.start_soon(create)
    assert stored == 20
    assert len(refusals) == 180
    assert set(refusals) == {
        "you have 20 tasks in the task store, the bound of unexpired tasks for each user "
        "(MRTR_TASK_MAX_PER_OWNER), so no new task of yours can start until one of them expires"
    }
    # Everyone else still starts tasks.
    other = await store.create(make_record(owner="someone-else"))
    assert await store.load(other.task_id) == other


async def test_one_owner_s_bytes_stay_within_its_byte_bound_at_ten_times_it(
    open_store: Opener,
) -> None:
    # A count bound alone let one owner keep a thousand records of a megabyte each. Here each
    # record weighs about 4 KB: ten times the bound's worth are offered, the owner keeps what
    # fits, every refusal names the setting, and another owner still starts tasks.
    bound = 40_000
    store = await open_store(max_tasks=1000, max_per_owner=1000, max_bytes_per_owner=bound)
    heavy = {"payload": "x" * 4000}
    kept: list[TaskRecord] = []
    refusals: set[str] = set()
    for _ in range(100):  # 400 KB offered
        try:
            kept.append(await store.create(make_record(owner="greedy", arguments=heavy)))
        except TaskStoreFull as exc:
            refusals.add(str(exc))
    weight = sum(len(record.to_json().encode()) for record in kept)
    assert 0 < weight <= bound
    assert bound - weight < len(kept[0].to_json().encode())  # it got all that fits
    assert refusals == {
        f"your unexpired tasks in the task store would pass {bound} bytes, the bound for each "
        "user (MRTR_TASK_MAX_BYTES_PER_OWNER), so no new task of yours can start until some "
        "of them expire"
    }
    other = await store.create(make_record(owner="someone-else", arguments=heavy))
    assert await store.load(other.task_id) == other
    # A swap that lightens a record gives its owner the room back.
    light = kept[0].evolve(arguments={})
    assert await store.swap(light)
    await store.create(make_record(owner="greedy"))


async def test_the_owner_bound_counts_only_that_owner_s_unexpired_tasks(
    open_store: Opener,
) -> None:
    store = await open_store(max_tasks=100, max_per_owner=3)
    kept = await store.create(make_record(owner="a"), once_key="kept")
    shortened = await store.create(make_record(owner="a"))
    await store.create(make_record(owner="a", ttl=0.3))
    with pytest.raises(TaskStoreFull, match="MRTR_TASK_MAX_PER_OWNER"):
        await store.create(make_record(owner="a"))
    # Full for "a", yet a replayed once-key of "a" still finds its task.
    assert await store.create(make_record(owner="a"), once_key="kept") == kept
    # A swap that moves a task's expiry closer moves it out of the count when it passes.
    assert await store.swap(shortened.evolve(expires_at=time.time() + 0.3))
    await anyio.sleep(0.5)
    await store.create(make_record(owner="a"))  # the expired one no longer counts
    await store.create(make_record(owner="a"))  # nor the shortened one
    with pytest.raises(TaskStoreFull, match="MRTR_TASK_MAX_PER_OWNER"):
        await store.create(make_record(owner="a"))
    # Purging early (a caller's `now` ahead) frees the owner's share as it frees the store's.
    assert await store.purge(time.time() + 7200) >= 3  # (and what expired, where still held)
    for _ in range(3):
        await store.create(make_record(owner="a"))
    with pytest.raises(TaskStoreFull, match="MRTR_TASK_MAX_PER_OWNER"):
        await store.create(make_record(owner="a"))


async def test_a_redis_owner_set_expires_with_its_last_task(redis_url: str) -> None:
    backend = task_backend(settings_for(redis_url), None, namespace=f"test-{uuid.uuid4().hex}")
    store = await backend.open()
    assert isinstance(store, RedisTaskStore)
    owner_key = f"{store._prefix}owner:o"
    await store.create(make_record(owner="o", ttl=60))
    last = await store.create(make_record(owner="o", ttl=120))
    await store.create(make_record(owner="o", ttl=30))
    assert last.expires_at is not None
    expires_ms = await store._client.pexpiretime(owner_key)
    assert expires_ms == math.ceil(last.expires_at * 1000)  # the latest task's, not the last made
    await store.create(make_record(owner="o", ttl=None))
    assert await store._client.pttl(owner_key) == -1  # a task that never expires: nor does it
    await store.close()


async def test_the_bound_counts_only_unexpired_tasks(open_store: Opener) -> None:
    store = await open_store(max_tasks=5)
    kept = await store.create(make_record(), once_key="kept")
    for _ in range(4):
        await store.create(make_record(ttl=0.3))
    with pytest.raises(TaskStoreFull):
        await store.create(make_record())
    # Full, yet a replayed once-key still finds its task.
    assert await store.create(make_record(), once_key="kept") == kept
    await anyio.sleep(0.5)
    await store.create(make_record())  # the expired four no longer count, purged or not


# -- records round-trip exactly ---------------------------------------------------------------

_json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**53), max_value=2**53)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=20),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4)
    ),
    max_leaves=12,
)
_json_objects = st.dictionaries(st.text(max_size=8), _json_values, max_size=4)
_times = st.floats(min_value=0, max_value=4e9, allow_nan=False)


def _field_strategy(field: dataclasses.Field[Any]) -> st.SearchStrategy[Any]:
    """A strategy for each TaskRecord field, by its annotation (new fields are covered too)."""
    annotation = str(field.type)
    if field.name == "status":
        return st.sampled_from(["working", "input_required", "completed", "failed", "cancelled"])
    if field.name == "asked":
        return st.dictionaries(st.text(max_size=8), st.tuples(st.text(), st.text()), max_size=3)
    if annotation.startswith("Mapping") and "None" in annotation:
        return st.none() | _json_objects
    if annotation.startswith("Mapping"):
        return _json_objects
    table: dict[str, st.SearchStrategy[Any]] = {
        "str": st.text(max_size=30),
        "str | None": st.none() | st.text(max_size=30),
        "float": _times,
        "float | None": st.none() | _times,
        "int": st.integers(min_value=0, max_value=2**53),
        "int | None": st.none() | st.integers(min_value=0, max_value=2**53),
        "bool": st.booleans(),
        "Any": _json_values,
    }
    return table[annotation]


_records = st.builds(
    TaskRecord,
    **{field.name: _field_strategy(field) for field in dataclasses.fields(TaskRecord)},
)


# A record is many fields of nested JSON: drawing one is slow on a busy machine, not wrong.
@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_records)
def test_a_record_survives_its_json_exactly(record: TaskRecord) -> None:
    text = record.to_json()
    assert TaskRecord.from_json(text) == record
    assert TaskRecord.from_json(text.encode("utf-8")) == record
    assert json.loads(text)["task_id"] == record.task_id


# -- SQLite: two processes, one file -----------------------------------------------------------

_RACER = textwrap.dedent(
    """
    import asyncio, dataclasses, importlib, json, sys, time
    from pathlib import Path

    runtime = sys.argv[1]
    sqlite = importlib.import_module(runtime + "._sqlite_store")
    tasks = importlib.import_module(runtime + "._task_store")
    path, task_id, go, name = Path(sys.argv[2]), sys.argv[3], Path(sys.argv[4]), sys.argv[5]

    async def main():
        store = await sqlite.open_sqlite_store(path, max_tasks=1000)
        while not go.exists():
            time.sleep(0.001)
        wins = retries = 0
        for _ in range(150):  # +1 attempts each, by compare-and-swap
            while True:
                record = await store.load(task_id)
                if await store.swap(record.evolve(attempts=record.attempts + 1, lease_owner=name)):
                    wins += 1
                    break
                retries += 1
        now = time.time()
        mine = tasks.TaskRecord(
            task_id=tasks.new_task_id(), owner="o", method="tools/call", target="t",
            arguments={}, answers={}, state=None, status="working", created_at=now,
            updated_at=now, expires_at=now + 60, ttl_ms=60000, poll_interval_ms=1000,
        )
        once = [(await store.create(dataclasses.replace(mine, task_id=tasks.new_task_id()),
                                    once_key=f"k{n}")).task_id for n in range(30)]
        await store.close()
        print(json.dumps({"wins": wins, "retries": retries, "once": once}))

    asyncio.run(main())
    """
)


async def test_two_processes_racing_on_one_sqlite_file_lose_no_update(tmp_path: Path) -> None:
    path = tmp_path / "state" / "tasks.db"
    store = await open_sqlite_store(path, max_tasks=1000)
    record = await store.create(make_record())
    go = tmp_path / "go"
    runtime = mrtr_runtime.__name__  # the baked package's runtime, as a subprocess imports it

    def race() -> list[dict[str, Any]]:
        racers = [
            subprocess.Popen(
                [sys.executable, "-c", _RACER, runtime, str(path), record.task_id, str(go), name],
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
            for name in ("a", "b")
        ]
        time.sleep(1.0)  # both opened and waiting
        go.touch()
        outputs = []
        for racer in racers:
            out, err = racer.communicate(timeout=90)
            assert racer.returncode == 0, err
            outputs.append(json.loads(out))
        return outputs

    outputs = await anyio.to_thread.run_sync(race)
    final = await store.load(record.task_id)
    assert final is not None
    assert final.attempts == 300  # every increment of both processes, none lost
    assert final.version == record.version + 300
    assert [output["wins"] for output in outputs] == [150, 150]
    # Each once-key made one task, whichever process came first; both got that task.
    assert outputs[0]["once"] == outputs[1]["once"]
    for task_id in outputs[0]["once"]:
        assert await store.load(task_id) is not None
    await store.close()


async def test_a_write_waiting_for_another_process_lock_never_holds_the_event_loop(
    tmp_path: Path,
) -> None:
    path = tmp_path / "tasks.db"
    store = await open_sqlite_store(path, max_tasks=100)
    record = await store.create(make_record())
    other = sqlite3.connect(path, isolation_level=None)  # another process's write lock
    other.execute("BEGIN IMMEDIATE")
    ticks = 0

    async def tick() -> None:
        nonlocal ticks
        while True:
            ticks += 1
            await anyio.sleep(0.01)

    async def release() -> None:
        await anyio.sleep(0.5)
        other.execute("COMMIT")

    async with anyio.create_task_group() as group:
        group.start_soon(tick)
        group.start_soon(release)
        started = time.monotonic()
        assert await store.swap(record.evolve(status_message="after the lock"))
        waited = time.monotonic() - started
        group.cancel_scope.cancel()
    other.close()
    # It waited for the lock, in a thread: the loop ran on (the release above is on the loop
    # too: a wait on the loop would last the whole busy timeout, then fail).
    assert 0.4 <= waited < 3
    assert ticks >= 20
    stored = await store.load(record.task_id)
    assert stored is not None
    assert stored.status_message == "after the lock"
    await store.close()


async def test_the_sqlite_row_counts_the_bounds_read_first_stay_exact(tmp_path: Path) -> None:
    store = await open_sqlite_store(tmp_path / "tasks.db", max_tasks=100, max_per_owner=6)

    def counts() -> tuple[int, int, dict[str, int]]:
        (kept,) = store._eager.execute("SELECT stored FROM task_count").fetchone()
        (real,) = store._eager.execute("SELECT count(*) FROM tasks").fetchone()
        owned = dict(store._eager.execute("SELECT owner, stored FROM owner_count").fetchall())
        grouped = store._eager.execute("SELECT owner, count(*) FROM tasks GROUP BY owner")
        assert owned == dict(grouped.fetchall())  # per owner too, none left at zero
        return kept, real, owned

    for number in range(10):
        owner = "a" if number % 2 else "b"
        record = make_record(ttl=0.2 if number < 4 else 3600, owner=owner)
        await store.create(record, once_key=f"k{number}")
    assert counts() == (10, 10, {"a": 5, "b": 5})
    await anyio.sleep(0.3)
    await store.create(make_record(owner="a"), once_key="k0")  # replaces b's expired holder
    assert counts() == (10, 10, {"a": 6, "b": 4})
    # "a" is at its bound of 6 counting its two expired rows: those go, the create is taken.
    await store.create(make_record(owner="a"))
    assert counts() == (9, 9, {"a": 5, "b": 4})
    assert await store.purge(time.time()) == 1
    assert counts() == (8, 8, {"a": 5, "b": 3})
    assert await store.purge(time.time() + 7200) == 8
    assert counts() == (0, 0, {})
    await store.close()


# -- SQLite: the file is private ---------------------------------------------------------------


def mode_of(path: Path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


async def test_the_sqlite_store_is_a_0600_file_in_a_0700_directory(tmp_path: Path) -> None:
    path = tmp_path / "new" / "tasks.db"
    store = await open_sqlite_store(path, max_tasks=10)
    await store.create(make_record())
    assert mode_of(path.parent) == 0o700
    assert mode_of(path) == 0o600
    for companion in ("tasks.db-wal", "tasks.db-shm"):  # WAL's files take the file's mode
        assert mode_of(path.parent / companion) == 0o600
    (journal_mode,) = store._eager.execute("PRAGMA journal_mode").fetchone()
    assert journal_mode == "wal"
    await store.close()


async def test_a_configured_store_s_missing_parents_are_refused_never_made(
    tmp_path: Path,
) -> None:
    absent = tmp_path / "nonexist"
    settings = settings_for(f"sqlite://{absent / 'dir' / 'x.db'}")
    with pytest.raises(TaskStoreUnavailable) as refused:
        await task_backend(settings, tmp_path / "state", namespace="x").open()
    assert str(refused.value) == (
        f"the task store's directory {absent / 'dir'} cannot be created: {absent} does not exist "
        f"(only the store's own directory is created); create it (mkdir -p {absent}) or point "
        "MRTR_TASK_STORE at a file in an existing directory"
    )
    assert not absent.exists()
    deeper = tmp_path / "a" / "b" / "c" / "x.db"
    with pytest.raises(TaskStoreUnavailable, match=f"{tmp_path / 'a'} does not exist"):
        await open_sqlite_store(deeper, max_tasks=10)
    assert not (tmp_path / "a").exists()


async def test_the_default_store_s_directory_is_made_as_the_key_s_is(tmp_path: Path) -> None:
    # The per-user state directory may not exist yet on a new account (~/.local/state).
    state = tmp_path / "home" / ".local" / "state" / "mrtr-server"
    store = await task_backend(Settings(), state, namespace="mrtr-server").open()
    assert isinstance(store, SqliteTaskStore)
    assert store.path == state / TASKS_FILE_NAME
    assert mode_of(state) == 0o700
    await store.close()


async def test_a_symlinked_sqlite_file_or_directory_is_refused(tmp_path: Path) -> None:
    real = tmp_path / "real"
    real.mkdir(mode=0o700)
    (real / "tasks.db").touch(mode=0o600)
    link_dir = tmp_path / "linked"
    link_dir.mkdir(mode=0o700)
    (link_dir / "tasks.db").symlink_to(real / "tasks.db")
    with pytest.raises(TaskStoreUnavailable, match="is a symlink"):
        await open_sqlite_store(link_dir / "tasks.db", max_tasks=10)
    (tmp_path / "dirlink").symlink_to(real)
    with pytest.raises(TaskStoreUnavailable, match=r"directory .* is a symlink"):
        await open_sqlite_store(tmp_path / "dirlink" / "tasks.db", max_tasks=10)


@pytest.mark.parametrize("mode", [0o770, 0o722, 0o1777])
async def test_a_directory_others_can_write_is_refused(tmp_path: Path, mode: int) -> None:
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(mode)
    with pytest.raises(TaskStoreUnavailable, match=r"can be written by other users.*chmod 700"):
        await open_sqlite_store(shared / "tasks.db", max_tasks=10)
    assert not (shared / "tasks.db").exists()


@pytest.mark.parametrize("mode", [0o644, 0o604, 0o660])
async def test_a_store_file_others_can_read_is_refused(tmp_path: Path, mode: int) -> None:
    path = tmp_path / "tasks.db"
    path.touch()
    path.chmod(mode)
    with pytest.raises(TaskStoreUnavailable, match=r"other users.*chmod 600"):
        await open_sqlite_store(path, max_tasks=10)


async def test_a_store_file_of_another_schema_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "tasks.db"
    store = await open_sqlite_store(path, max_tasks=10)
    store._eager.execute("PRAGMA user_version = 99")
    await store.close()
    with pytest.raises(TaskStoreUnavailable, match="schema version 99"):
        await open_sqlite_store(path, max_tasks=10)


#: What runtime 0.7.0 wrote (schema 2), statement by statement.
SCHEMA_2 = (
    """CREATE TABLE tasks (task_id TEXT PRIMARY KEY NOT NULL, version INTEGER NOT NULL,
        status TEXT NOT NULL, lease_expires REAL NOT NULL, expires_at REAL NOT NULL,
        owner TEXT NOT NULL, once_key TEXT UNIQUE, record TEXT NOT NULL)""",
    "CREATE INDEX tasks_by_lease ON tasks (status, lease_expires)",
    "CREATE INDEX tasks_by_expiry ON tasks (expires_at)",
    "CREATE TABLE task_count (one INTEGER PRIMARY KEY CHECK (one = 1), stored INTEGER NOT NULL)",
    "INSERT INTO task_count (one, stored) VALUES (1, 0)",
    "CREATE TABLE owner_count (owner TEXT PRIMARY KEY NOT NULL, stored INTEGER NOT NULL) "
    "WITHOUT ROWID",
    """CREATE TRIGGER task_added AFTER INSERT ON tasks BEGIN
        UPDATE task_count SET stored = stored + 1;
        INSERT INTO owner_count (owner, stored) VALUES (NEW.owner, 1)
            ON CONFLICT (owner) DO UPDATE SET stored = stored + 1; END""",
    """CREATE TRIGGER task_removed AFTER DELETE ON tasks BEGIN
        UPDATE task_count SET stored = stored - 1;
        UPDATE owner_count SET stored = stored - 1 WHERE owner = OLD.owner;
        DELETE FROM owner_count WHERE owner = OLD.owner AND stored <= 0; END""",
    "PRAGMA user_version = 2",
)


async def test_a_schema_2_file_gains_the_round_records_and_keeps_its_tasks(
    tmp_path: Path,
) -> None:
    # A project updated from 0.7.0 keeps its tasks (a host may be polling one), gets single
    # use (the rounds table) and its owners' bytes counted from the records it has.
    path = tmp_path / "tasks.db"
    record = make_record()
    with sqlite3.connect(path, isolation_level=None) as db:
        for statement in SCHEMA_2:
            db.execute(statement)
        db.execute(
            "INSERT INTO tasks (task_id, version, status, lease_expires, expires_at, owner, "
            "once_key, record) VALUES (?, ?, ?, ?, ?, ?, NULL, ?)",
            (
                record.task_id,
                record.version,
                record.status,
                record.lease_expires,
                record.expires_at,
                record.owner,
                record.to_json(),
            ),
        )
    path.chmod(0o600)
    store = await open_sqlite_store(path, max_tasks=10)
    try:
        assert await store.load(record.task_id) == record
        claimed = await store.claim_round(round_claim("run-a"), time.time())
        assert claimed.holder == "run-a"
        assert store._eager.execute("PRAGMA user_version").fetchone()[0] == 3
        (weight,) = store._eager.execute(
            "SELECT bytes FROM owner_count WHERE owner = ?", (record.owner,)
        ).fetchone()
        assert weight == len(record.to_json().encode())
        grown = record.evolve(result={"content": [{"type": "text", "text": "y" * 100}]})
        assert await store.swap(grown)
        (weight,) = store._eager.execute(
            "SELECT bytes FROM owner_count WHERE owner = ?", (record.owner,)
        ).fetchone()
        assert weight == len(grown.to_json().encode())
    finally:
        await store.close()


#: What runtimes 0.8.0 to 0.11.0 wrote (schema 3): schema 2, the owners' bytes of tasks and
#: the round records, without their owners.
SCHEMA_3 = (
    *SCHEMA_2[:-1],
    *_sqlite_store._OWNER_BYTES_SCHEMA,
    """CREATE TABLE rounds (key TEXT PRIMARY KEY NOT NULL, version INTEGER NOT NULL,
        expires_at REAL NOT NULL, free_from REAL NOT NULL, record TEXT NOT NULL) WITHOUT ROWID""",
    "PRAGMA user_version = 3",
)


#: How runtimes 0.8.0 to 0.11.0 claim a round (no owner): they may share the file with this one.
CLAIM_ROUND_0_11 = (
    "INSERT INTO rounds (key, version, expires_at, free_from, record) VALUES (?, 1, ?, ?, ?) "
    "ON CONFLICT (key) DO UPDATE SET version = rounds.version + 1, "
    "expires_at = excluded.expires_at, free_from = excluded.free_from, record = excluded.record "
    "WHERE rounds.free_from <= ? OR rounds.expires_at <= ? "
    "RETURNING version"
)


async def test_a_schema_3_file_keeps_its_round_records_and_counts_new_ones_by_owner(
    tmp_path: Path,
) -> None:
    # A project updated from 0.8.0 to 0.11.0: a confirmation carried out before the update
    # is still answered from its record (never run again), and new rounds count by owner.
    # The schema stays 3 (the owners are only added), so a 0.11.0 server still running on the
    # same file (a host not restarted yet) keeps claiming rounds, counted under no owner.
    path = tmp_path / "tasks.db"
    settled = RoundRecord(key="before", expires_at=time.time() + 600, outcome={"result": {}})
    with sqlite3.connect(path, isolation_level=None) as db:
        for statement in SCHEMA_3:
            db.execute(statement)
        old_json = settled.to_json()  # the fields 0.11 wrote: the owner is never in it
        db.execute(
            "INSERT INTO rounds (key, version, expires_at, free_from, record) "
            "VALUES (?, 1, ?, ?, ?)",
            ("before", settled.expires_at, math.inf, old_json),
        )
    path.chmod(0o600)
    store = await open_sqlite_store(path, max_tasks=10)
    try:
        assert store._eager.execute("PRAGMA user_version").fetchone()[0] == 3
        assert await store.claim_round(round_claim("run", key="before"), time.time()) == settled
        mine = await store.claim_round(round_claim("run", key="after"), time.time())
        assert await store.round_bytes("owner-a") == len(mine.to_json())
        assert await store.round_bytes("") == len(old_json)  # the old record: owner unknown
        now = time.time()
        claimed_by_0_11 = store._eager.execute(
            CLAIM_ROUND_0_11, ("by-0.11", now + 600, now + 15, old_json, now, now)
        ).fetchone()
        assert claimed_by_0_11 == (1,)
        assert await store.round_bytes("") == 2 * len(old_json)
    finally:
        await store.close()
    reopened = await open_sqlite_store(path, max_tasks=10)
    try:  # opened again: nothing more to add, nothing lost
        assert await reopened.round_bytes("owner-a") == len(mine.to_json())
    finally:
        await reopened.close()


async def test_a_file_that_is_not_sqlite_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "tasks.db"
    path.write_bytes(b"not a database at all, just some bytes" * 100)
    path.chmod(0o600)
    with pytest.raises(TaskStoreUnavailable, match="cannot be used"):
        await open_sqlite_store(path, max_tasks=10)


# -- MRTR_TASK_STORE and the opener ------------------------------------------------------------


def test_the_default_store_is_tasks_sqlite3_beside_the_per_user_key(tmp_path: Path) -> None:
    state = tmp_path / "state" / "mrtr-server"
    backend = task_backend(Settings.from_environment({}), state, namespace="mrtr-server")
    assert (backend.kind, backend.path) == ("sqlite", state / TASKS_FILE_NAME)
    # With no home to keep it in, tasks live in memory.
    assert task_backend(Settings(), None, namespace="x").kind == "memory"


async def test_the_store_opens_only_when_asked_and_a_stat_says_whether_to(
    tmp_path: Path,
) -> None:
    state = tmp_path / "state"
    backend = task_backend(Settings(), state, namespace="x")
    assert not backend.may_hold_tasks()
    assert not state.exists()  # deciding which store opens nothing, creates nothing
    store = await backend.open()
    assert isinstance(store, SqliteTaskStore)
    assert backend.may_hold_tasks()
    await store.close()
    memory = task_backend(settings_for("memory:"), state, namespace="x")
    assert not memory.may_hold_tasks()
    assert isinstance(await memory.open(), MemoryTaskStore)
    assert task_backend(settings_for("redis://localhost/0"), None, namespace="x").may_hold_tasks()


def test_choosing_the_store_loads_no_store_module(tmp_path: Path) -> None:
    # Start-up chooses the store (Project.build_server); the stores load with the first task.
    script = textwrap.dedent(
        f"""
        import importlib, sys
        from pathlib import Path
        runtime = {mrtr_runtime.__name__!r}
        backends = importlib.import_module(runtime + "._task_backends")
        config = importlib.import_module(runtime + "._config")
        for url in ("", "redis://h/0", "memory:", "sqlite:///x.db"):
            settings = config.Settings.from_environment({{"MRTR_TASK_STORE": url}})
            backends.task_backend(settings, Path({str(tmp_path)!r}), namespace="x")
        ends = ("._task_store", "._sqlite_store", ".redis", "sqlite3")
        print(sorted(name for name in sys.modules if name.endswith(ends) or name == "redis"))
        """
    )
    out = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True, timeout=60
    ).stdout
    assert out.strip() == "[]"


@pytest.mark.parametrize(
    "value",
    [
        "sqlite://relative.db",
        "sqlite:///",
        "sqlite:///tmp/x.db?mode=ro",
        "postgres://db/tasks",
        "redis://",
        "redis://host:notaport/0",
        "redis://host:6379/zero",
        "memory",
        "/abs/path.db",
    ],
)
async def test_a_bad_store_url_is_refused_with_the_forms_it_may_take(value: str) -> None:
    settings = settings_for(value)
    assert "MRTR_TASK_STORE" in settings.problems
    backend = task_backend(settings, Path("/unused"), namespace="x")
    assert backend.kind == "refused"
    with pytest.raises(TaskStoreUnavailable, match="MRTR_TASK_STORE") as refused:
        await backend.open()
    assert "is refused" in str(refused.value)


def test_a_redis_password_never_appears_in_messages_or_reprs() -> None:
    url = "rediss://user:s3cret-pass@cache.internal:6380/2"
    settings = settings_for(url)
    assert settings.problems == {}
    assert "s3cret" not in repr(settings)
    backend = task_backend(settings, None, namespace="x")
    assert backend.kind == "redis"
    assert backend.location == "rediss://user:***@cache.internal:6380/2"
    assert "s3cret" not in repr(backend)
    bad = settings_for("redis://:s3cret-pass@host:bad/0")
    assert "s3cret" not in bad.problems["MRTR_TASK_STORE"]


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("redis://cache:6379/0?password=s3cret-pass", "redis://cache:6379/0?password=***"),
        ("redis://cache?password=s3cret-pass", "redis://cache?password=***"),
        (
            "rediss://cache/1?username=s3cret-user&password=s3cret-pass&ssl_cert_reqs=none",
            "rediss://cache/1?username=***&password=***&ssl_cert_reqs=none",
        ),
        ("redis://cache/0?Password=s3cret-pass#x", "redis://cache/0?Password=***#x"),
        (
            "redis://u:s3cret-pass@cache/0?password=s3cret-pass",
            "redis://u:***@cache/0?password=***",
        ),
    ],
)
def test_credentials_in_a_store_url_s_query_are_masked_like_its_userinfo(
    url: str, shown: str
) -> None:
    # redis-py reads ?password= and ?username= as it reads the userinfo.
    backend = task_backend(settings_for(url), None, namespace="x")
    assert backend.location == shown
    assert "s3cret" not in repr(backend)
    bad = settings_for(url.replace("cache", "cache:bad", 1))
    assert "s3cret" not in bad.problems["MRTR_TASK_STORE"]


async def test_an_unreachable_redis_named_by_a_query_password_hides_it() -> None:
    backend = task_backend(
        settings_for("redis://127.0.0.1:1/0?password=pw-123"), None, namespace="x"
    )
    with pytest.raises(TaskStoreUnavailable, match="cannot be reached") as failed:
        await backend.open()
    assert "pw-123" not in str(failed.value)


@pytest.mark.parametrize("variable", ["MRTR_TASK_MAX_STORED", "MRTR_TASK_MAX_PER_OWNER"])
@pytest.mark.parametrize("value", ["0", "-5", "ten", "1e3", "9999999999"])
async def test_a_bad_bound_is_refused(variable: str, value: str) -> None:
    settings = Settings.from_environment({variable: value})
    assert "whole number from 1" in settings.problems[variable]
    with pytest.raises(TaskStoreUnavailable, match=variable):
        await task_backend(settings, None, namespace="x").open()


def test_the_bounds_default_and_reach_every_store(tmp_path: Path) -> None:
    assert Settings.from_environment({"MRTR_TASK_MAX_STORED": " 25 "}).task_max_stored == 25
    assert Settings.from_environment({}).task_max_stored == 10_000
    assert Settings.from_environment({"MRTR_TASK_MAX_PER_OWNER": "7"}).task_max_per_owner == 7
    assert Settings.from_environment({}).task_max_per_owner == 1_000
    for url in ("memory:", f"sqlite://{tmp_path / 'x.db'}", "redis://localhost/0"):
        backend = task_backend(settings_for(url, 30, 7), None, namespace="x")
        assert (backend.max_tasks, backend.max_per_owner) == (30, 7)


async def test_a_missing_redis_extra_names_the_install_command(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    wing = f"{mrtr_runtime.__name__}.redis"
    for name in (wing, f"{wing}._store", "redis", "redis.asyncio", "redis.exceptions"):
        monkeypatch.delitem(sys.modules, name, raising=False)
    monkeypatch.setitem(sys.modules, "redis", None)  # what an environment without it imports
    backend = task_backend(
        settings_for("redis://127.0.0.1:1/0"), None, namespace="x", project="my-server"
    )
    with pytest.raises(TaskStoreUnavailable) as missing:
        await backend.open()
    assert "install the project's redis extra: pip install 'my-server[redis]'" in str(missing.value)


async def test_an_unreachable_redis_fails_at_open_naming_it_without_its_password() -> None:
    backend = task_backend(settings_for("redis://:pw-123@127.0.0.1:1/0"), None, namespace="x")
    with pytest.raises(TaskStoreUnavailable, match="cannot be reached") as failed:
        await backend.open()
    assert "pw-123" not in str(failed.value)
    assert "127.0.0.1:1" in str(failed.value)


async def test_a_lone_surrogate_in_a_record_is_stored_and_read_back(open_store: Opener) -> None:
    # A client may send "\ud800" in any JSON string (an argument, an answer, a result echoing
    # one): SQLite's UTF-8 and Redis refused the record, and the task never ended.
    store = await open_store()
    record = make_record(arguments={"s": "\ud800 and \udfff"}, result={"text": "\ud83d"})
    assert await store.create(record) == record
    assert await store.load(record.task_id) == record
    swapped = record.evolve(status_message="\udc00")
    assert await store.swap(swapped)
    assert await store.load(record.task_id) == swapped


async def test_an_owner_s_bytes_are_read_as_the_bound_counts_them(open_store: Opener) -> None:
    store = await open_store(max_bytes_per_owner=10_000_000)
    records = [make_record(owner="counted", arguments={"x": "y" * n}) for n in (10, 1000)]
    for record in records:
        await store.create(record)
    assert await store.owner_bytes("counted") == sum(len(r.to_json()) for r in records)
    assert await store.owner_bytes("nobody") == 0
