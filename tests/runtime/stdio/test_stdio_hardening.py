"""The stdio transport with whatever stdin a host or a person hands it, and its time bounds.

basic/transports/stdio: the server reads newline-delimited JSON-RPC from stdin and "SHOULD exit
promptly when their standard input is closed" -- whatever stdin is: a pipe, a socket, a file,
/dev/null. basic/utilities/cancellation: either side may cancel a request it sent, so a server
that gives up waiting for the client's answer says so.

The real server runs as a subprocess (the same script as `test_stdio_e2e.py`).
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from pathlib import Path

import anyio
import pytest

from mrtr_runtime._config import Settings
from mrtr_runtime._stdio import (
    CLIENT_REQUEST_TIMEOUT_SECONDS,
    DRAIN_SECONDS,
    WRITE_GRACE_SECONDS,
)
from support import (
    BOUND,
    LEGACY_INITIALIZE,
    PACKAGE,
    Json,
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
)

#: Start-up plus DRAIN_SECONDS plus WRITE_GRACE_SECONDS, with room for a loaded machine.
EXIT_BOUND = DRAIN_SECONDS + WRITE_GRACE_SECONDS + 10


def line(message: Json) -> bytes:
    return json.dumps(message).encode() + b"\n"


def echo(request_id: int | str, text: str) -> Json:
    return request(request_id, "tools/call", {"name": "echo", "arguments": {"text": text}})


def responses_in(stdout: bytes) -> dict[object, Json]:
    """Every line must be one JSON-RPC message; the responses, by id."""
    messages = [json.loads(raw) for raw in stdout.splitlines()]
    assert all(message["jsonrpc"] == "2.0" for message in messages)
    return {message["id"]: message for message in messages if "id" in message}


# -- any stdin ---------------------------------------------------------------------------------


def test_stdin_dev_null_is_end_of_input_and_the_server_exits_0(command: list[str]) -> None:
    # epoll refuses /dev/null: handed to the loop as a pipe it used to hang the server.
    done = subprocess.run(
        command,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        env=server_env(),
        timeout=EXIT_BOUND,
        check=False,
    )
    assert done.stdout == b""
    assert_clean_exit(done.returncode, done.stderr.decode(errors="replace"))


def test_stdin_and_stdout_regular_files_serve_every_request_then_exit_0(
    command: list[str], tmp_path: Path
) -> None:
    requests = tmp_path / "requests.jsonl"
    requests.write_bytes(
        line(request(1, "server/discover"))
        + line(echo(2, "from a file"))
        + line(request(3, "tools/list"))
    )
    answers = tmp_path / "answers.jsonl"
    with requests.open("rb") as stdin, answers.open("wb") as stdout:
        done = subprocess.run(
            command,
            stdin=stdin,
            stdout=stdout,
            stderr=subprocess.PIPE,
            env=server_env(),
            timeout=EXIT_BOUND,
            check=False,
        )
    assert_clean_exit(done.returncode, done.stderr.decode(errors="replace"))
    responses = responses_in(answers.read_bytes())
    assert sorted(responses) == [1, 2, 3]
    assert responses[1]["result"]["supportedVersions"] == ["2026-07-28"]
    assert text_of(responses[2]["result"]) == "from a file"
    assert "tools" in responses[3]["result"]


def test_a_socket_as_stdin_is_served_and_its_shutdown_is_end_of_input(
    command: list[str],
) -> None:
    ours, theirs = socket.socketpair()
    with ours, theirs:
        process = subprocess.Popen(
            command,
            stdin=theirs,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=server_env(),
        )
        theirs.close()
        ours.sendall(line(request(1, "server/discover")) + line(echo(2, "over a socket")))
        ours.shutdown(socket.SHUT_WR)
        try:
            stdout, stderr = process.communicate(timeout=EXIT_BOUND)
        finally:
            if process.returncode is None:
                process.kill()
                process.communicate()
    assert_clean_exit(process.returncode, stderr.decode(errors="replace"))
    responses = responses_in(stdout)
    assert sorted(responses) == [1, 2]
    assert text_of(responses[2]["result"]) == "over a socket"


def test_one_socket_as_both_stdin_and_stdout_is_served(command: list[str]) -> None:
    # inetd and `socat ... EXEC:` hand a server one socket for both directions.
    ours, theirs = socket.socketpair()
    with ours, theirs:
        process = subprocess.Popen(
            command, stdin=theirs, stdout=theirs, stderr=subprocess.PIPE, env=server_env()
        )
        theirs.close()
        ours.sendall(line(request(1, "server/discover")) + line(echo(2, "both ways")))
        ours.settimeout(BOUND)
        received = b""
        while received.count(b"\n") < 2:
            chunk = ours.recv(65536)
            if not chunk:
                break
            received += chunk
        ours.shutdown(socket.SHUT_WR)
        try:
            _, stderr = process.communicate(timeout=EXIT_BOUND)
        finally:
            if process.returncode is None:
                process.kill()
                process.communicate()
    assert_clean_exit(process.returncode, stderr.decode(errors="replace"))
    responses = responses_in(received)
    assert sorted(responses) == [1, 2]
    assert text_of(responses[2]["result"]) == "both ways"


def test_requests_still_open_when_input_ends_are_answered_not_dropped(
    command: list[str], tmp_path: Path
) -> None:
    # Ten calls that outlast the drain bound, then end of input: each gets an error response
    # that says the server stopped, and the quick one before them its result.
    requests = tmp_path / "requests.jsonl"
    slow = [
        request(n, "tools/call", {"name": "stuck", "arguments": {"seconds": 60}})
        for n in range(1, 11)
    ]
    requests.write_bytes(b"".join(line(message) for message in [echo(0, "quick"), *slow]))
    with requests.open("rb") as stdin:
        done = subprocess.run(
            command,
            stdin=stdin,
            capture_output=True,
            env=server_env(),
            timeout=EXIT_BOUND + 10,
            check=False,
        )
    assert done.returncode == 0, done.stderr.decode(errors="replace")
    responses = responses_in(done.stdout)
    assert sorted(responses) == list(range(11))
    assert text_of(responses[0]["result"]) == "quick"
    for n in range(1, 11):
        assert responses[n]["error"]["code"] == -32603
        assert responses[n]["error"]["message"].startswith("Server stopping")


@pytest.mark.anyio
async def test_the_last_line_is_served_even_without_a_newline_before_eof(
    command: list[str],
) -> None:
    with anyio.fail_after(BOUND):
        async with raw_server(command, server_env()) as process:
            stdout = reader(process)
            await send(process, line(echo(1, "first")) + line(echo(2, "last")).rstrip(b"\n"))
            assert process.stdin is not None
            await process.stdin.aclose()
            messages = await read_until_end(stdout)
            stderr = await read_stderr(process)
            returncode = await process.wait()
    responses = {message["id"]: message for message in messages}
    assert sorted(responses) == [1, 2]
    assert text_of(responses[2]["result"]) == "last"
    assert_clean_exit(returncode, stderr)


# -- server-to-client requests time out ---------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (None, CLIENT_REQUEST_TIMEOUT_SECONDS),
        ("", CLIENT_REQUEST_TIMEOUT_SECONDS),
        ("2.5", 2.5),
        ("30", 30.0),
        ("0", CLIENT_REQUEST_TIMEOUT_SECONDS),
        ("-1", CLIENT_REQUEST_TIMEOUT_SECONDS),
        ("nan", CLIENT_REQUEST_TIMEOUT_SECONDS),
        ("inf", CLIENT_REQUEST_TIMEOUT_SECONDS),
        ("ten", CLIENT_REQUEST_TIMEOUT_SECONDS),
    ],
)
def test_the_client_request_timeout_comes_from_the_environment_or_defaults_to_10_minutes(
    value: str | None, expected: float
) -> None:
    environ = {} if value is None else {"MRTR_CLIENT_REQUEST_TIMEOUT_SECONDS": value}
    settings = Settings.from_environment(environ)
    assert settings.client_request_timeout == expected
    assert CLIENT_REQUEST_TIMEOUT_SECONDS == 600
    # A value refused is named (the stdio transport warns with it), never silently dropped.
    refused = "MRTR_CLIENT_REQUEST_TIMEOUT_SECONDS" in settings.problems
    assert refused == (value not in (None, "", "2.5", "30"))


@pytest.mark.anyio
async def test_a_legacy_question_the_client_never_answers_times_out_and_is_withdrawn(
    command: list[str],
) -> None:
    env = server_env(MRTR_CLIENT_REQUEST_TIMEOUT_SECONDS="1")
    with anyio.fail_after(BOUND):
        async with raw_server(command, env) as process:
            stdout = reader(process)
            await send(process, LEGACY_INITIALIZE)
            assert (await read_message(stdout))["result"]["protocolVersion"] == "2025-11-25"
            await send(process, {"jsonrpc": "2.0", "method": "notifications/initialized"})
            call = {"name": "ask", "arguments": {"topic": "tea"}}
            await send(process, {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": call})
            asked = await read_message(stdout)
            assert asked["method"] == "elicitation/create"
            # No answer. After a second the server withdraws the question, then ends the call.
            withdrawn = await read_message(stdout)
            result = await read_message(stdout)
            # A late answer is ignored; the server still serves.
            await send(
                process, {"jsonrpc": "2.0", "id": asked["id"], "result": {"action": "cancel"}}
            )
            await send(process, {"jsonrpc": "2.0", "id": 2, "method": "ping"})
            assert process.stdin is not None
            await process.stdin.aclose()
            rest = await read_until_end(stdout)
            stderr = await read_stderr(process)
            returncode = await process.wait()
    assert withdrawn["method"] == "notifications/cancelled"
    assert withdrawn["params"]["requestId"] == asked["id"]
    assert "no answer within 1 s" in withdrawn["params"]["reason"]
    assert result["id"] == 1
    assert result["result"]["isError"] is True
    assert "no answer within 1 s" in text_of(result["result"])
    assert rest == [{"jsonrpc": "2.0", "id": 2, "result": {}}]
    assert_clean_exit(returncode, stderr)


@pytest.mark.anyio
async def test_an_invalid_client_request_timeout_is_warned_about_and_the_server_runs(
    command: list[str],
) -> None:
    with anyio.fail_after(BOUND):
        async with raw_server(
            command, server_env(MRTR_CLIENT_REQUEST_TIMEOUT_SECONDS="soon")
        ) as process:
            stdout = reader(process)
            await send(process, echo(1, "fine"))
            assert text_of((await read_message(stdout))["result"]) == "fine"
            assert process.stdin is not None
            await process.stdin.aclose()
            stderr = await read_stderr(process)
            returncode = await process.wait()
    assert "MRTR_CLIENT_REQUEST_TIMEOUT_SECONDS='soon'" in stderr
    assert_clean_exit(returncode, stderr)


# -- cancellation reaches handlers in worker threads ---------------------------------------------


@pytest.mark.anyio
async def test_a_cancelled_blocking_tool_that_finishes_later_is_never_answered(
    command: list[str],
) -> None:
    # `stuck` is a plain def: the event loop cannot stop its thread, which returns "unstuck"
    # after the cancellation. basic/utilities/cancellation: nothing more may be sent for it.
    with anyio.fail_after(BOUND):
        async with raw_server(command, server_env()) as process:
            stdout = reader(process)
            await send(
                process,
                request("stuck", "tools/call", {"name": "stuck", "arguments": {"seconds": 1}}),
            )
            await send(process, echo(1, "running"))
            assert (await read_message(stdout))["id"] == 1  # `stuck` is in its thread by now
            await send(
                process,
                {
                    "jsonrpc": "2.0",
                    "method": "notifications/cancelled",
                    "params": {"requestId": "stuck", "reason": "test"},
                },
            )
            await anyio.sleep(2)  # let the thread finish after the cancellation
            await send(process, echo(2, "after"))
            assert process.stdin is not None
            await process.stdin.aclose()
            messages = await read_until_end(stdout)
            stderr = await read_stderr(process)
            returncode = await process.wait()
    assert [message.get("id") for message in messages] == [2]
    assert_clean_exit(returncode, stderr)


def test_logs_never_show_the_credentials_of_a_url() -> None:
    # A library's exception can quote an endpoint URL with user:password@ in it (an
    # AWS_ENDPOINT_URL, say); the log line and its traceback show the URL without them.
    script = (
        "import logging\n"
        f"from {PACKAGE}.mrtr_runtime.server import configure_logging\n"
        "configure_logging()\n"
        "try:\n"
        "    raise ConnectionError('cannot reach https://deployer:s3cr3t-pw@aws.example/')\n"
        "except ConnectionError:\n"
        "    logging.getLogger('tool').exception('failed at http://me:other-pw@host:9/x')\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=30, check=True
    )
    assert done.stdout == ""
    assert "https://[redacted]@aws.example/" in done.stderr
    assert "http://[redacted]@host:9/x" in done.stderr
    assert "s3cr3t-pw" not in done.stderr
    assert "other-pw" not in done.stderr


def test_argument_errors_quote_client_keys_short_and_count_the_rest(command: list[str]) -> None:
    huge_key = "K" * 200_000
    many = {f"extra{n}": n for n in range(10_000)}
    messages = [
        request(1, "tools/call", {"name": "echo", "arguments": {"text": "x", huge_key: 1}}),
        request(2, "tools/call", {"name": "echo", "arguments": {"text": "x", **many}}),
    ]
    done = subprocess.run(
        command,
        input=b"".join(line(message) for message in messages),
        capture_output=True,
        env=server_env(),
        timeout=EXIT_BOUND + 10,
        check=False,
    )
    responses = responses_in(done.stdout)
    for n in (1, 2):
        assert responses[n]["result"]["isError"] is True
        assert len(text_of(responses[n]["result"])) < 2_000
    assert "(200000 characters)" in text_of(responses[1]["result"])
    assert text_of(responses[2]["result"]).endswith("and 9990 more problems")
