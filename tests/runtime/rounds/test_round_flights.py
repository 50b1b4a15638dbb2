"""Sendings of one confirming round that arrive together run the handler once (single-flight).

A client, a retrying proxy or a double click can send the same round-2 request (the same
`requestState`) twice before the first is answered. Each would pass verification, so each
would run the handler: a double deploy. Within one server process the second waits for the
first and gets its result, whatever answers it carries (the token is the round); later
sendings are answered from the round's record (`test_single_use.py`).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import anyio
import pytest
from anyio import wait_all_tasks_blocked

from mrtr_runtime import Context, InputRequired, Registry, elicit_form
from mrtr_runtime._answers import ElicitResult
from mrtr_runtime.server import Server
from mrtr_runtime.testing import MemoryClient
from support import (
    ALL_CAPABILITIES,
    BOUND,
    Confirm,
    Json,
    accept,
    make_codec,
    raw_server,
    read_message,
    reader,
    request,
    send,
    server_env,
)

pytestmark = pytest.mark.anyio


def confirming_registry(runs: list[str], gate: anyio.Event) -> Registry:
    """`deploy` asks to confirm, then records its run and waits for `release`."""
    registry = Registry()

    @registry.tool()
    async def deploy(stack: str, *, ctx: Context) -> str | InputRequired:
        confirm = ctx.input_response_as("confirm", ElicitResult[Confirm])
        if confirm is None:
            return ctx.request_input({"confirm": elicit_form(f"Deploy {stack}?", Confirm)})
        runs.append(stack)
        number = len(runs)
        await gate.wait()
        return f"deployed {stack}, run {number}"

    @registry.tool()
    async def release() -> str:
        gate.set()
        return "released"

    return registry


def confirming_server(runs: list[str], gate: anyio.Event) -> Server:
    registry = confirming_registry(runs, gate)
    return Server(name="support-server", version="1", registry=registry, signing=make_codec())


async def first_round(client: MemoryClient, stack: str = "web") -> str:
    result = await client.request("tools/call", {"name": "deploy", "arguments": {"stack": stack}})
    assert result["resultType"] == "input_required", result
    token: str = result["requestState"]
    return token


def confirming(token: str, answer: Json | None = None, stack: str = "web") -> Json:
    return {
        "name": "deploy",
        "arguments": {"stack": stack},
        "requestState": token,
        "inputResponses": {"confirm": answer or accept(confirmed=True)},
    }


async def run_together(client: MemoryClient, gate: anyio.Event, params: list[Json]) -> list[Json]:
    results: list[Json] = [{} for _ in params]

    async def one(index: int) -> None:
        results[index] = await client.request("tools/call", params[index])

    with anyio.fail_after(BOUND):
        async with anyio.create_task_group() as group:
            for index in range(len(params)):
                group.start_soon(one, index)
            # Every request has reached the handler or is waiting for the one that did.
            await wait_all_tasks_blocked()
            gate.set()
    return results


@pytest.mark.parametrize("count", [2, 20])
async def test_identical_concurrent_confirming_rounds_run_the_handler_once(count: int) -> None:
    runs: list[str] = []
    gate = anyio.Event()
    server = confirming_server(runs, gate)
    client = MemoryClient(server, capabilities=ALL_CAPABILITIES)
    token = await first_round(client)
    results = await run_together(client, gate, [confirming(token)] * count)
    assert runs == ["web"]
    texts = {result["content"][0]["text"] for result in results}
    assert texts == {"deployed web, run 1"}
    assert len(server._flights) == 0  # nothing is kept once the run ends


async def test_different_answers_to_one_token_running_together_are_one_run() -> None:
    # The round is the token, not what comes with it: the first sending's answers decide.
    runs: list[str] = []
    gate = anyio.Event()
    client = MemoryClient(confirming_server(runs, gate), capabilities=ALL_CAPABILITIES)
    token = await first_round(client)
    declined = confirming(token, accept(confirmed=False))
    results = await run_together(client, gate, [confirming(token), declined])
    assert runs == ["web"]
    assert {result["content"][0]["text"] for result in results} == {"deployed web, run 1"}


async def test_the_same_answers_in_another_member_order_are_the_same_run() -> None:
    # The key names the answers by their canonical JSON, the text their size was measured on.
    runs: list[str] = []
    gate = anyio.Event()
    client = MemoryClient(confirming_server(runs, gate), capabilities=ALL_CAPABILITIES)
    token = await first_round(client)
    reordered = confirming(token, {"content": {"confirmed": True}, "action": "accept"})
    results = await run_together(client, gate, [confirming(token), reordered])
    assert runs == ["web"]
    assert {result["content"][0]["text"] for result in results} == {"deployed web, run 1"}


async def test_the_same_round_again_after_the_first_finished_gets_its_result() -> None:
    runs: list[str] = []
    gate = anyio.Event()
    gate.set()
    client = MemoryClient(confirming_server(runs, gate), capabilities=ALL_CAPABILITIES)
    token = await first_round(client)
    first = await client.request("tools/call", confirming(token))
    again = await client.request("tools/call", confirming(token))
    assert runs == ["web"]
    assert again == first


async def test_a_round_waiting_on_a_cancelled_one_is_told_to_send_it_again() -> None:
    runs: list[str] = []
    gate = anyio.Event()
    server = confirming_server(runs, gate)
    client = MemoryClient(server, capabilities=ALL_CAPABILITIES)
    token = await first_round(client)
    body = {**confirming(token), "_meta": client._meta()}
    responses: dict[int, Json | None] = {}

    async def one(request_id: int) -> None:
        message = {"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": body}
        responses[request_id] = await client.send(message)

    with anyio.fail_after(BOUND):
        async with anyio.create_task_group() as group:
            group.start_soon(one, 1)
            await wait_all_tasks_blocked()
            group.start_soon(one, 2)
            await wait_all_tasks_blocked()
            await client.cancel(1)
    assert runs == ["web"]
    assert responses[1] is None  # a cancelled request is not answered
    second = responses[2]
    assert second is not None
    assert second["error"]["code"] == -32603
    assert "send it again" in second["error"]["message"]
    assert len(server._flights) == 0


SERVER_SCRIPT = """\
import anyio
import support  # first: it makes the baked runtime importable as mrtr_runtime
from test_round_flights import confirming_server

from mrtr_runtime.server import serve_stdio

serve_stdio(confirming_server([], anyio.Event()))
"""


async def test_identical_confirming_rounds_pipelined_over_stdio_run_once(tmp_path: Path) -> None:
    script = tmp_path / "serve_confirming.py"
    script.write_text(SERVER_SCRIPT, encoding="utf-8")
    env = server_env()
    with anyio.fail_after(BOUND):
        async with raw_server([sys.executable, str(script)], env) as process:
            stdout = reader(process)
            first = {"name": "deploy", "arguments": {"stack": "web"}}
            await send(process, request(0, "tools/call", first))
            token = (await read_message(stdout))["result"]["requestState"]
            lines = b"".join(
                json_line(request(i, "tools/call", confirming(token))) for i in range(1, 21)
            )
            # All twenty in one write, then the release: the server has started them all first.
            await send(process, lines + json_line(request(21, "tools/call", {"name": "release"})))
            answers = [await read_message(stdout) for _ in range(21)]
    by_id = {answer["id"]: answer for answer in answers}
    texts = {by_id[i]["result"]["content"][0]["text"] for i in range(1, 21)}
    assert texts == {"deployed web, run 1"}


def json_line(message: Json) -> bytes:
    return json.dumps(message).encode() + b"\n"
