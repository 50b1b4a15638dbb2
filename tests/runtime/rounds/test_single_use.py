"""A confirmation is carried out once, by the runtime, whatever comes with its replays.

2026-07-28 basic/patterns/mrtr, "Security Considerations": servers for which a given
requestState must be consumed at most once MUST enforce that invariant server-side. Here every
round that closes a verified requestState is recorded under the token's identity (its exact
text: nonce and binding), and every later sending of that token is answered from the record
before any handler code runs:

- sendings running together (in one process, or in two servers sharing a store) run once,
  whatever answers, extra properties or extra keys each carries;
- a sending after the first finished gets the same result, not a second run and not a new
  question (a handler that re-asks when what it showed changed, skeleton (e), included);
- a round that asked again is not consumed: a corrected answer can still be sent;
- a run that died before its point of no return is run again; one that died past it is not,
  and says so; a run whose claim lapsed (a paused process) stops at its point of no return;
- a store that cannot record the round refuses to run it, naming the store.
"""

from __future__ import annotations

# The names this runtime added for single use are imported where they are used, so that the
# tests of what a client sees also run against an older runtime (where they fail).
import hashlib
import logging
import sqlite3
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import pytest
from anyio import wait_all_tasks_blocked

from mrtr_runtime import (
    Accepted,
    Context,
    InputRequired,
    Registry,
    ToolAnnotations,
    elicit_form,
)
from mrtr_runtime._task_store import MemoryTaskStore, TaskStore, TaskStoreUnavailable
from mrtr_runtime.server import Server
from mrtr_runtime.testing import MemoryClient
from support import (
    ALL_CAPABILITIES,
    BOUND,
    SERVER_NAME,
    Confirm,
    Json,
    accept,
    make_codec,
    text_of,
)

pytestmark = pytest.mark.anyio


class World:
    """What the tools act on, and how often they acted."""

    def __init__(self) -> None:
        self.version = 1
        self.actions = 0
        self.gate = anyio.Event()
        self.gate.set()
        self.before_action: Callable[[], None] = lambda: None


def build(world: World) -> Registry:
    registry = Registry()

    @registry.tool(annotations=ToolAnnotations(destructive=True, idempotent=False))
    async def rotate(name: str, *, ctx: Context) -> str | InputRequired:
        """Skeleton (e): the question shows the current version, and the yes is for it."""
        shown = f"v{world.version}"
        question = f"Rotate {name} from {shown} to v{world.version + 1}?"
        match ctx.form_answer("confirm", Confirm):
            case None:
                return ctx.request_input({"confirm": elicit_form(question, Confirm)}, state=shown)
            case Accepted(content=Confirm(confirmed=True)) if ctx.state != shown:
                again = elicit_form(f"{name} changed after you confirmed. {question}", Confirm)
                return ctx.request_input({"confirm": again}, state=shown)
            case Accepted(content=Confirm(confirmed=True)):
                await world.gate.wait()
                world.before_action()
                # As 0.7 tools call it: the claim is checked all the same (test_fencing.py
                # awaits the written mark with ctx.pass_point_of_no_return()).
                ctx.point_of_no_return()
                world.actions += 1
                world.version += 1
                return f"Rotated {name} to v{world.version} (action {world.actions})."
            case _:
                return "Nothing was rotated."

    @registry.tool(task="optional", annotations=ToolAnnotations(idempotent=False))
    async def rotate_task(name: str, *, ctx: Context) -> str | InputRequired:
        """The same as a task: asks in rounds, then acts in the task."""
        shown = f"v{world.version}"
        if not ctx.in_task:
            match ctx.form_answer("confirm", Confirm):
                case None:
                    ask = elicit_form(f"Rotate {name} from {shown}?", Confirm)
                    return ctx.request_input({"confirm": ask}, state=shown)
                case Accepted(content=Confirm(confirmed=True)) if ctx.state != shown:
                    ask = elicit_form(f"{name} changed. Rotate it from {shown}?", Confirm)
                    return ctx.request_input({"confirm": ask}, state=shown)
                case Accepted(content=Confirm(confirmed=True)):
                    ctx.start_task(f"Rotating {name}")
                case _:
                    return "Nothing was rotated."
        world.actions += 1
        world.version += 1
        return f"Rotated {name} to v{world.version} (action {world.actions})."

    return registry


def make(world: World, store: Callable[[], Any] | None = None, **codec: Any) -> Server:
    return Server(
        name=SERVER_NAME,
        version="1",
        registry=build(world),
        signing=make_codec(**codec),
        task_store=store,
    )


async def first(client: MemoryClient, tool: str = "rotate") -> str:
    result = await client.request("tools/call", {"name": tool, "arguments": {"name": "db"}})
    assert result["resultType"] == "input_required", result
    token: str = result["requestState"]
    return token


def confirming(token: str, tool: str = "rotate", **answers: Json) -> Json:
    return {
        "name": tool,
        "arguments": {"name": "db"},
        "requestState": token,
        "inputResponses": answers or {"confirm": accept(confirmed=True)},
    }


#: Six ways a client, an SDK or a proxy changes a confirmation it sends again.
VARIANTS: list[Json] = [
    {"confirm": accept(confirmed=True)},
    {"confirm": {"action": "accept", "content": {"confirmed": True, "note": "again"}}},
    {"confirm": accept(confirmed=True), "never-asked": accept(confirmed=True)},
    {"confirm": {"action": "accept", "content": {"confirmed": True}, "extra": 1}},
    {"confirm": {"content": {"confirmed": True}, "action": "accept"}},
    {"confirm": accept(confirmed=True), "x": {"action": "decline"}},
]


async def send_together(client: MemoryClient, world: World, params: list[Json]) -> list[Json]:
    results: list[Json] = [{} for _ in params]

    async def one(index: int) -> None:
        results[index] = await client.request("tools/call", params[index])

    world.gate = anyio.Event()
    with anyio.fail_after(BOUND):
        async with anyio.create_task_group() as group:
            for index in range(len(params)):
                group.start_soon(one, index)
            await wait_all_tasks_blocked()
            world.gate.set()
    return results


async def test_six_concurrent_replays_each_with_something_extra_run_once() -> None:
    world = World()
    client = MemoryClient(make(world), capabilities=ALL_CAPABILITIES)
    token = await first(client)
    params = [{**confirming(token), "inputResponses": answers} for answers in VARIANTS]
    results = await send_together(client, world, params)
    assert world.actions == 1
    assert {text_of(result) for result in results} == {"Rotated db to v2 (action 1)."}


async def test_sixty_concurrent_replays_at_ten_times_the_variants_run_once() -> None:
    world = World()
    client = MemoryClient(make(world), capabilities=ALL_CAPABILITIES)
    token = await first(client)
    params = [{**confirming(token), "inputResponses": VARIANTS[i % 6]} for i in range(60)]
    results = await send_together(client, world, params)
    assert world.actions == 1
    assert len({text_of(result) for result in results}) == 1


async def test_a_replay_after_completion_gets_its_result_not_a_new_question() -> None:
    # Skeleton (e) re-asks when what it showed changed: without single use, the replay of its
    # confirming round would ask "rotate v2 to v3?", and a yes would rotate again.
    world = World()
    client = MemoryClient(make(world), capabilities=ALL_CAPABILITIES)
    token = await first(client)
    done = await client.request("tools/call", confirming(token))
    assert text_of(done) == "Rotated db to v2 (action 1)."
    for answers in [*VARIANTS, {"confirm": {"action": "decline"}}, {}]:
        again = await client.request("tools/call", {**confirming(token), "inputResponses": answers})
        assert again["resultType"] == "complete", again
        assert text_of(again) == "Rotated db to v2 (action 1)."
    assert world.actions == 1


async def test_a_replay_with_a_malformed_answer_still_gets_the_recorded_result() -> None:
    world = World()
    client = MemoryClient(make(world), capabilities=ALL_CAPABILITIES)
    token = await first(client)
    await client.request("tools/call", confirming(token))
    again = await client.request(
        "tools/call", {**confirming(token), "inputResponses": {"confirm": {"action": "maybe"}}}
    )
    assert text_of(again) == "Rotated db to v2 (action 1)."


async def test_a_round_that_asked_again_is_not_consumed() -> None:
    # The seed's "correct an earlier answer by re-sending it": a round whose handler asked
    # again (here the answer did not fit the form) can be sent again with a better answer.
    world = World()
    client = MemoryClient(make(world), capabilities=ALL_CAPABILITIES)
    token = await first(client)
    asked = await client.request(
        "tools/call", {**confirming(token), "inputResponses": {"confirm": accept(confirmed="yes")}}
    )
    assert asked["resultType"] == "input_required"
    done = await client.request("tools/call", confirming(token))
    assert text_of(done) == "Rotated db to v2 (action 1)."
    assert world.actions == 1


async def test_a_decline_is_an_outcome_too() -> None:
    world = World()
    client = MemoryClient(make(world), capabilities=ALL_CAPABILITIES)
    token = await first(client)
    declined = await client.request(
        "tools/call", {**confirming(token), "inputResponses": {"confirm": {"action": "decline"}}}
    )
    assert text_of(declined) == "Nothing was rotated."
    again = await client.request("tools/call", confirming(token))
    assert text_of(again) == "Nothing was rotated."
    assert world.actions == 0


async def test_each_token_is_its_own_round() -> None:
    # Two conversations asking the same question get two tokens (their nonces differ): one's
    # confirmation is never taken for the other's.
    world = World()
    client = MemoryClient(make(world), capabilities=ALL_CAPABILITIES)
    one, two = await first(client), await first(client)
    assert one != two
    assert text_of(await client.request("tools/call", confirming(one))) == (
        "Rotated db to v2 (action 1)."
    )
    # The second conversation's yes was for v1, which is gone: it is asked again (e).
    assert (await client.request("tools/call", confirming(two)))["resultType"] == ("input_required")
    assert world.actions == 1


def opening(store: TaskStore) -> Callable[[], Any]:
    async def open_store() -> TaskStore:
        return store

    return open_store


def sqlite_opener(path: Path) -> Callable[[], Any]:
    from mrtr_runtime._sqlite_store import open_sqlite_store

    async def open_store() -> TaskStore:
        return await open_sqlite_store(path, max_tasks=1000, max_per_owner=1000)

    return open_store


async def test_two_servers_on_one_sqlite_store_run_a_replayed_round_once(tmp_path: Path) -> None:
    # Two processes of one user (two hosts, or a restart overlapping the old process) share
    # the per-user store: a round sent to both at once runs in one of them.
    (tmp_path / "state").mkdir(mode=0o700)
    path = tmp_path / "state" / "tasks.db"
    world = World()
    servers = [make(world, sqlite_opener(path)) for _ in range(2)]
    clients = [MemoryClient(server, capabilities=ALL_CAPABILITIES) for server in servers]
    token = await first(clients[0])
    results: list[Json] = []
    world.gate = anyio.Event()

    async def one(index: int) -> None:
        params = {**confirming(token), "inputResponses": VARIANTS[index % 6]}
        results.append(await clients[index % 2].request("tools/call", params))

    with anyio.fail_after(BOUND):
        async with anyio.create_task_group() as group:
            for index in range(12):
                group.start_soon(one, index)
            await wait_all_tasks_blocked()
            await anyio.sleep(0.3)  # the other server's sendings poll the record
            world.gate.set()
    assert world.actions == 1
    assert {text_of(result) for result in results} == {"Rotated db to v2 (action 1)."}
    # A third server, started later on the same store, answers from the record too.
    late = MemoryClient(make(world, sqlite_opener(path)), capabilities=ALL_CAPABILITIES)
    assert text_of(await late.request("tools/call", confirming(token))) == (
        "Rotated db to v2 (action 1)."
    )
    with sqlite3.connect(path) as db:
        (rows,) = db.execute("SELECT count(*) FROM rounds").fetchone()
    assert rows == 1


async def test_a_task_tool_replayed_after_completion_gets_the_same_task() -> None:
    world = World()
    client = MemoryClient(make(world), capabilities=ALL_CAPABILITIES, tasks=True)
    token = await first(client, "rotate_task")
    made = await client.request("tools/call", confirming(token, "rotate_task"))
    assert made["resultType"] == "task"
    with anyio.fail_after(BOUND):
        for _ in range(1000):
            got = await client.request("tasks/get", {"taskId": made["taskId"]})
            if got["status"] == "completed":
                break
            await anyio.sleep(0.01)
    for answers in VARIANTS:
        params = {**confirming(token, "rotate_task"), "inputResponses": answers}
        again = await client.request("tools/call", params)
        assert again["resultType"] == "task", again
        assert again["taskId"] == made["taskId"]
    assert world.actions == 1


async def test_a_task_tool_replayed_by_a_client_without_tasks_gets_the_task_s_result() -> None:
    world = World()
    server = make(world)
    tasks_client = MemoryClient(server, capabilities=ALL_CAPABILITIES, tasks=True)
    token = await first(tasks_client, "rotate_task")
    made = await tasks_client.request("tools/call", confirming(token, "rotate_task"))
    plain = MemoryClient(server, capabilities=ALL_CAPABILITIES)
    with anyio.fail_after(BOUND):
        result = await plain.request("tools/call", confirming(token, "rotate_task"))
    assert text_of(result) == "Rotated db to v2 (action 1)."
    got = await tasks_client.request("tasks/get", {"taskId": made["taskId"]})
    assert got["result"]["resultType"] == "complete"  # basic/index: every result says its kind
    assert world.actions == 1


# -- runs that died, runs that were paused -------------------------------------------------------


async def claimed_by_a_dead_run(store: TaskStore, token: str, *, committed: bool) -> None:
    """The record a process leaves when it dies mid-run: claimed, its lease lapsed."""
    from mrtr_runtime._task_store import RoundRecord
    from mrtr_runtime._tokens import round_key

    now = time.time()
    record = await store.claim_round(
        RoundRecord(
            key=round_key(token),
            expires_at=now + 600,
            holder="dead-process:0",
            lease_expires=now - 1,
            committed=committed,
        ),
        now,
    )
    assert record.holder == "dead-process:0"


async def test_a_run_that_died_before_its_point_of_no_return_is_run_again(
    caplog: pytest.LogCaptureFixture,
) -> None:
    store = MemoryTaskStore()
    world = World()
    client = MemoryClient(make(world, opening(store)), capabilities=ALL_CAPABILITIES)
    token = await first(client)
    await claimed_by_a_dead_run(store, token, committed=False)
    with caplog.at_level(logging.INFO, logger="mrtr_runtime"):
        done = await client.request("tools/call", confirming(token))
    assert text_of(done) == "Rotated db to v2 (action 1)."
    assert any("resumed" in record.getMessage() for record in caplog.records)


async def test_a_run_that_died_past_its_point_of_no_return_is_not_run_again(
    caplog: pytest.LogCaptureFixture,
) -> None:
    store = MemoryTaskStore()
    world = World()
    client = MemoryClient(make(world, opening(store)), capabilities=ALL_CAPABILITIES)
    token = await first(client)
    await claimed_by_a_dead_run(store, token, committed=True)
    from mrtr_runtime._once import MAYBE_CARRIED_OUT_ROUND

    with caplog.at_level(logging.INFO, logger="mrtr_runtime"):
        result = await client.request("tools/call", confirming(token))
        again = await client.request("tools/call", confirming(token))
    assert result["isError"] is True
    assert text_of(result) == MAYBE_CARRIED_OUT_ROUND
    assert again == result
    assert world.actions == 0
    decisions = [record.getMessage() for record in caplog.records]
    assert sum("stopped past its point of no return" in line for line in decisions) == 1


async def test_a_run_paused_past_its_lease_stops_at_its_point_of_no_return() -> None:
    # The process froze (SIGSTOP, a VM paused, a laptop asleep) between the yes and the
    # action; meanwhile its claim lapsed and another sending took the round over and acted.
    # When it wakes, its point of no return refuses: the action happens once.
    world = World()
    server = make(world)
    server.ledger.lease_seconds = 0.2
    client = MemoryClient(server, capabilities=ALL_CAPABILITIES)
    token = await first(client)
    paused = anyio.Event()
    woken = anyio.Event()
    outcomes: dict[str, Json | BaseException] = {}

    def freeze_first_run() -> None:
        if not paused.is_set():
            paused.set()
            time.sleep(0.4)  # the whole process stops: no renewal runs either
            woken.set()

    world.before_action = freeze_first_run

    async def send(name: str) -> None:
        try:
            outcomes[name] = await client.request("tools/call", confirming(token))
        except Exception as error:  # the frozen run's request
            outcomes[name] = error

    with anyio.fail_after(BOUND):
        async with anyio.create_task_group() as group:
            group.start_soon(send, "frozen")
            await paused.wait()
    assert woken.is_set()
    assert world.actions == 0  # the frozen run stopped before acting
    frozen = outcomes["frozen"]
    assert isinstance(frozen, Exception) and "claim lapsed" in str(frozen)
    # The next sending finds the claim released (the stopped run never passed its mark).
    done = await client.request("tools/call", confirming(token))
    assert text_of(done) == "Rotated db to v2 (action 1)."
    assert world.actions == 1


async def test_point_of_no_return_in_a_thread_waits_for_the_durable_mark(tmp_path: Path) -> None:
    (tmp_path / "state").mkdir(mode=0o700)
    path = tmp_path / "state" / "tasks.db"
    registry = Registry()
    seen: list[bool] = []

    @registry.tool()
    def write_once(*, ctx: Context) -> str | InputRequired:
        if ctx.form_answer("confirm", Confirm) is None:
            return ctx.request_input({"confirm": elicit_form("Go?", Confirm)})
        ctx.point_of_no_return()
        with sqlite3.connect(path) as db:  # what a server taking over would read now
            (record,) = db.execute("SELECT record FROM rounds").fetchone()
        seen.append('"committed":true' in record)
        return "written"

    server = Server(
        name=SERVER_NAME,
        version="1",
        registry=registry,
        signing=make_codec(),
        task_store=sqlite_opener(path),
    )
    client = MemoryClient(server, capabilities=ALL_CAPABILITIES)
    asked = await client.request("tools/call", {"name": "write_once", "arguments": {}})
    params = {
        "name": "write_once",
        "arguments": {},
        "requestState": asked["requestState"],
        "inputResponses": {"confirm": accept(confirmed=True)},
    }
    assert text_of(await client.request("tools/call", params)) == "written"
    assert seen == [True]


async def test_a_store_that_cannot_record_the_round_refuses_to_run_it() -> None:
    world = World()

    from mrtr_runtime._task_store import RoundRecord

    class BrokenStore(MemoryTaskStore):
        async def claim_round(self, claim: RoundRecord, now: float) -> RoundRecord:
            raise TaskStoreUnavailable("the task store /var/x/tasks.db: database or disk is full")

    async def opener() -> TaskStore:
        return BrokenStore()

    client = MemoryClient(make(world, opener), capabilities=ALL_CAPABILITIES)
    token = await first(client)
    from mrtr_runtime.testing import RpcError

    with pytest.raises(RpcError) as failed:
        await client.request("tools/call", confirming(token))
    assert "database or disk is full" in failed.value.message
    assert "/var/x/tasks.db" in failed.value.message
    assert "not carried out" in failed.value.message
    assert world.actions == 0


async def test_a_principal_past_its_round_records_bound_gets_replays_not_new_rounds() -> None:
    # MRTR_TASK_MAX_ROUND_BYTES_PER_OWNER: room for about 3 confirmations' records; 30 are sent
    # (10x). Those past the bound are refused before any handler code runs; the ones carried
    # out are still answered from their records when sent again.
    world = World()
    measured = MemoryTaskStore()

    async def measuring() -> TaskStore:
        return measured

    probe = MemoryClient(make(World(), measuring), capabilities=ALL_CAPABILITIES)
    await probe.request("tools/call", confirming(await first(probe)))
    (one_record,) = measured._round_bytes.values()  # a settled round's record, in bytes
    room = 3 * one_record + one_record // 2

    async def opener() -> TaskStore:
        return MemoryTaskStore(max_round_bytes_per_owner=room)

    client = MemoryClient(make(world, opener), capabilities=ALL_CAPABILITIES)
    from mrtr_runtime.testing import RpcError

    done: list[tuple[str, str]] = []
    refused: list[str] = []
    for _ in range(30):
        token = await first(client)
        try:
            done.append((token, text_of(await client.request("tools/call", confirming(token)))))
        except RpcError as error:
            refused.append(error.message)
    assert len(done) == 3 and len(refused) == 27
    assert world.actions == 3
    assert refused[0].startswith("This confirmation was not carried out: your confirmations'")
    assert "MRTR_TASK_MAX_ROUND_BYTES_PER_OWNER" in refused[0]
    assert refused[0].endswith("Nothing was run.")
    for token, text in done:
        assert text_of(await client.request("tools/call", confirming(token))) == text
    assert world.actions == 3


async def test_the_record_lives_as_long_as_the_token_verifies() -> None:
    store = MemoryTaskStore()
    world = World()
    client = MemoryClient(
        make(world, opening(store), ttl_seconds=900), capabilities=ALL_CAPABILITIES
    )
    token = await first(client)
    before = time.time()
    await client.request("tools/call", confirming(token))
    from mrtr_runtime._tokens import round_key

    record = await store.load_round(round_key(token))
    assert record is not None and record.outcome is not None
    assert record.expires_at >= before + 900
    assert record.holder is None


def test_the_round_key_is_the_token_s_identity_only() -> None:
    from mrtr_runtime._tokens import round_key

    token = "m1.abcd1234." + "A" * 40 + "." + "B" * 43
    assert round_key(token) == hashlib.sha256(token.encode()).hexdigest()
    assert round_key(token) != round_key(token[:-1] + "C")


async def test_cancelled_before_its_point_of_no_return_the_round_is_released() -> None:
    world = World()
    server = make(world)
    client = MemoryClient(server, capabilities=ALL_CAPABILITIES)
    token = await first(client)
    world.gate = anyio.Event()
    body = {**confirming(token), "_meta": client._meta()}
    with anyio.fail_after(BOUND):
        async with anyio.create_task_group() as group:
            message = {"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": body}
            group.start_soon(client.send, message)
            await wait_all_tasks_blocked()
            await client.cancel(7)
    world.gate.set()
    done = await client.request("tools/call", confirming(token))
    assert text_of(done) == "Rotated db to v2 (action 1)."


async def test_a_full_disk_is_named_and_a_stored_task_still_reads(tmp_path: Path) -> None:
    # SQLite's own "database or disk is full", made by capping the file at the pages it has.
    (tmp_path / "state").mkdir(mode=0o700)
    path = tmp_path / "state" / "tasks.db"
    world = World()
    server = make(world, sqlite_opener(path))
    client = MemoryClient(server, capabilities=ALL_CAPABILITIES, tasks=True)
    token = await first(client, "rotate_task")
    made = await client.request("tools/call", confirming(token, "rotate_task"))
    for _ in range(1000):
        done = await client.request("tasks/get", {"taskId": made["taskId"]})
        if done["status"] == "completed":
            break
        await anyio.sleep(0.01)
    store = await server.tasks.store()
    for connection in (store._eager, store._patient):  # type: ignore[attr-defined]
        pages = connection.execute("PRAGMA page_count").fetchone()[0]
        connection.execute(f"PRAGMA max_page_count = {pages}")
    plain = MemoryClient(server, capabilities=ALL_CAPABILITIES)
    from mrtr_runtime.testing import RpcError

    failures = []
    for _ in range(20):  # enough new rounds to need a new page
        token = await first(plain)
        try:
            await plain.request("tools/call", confirming(token))
        except RpcError as error:
            failures.append(error)
            break
    assert failures, "the capped file took every round"
    (failure,) = failures
    assert failure.code == -32603
    assert str(path) in failure.message and "database or disk is full" in failure.message
    assert "not carried out" in failure.message
    still = await client.request("tasks/get", {"taskId": made["taskId"]})
    assert still["status"] == "completed"


async def test_a_store_failing_after_the_run_still_keeps_a_replay_from_running_it() -> None:
    # The claim was written, the run acted, and the store failed on its outcome (its disk
    # filled meanwhile): a smaller record follows, and a replay runs nothing.
    from mrtr_runtime._task_store import RoundRecord

    class FillingStore(MemoryTaskStore):
        async def swap_round(self, record: RoundRecord) -> bool:
            if record.outcome is not None and "Rotated" in str(record.outcome):
                raise TaskStoreUnavailable("the task store /x/tasks.db: database or disk is full")
            return await super().swap_round(record)

    store = FillingStore()
    world = World()
    client = MemoryClient(make(world, opening(store)), capabilities=ALL_CAPABILITIES)
    token = await first(client)
    done = await client.request("tools/call", confirming(token))
    assert text_of(done) == "Rotated db to v2 (action 1)."  # the client got the real result
    again = await client.request("tools/call", confirming(token))
    assert again["isError"] is True
    assert "carried out" in text_of(again) and "could not be kept" in text_of(again)
    assert world.actions == 1


async def test_a_round_that_acted_then_asked_again_is_consumed() -> None:
    # Past its point of no return the handler acted, then asked one more question: a replay
    # of that round must get the same question back, never run the action again.
    registry = Registry()
    actions: list[str] = []

    @registry.tool()
    async def act_then_ask(*, ctx: Context) -> str | InputRequired:
        if ctx.form_answer("confirm", Confirm) is None:
            return ctx.request_input({"confirm": elicit_form("Go?", Confirm)})
        if ctx.form_answer("note", Confirm) is None:
            await ctx.pass_point_of_no_return()
            actions.append("acted")
            return ctx.request_input({"note": elicit_form("Anything to add?", Confirm)})
        return "done"

    server = Server(name=SERVER_NAME, version="1", registry=registry, signing=make_codec())
    client = MemoryClient(server, capabilities=ALL_CAPABILITIES)
    asked = await client.request("tools/call", {"name": "act_then_ask", "arguments": {}})
    params = {
        "name": "act_then_ask",
        "arguments": {},
        "requestState": asked["requestState"],
        "inputResponses": {"confirm": accept(confirmed=True)},
    }
    again = await client.request("tools/call", params)
    assert again["resultType"] == "input_required"
    replayed = await client.request("tools/call", params)
    assert replayed == again  # the same round back, its token included
    assert actions == ["acted"]


async def test_a_sending_waits_for_a_run_elsewhere_until_its_deadline_not_a_count() -> None:
    # A run holds the round in another process (its lease current): the second sending polls
    # for the outcome until wait_seconds, then says so; it is not "changed too often".
    from mrtr_runtime._task_store import RoundRecord
    from mrtr_runtime._tokens import round_key

    store = MemoryTaskStore()
    world = World()
    server = make(world, opening(store))
    server.ledger.wait_seconds = 1.0
    server.ledger.poll_seconds = 0.005  # 200 looks: more than the 64 conflicts allowed
    client = MemoryClient(server, capabilities=ALL_CAPABILITIES)
    token = await first(client)
    now = time.time()
    elsewhere = RoundRecord(round_key(token), now + 600, "other-process:1", now + 600)
    await store.claim_round(elsewhere, now)
    from mrtr_runtime.testing import RpcError

    started = time.monotonic()
    with pytest.raises(RpcError) as waited:
        await client.request("tools/call", confirming(token))
    assert "still being carried out" in waited.value.message
    assert time.monotonic() - started >= 0.9
    assert world.actions == 0


async def test_a_carried_out_round_is_answered_from_its_record_when_the_store_cannot_write() -> (
    None
):
    from mrtr_runtime._task_store import RoundRecord

    class ReadOnly(MemoryTaskStore):
        read_only = False

        async def claim_round(self, claim: RoundRecord, now: float) -> RoundRecord:
            if self.read_only:
                raise TaskStoreUnavailable(
                    "the task store /x/tasks.db: attempt to write a readonly database"
                )
            return await super().claim_round(claim, now)

    store = ReadOnly()
    world = World()
    client = MemoryClient(make(world, opening(store)), capabilities=ALL_CAPABILITIES)
    token = await first(client)
    done = await client.request("tools/call", confirming(token))
    store.read_only = True
    again = await client.request("tools/call", confirming(token))
    assert again == done
    fresh = await first(client)
    from mrtr_runtime.testing import RpcError

    with pytest.raises(RpcError, match="readonly database"):
        await client.request("tools/call", confirming(fresh))
    assert world.actions == 1


async def test_an_unreadable_round_record_refuses_the_round_and_says_why(tmp_path: Path) -> None:
    # A damaged store (or one another version wrote): the record of a carried-out round can no
    # longer be read. Fail closed (it may have been carried out), and say so, naming the store
    # variable: not a bare "Internal error".
    world = World()
    path = tmp_path / "tasks.sqlite3"
    client = MemoryClient(make(world, sqlite_opener(path)), capabilities=ALL_CAPABILITIES)
    token = await first(client)
    await client.request("tools/call", confirming(token))
    assert world.actions == 1
    with sqlite3.connect(path) as db:
        db.execute("UPDATE rounds SET record = ?", ('{"key": "k", "unknown_field": 1}',))
    from mrtr_runtime.testing import RpcError

    with pytest.raises(RpcError) as failed:
        await client.request("tools/call", confirming(token))
    message = failed.value.message
    assert "not carried out" in message
    assert "confirmed round's record it cannot read" in message
    assert "unknown_field" in message and "MRTR_TASK_STORE" in message
    assert world.actions == 1
