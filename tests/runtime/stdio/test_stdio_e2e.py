"""The real server as a subprocess over real pipes: the wire, concurrency, shutdown, restarts.

2026-07-28 basic/transports/stdio: newline-delimited JSON-RPC; "The server MUST NOT write
anything to its stdout that is not a valid MCP message"; after a cancellation the server "MUST
NOT send any further messages" for that request; servers "SHOULD exit promptly when their
standard input is closed". MRTR's reason to exist: a round survives the server process.

Each test starts a tiny server script (written to tmp) that serves `support.build_registry()`
with `serve_stdio`, keyed from the environment by `codec_from_environment`.
"""

from __future__ import annotations

import json
import signal
import sys
from typing import Any

import anyio
import pytest

from mrtr_runtime._jsonrpc import MAX_LINE_BYTES
from mrtr_runtime._stdio import MAX_CONCURRENT_REQUESTS
from mrtr_runtime.testing import ClientSession, RpcError
from support import (
    ARN,
    BOUND,
    DEPLOY,
    FORMS,
    KEY_HEX,
    LEGACY_INITIALIZE,
    OTHER_KEY_HEX,
    Json,
    accept,
    assert_clean_exit,
    raw_server,
    read_message,
    read_stderr,
    read_until_end,
    reader,
    request,
    send,
    server_env,
    text_of,
    unmatched_errors,
)

pytestmark = pytest.mark.anyio

# -- the wire ----------------------------------------------------------------------------------


async def test_discover_and_a_tool_call_work_over_real_pipes(command: list[str]) -> None:
    with anyio.fail_after(BOUND):
        async with ClientSession.spawn(command, env=server_env()) as session:
            discover = await session.request("server/discover", {})
            assert discover["supportedVersions"] == ["2026-07-28"]
            result = await session.request(
                "tools/call", {"name": "echo", "arguments": {"text": "hi"}}
            )
            assert text_of(result) == "hi"
            assert_clean_exit(await session.close(), session.stderr_text())
            assert session.protocol_violations == []


async def test_unparseable_lines_get_errors_with_a_null_id_and_the_server_keeps_serving(
    command: list[str],
) -> None:
    with anyio.fail_after(BOUND):
        async with ClientSession.spawn(command, env=server_env()) as session:
            for line in (
                b"not json\n",
                b"\xff\xfe\n",
                b"[]\n",
                b"42\n",
                b'{"jsonrpc":"2.0","id":true,"method":"x"}\n',
            ):
                await session.send_raw(line)
            result = await session.request(
                "tools/call", {"name": "echo", "arguments": {"text": "still here"}}
            )
            assert text_of(result) == "still here"
            assert [code for _, code in unmatched_errors(session)] == [
                -32700,
                -32700,
                -32600,
                -32600,
                -32600,
            ]
            assert session.protocol_violations == []


async def test_an_oversized_line_is_refused_and_the_next_request_is_served(
    command: list[str],
) -> None:
    with anyio.fail_after(BOUND):
        async with ClientSession.spawn(command, env=server_env()) as session:
            huge = json.dumps(
                request(
                    99, "tools/call", {"name": "echo", "arguments": {"text": "x" * MAX_LINE_BYTES}}
                )
            ).encode()
            await session.send_raw(huge + b"\n")
            result = await session.request(
                "tools/call", {"name": "echo", "arguments": {"text": "next"}}
            )
            assert text_of(result) == "next"
            assert unmatched_errors(session) == [(None, -32600)]
            assert session.protocol_violations == []


async def test_a_stray_print_in_a_tool_goes_to_stderr_and_stdout_stays_json_lines(
    command: list[str],
) -> None:
    with anyio.fail_after(BOUND):
        async with ClientSession.spawn(command, env=server_env()) as session:
            result = await session.request(
                "tools/call", {"name": "shout", "arguments": {"text": "STRAY-PRINT-42"}}
            )
            assert text_of(result) == "shouted"
            after = await session.request(
                "tools/call", {"name": "echo", "arguments": {"text": "ok"}}
            )
            assert text_of(after) == "ok"
            returncode = await session.close()
            assert session.protocol_violations == []
            assert "STRAY-PRINT-42" in session.stderr_text()
            assert_clean_exit(returncode, session.stderr_text())


async def test_a_child_process_of_a_tool_can_neither_write_the_wire_nor_read_requests(
    command: list[str],
) -> None:
    with anyio.fail_after(BOUND):
        async with ClientSession.spawn(command, env=server_env()) as session:
            result = await session.request("tools/call", {"name": "spawn_child"})
            assert text_of(result) == "child exited 0"
            returncode = await session.close()
            assert session.protocol_violations == []
            # The child's stdin was /dev/null and its stdout went to the server's stderr.
            assert "CHILD-STDIN-BYTES=0" in session.stderr_text()
            assert_clean_exit(returncode, session.stderr_text())


async def test_a_tool_returning_nan_never_puts_invalid_json_on_stdout(command: list[str]) -> None:
    with anyio.fail_after(BOUND):
        async with ClientSession.spawn(command, env=server_env()) as session:
            # Bounded: were NaN to reach the wire, the line would be unparseable and its
            # response would never arrive.
            result = await session.request("tools/call", {"name": "measure"}, timeout=5)
            assert result["isError"] is True
            assert session.protocol_violations == []


# -- concurrency and cancellation --------------------------------------------------------------


async def test_a_slow_tool_does_not_block_a_fast_one(command: list[str]) -> None:
    waiting = anyio.Event()

    async def on_notification(message: dict[str, object]) -> None:
        if message.get("method") == "notifications/progress":
            waiting.set()

    with anyio.fail_after(BOUND):
        async with ClientSession.spawn(
            command, env=server_env(), notification_handler=on_notification
        ) as session:
            outcome: list[str] = []

            async def slow() -> None:
                result = await session.request(
                    "tools/call",
                    {"name": "gate", "arguments": {"name": "a"}, "_meta": {"progressToken": "g"}},
                )
                outcome.append(text_of(result))

            async with anyio.create_task_group() as task_group:
                task_group.start_soon(slow)
                await waiting.wait()
                fast = await session.request(
                    "tools/call", {"name": "echo", "arguments": {"text": "fast"}}
                )
                assert text_of(fast) == "fast"
                assert outcome == []  # the slow call is still in flight
                await session.request("tools/call", {"name": "release", "arguments": {"name": "a"}})
            assert outcome == ["gate a opened"]


async def test_a_cancelled_request_gets_no_response_and_later_requests_are_served(
    command: list[str],
) -> None:
    with anyio.fail_after(BOUND):
        async with raw_server(command, server_env()) as process:
            stdout = reader(process)
            await send(
                process,
                request(
                    "doomed",
                    "tools/call",
                    {"name": "gate", "arguments": {"name": "c"}},
                    progressToken="p",
                ),
            )
            progress = await read_message(stdout)
            assert progress["method"] == "notifications/progress"
            await send(
                process,
                {
                    "jsonrpc": "2.0",
                    "method": "notifications/cancelled",
                    "params": {"requestId": "doomed", "reason": "user"},
                },
            )
            # Opening the gate now would let a cancel that was ignored answer "doomed".
            await send(
                process, request(2, "tools/call", {"name": "release", "arguments": {"name": "c"}})
            )
            await send(
                process, request(3, "tools/call", {"name": "echo", "arguments": {"text": "alive"}})
            )
            # Unknown and malformed cancellations are ignored.
            await send(
                process,
                {
                    "jsonrpc": "2.0",
                    "method": "notifications/cancelled",
                    "params": {"requestId": 12345},
                },
            )
            await send(
                process, {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {}}
            )
            await send(
                process, request(4, "tools/call", {"name": "echo", "arguments": {"text": "still"}})
            )
            assert process.stdin is not None
            await process.stdin.aclose()
            messages = await read_until_end(stdout)
            stderr = await read_stderr(process)
            returncode = await process.wait()
    responses = {message["id"]: message for message in messages if "id" in message}
    assert "doomed" not in responses
    assert set(responses) == {2, 3, 4}
    assert text_of(responses[3]["result"]) == "alive"
    assert text_of(responses[4]["result"]) == "still"
    assert_clean_exit(returncode, stderr)


async def test_a_reused_in_flight_id_is_an_invalid_request(command: list[str]) -> None:
    with anyio.fail_after(BOUND):
        async with raw_server(command, server_env()) as process:
            stdout = reader(process)
            await send(
                process,
                request(
                    1, "tools/call", {"name": "gate", "arguments": {"name": "d"}}, progressToken=1
                ),
            )
            assert (await read_message(stdout))["method"] == "notifications/progress"
            await send(
                process, request(1, "tools/call", {"name": "echo", "arguments": {"text": "dup"}})
            )
            duplicate = await read_message(stdout)
            assert (duplicate["id"], duplicate["error"]["code"]) == (1, -32600)
            await send(
                process, request(2, "tools/call", {"name": "release", "arguments": {"name": "d"}})
            )
            answers = {(await read_message(stdout))["id"] for _ in range(2)}
            assert answers == {1, 2}


async def test_more_legacy_calls_than_slots_all_complete_through_the_bridge(
    command: list[str],
) -> None:
    async def elicitation(params: dict[str, object]) -> Json:
        return accept(text="fine")

    answered: list[str] = []
    with anyio.fail_after(10):
        async with ClientSession.spawn(
            command, env=server_env(), era="legacy", elicitation=elicitation
        ) as session:

            async def ask(topic: str) -> None:
                result = await session.request(
                    "tools/call", {"name": "ask", "arguments": {"topic": topic}}
                )
                answered.append(text_of(result))

            async with anyio.create_task_group() as task_group:
                for number in range(MAX_CONCURRENT_REQUESTS + 6):
                    task_group.start_soon(ask, f"t{number}")
    assert len(answered) == MAX_CONCURRENT_REQUESTS + 6


async def test_a_legacy_call_cancelled_while_it_waits_for_the_client_is_never_answered(
    command: list[str],
) -> None:
    with anyio.fail_after(BOUND):
        async with raw_server(command, server_env()) as process:
            stdout = reader(process)
            await send(process, LEGACY_INITIALIZE)
            assert (await read_message(stdout))["result"]["protocolVersion"] == "2025-11-25"
            await send(process, {"jsonrpc": "2.0", "method": "notifications/initialized"})
            call = {"name": "ask", "arguments": {"topic": "tea"}}
            await send(process, {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": call})
            asked = await read_message(stdout)
            assert asked["method"] == "elicitation/create"
            await send(
                process,
                {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 1}},
            )
            # The answer arrives after the cancellation: it must be dropped quietly.
            await send(
                process, {"jsonrpc": "2.0", "id": asked["id"], "result": accept(text="late")}
            )
            await send(process, {"jsonrpc": "2.0", "id": 2, "method": "ping"})
            assert process.stdin is not None
            await process.stdin.aclose()
            messages = await read_until_end(stdout)
            stderr = await read_stderr(process)
            returncode = await process.wait()
    # The question is withdrawn (basic/utilities/cancellation: either side may cancel what it
    # sent), and the cancelled call itself gets nothing.
    withdrawn, pong = messages
    assert withdrawn["method"] == "notifications/cancelled"
    assert withdrawn["params"]["requestId"] == asked["id"]
    assert pong == {"jsonrpc": "2.0", "id": 2, "result": {}}
    assert_clean_exit(returncode, stderr)


# -- shutdown ----------------------------------------------------------------------------------


async def test_a_client_that_stops_reading_does_not_crash_the_server(command: list[str]) -> None:
    with anyio.fail_after(BOUND):
        async with raw_server(command, server_env()) as process:
            stdout = reader(process)
            await send(
                process,
                request(
                    1, "tools/call", {"name": "gate", "arguments": {"name": "g"}}, progressToken=1
                ),
            )
            assert (await read_message(stdout))["method"] == "notifications/progress"
            assert process.stdout is not None
            await process.stdout.aclose()  # the host stops reading: every write now fails
            await send(
                process, request(2, "tools/call", {"name": "release", "arguments": {"name": "g"}})
            )
            await send(
                process, request(3, "tools/call", {"name": "echo", "arguments": {"text": "x"}})
            )
            assert process.stdin is not None
            await process.stdin.aclose()
            returncode = await process.wait()
            stderr = await read_stderr(process)
    assert_clean_exit(returncode, stderr)


async def test_stdin_eof_exits_zero_promptly_without_a_traceback(command: list[str]) -> None:
    with anyio.fail_after(BOUND):
        async with ClientSession.spawn(command, env=server_env()) as session:
            await session.request("tools/list", {})
            with anyio.fail_after(5):
                returncode = await session.close(bound=5)
            assert_clean_exit(returncode, session.stderr_text())


async def test_stdin_eof_lets_in_flight_requests_finish_first(command: list[str]) -> None:
    with anyio.fail_after(BOUND):
        async with raw_server(command, server_env()) as process:
            stdout = reader(process)
            await send(
                process, request(1, "tools/call", {"name": "gate", "arguments": {"name": "e"}})
            )
            await send(
                process, request(2, "tools/call", {"name": "release", "arguments": {"name": "e"}})
            )
            assert process.stdin is not None
            await process.stdin.aclose()
            messages = await read_until_end(stdout)
            stderr = await read_stderr(process)
            returncode = await process.wait()
    assert sorted(message["id"] for message in messages) == [1, 2]
    assert_clean_exit(returncode, stderr)


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")
@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
async def test_a_termination_signal_exits_zero_even_with_work_in_flight(
    command: list[str], signum: signal.Signals
) -> None:
    with anyio.fail_after(BOUND):
        async with raw_server(command, server_env()) as process:
            stdout = reader(process)
            await send(
                process,
                request(
                    1, "tools/call", {"name": "gate", "arguments": {"name": "f"}}, progressToken=1
                ),
            )
            assert (await read_message(stdout))["method"] == "notifications/progress"
            process.send_signal(signum)
            with anyio.fail_after(10):
                returncode = await process.wait()
            stderr = await read_stderr(process)
    assert_clean_exit(returncode, stderr)


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")
async def test_sigterm_exits_zero_promptly_even_with_a_blocking_tool_stuck_in_a_thread(
    command: list[str],
) -> None:
    with anyio.fail_after(BOUND):
        async with raw_server(command, server_env()) as process:
            stdout = reader(process)
            await send(process, request(1, "tools/call", {"name": "stuck"}))
            await send(
                process, request(2, "tools/call", {"name": "echo", "arguments": {"text": "up"}})
            )
            assert (await read_message(stdout))["id"] == 2  # served while `stuck` blocks
            process.terminate()
            with anyio.fail_after(5):
                returncode = await process.wait()
            stderr = await read_stderr(process)
    assert_clean_exit(returncode, stderr)


# -- MRTR across processes ---------------------------------------------------------------------


async def test_round_two_completes_on_a_new_server_process_with_the_same_key(
    command: list[str],
) -> None:
    with anyio.fail_after(BOUND):
        async with ClientSession.spawn(command, env=server_env(), capabilities=FORMS) as first:
            round_one = await first.request("tools/call", DEPLOY)
            assert_clean_exit(await first.close(), first.stderr_text())
        assert round_one["resultType"] == "input_required"
        assert sorted(round_one["inputRequests"]) == ["confirm", "role-arn"]  # type: ignore[call-overload]
        retry = {
            **DEPLOY,
            "inputResponses": {"confirm": accept(confirmed=True), "role-arn": accept(arn=ARN)},
            "requestState": round_one["requestState"],
        }
        async with ClientSession.spawn(command, env=server_env(), capabilities=FORMS) as second:
            result = await second.request("tools/call", retry)
            assert text_of(result) == "Deployed prod-api successfully"
        async with ClientSession.spawn(
            command, env=server_env(OTHER_KEY_HEX), capabilities=FORMS
        ) as stranger:
            with pytest.raises(RpcError) as caught:
                await stranger.request("tools/call", retry)
            assert (caught.value.code, caught.value.message) == (
                -32602,
                "Invalid requestState: unknown key",
            )


async def test_a_rotated_server_accepts_a_round_signed_with_the_previous_key(
    command: list[str],
) -> None:
    with anyio.fail_after(BOUND):
        async with ClientSession.spawn(command, env=server_env(), capabilities=FORMS) as first:
            round_one = await first.request("tools/call", DEPLOY)
        rotated = server_env(OTHER_KEY_HEX, MRTR_PREVIOUS_SIGNING_KEYS=KEY_HEX)
        async with ClientSession.spawn(command, env=rotated, capabilities=FORMS) as second:
            result = await second.request(
                "tools/call",
                {
                    **DEPLOY,
                    "inputResponses": {
                        "confirm": accept(confirmed=True),
                        "role-arn": accept(arn=ARN),
                    },
                    "requestState": round_one["requestState"],
                },
            )
            assert text_of(result) == "Deployed prod-api successfully"


async def test_without_a_configured_key_a_round_does_not_survive_a_restart(
    command: list[str],
) -> None:
    with anyio.fail_after(BOUND):
        async with ClientSession.spawn(command, env=server_env(None), capabilities=FORMS) as first:
            round_one = await first.request("tools/call", DEPLOY)
            await first.close()
            assert "no requestState signing key configured" in first.stderr_text()
        async with ClientSession.spawn(command, env=server_env(None), capabilities=FORMS) as second:
            with pytest.raises(RpcError) as caught:
                await second.request(
                    "tools/call", {**DEPLOY, "requestState": round_one["requestState"]}
                )
            assert caught.value.code == -32602


async def test_the_client_loop_runs_three_rounds_over_real_pipes(command: list[str]) -> None:
    replies = {
        "Your name?": accept(name="Ada"),
        "Your colour?": accept(colour="blue"),
        "Your size?": accept(size=7),
    }

    async def elicitation(params: dict[str, object]) -> Json:
        return replies[str(params["message"])]

    with anyio.fail_after(BOUND):
        async with ClientSession.spawn(
            command, env=server_env(), elicitation=elicitation
        ) as session:
            result = await session.call_tool("wizard")
            assert result.structured == {
                "name": "Ada",
                "colour": "blue",
                "size": 7,
                "seen": ["colour", "name", "size"],
            }
            assert session.protocol_violations == []


async def test_a_legacy_client_completes_the_deploy_with_real_elicitation_requests(
    command: list[str],
) -> None:
    asked: list[dict[str, object]] = []

    async def elicitation(params: dict[str, object]) -> Json:
        asked.append(params)
        schema: Any = params["requestedSchema"]
        return accept(confirmed=True) if "confirmed" in schema["properties"] else accept(arn=ARN)

    with anyio.fail_after(BOUND):
        async with ClientSession.spawn(
            command, env=server_env(), era="legacy", elicitation=elicitation
        ) as session:
            assert session.initialize_result is not None
            assert session.initialize_result["protocolVersion"] == "2025-11-25"
            result = await session.request("tools/call", DEPLOY)
            assert result == {
                "content": [{"type": "text", "text": "Deployed prod-api successfully"}]
            }
            assert [params["message"] for params in asked] == [
                "Deploy stack 'prod-api' to AWS production?",
                "Provide the IAM role ARN to assume:",
            ]
            assert_clean_exit(await session.close(), session.stderr_text())
            assert session.protocol_violations == []
