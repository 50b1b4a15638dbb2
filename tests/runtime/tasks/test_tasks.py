"""The tasks extension (`io.modelcontextprotocol/tasks`): tools that become tasks, followed with
tasks/get, answered with tasks/update, stopped with tasks/cancel, resumed after a worker died.

Every test runs the whole server in process (MemoryClient); workers are the engine's own
asyncio tasks on the test's loop. The poll interval is shortened so that following a task
takes milliseconds, not seconds.
"""

from __future__ import annotations

import asyncio
import re
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import replace
from pathlib import Path

import anyio
import pytest

import support
import task_tools
from mrtr_runtime import Context, Registry
from mrtr_runtime._context import RequestCancelled
from mrtr_runtime._jsonrpc import Request, RpcError
from mrtr_runtime._router import Session
from mrtr_runtime._task_store import MemoryTaskStore, TaskRecord, TaskStore, TaskStoreUnavailable
from mrtr_runtime._tasks import MAX_RESULT_BYTES, MAX_RUNNING, MAYBE_DONE, TaskEngine
from mrtr_runtime.server import Server
from mrtr_runtime.testing import ClientSession, MemoryClient, answers
from support import ALL_CAPABILITIES, META_CAPABILITIES, Json, accept, meta, rpc_error
from task_tools import Flags, build

pytestmark = pytest.mark.anyio

TASKS = "io.modelcontextprotocol/tasks"
WITH_TASKS: Json = {**ALL_CAPABILITIES, "extensions": {TASKS: {}}}
ISO_Z = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z$")
BOUND = 10.0


@pytest.fixture
def flags() -> Flags:
    return Flags()


def fast(server: Server) -> Server:
    server.tasks.poll_interval_ms = 20
    return server


@pytest.fixture
def server(flags: Flags) -> Server:
    return fast(support.make_server(registry=build(flags)))


@pytest.fixture
def tasks_client(server: Server) -> MemoryClient:
    return MemoryClient(server, capabilities=WITH_TASKS)


@pytest.fixture
def plain_client(server: Server) -> MemoryClient:
    return MemoryClient(server, capabilities=ALL_CAPABILITIES)


async def until(check: Callable[[], bool]) -> None:
    """Wait (at most BOUND seconds) until `check()` holds."""
    for _ in range(int(BOUND / 0.01)):
        if check():
            return
        await asyncio.sleep(0.01)
    raise AssertionError("the condition did not come true in time")


async def wait_for(client: MemoryClient, task_id: str, *statuses: str) -> Json:
    with anyio.fail_after(BOUND):
        while True:
            task = await client.request("tasks/get", {"taskId": task_id})
            if task["status"] in statuses:
                return task
            await asyncio.sleep(0.01)


async def start(client: MemoryClient, name: str, arguments: Json | None = None) -> Json:
    result = await client.request("tools/call", {"name": name, "arguments": arguments or {}})
    assert result["resultType"] == "task", result
    return result


# -- the extension, advertised and gated ---------------------------------------------------------


async def test_discover_advertises_the_extension_and_initialize_does_not(server: Server) -> None:
    modern = await MemoryClient(server).request("server/discover")
    assert modern["capabilities"]["extensions"] == {TASKS: {}}
    legacy = MemoryClient(server, era="legacy")
    await legacy.initialize()
    assert legacy.initialize_result is not None
    assert "extensions" not in legacy.initialize_result["capabilities"]


async def test_create_task_result_has_the_flat_task_fields(tasks_client: MemoryClient) -> None:
    created = await start(tasks_client, "slow", {"seconds": 0})
    assert set(created) == {
        "resultType",
        "taskId",
        "status",
        "statusMessage",
        "createdAt",
        "lastUpdatedAt",
        "ttlMs",
        "pollIntervalMs",
        "_meta",
    }
    assert created["status"] == "working"
    assert created["statusMessage"] == "Starting"
    assert ISO_Z.match(created["createdAt"]) and ISO_Z.match(created["lastUpdatedAt"])
    assert created["ttlMs"] == 24 * 3600 * 1000
    assert created["pollIntervalMs"] == 20
    assert len(created["taskId"]) >= 32
    done = await wait_for(tasks_client, created["taskId"], "completed")
    assert done["resultType"] == "complete"
    assert done["result"]["content"] == [{"type": "text", "text": "slept 0.0"}]
    assert "requestState" not in done and "task" not in done and "ttl" not in done


async def test_a_client_without_the_extension_gets_the_result_inline(
    plain_client: MemoryClient, flags: Flags
) -> None:
    result = await plain_client.call_tool("slow", {"seconds": 0})
    assert result.text == "slept 0.0" and result.task_id is None
    assert flags.runs["slow"] == 1


async def test_a_required_task_tool_refuses_a_client_without_the_extension_before_running(
    plain_client: MemoryClient, flags: Flags
) -> None:
    error = await rpc_error(plain_client, "tools/call", {"name": "required_job"})
    assert error.code == -32021
    assert error.data == {"requiredCapabilities": {"extensions": {TASKS: {}}}}
    assert flags.runs["required_job"] == 0


async def test_a_required_task_tool_refuses_a_legacy_session(server: Server, flags: Flags) -> None:
    legacy = MemoryClient(server, era="legacy", capabilities=ALL_CAPABILITIES)
    error = await rpc_error(legacy, "tools/call", {"name": "required_job"})
    assert error.code == -32021
    assert flags.runs["required_job"] == 0


@pytest.mark.parametrize("method", ["tasks/get", "tasks/update", "tasks/cancel"])
async def test_task_methods_need_the_extension_on_the_request(
    plain_client: MemoryClient, tasks_client: MemoryClient, method: str
) -> None:
    created = await start(tasks_client, "slow", {"seconds": 0})
    params: Json = {"taskId": created["taskId"], "inputResponses": {}}
    error = await rpc_error(plain_client, method, params)
    assert error.code == -32021
    assert error.data == {"requiredCapabilities": {"extensions": {TASKS: {}}}}


@pytest.mark.parametrize("method", ["tasks/get", "tasks/update", "tasks/cancel"])
async def test_task_methods_do_not_exist_in_a_legacy_session(server: Server, method: str) -> None:
    legacy = MemoryClient(server, era="legacy")
    error = await rpc_error(legacy, method, {"taskId": "x"})
    assert error.code == -32601


@pytest.mark.parametrize("method", ["tasks/result", "tasks/list"])
async def test_tasks_result_and_list_are_not_methods(
    tasks_client: MemoryClient, method: str
) -> None:
    error = await rpc_error(tasks_client, method, {"taskId": "x"})
    assert error.code == -32601


@pytest.mark.parametrize("method", ["tasks/get", "tasks/update", "tasks/cancel"])
async def test_an_unknown_task_id_is_invalid_params(
    tasks_client: MemoryClient, method: str
) -> None:
    error = await rpc_error(tasks_client, method, {"taskId": "nope", "inputResponses": {}})
    assert (error.code, error.message) == (-32602, "Task not found")


async def test_an_expired_task_is_not_found(server: Server, tasks_client: MemoryClient) -> None:
    store = await server.tasks.store()
    gone = replace(dead_record(server, attempts=0), task_id="expired", expires_at=time.time() - 1)
    await store.create(gone)
    error = await rpc_error(tasks_client, "tasks/get", {"taskId": "expired"})
    assert (error.code, error.message) == (-32602, "Task not found")


async def test_an_update_of_a_task_that_asks_nothing_is_acknowledged_and_ignored(
    tasks_client: MemoryClient,
) -> None:
    created = await start(tasks_client, "progress")
    ack = await tasks_client.request(
        "tasks/update", {"taskId": created["taskId"], "inputResponses": {"x.1": accept(a=1)}}
    )
    assert ack["resultType"] == "complete"
    task = await tasks_client.request("tasks/get", {"taskId": created["taskId"]})
    assert task["status"] == "working"


async def test_a_legacy_session_runs_an_optional_task_tool_inline(server: Server) -> None:
    legacy = MemoryClient(server, era="legacy", capabilities=ALL_CAPABILITIES)
    assert (await legacy.call_tool("slow", {"seconds": 0})).text == "slept 0.0"


async def as_principal(server: Server, principal: str, method: str, params: Json) -> Json:
    request = Request(1, method, {**params, "_meta": meta(WITH_TASKS)})
    peer = MemoryClient(server)  # only its notify is used, and never here
    from mrtr_runtime.testing._memory import _Peer

    return await server.handle_request(request, Session(), _Peer(peer), None, principal)


@pytest.mark.parametrize("method", ["tasks/get", "tasks/update", "tasks/cancel"])
async def test_someone_elses_task_is_not_found(server: Server, method: str) -> None:
    created = await as_principal(
        server, "alice", "tools/call", {"name": "slow", "arguments": {"seconds": 0}}
    )
    task_id = created["result"]["taskId"]
    own = await as_principal(server, "alice", "tasks/get", {"taskId": task_id})
    assert own["result"]["taskId"] == task_id
    for who in ("mallory", None):
        params = {"taskId": task_id, "inputResponses": {}}
        if who is None:
            answer = await MemoryClient(server, capabilities=WITH_TASKS).send(
                {
                    "jsonrpc": "2.0",
                    "id": 9,
                    "method": method,
                    "params": {**params, "_meta": meta(WITH_TASKS)},
                }
            )
        else:
            answer = await as_principal(server, who, method, params)
        assert answer is not None
        assert answer["error"] == {"code": -32602, "message": "Task not found"}


async def test_a_task_of_another_server_is_not_found(flags: Flags) -> None:
    store = MemoryTaskStore()

    async def shared() -> TaskStore:
        return store

    first = Server(
        name="one",
        version="1",
        registry=build(flags),
        signing=support.make_codec(),
        task_store=shared,
    )
    second = Server(
        name="two",
        version="1",
        registry=build(flags),
        signing=support.make_codec(),
        task_store=shared,
    )
    created = await start(MemoryClient(first, capabilities=WITH_TASKS), "slow", {"seconds": 0})
    error = await rpc_error(
        MemoryClient(second, capabilities=WITH_TASKS), "tasks/get", {"taskId": created["taskId"]}
    )
    assert error.code == -32602


# -- outcomes --------------------------------------------------------------------------------------


async def test_a_protocol_error_fails_the_task_with_that_error(tasks_client: MemoryClient) -> None:
    created = await start(tasks_client, "protocol_error")
    failed = await wait_for(tasks_client, created["taskId"], "failed")
    assert failed["error"] == {"code": -32000, "message": "the backend refused"}
    assert failed["statusMessage"] == "the backend refused"
    assert "result" not in failed


@pytest.mark.parametrize("tool", ["crashes", "raises_tool_error"])
async def test_a_tool_that_raises_completes_the_task_with_the_inline_is_error(
    tasks_client: MemoryClient, plain_client: MemoryClient, tool: str
) -> None:
    # tasks "Task Execution Errors": only a JSON-RPC error fails a task; a tool's own failure
    # is the same isError result the call gives inline, and the task ends `completed`.
    inline = await plain_client.request("tools/call", {"name": tool, "arguments": {}})
    created = await start(tasks_client, tool)
    done = await wait_for(tasks_client, created["taskId"], "completed", "failed")
    assert done["status"] == "completed"
    assert done["result"]["isError"] is True
    assert done["result"]["content"] == inline["content"]
    assert "error" not in done and "statusMessage" not in done


async def test_a_tool_error_completes_the_task_with_is_error(tasks_client: MemoryClient) -> None:
    created = await start(tasks_client, "tool_error")
    done = await wait_for(tasks_client, created["taskId"], "completed")
    assert done["result"]["isError"] is True


async def test_except_exception_does_not_swallow_start_task(
    tasks_client: MemoryClient, plain_client: MemoryClient
) -> None:
    created = await start(tasks_client, "swallows")
    done = await wait_for(tasks_client, created["taskId"], "completed")
    assert done["result"]["content"][0]["text"] == "in task"
    assert (await plain_client.call_tool("swallows")).text == "inline"


async def test_a_finally_around_start_task_runs_in_the_request_that_became_a_task_and_again(
    tasks_client: MemoryClient, plain_client: MemoryClient, flags: Flags
) -> None:
    # What docs/multi-round-handlers.md states: start_task ends the request's run by raising
    # (a BaseException), so a `finally` (or a `with`) around it runs there, before the task
    # runs the handler again from the top; for a client without tasks it runs once, inline.
    created = await start(tasks_client, "cleans_up")
    done = await wait_for(tasks_client, created["taskId"], "completed")
    assert done["result"]["content"][0]["text"] == "in task"
    assert flags.runs["cleans_up:started"] == 2
    assert (flags.runs["cleans_up:request"], flags.runs["cleans_up:in task"]) == (1, 1)
    assert (await plain_client.call_tool("cleans_up")).text == "inline"
    assert (flags.runs["cleans_up:request"], flags.runs["cleans_up:in task"]) == (2, 1)


async def test_start_task_in_a_tool_not_declared_for_tasks_is_a_tool_mistake(
    tasks_client: MemoryClient,
) -> None:
    result = await tasks_client.call_tool("plain")
    assert result.is_error and "TypeError" in result.text


async def test_a_result_past_the_bound_fails_the_task_saying_so(tasks_client: MemoryClient) -> None:
    created = await start(tasks_client, "huge")
    failed = await wait_for(tasks_client, created["taskId"], "failed")
    assert failed["error"]["code"] == -32603
    assert f"at most {MAX_RESULT_BYTES}" in failed["error"]["message"]
    assert "result" not in failed


async def test_progress_becomes_the_status_message(
    tasks_client: MemoryClient, flags: Flags
) -> None:
    created = await start(tasks_client, "progress")
    with anyio.fail_after(BOUND):
        while True:
            task = await tasks_client.request("tasks/get", {"taskId": created["taskId"]})
            if task.get("statusMessage") == "halfway there":
                break
            await asyncio.sleep(0.01)
    assert task["status"] == "working"
    assert not [n for n in tasks_client.notifications if n["method"] == "notifications/progress"]
    flags.release.set()
    done = await wait_for(tasks_client, created["taskId"], "completed")
    # The end's statusMessage fits the end: not the last progress text of a finished task.
    assert "statusMessage" not in done


async def wait_for_message(client: MemoryClient, task_id: str, message: str) -> None:
    with anyio.fail_after(BOUND):
        while True:
            task = await client.request("tasks/get", {"taskId": task_id})
            if task.get("statusMessage") == message:
                return
            await asyncio.sleep(0.01)


async def test_a_cancelled_task_s_status_message_says_why_not_its_last_progress(
    tasks_client: MemoryClient,
) -> None:
    created = await start(tasks_client, "progress")
    await wait_for_message(tasks_client, created["taskId"], "halfway there")
    await tasks_client.request("tasks/cancel", {"taskId": created["taskId"]})
    cancelled = await wait_for(tasks_client, created["taskId"], "cancelled")
    assert cancelled["statusMessage"] == "Cancelled at the client's request."


async def test_status_messages_are_written_at_a_bounded_rate_and_redacted(
    tasks_client: MemoryClient,
) -> None:
    created = await start(tasks_client, "chatty")
    assert created["statusMessage"] == "using [redacted]"
    done = await wait_for(tasks_client, created["taskId"], "completed")
    assert "statusMessage" not in done  # the end is not the last step's text
    store = await tasks_client.server.tasks.store()
    record = await store.load(created["taskId"])
    # 100 messages in well under STATUS_INTERVAL_SECONDS: the first, the last, the end.
    assert record is not None and record.version <= 5


# -- input during the task ------------------------------------------------------------------------


async def test_task_questions_partial_answers_and_unique_keys(tasks_client: MemoryClient) -> None:
    created = await start(tasks_client, "two_questions")
    task_id = created["taskId"]
    asking = await wait_for(tasks_client, task_id, "input_required")
    keys = set(asking["inputRequests"])
    assert len(keys) == 2
    name_key = next(key for key in keys if key.startswith("name"))
    confirm_key = next(key for key in keys if key.startswith("confirm"))
    ack = await tasks_client.request(
        "tasks/update",
        {"taskId": task_id, "inputResponses": {"unknown-key": {"ignored": True}}},
    )
    assert set(ack) == {"resultType", "_meta"} and ack["resultType"] == "complete"
    await tasks_client.request(
        "tasks/update", {"taskId": task_id, "inputResponses": {name_key: accept(name="Ada")}}
    )
    partial = await tasks_client.request("tasks/get", {"taskId": task_id})
    assert partial["status"] == "input_required"
    assert set(partial["inputRequests"]) == {confirm_key}
    # An answer that does not fit the form: asked again, under a key never used before.
    await tasks_client.request(
        "tasks/update",
        {"taskId": task_id, "inputResponses": {confirm_key: accept(confirmed="yes")}},
    )
    again = await wait_for(tasks_client, task_id, "input_required")
    for _ in range(1000):
        if again["status"] == "input_required" and set(again["inputRequests"]) != {confirm_key}:
            break
        await asyncio.sleep(0.01)
        again = await tasks_client.request("tasks/get", {"taskId": task_id})
    (new_key,) = again["inputRequests"]
    assert new_key not in keys and new_key.startswith("confirm")
    # The answered key is not outstanding any more: an answer to it is ignored.
    await tasks_client.request(
        "tasks/update",
        {"taskId": task_id, "inputResponses": {name_key: accept(name="Eve")}},
    )
    await tasks_client.request(
        "tasks/update",
        {"taskId": task_id, "inputResponses": {new_key: accept(confirmed=True)}},
    )
    done = await wait_for(tasks_client, task_id, "completed")
    assert "Ada" in done["result"]["content"][0]["text"]


async def test_a_bad_answer_envelope_is_invalid_params(tasks_client: MemoryClient) -> None:
    created = await start(tasks_client, "two_questions")
    asking = await wait_for(tasks_client, created["taskId"], "input_required")
    key = next(iter(asking["inputRequests"]))
    error = await rpc_error(
        tasks_client,
        "tasks/update",
        {"taskId": created["taskId"], "inputResponses": {key: {"action": "maybe"}}},
    )
    assert error.code == -32602


async def test_the_client_follows_a_task_and_answers_its_questions(server: Server) -> None:
    client = MemoryClient(
        server,
        capabilities=WITH_TASKS,
        elicitation=answers({"name": {"name": "Ada"}, "confirm": {"confirmed": True}}),
    )
    result = await client.call_tool("two_questions")
    assert result.task_id is not None
    assert "Ada" in result.text


async def test_questions_first_then_the_task(server: Server, flags: Flags) -> None:
    client = MemoryClient(server, tasks=True, elicitation=answers({"confirm": {"confirmed": True}}))
    first = await client.request(
        "tools/call", {"name": "delete_file", "arguments": {"filename": "a"}}
    )
    assert first["resultType"] == "input_required" and "taskId" not in first
    created = await support.next_round(
        client,
        "tools/call",
        {"name": "delete_file", "arguments": {"filename": "a"}},
        first,
        {"confirm": accept(confirmed=True)},
    )
    assert created["resultType"] == "task"
    assert "requestState" not in created and "inputRequests" not in created
    # The tool asks for 60 s, but a task made by a confirmation is kept at least as long as
    # its token verifies (600 s here): a replay must find it, not run again.
    assert created["ttlMs"] == 600_000
    done = await wait_for(client, created["taskId"], "completed")
    assert done["result"]["content"][0]["text"] == "deleted a"
    assert flags.runs["delete_file"] == 1


async def test_a_tool_sets_the_ttl_of_its_tasks(tasks_client: MemoryClient) -> None:
    created = await start(tasks_client, "short_lived")
    assert created["ttlMs"] == 60_000
    store = await tasks_client.server.tasks.store()
    record = await store.load(created["taskId"])
    assert record is not None and record.expires_at == pytest.approx(record.created_at + 60)


async def test_task_answers_are_bounded_like_round_answers(tasks_client: MemoryClient) -> None:
    created = await start(tasks_client, "two_questions")
    await wait_for(tasks_client, created["taskId"], "input_required")
    many = {f"k{n}": accept(name="x") for n in range(640)}  # ten times the 64 a round takes
    error = await rpc_error(
        tasks_client, "tasks/update", {"taskId": created["taskId"], "inputResponses": many}
    )
    assert error.code == -32602 and "more than 64" in error.message
    big = {"k": accept(name="x" * (320 * 1024))}  # ten times the 32 KiB
    error = await rpc_error(
        tasks_client, "tasks/update", {"taskId": created["taskId"], "inputResponses": big}
    )
    assert error.code == -32602 and "bytes" in error.message
    error = await rpc_error(tasks_client, "tasks/update", {"taskId": created["taskId"]})
    assert error.code == -32602


# -- confirmed once --------------------------------------------------------------------------------


async def confirming_round(client: MemoryClient) -> Json:
    params: Json = {"name": "delete_file", "arguments": {"filename": "b"}}
    first = await client.request("tools/call", params)
    return {
        **params,
        "inputResponses": {"confirm": accept(confirmed=True)},
        "requestState": first["requestState"],
    }


async def test_a_replayed_confirmation_returns_the_same_task_and_never_runs_twice(
    tasks_client: MemoryClient, flags: Flags
) -> None:
    retry = await confirming_round(tasks_client)
    created = await tasks_client.request("tools/call", retry)
    await wait_for(tasks_client, created["taskId"], "completed")
    replayed = await tasks_client.request("tools/call", retry)
    assert replayed["resultType"] == "task"
    assert replayed["taskId"] == created["taskId"]
    assert replayed["status"] == "completed"
    together = await asyncio.gather(*(tasks_client.request("tools/call", retry) for _ in range(5)))
    assert {answer["taskId"] for answer in together} == {created["taskId"]}
    assert flags.runs["delete_file"] == 1


async def test_a_replayed_inline_confirmation_returns_the_stored_result(
    plain_client: MemoryClient, tasks_client: MemoryClient, flags: Flags
) -> None:
    retry = await confirming_round(plain_client)
    first = await plain_client.request("tools/call", retry)
    assert first["content"][0]["text"] == "deleted b"
    again = await plain_client.request("tools/call", retry)
    assert again["content"] == first["content"]
    assert flags.runs["delete_file"] == 1
    # A client that follows tasks, replaying the same round, finds the same run as a task.
    # (The token is bound to the principal, not the capabilities, so the round is the same.)
    as_task = await tasks_client.request("tools/call", retry)
    assert as_task["resultType"] == "task" and as_task["status"] == "completed"
    assert flags.runs["delete_file"] == 1


async def test_a_first_round_without_a_token_is_its_own_task_each_time(
    tasks_client: MemoryClient, flags: Flags
) -> None:
    one = await start(tasks_client, "slow", {"seconds": 0})
    two = await start(tasks_client, "slow", {"seconds": 0})
    assert one["taskId"] != two["taskId"]
    await wait_for(tasks_client, one["taskId"], "completed")
    await wait_for(tasks_client, two["taskId"], "completed")
    assert flags.runs["slow"] == 2


# -- cancellation ----------------------------------------------------------------------------------


async def test_cancel_reaches_an_async_handler_within_a_second(
    tasks_client: MemoryClient, flags: Flags
) -> None:
    created = await start(tasks_client, "slow", {"seconds": 60})
    await until(lambda: flags.runs["slow"] > 0)
    sent = time.monotonic()
    ack = await tasks_client.request("tasks/cancel", {"taskId": created["taskId"]})
    assert set(ack) == {"resultType", "_meta"}
    cancelled = await wait_for(tasks_client, created["taskId"], "cancelled", "completed", "failed")
    assert cancelled["status"] == "cancelled"
    assert flags.cancelled_at is not None and flags.cancelled_at - sent < 1.0
    again = await tasks_client.request("tasks/cancel", {"taskId": created["taskId"]})
    assert set(again) == {"resultType", "_meta"}


async def test_cancel_reaches_a_thread_handler_within_a_second(
    tasks_client: MemoryClient, flags: Flags
) -> None:
    created = await start(tasks_client, "threaded")
    await asyncio.sleep(0.05)
    sent = time.monotonic()
    await tasks_client.request("tasks/cancel", {"taskId": created["taskId"]})
    assert await asyncio.to_thread(flags.thread_stopped.wait, 1.0)
    assert time.monotonic() - sent < 1.0
    cancelled = await wait_for(tasks_client, created["taskId"], "cancelled", "completed")
    assert cancelled["status"] == "cancelled"


async def test_a_task_past_its_point_of_no_return_runs_to_its_end_despite_a_cancel(
    tasks_client: MemoryClient, flags: Flags
) -> None:
    created = await start(tasks_client, "committed_job")
    await until(lambda: flags.runs["committed_job"] == 1)
    await tasks_client.request("tasks/cancel", {"taskId": created["taskId"]})
    await asyncio.sleep(0.05)
    still = await tasks_client.request("tasks/get", {"taskId": created["taskId"]})
    assert still["status"] == "working"
    flags.release.set()
    done = await wait_for(tasks_client, created["taskId"], "completed", "cancelled")
    assert done["status"] == "completed"
    assert done["result"]["content"][0]["text"] == "carried out"
    store = await tasks_client.server.tasks.store()
    record = await store.load(created["taskId"])
    assert record is not None and record.committed and record.cancel_requested


async def test_cancel_of_a_task_waiting_for_input_ends_it(tasks_client: MemoryClient) -> None:
    created = await start(tasks_client, "two_questions")
    await wait_for(tasks_client, created["taskId"], "input_required")
    await tasks_client.request("tasks/cancel", {"taskId": created["taskId"]})
    task = await tasks_client.request("tasks/get", {"taskId": created["taskId"]})
    assert task["status"] == "cancelled" and "inputRequests" not in task


# -- durability: a worker that died --------------------------------------------------------------


def dead_record(server: Server, *, attempts: int, target: str = "slow") -> TaskRecord:
    now = time.time()
    return TaskRecord(
        task_id=f"dead-{attempts}-{target}",
        owner=server.tasks.owner(None),
        method="tools/call",
        target=target,
        arguments={"seconds": 0},
        answers={},
        state=None,
        status="working",
        created_at=now - 30,
        updated_at=now - 30,
        expires_at=now + 3600,
        ttl_ms=3_600_000,
        poll_interval_ms=20,
        lease_owner="a-process-that-died",
        lease_expires=now - 1,
        attempts=attempts,
    )


async def test_a_task_whose_lease_lapsed_resumes_on_tasks_get(
    server: Server, tasks_client: MemoryClient, flags: Flags
) -> None:
    store = await server.tasks.store()
    record = await store.create(dead_record(server, attempts=1))
    done = await wait_for(tasks_client, record.task_id, "completed")
    assert done["result"]["content"][0]["text"] == "slept 0.0"
    assert flags.runs["slow"] == 1
    stored = await store.load(record.task_id)
    assert stored is not None and stored.attempts == 2


async def test_the_sweeper_resumes_a_task_whose_lease_lapsed(server: Server, flags: Flags) -> None:
    store = await server.tasks.store()
    record = await store.create(dead_record(server, attempts=1))
    assert await server.tasks.pump() == 1
    for _ in range(1000):
        found = await store.load(record.task_id)
        if found is not None and found.terminal:
            break
        await asyncio.sleep(0.01)
    assert found is not None and found.status == "completed" and flags.runs["slow"] == 1


async def test_a_task_held_by_a_live_lease_is_not_taken_over(server: Server, flags: Flags) -> None:
    store = await server.tasks.store()
    live = replace(dead_record(server, attempts=1), lease_expires=time.time() + 60)
    record = await store.create(live)
    assert await server.tasks.pump() == 0
    client = MemoryClient(server, capabilities=WITH_TASKS)
    assert (await client.request("tasks/get", {"taskId": record.task_id}))["status"] == "working"
    assert flags.runs["slow"] == 0


async def test_a_task_that_stopped_three_times_fails_saying_so(
    server: Server, tasks_client: MemoryClient, flags: Flags
) -> None:
    store = await server.tasks.store()
    record = await store.create(dead_record(server, attempts=3))
    failed = await wait_for(tasks_client, record.task_id, "failed")
    assert "stopped 3 times" in failed["error"]["message"]
    assert flags.runs["slow"] == 0


# -- bounds at 10x ----------------------------------------------------------------------------


async def test_ten_times_the_running_bound_all_complete_never_more_than_the_bound_at_once(
    tasks_client: MemoryClient, server: Server, flags: Flags
) -> None:
    count = 10 * MAX_RUNNING
    with anyio.fail_after(60):
        created = await asyncio.gather(
            *(start(tasks_client, "slow", {"seconds": 0.05}) for _ in range(count))
        )
        assert all(task["status"] == "working" for task in created)
        for task in created:
            await wait_for(tasks_client, task["taskId"], "completed")
    assert flags.runs["slow"] == count
    assert flags.most_running == MAX_RUNNING
    assert server.tasks.running == 0


async def test_a_full_store_refuses_a_new_task_with_an_internal_error(flags: Flags) -> None:
    store = MemoryTaskStore(max_tasks=3)

    async def opener() -> TaskStore:
        return store

    server = fast(
        Server(
            name="s",
            version="1",
            registry=build(flags),
            signing=support.make_codec(),
            task_store=opener,
        )
    )
    client = MemoryClient(server, capabilities=WITH_TASKS)
    for _ in range(3):
        await start(client, "slow", {"seconds": 0})
    for _ in range(27):  # ten times the bound, all refused past it
        error = await rpc_error(client, "tools/call", {"name": "slow", "arguments": {"seconds": 0}})
        assert error.code == -32603 and "3 tasks" in error.message
    assert len(store) == 3


def test_a_task_ttl_past_seven_days_is_refused_where_the_tool_is_declared() -> None:
    registry = Registry()
    with pytest.raises(ValueError, match="7 days"):

        @registry.tool(task="optional", task_ttl_seconds=70 * 24 * 3600)
        def too_long() -> str:
            return ""

    with pytest.raises(ValueError, match="task must be"):

        @registry.tool(task="sometimes")  # type: ignore[arg-type]
        def odd() -> str:
            return ""


# -- notifications ---------------------------------------------------------------------------


async def test_listen_to_task_ids_sends_each_status_change(
    tasks_client: MemoryClient, flags: Flags
) -> None:
    created = await start(tasks_client, "progress")
    task_id = created["taskId"]
    async with tasks_client.listen({"taskIds": [task_id, "not-a-task"]}) as stream:
        assert stream.acknowledged == {"taskIds": [task_id]}
        await until(
            lambda: any(
                n["params"].get("statusMessage") == "halfway there" for n in stream.notifications
            )
        )
        flags.release.set()
        await until(lambda: any(n["params"]["status"] == "completed" for n in stream.notifications))
    sent = stream.notifications
    assert {n["method"] for n in sent} == {"notifications/tasks"}
    final = sent[-1]["params"]
    assert final["taskId"] == task_id and final["result"]["content"][0]["text"] == "finished"


async def test_listen_to_task_ids_needs_the_extension(
    plain_client: MemoryClient, tasks_client: MemoryClient
) -> None:
    created = await start(tasks_client, "slow", {"seconds": 0})
    with pytest.raises(RpcError) as refused:
        async with plain_client.listen({"taskIds": [created["taskId"]]}):
            pass
    assert refused.value.code == -32021


async def test_a_cancelled_task_reads_as_cancelled_to_the_following_client(server: Server) -> None:
    client = MemoryClient(server, tasks=True)
    call = asyncio.create_task(client.call_tool("slow", {"seconds": 60}))
    await until(lambda: bool(server.tasks._runs))
    await client.request("tasks/cancel", {"taskId": next(iter(server.tasks._runs))})
    with pytest.raises(RequestCancelled):
        await asyncio.wait_for(call, BOUND)


async def test_an_engine_alone_opens_no_store_until_a_task_is_used(flags: Flags) -> None:
    opened: list[int] = []

    async def opener() -> TaskStore:
        opened.append(1)
        return MemoryTaskStore()

    server = Server(
        name="s",
        version="1",
        registry=build(flags),
        signing=support.make_codec(),
        task_store=opener,
    )
    client = MemoryClient(server, tasks=True)
    await client.request("server/discover")
    await client.request("tools/list")
    assert opened == []
    await client.call_tool("tool_error")
    assert opened == [1]
    assert isinstance(server.tasks, TaskEngine)


# -- replicas and restarts: two servers on one store --------------------------------------------


def shared_servers(flags: Flags, store: TaskStore) -> tuple[Server, Server]:
    async def opener() -> TaskStore:
        return store

    def one() -> Server:
        return fast(
            Server(
                name=support.SERVER_NAME,
                version="1",
                registry=build(flags),
                signing=support.make_codec(),
                task_store=opener,
            )
        )

    return one(), one()


async def test_a_stopping_server_leaves_its_task_working_and_another_resumes_it(
    flags: Flags,
) -> None:
    first, second = shared_servers(flags, MemoryTaskStore())
    first.tasks.lease_seconds = 0.2
    created = await start(MemoryClient(first, tasks=True), "slow", {"seconds": 60})
    await until(lambda: flags.runs["slow"] == 1)
    assert first.tasks.stop() == set()  # nothing past a point of no return: all stopped
    await until(lambda: flags.cancelled_at is not None)
    store = await first.tasks.store()
    left = await store.load(created["taskId"])
    assert left is not None and left.status == "working" and left.lease_owner is not None
    # The next server: the lease has not lapsed yet, so nobody takes it...
    follower = MemoryClient(second, tasks=True)
    assert (await follower.request("tasks/get", {"taskId": created["taskId"]}))["status"] == (
        "working"
    )
    assert flags.runs["slow"] == 1
    # ...and once it has, the task is resumed there (shortened to finish at once).
    await asyncio.sleep(0.25)
    flags.runs.clear()
    resumed = await follower.request("tasks/get", {"taskId": created["taskId"]})
    assert resumed["status"] == "working"
    await until(lambda: flags.runs["slow"] == 1)
    record = await store.load(created["taskId"])
    assert record is not None and record.attempts == 2
    assert record.lease_owner == second.tasks.worker_id
    await follower.request("tasks/cancel", {"taskId": created["taskId"]})
    await wait_for(follower, created["taskId"], "cancelled")


async def test_a_stopping_server_lets_a_task_past_its_point_of_no_return_finish(
    server: Server, tasks_client: MemoryClient, flags: Flags
) -> None:
    created = await start(tasks_client, "committed_job")
    await until(lambda: flags.runs["committed_job"] == 1)
    finishing = server.tasks.stop()
    assert len(finishing) == 1
    flags.release.set()
    await asyncio.wait(finishing, timeout=BOUND)
    store = await server.tasks.store()
    record = await store.load(created["taskId"])
    assert record is not None and record.status == "completed"
    server.tasks.abandon()  # nothing left to stop


async def test_a_cancel_on_another_replica_reaches_the_worker_at_its_renewal(
    flags: Flags,
) -> None:
    runner, other = shared_servers(flags, MemoryTaskStore())
    runner.tasks.renew_seconds = 0.05
    created = await start(MemoryClient(runner, tasks=True), "slow", {"seconds": 60})
    await until(lambda: flags.runs["slow"] == 1)
    elsewhere = MemoryClient(other, tasks=True)
    await elsewhere.request("tasks/cancel", {"taskId": created["taskId"]})
    # The other replica does not run it, and a held lease is not its to end: it marks it.
    store = await other.tasks.store()
    marked = await store.load(created["taskId"])
    assert marked is not None and marked.cancel_requested and marked.status == "working"
    done = await wait_for(elsewhere, created["taskId"], "cancelled", "completed", "failed")
    assert done["status"] == "cancelled"
    assert flags.cancelled_at is not None


async def test_notifications_follow_a_change_made_by_another_replica(flags: Flags) -> None:
    runner, other = shared_servers(flags, MemoryTaskStore())
    created = await start(MemoryClient(runner, tasks=True), "progress")
    listener = MemoryClient(other, tasks=True)
    async with listener.listen({"taskIds": [created["taskId"]]}) as stream:
        assert stream.acknowledged == {"taskIds": [created["taskId"]]}
        flags.release.set()
        await until(lambda: any(n["params"]["status"] == "completed" for n in stream.notifications))


async def test_an_inline_replay_on_another_replica_waits_for_the_first_run(flags: Flags) -> None:
    first, second = shared_servers(flags, MemoryTaskStore())
    one = MemoryClient(first, capabilities=ALL_CAPABILITIES)
    params: Json = {"name": "confirm_slow", "arguments": {"seconds": 0.3}}
    asked = await one.request("tools/call", params)
    retry = {
        **params,
        "inputResponses": {"confirm": accept(confirmed=True)},
        "requestState": asked["requestState"],
    }
    running = asyncio.create_task(one.request("tools/call", retry))
    await until(lambda: flags.runs["confirm_slow"] == 1)
    replayed = await MemoryClient(second, capabilities=ALL_CAPABILITIES).request(
        "tools/call", retry
    )
    assert replayed["content"] == [{"type": "text", "text": "went for 0.3"}]
    assert (await running)["content"] == replayed["content"]
    assert flags.runs["confirm_slow"] == 1


# -- over stdio ------------------------------------------------------------------------------


async def test_a_stdio_client_follows_a_task_to_its_end(tmp_path: Path) -> None:
    script = tmp_path / "serve_tasks.py"
    script.write_text(task_tools.SERVER_SCRIPT, encoding="utf-8")
    async with ClientSession.spawn(
        [sys.executable, str(script)],
        env=support.server_env(),
        tasks=True,
        elicitation=answers({"name": {"name": "Ada"}, "confirm": {"confirmed": True}}),
    ) as session:
        with anyio.fail_after(support.BOUND):
            result = await session.call_tool("two_questions")
            plain = await session.call_tool("slow", {"seconds": 0}, meta={})
    assert result.task_id is not None and "Ada" in result.text
    assert plain.task_id is not None and plain.text == "slept 0.0"
    support.assert_clean_exit(session.returncode, session.stderr_text())


# -- the project's store, and a server killed mid-task ----------------------------------------


async def test_the_project_keeps_its_tasks_where_mrtr_task_store_says(
    build_server: Callable[[Mapping[str, str] | None], Server], tmp_path: Path
) -> None:
    path = tmp_path / "tasks.db"
    server = build_server(
        {"MRTR_SIGNING_KEY": support.KEY_HEX, "MRTR_TASK_STORE": f"sqlite://{path}"}
    )
    assert not path.exists()  # built, not opened: the first task operation opens it
    store = await server.tasks.store()
    assert path.exists()
    assert type(store).__name__ == "SqliteTaskStore"
    await store.close()


async def test_a_store_that_cannot_be_opened_is_an_internal_error_saying_why(flags: Flags) -> None:
    async def refused() -> TaskStore:
        raise TaskStoreUnavailable("MRTR_TASK_STORE is refused: try sqlite:///abs/path.db")

    server = Server(
        name="s",
        version="1",
        registry=build(flags),
        signing=support.make_codec(),
        task_store=refused,
    )
    client = MemoryClient(server, tasks=True)
    error = await rpc_error(client, "tools/call", {"name": "slow", "arguments": {"seconds": 0}})
    assert error.code == -32603 and "MRTR_TASK_STORE is refused" in error.message
    # A client without the extension is not affected by a store it does not need.
    plain = MemoryClient(server, capabilities=ALL_CAPABILITIES)
    assert (await plain.call_tool("slow", {"seconds": 0})).text == "slept 0.0"


KILLED_SERVER_SCRIPT = """\
import os

import support
from task_tools import Flags, build

from mrtr_runtime._config import Settings
from mrtr_runtime._task_backends import task_backend
from mrtr_runtime.server import Server, serve_stdio

backend = task_backend(Settings.from_environment(os.environ), None, namespace="tasks-test")
server = Server(
    name=support.SERVER_NAME,
    version="1",
    registry=build(Flags()),
    signing=support.make_codec(),
    task_store=backend.open,
    task_store_exists=backend.may_hold_tasks,
)
server.tasks.poll_interval_ms = 50
server.tasks.lease_seconds = 1.0
server.tasks.renew_seconds = 0.3
server.tasks.sweep_seconds = 0.2
serve_stdio(server)
"""


async def test_a_stdio_server_killed_mid_task_finishes_it_after_a_restart(tmp_path: Path) -> None:
    script = tmp_path / "serve_killable.py"
    script.write_text(KILLED_SERVER_SCRIPT, encoding="utf-8")
    command = [sys.executable, str(script)]
    env = support.server_env(MRTR_TASK_STORE=f"sqlite://{tmp_path / 'tasks.db'}")
    capabilities = {META_CAPABILITIES: WITH_TASKS}
    call = support.request(1, "tools/call", {"name": "slow", "arguments": {"seconds": 1.5}})
    call["params"]["_meta"].update(capabilities)
    with anyio.fail_after(support.BOUND):
        async with support.raw_server(command, env) as first:
            await support.send(first, call)
            created = (await support.read_message(support.reader(first)))["result"]
            assert created["resultType"] == "task"
            await anyio.sleep(0.4)  # the worker runs the handler...
            first.kill()  # ...and the process dies under it: SIGKILL, nothing written
            await first.wait()
        async with ClientSession.spawn(command, env=env, tasks=True) as session:
            # Nobody polls at first: the restarted server's sweeper finds the lapsed lease.
            await session.request("server/discover", {})
            said: set[str] = set()
            for _ in range(200):
                task = await session.request("tasks/get", {"taskId": created["taskId"]})
                said.add(task.get("statusMessage") or "")
                if task["status"] != "working":
                    break
                await anyio.sleep(0.05)
    assert task["status"] == "completed"
    assert task["result"]["content"] == [{"type": "text", "text": "slept 1.5"}]
    assert task["result"]["resultType"] == "complete"
    assert "resumed (start 2 of at most 3)" in session.stderr_text()
    # What its host showed while it ran again: that it resumed, not "Starting" a second time.
    resumed = "Resumed after the server stopped (start 2 of at most 3); running it again"
    assert any(message.startswith(resumed) for message in said), said


# -- past the point of no return: a takeover never acts twice, a cancel never lies ----------------


def committed_record(server: Server, target: str, **changes: object) -> TaskRecord:
    """A task whose worker died after its handler passed its point of no return."""
    record = replace(dead_record(server, attempts=1, target=target), arguments={}, committed=True)
    return replace(record, **changes)  # type: ignore[arg-type]


async def test_a_takeover_past_the_point_of_no_return_does_not_run_a_tool_that_is_not_idempotent(
    server: Server, tasks_client: MemoryClient, flags: Flags
) -> None:
    store = await server.tasks.store()
    record = await store.create(committed_record(server, "committed_job"))
    done = await wait_for(tasks_client, record.task_id, "completed", "failed", "cancelled")
    assert done["status"] == "completed"
    assert done["result"]["isError"] is True
    assert done["result"]["content"][0]["text"] == MAYBE_DONE
    assert flags.runs["committed_job"] == 0


async def test_a_takeover_past_the_point_of_no_return_runs_an_idempotent_tool_again(
    server: Server, tasks_client: MemoryClient, flags: Flags
) -> None:
    flags.release.set()
    store = await server.tasks.store()
    record = await store.create(committed_record(server, "idempotent_job"))
    done = await wait_for(tasks_client, record.task_id, "completed", "failed", "cancelled")
    assert done["result"]["content"][0]["text"] == "carried out again"
    assert flags.runs["idempotent_job"] == 1


async def test_the_point_of_no_return_is_in_the_store_before_the_action_on_the_loop(
    server: Server, tasks_client: MemoryClient, flags: Flags
) -> None:
    server.tasks.renew_seconds = 3600.0  # no renewal writes it: only the mark itself
    created = await start(tasks_client, "committed_job")
    await until(lambda: flags.runs["committed_job"] == 1)
    await asyncio.sleep(0)  # the handler waits: the scheduled write goes out
    store = await server.tasks.store()
    record = await store.load(created["taskId"])
    assert record is not None and record.committed
    flags.release.set()
    await wait_for(tasks_client, created["taskId"], "completed")


async def test_the_point_of_no_return_is_in_the_store_before_a_thread_goes_on(
    server: Server, tasks_client: MemoryClient, flags: Flags
) -> None:
    server.tasks.renew_seconds = 3600.0
    created = await start(tasks_client, "thread_commit")
    assert await asyncio.to_thread(flags.thread_committed.wait, BOUND)
    # The thread has returned from point_of_no_return(): the mark is stored already.
    store = await server.tasks.store()
    record = await store.load(created["taskId"])
    assert record is not None and record.committed
    flags.thread_go.set()
    await wait_for(tasks_client, created["taskId"], "completed")


async def test_a_cancel_of_a_dead_worker_s_task_past_its_point_of_no_return_is_not_cancelled(
    server: Server, tasks_client: MemoryClient, flags: Flags
) -> None:
    store = await server.tasks.store()
    record = await store.create(committed_record(server, "committed_job"))
    await tasks_client.request("tasks/cancel", {"taskId": record.task_id})
    done = await wait_for(tasks_client, record.task_id, "completed", "failed", "cancelled")
    assert done["status"] == "completed" and done["result"]["isError"] is True
    assert done["result"]["content"][0]["text"] == MAYBE_DONE
    assert flags.runs["committed_job"] == 0


async def test_a_takeover_of_a_committed_task_with_a_cancel_requested_is_not_cancelled(
    server: Server, tasks_client: MemoryClient, flags: Flags
) -> None:
    # The cancel came while the dead worker still held its lease (another replica): the
    # takeover finds it, and the action may have happened all the same.
    store = await server.tasks.store()
    record = await store.create(committed_record(server, "committed_job", cancel_requested=True))
    done = await wait_for(tasks_client, record.task_id, "completed", "failed", "cancelled")
    assert done["status"] == "completed" and done["result"]["isError"] is True
    assert flags.runs["committed_job"] == 0


async def test_a_committed_task_waiting_for_input_is_not_cancelled(
    server: Server, tasks_client: MemoryClient
) -> None:
    store = await server.tasks.store()
    record = await store.create(
        committed_record(server, "two_questions", status="input_required", lease_owner=None)
    )
    await tasks_client.request("tasks/cancel", {"taskId": record.task_id})
    done = await tasks_client.request("tasks/get", {"taskId": record.task_id})
    assert done["status"] == "completed" and done["result"]["isError"] is True


# -- replays of a confirmation from a client that does not follow tasks ---------------------------


async def confirmation_of(client: MemoryClient, name: str, arguments: Json) -> Json:
    params: Json = {"name": name, "arguments": arguments}
    first = await client.request("tools/call", params)
    assert first["resultType"] == "input_required", first
    return {
        **params,
        "inputResponses": {"confirm": accept(confirmed=True)},
        "requestState": first["requestState"],
    }


async def test_an_inline_replay_of_a_task_waiting_for_input_answers_at_once(
    tasks_client: MemoryClient, plain_client: MemoryClient
) -> None:
    retry = await confirmation_of(tasks_client, "confirm_then_ask", {})
    created = await tasks_client.request("tools/call", retry)
    await wait_for(tasks_client, created["taskId"], "input_required")
    with anyio.fail_after(2):
        replies = await asyncio.gather(
            *(plain_client.request("tools/call", retry) for _ in range(70))
        )
    for reply in replies:
        assert reply["isError"] is True
        text = reply["content"][0]["text"]
        assert created["taskId"] in text and "waits for input" in text


async def test_an_inline_replay_of_a_running_task_waits_a_bounded_time(
    server: Server, tasks_client: MemoryClient, plain_client: MemoryClient, flags: Flags
) -> None:
    server.tasks.inline_wait_seconds = 0.2
    retry = await confirmation_of(tasks_client, "confirm_slow", {"seconds": 60})
    created = await tasks_client.request("tools/call", retry)
    await until(lambda: flags.runs["confirm_slow"] == 1)
    with anyio.fail_after(2):
        reply = await plain_client.request("tools/call", retry)
    assert reply["isError"] is True
    text = reply["content"][0]["text"]
    assert f"still running as task {created['taskId']}" in text
    assert "call again" in text
    assert flags.runs["confirm_slow"] == 1
    await tasks_client.request("tasks/cancel", {"taskId": created["taskId"]})


@pytest.mark.parametrize("replayer", ["plain", "tasks"])
async def test_an_inline_confirmation_that_asks_again_replays_that_round_and_is_no_task(
    tasks_client: MemoryClient, plain_client: MemoryClient, replayer: str
) -> None:
    retry = await confirmation_of(plain_client, "confirm_then_ask", {})
    asked = await plain_client.request("tools/call", retry)
    assert asked["resultType"] == "input_required" and "name" in asked["inputRequests"]
    client = plain_client if replayer == "plain" else tasks_client
    again = await client.request("tools/call", retry)
    assert again == asked  # the same round, never a task "completed" with a round inside
    store = await tasks_client.server.tasks.store()
    assert isinstance(store, MemoryTaskStore)
    (kept,) = (e.record for e in store._tasks.values() if e.record.target == "confirm_then_ask")
    error = await rpc_error(tasks_client, "tasks/get", {"taskId": kept.task_id})
    assert error.code == -32602 and error.message == "Task not found"


# -- listens, sessions that cannot follow tasks, and the store without a home -------------------


async def test_a_listen_for_task_ids_none_agreed_ends_at_once(
    server: Server, tasks_client: MemoryClient
) -> None:
    params = {"notifications": {"taskIds": ["no-such-task"]}}
    with anyio.fail_after(2):
        for _ in range(20):  # more than the open listens allowed: each one ends, none is held
            result = await tasks_client.request("subscriptions/listen", params)
            assert "_meta" in result
    acks = [
        n
        for n in tasks_client.notifications
        if n["method"] == "notifications/subscriptions/acknowledged"
    ]
    assert acks and acks[-1]["params"]["notifications"] == {"taskIds": []}


async def test_a_legacy_session_calling_a_required_task_tool_hears_it_needs_a_newer_client(
    server: Server,
) -> None:
    legacy = MemoryClient(server, era="legacy")
    await legacy.initialize()
    error = await rpc_error(legacy, "tools/call", {"name": "required_job", "arguments": {}})
    assert error.code == -32021
    assert "2026-07-28" in error.message and TASKS in error.message
    assert error.data == {"requiredCapabilities": {"extensions": {TASKS: {}}}}


async def test_a_store_in_memory_for_want_of_a_home_warns_once_when_opened(
    caplog: pytest.LogCaptureFixture,
) -> None:
    from mrtr_runtime._config import Settings
    from mrtr_runtime._task_backends import task_backend

    settings = Settings.from_environment({})
    homeless = task_backend(settings, None, namespace="mrtr")
    asked = Settings.from_environment({"MRTR_TASK_STORE": "memory:"})
    chosen = task_backend(asked, None, namespace="mrtr")
    with caplog.at_level("WARNING", logger="mrtr_runtime"):
        await chosen.open()
        assert not caplog.records  # memory asked for: nothing to warn of
        await homeless.open()
    (warning,) = caplog.records
    assert warning.levelname == "WARNING"
    assert "not durably" in warning.getMessage()
    assert "runs again" in warning.getMessage() and "MRTR_TASK_STORE" in warning.getMessage()


# -- stopping: leases given up, and the HTTP grace ------------------------------------------------


async def test_a_graceful_stop_gives_up_the_leases_so_another_server_takes_over_at_once(
    flags: Flags,
) -> None:
    first, second = shared_servers(flags, MemoryTaskStore())
    created = await start(MemoryClient(first, tasks=True), "slow", {"seconds": 60})
    await until(lambda: flags.runs["slow"] == 1)
    first.tasks.stop()
    await first.release_tasks(BOUND)
    store = await first.tasks.store()
    left = await store.load(created["taskId"])
    assert left is not None and left.status == "working"
    assert left.lease_owner is None and left.lease_expires == 0.0
    # No lease to wait out (15 s): the next server resumes it on the first look.
    follower = MemoryClient(second, tasks=True)
    await follower.request("tasks/get", {"taskId": created["taskId"]})
    await until(lambda: flags.runs["slow"] == 2)
    await follower.request("tasks/cancel", {"taskId": created["taskId"]})
    await wait_for(follower, created["taskId"], "cancelled")


async def test_the_stop_log_says_what_becomes_of_each_task(
    server: Server, tasks_client: MemoryClient, flags: Flags, caplog: pytest.LogCaptureFixture
) -> None:
    stopped = await start(tasks_client, "slow", {"seconds": 60})
    past = await start(tasks_client, "committed_job")
    await until(lambda: flags.runs["slow"] == 1 and flags.runs["committed_job"] == 1)
    with caplog.at_level("WARNING", logger="mrtr_runtime"):
        finishing = server.tasks.stop()
        assert len(finishing) == 1
        server.tasks.abandon()  # the grace is over: the committed one is still running
        await asyncio.wait(finishing, timeout=BOUND)
    lines = {r.getMessage() for r in caplog.records}
    (before,) = (line for line in lines if stopped["taskId"] in line)
    assert "before its point of no return" in before and "resumes" in before
    (after,) = (line for line in lines if past["taskId"] in line)
    assert "may have been carried out" in after and "without running again" in after


async def test_an_answer_asked_for_again_in_a_task_says_why_in_its_status(
    tasks_client: MemoryClient,
) -> None:
    # A host shows a task's statusMessage: a question that comes back under a new key after
    # tasks/update says there why the answer did not do (its message starts with it too).
    created = await start(tasks_client, "two_questions")
    asked = await wait_for(tasks_client, created["taskId"], "input_required")
    keys = {key.partition(".")[0]: key for key in asked["inputRequests"]}
    answers = {keys["name"]: accept(name="Ada"), keys["confirm"]: accept(confirmed="yes")}
    await tasks_client.request(
        "tasks/update", {"taskId": created["taskId"], "inputResponses": answers}
    )
    with anyio.fail_after(BOUND):
        while True:
            again = await wait_for(tasks_client, created["taskId"], "input_required")
            if again["inputRequests"].keys() != asked["inputRequests"].keys():
                break
            await asyncio.sleep(0.01)
    (key,) = again["inputRequests"]
    assert key.startswith("confirm.")
    reason = "the answer to 'confirm' was not valid (confirmed: Input should be a valid boolean)"
    assert again["statusMessage"] == f"Asked again: {reason}."
    message = again["inputRequests"][key]["params"]["message"]
    assert message.startswith("That answer was not valid (confirmed:")


async def test_the_testing_client_records_the_questions_asked_inside_a_task(
    server: Server,
) -> None:
    # Before, `asked` held only the request's rounds: a test of a task tool could not see
    # the questions its task asked (`asked == ()`).
    client = MemoryClient(
        server,
        capabilities=WITH_TASKS,
        tasks=True,
        elicitation=answers({"name": {"name": "Ada"}, "confirm": {"confirmed": True}}),
    )
    with anyio.fail_after(BOUND):
        result = await client.call_tool("two_questions")
    assert result.task_id is not None
    assert result.asked == (("confirm", "name"),)
    assert result.rounds == 1


async def test_a_result_past_the_owner_s_byte_bound_is_not_kept_and_says_so() -> None:
    # The bound holds for what tasks grow into: thirty tasks started at once, each returning
    # 200 kB, against a 300 kB bound: the owner never holds much past it, and the tasks whose
    # result did not fit say the work was done and the result not kept.
    registry = Registry()

    @registry.tool(task="optional")
    async def big(n: int, *, ctx: Context) -> str:
        ctx.start_task()
        return "z" * 200_000

    store = MemoryTaskStore(max_bytes_per_owner=300_000)

    async def opener() -> TaskStore:
        return store

    server = fast(
        Server(
            name="s",
            version="1",
            registry=registry,
            signing=support.make_codec(),
            task_store=opener,
        )
    )
    client = MemoryClient(server, capabilities=WITH_TASKS)
    created = [await start(client, "big", {"n": n}) for n in range(30)]
    ended = [await wait_for(client, task["taskId"], "completed", "failed") for task in created]
    kept = [task for task in ended if not task["result"].get("isError")]
    refused = [task for task in ended if task["result"].get("isError")]
    assert kept and refused
    assert all(
        "MRTR_TASK_MAX_BYTES_PER_OWNER" in task["result"]["content"][0]["text"] for task in refused
    )
    assert await store.owner_bytes(server.tasks.owner(None)) <= 300_000 + 200_000


async def test_a_worker_that_fails_ends_its_task_failed_instead_of_running_it_again() -> None:
    registry = Registry()
    runs: list[int] = []

    @registry.tool(task="optional")
    async def flaky(*, ctx: Context) -> str:
        ctx.start_task()
        runs.append(1)
        return "done"

    class Failing(MemoryTaskStore):
        async def owner_bytes(self, owner: str) -> int:
            raise RuntimeError("the store's driver broke")

    store = Failing()

    async def opener() -> TaskStore:
        return store

    server = fast(
        Server(
            name="s",
            version="1",
            registry=registry,
            signing=support.make_codec(),
            task_store=opener,
        )
    )
    server.tasks.lease_seconds = 0.2
    client = MemoryClient(server, capabilities=WITH_TASKS)
    created = await start(client, "flaky")
    task = await wait_for(client, created["taskId"], "failed", "completed")
    assert task["status"] == "failed"
    assert "worker failed (RuntimeError)" in task["error"]["message"]
    await asyncio.sleep(0.5)  # past its lease: nobody runs it again
    assert runs == [1]
