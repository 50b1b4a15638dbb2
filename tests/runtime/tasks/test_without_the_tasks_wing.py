"""A project generated without the tasks wing (`include_tasks=no`): its runtime has no `_tasks`.

The wing is pointed at a module that does not exist, which is what the post-gen hook's removal
of `_tasks.py` leaves (tests/template/test_baked_checks.py runs a real bake of it). Without the
wing the server declares no tasks extension, task methods are not found, a `task="optional"`
tool runs inline whatever the client declares, and a confirming round is still carried out at
most once (single use lives in the store, not in the task engine). A tool that would need the
wing, and a test client that would follow tasks, are refused where they are written, saying
which option adds it.
"""

from __future__ import annotations

import dataclasses
import time
from collections import Counter

import pytest

import support
from mrtr_runtime import Context, InputRequired, Registry, _wings, elicit_form
from mrtr_runtime._records import Records
from mrtr_runtime._task_store import MemoryTaskStore, RoundRecord
from mrtr_runtime.server import Server
from mrtr_runtime.testing import MemoryClient
from support import ALL_CAPABILITIES, Json, accept, rpc_error

pytestmark = pytest.mark.anyio

TASKS = "io.modelcontextprotocol/tasks"
WITH_TASKS: Json = {**ALL_CAPABILITIES, "extensions": {TASKS: {}}}
#: What every refusal names: the option, and the command that adds the wing.
ADD_IT = '--variables-to-update \'{"include_tasks": "yes"}\''


@pytest.fixture(autouse=True)
def tasks_left_out(monkeypatch: pytest.MonkeyPatch) -> None:
    wing = dataclasses.replace(_wings.WINGS["tasks"], module="._tasks_left_out")
    monkeypatch.setitem(_wings.WINGS, "tasks", wing)


@pytest.fixture
def runs() -> Counter[str]:
    return Counter()


@pytest.fixture
def server(runs: Counter[str]) -> Server:
    registry = Registry()

    @registry.tool(task="optional")
    async def delete_file(filename: str, *, ctx: Context) -> str | InputRequired:
        """Asks first, then would run as a task."""
        if ctx.form_answer("confirm", support.Confirm) is None:
            return ctx.request_input(
                {"confirm": elicit_form(f"Delete {filename}?", support.Confirm)}
            )
        ctx.start_task("Deleting")
        runs["delete_file"] += 1
        return f"deleted {filename}"

    return support.make_server(registry=registry)


async def confirmation(client: MemoryClient) -> Json:
    """delete_file's confirming round: its first round asked, then a yes under its token."""
    call: Json = {"name": "delete_file", "arguments": {"filename": "a.txt"}}
    first = await client.request("tools/call", call)
    assert first["resultType"] == "input_required"
    answers = {"confirm": accept(confirmed=True)}
    return {**call, "inputResponses": answers, "requestState": first["requestState"]}


async def test_discover_declares_no_tasks_extension(server: Server) -> None:
    discovered = await MemoryClient(server).request("server/discover")
    assert TASKS not in discovered["capabilities"].get("extensions", {})
    assert server.serves_tasks is False


@pytest.mark.parametrize("method", ["tasks/get", "tasks/update", "tasks/cancel"])
async def test_task_methods_are_not_found_even_for_a_client_that_declares_tasks(
    server: Server, method: str
) -> None:
    client = MemoryClient(server, capabilities=WITH_TASKS)
    error = await rpc_error(client, method, {"taskId": "x", "inputResponses": {}})
    assert error.code == -32601
    assert "include_tasks=no" in error.message and ADD_IT in error.message


async def test_a_listen_for_task_ids_is_refused_saying_why(server: Server) -> None:
    client = MemoryClient(server, capabilities=WITH_TASKS)
    with pytest.raises(support.RpcError) as refused:
        async with client.listen({"taskIds": ["x"]}):
            pass
    assert refused.value.code == -32602
    assert "follows no tasks" in refused.value.message and ADD_IT in refused.value.message


async def test_a_task_tool_runs_inline_and_its_confirmation_replayed_runs_once(
    server: Server, runs: Counter[str]
) -> None:
    client = MemoryClient(server, capabilities=WITH_TASKS)
    confirming = await confirmation(client)

    done = await client.request("tools/call", confirming)
    replayed = await client.request("tools/call", confirming)
    with_extra = await client.request("tools/call", {**confirming, "extra": True})

    assert done["resultType"] == "complete"
    assert done["content"] == [{"type": "text", "text": "deleted a.txt"}]
    assert replayed["content"] == with_extra["content"] == done["content"]
    assert runs["delete_file"] == 1
    assert server._tasks is None  # the engine was never asked for


async def test_a_required_task_tool_is_refused_where_it_is_declared() -> None:
    registry = Registry()
    with pytest.raises(ValueError, match="include_tasks=no") as refused:

        @registry.tool(task="required")
        async def must_be_a_task(*, ctx: Context) -> str:
            return "never"

    assert ADD_IT in str(refused.value)


async def test_a_test_client_that_would_follow_tasks_is_refused(server: Server) -> None:
    with pytest.raises(_wings.WingMissing, match="include_tasks=no"):
        MemoryClient(server, tasks=True)


async def test_the_background_loop_forgets_expired_round_records() -> None:
    store = MemoryTaskStore()

    async def opened() -> MemoryTaskStore:
        return store

    records = Records("a-server", opened)
    now = time.time()
    owner = records.owner(None)
    for key, expires_at in (("gone", now - 1), ("kept", now + 600)):
        await store.claim_round(
            RoundRecord(key=key, expires_at=expires_at, lease_expires=now, owner=owner), now
        )
    await records.store()

    await records.purge_if_due(now)

    assert await store.load_round("gone") is None
    assert await store.load_round("kept") is not None


async def test_a_confirmation_that_became_a_task_before_the_wing_was_dropped_says_so(
    server: Server, runs: Counter[str]
) -> None:
    # A project that had the wing, and a store that still holds a round that became a task:
    # its replay runs nothing and says why, rather than failing as an internal error.
    client = MemoryClient(server, capabilities=WITH_TASKS)
    confirming = await confirmation(client)
    await client.request("tools/call", confirming)
    store = await server.records.store()
    assert isinstance(store, MemoryTaskStore)
    (key,) = store._rounds
    record = await store.load_round(key)
    assert record is not None
    assert await store.swap_round(record.evolve(outcome={"task": "task-of-before"}))

    error = await rpc_error(client, "tools/call", confirming)

    assert error.code == -32603
    assert "became task task-of-before" in error.message and ADD_IT in error.message
    assert runs["delete_file"] == 1


async def test_a_question_after_start_task_does_not_reopen_the_confirmed_round(
    runs: Counter[str],
) -> None:
    # With the engine the confirmation would become a task; inline, it is consumed all the
    # same: sent again, it gets the same next question back, never a fresh run that a second
    # yes would carry out again.
    registry = Registry()

    @registry.tool(task="optional")
    async def publish(*, ctx: Context) -> str | InputRequired:
        """Asks, starts the work, then asks the work's own question."""
        if ctx.form_answer("confirm", support.Confirm) is None:
            return ctx.request_input({"confirm": elicit_form("Publish?", support.Confirm)})
        ctx.start_task()
        runs["publish.started"] += 1
        if ctx.form_answer("channel", support.Confirm) is None:
            return ctx.request_input({"channel": elicit_form("Announce?", support.Confirm)})
        runs["publish"] += 1
        return "published"

    client = MemoryClient(support.make_server(registry=registry), capabilities=ALL_CAPABILITIES)
    call: Json = {"name": "publish", "arguments": {}}
    first = await client.request("tools/call", call)
    yes = {"confirm": accept(confirmed=True)}
    confirming = {**call, "inputResponses": yes, "requestState": first["requestState"]}
    second = await client.request("tools/call", confirming)
    assert second["resultType"] == "input_required" and "channel" in second["inputRequests"]

    replayed = await client.request("tools/call", confirming)
    announced = {"channel": accept(confirmed=True)}
    for state in (second["requestState"], replayed["requestState"]):
        done = await client.request(
            "tools/call", {**call, "inputResponses": announced, "requestState": state}
        )
        assert done["content"] == [{"type": "text", "text": "published"}]

    assert replayed == second  # the very same question, from the record
    assert runs["publish.started"] == 2  # the first sending, then the answer to its question
    assert runs["publish"] == 1
