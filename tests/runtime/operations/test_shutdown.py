"""Truthful outcomes at shutdown: a tool's point of no return, and what a stopping server says.

A handler marks `ctx.point_of_no_return()` right before its side effect. From there a cancel no
longer aborts it, and a server told to stop (SIGTERM, SIGINT, end of input) gives it
SHUTDOWN_GRACE_SECONDS to finish and send its real result; past the grace the client is told
the action may have been carried out, never that it was not. Requests before their mark are
stopped at once, as before, and told they were not completed.

The stdio server runs as a subprocess (the support server plus two tools of this file's own).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
import sys
import threading
import time
from pathlib import Path

import anyio
import pytest

from mrtr_runtime import Context, RequestCancelled
from mrtr_runtime._capabilities import ClientCapabilities
from mrtr_runtime._context import SHUTDOWN_GRACE_SECONDS, Cancellation
from mrtr_runtime._stdio import WRITE_GRACE_SECONDS
from support import (
    ALL_CAPABILITIES,
    BOUND,
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

_logger = logging.getLogger(__name__)

#: The server's own promise (grace, then the last writes and their flush), plus start-up room.
EXIT_BOUND = SHUTDOWN_GRACE_SECONDS + 2 * WRITE_GRACE_SECONDS + 10

SCRIPT = """\
import asyncio
import os
import threading
from pathlib import Path

from support import build_registry, make_server

from mrtr_runtime import Context
from mrtr_runtime.server import codec_from_environment, serve_stdio

registry = build_registry()


@registry.tool()
def commit_then_wait(seconds: float, marker: str, *, ctx: Context) -> str:
    \"\"\"Passes its point of no return, says so in `marker`, then works for `seconds`.\"\"\"
    ctx.point_of_no_return()
    Path(marker).write_text("committed")
    threading.Event().wait(seconds)
    ctx.check_cancelled()  # past the mark: never raises
    return f"carried out after {seconds:g} s"


@registry.tool()
async def commit_async_then_finish(seconds: float, marker: str, *, ctx: Context) -> str:
    \"\"\"Passes its point of no return, then works for `seconds` and says it ended.\"\"\"
    await ctx.pass_point_of_no_return()
    Path(marker).write_text("committed")
    await asyncio.sleep(seconds)
    Path(marker).write_text("finished")
    return "finished"


@registry.tool()
def wait_unmarked(seconds: float, marker: str, *, ctx: Context) -> str:
    \"\"\"Works for `seconds` without ever passing a point of no return.\"\"\"
    Path(marker).write_text("started")
    deadline = threading.Event()
    for _ in range(int(seconds * 10)):
        deadline.wait(0.1)
        ctx.check_cancelled()
    return "never marked"


codec = codec_from_environment(os.environ, default_key_file=None)
serve_stdio(make_server(registry=registry, codec=codec))
"""


@pytest.fixture
def shutdown_command(tmp_path: Path) -> list[str]:
    script = tmp_path / "serve_shutdown.py"
    script.write_text(SCRIPT, encoding="utf-8")
    return [sys.executable, str(script)]


def call(request_id: int, tool: str, seconds: float, marker: Path) -> Json:
    arguments = {"seconds": seconds, "marker": str(marker)}
    return request(request_id, "tools/call", {"name": tool, "arguments": arguments})


async def wait_for(marker: Path) -> None:
    while not await anyio.Path(marker).exists():  # noqa: ASYNC110 -- the tool's own file
        await anyio.sleep(0.02)


async def stop_after_marks(
    command: list[str],
    calls: list[Json],
    markers: list[Path],
    *,
    how: str,
) -> tuple[dict[object, Json], int | None, str, float]:
    """Start the server, send `calls`, wait until each has written its marker, then stop it
    (`how`: "SIGTERM", "SIGINT" or "EOF"). The responses by id, exit status, stderr, and the
    seconds from the stop to the exit."""
    with anyio.fail_after(BOUND + EXIT_BOUND):
        async with raw_server(command, server_env()) as process:
            stdout = reader(process)
            for message in calls:
                await send(process, message)
            for marker in markers:
                await wait_for(marker)
            stopped_at = time.monotonic()
            if how == "EOF":
                assert process.stdin is not None
                await process.stdin.aclose()
            else:
                process.send_signal(getattr(signal, how))
            messages = await read_until_end(stdout)
            stderr = await read_stderr(process)
            returncode = await process.wait()
            took = time.monotonic() - stopped_at
    return {m["id"]: m for m in messages if "id" in m}, returncode, stderr, took


# -- the mark itself -----------------------------------------------------------------------------


def context(cancellation: Cancellation) -> Context:
    return Context(
        answers={},
        request_state=None,
        client_capabilities=ClientCapabilities(ALL_CAPABILITIES),
        protocol_version="2026-07-28",
        era="modern",
        cancellation=cancellation,
    )


def test_past_the_point_of_no_return_a_cancel_no_longer_stops_the_work() -> None:
    cancellation = Cancellation()
    ctx = context(cancellation)
    assert not ctx.past_point_of_no_return
    ctx.point_of_no_return()
    assert ctx.past_point_of_no_return
    cancellation.cancel()
    assert ctx.cancelled
    ctx.check_cancelled()  # does not raise: the work goes on to its end


@pytest.mark.anyio
async def test_a_client_cancel_stops_the_work_only_before_its_mark() -> None:
    # The rule every transport applies to a client's notifications/cancelled (and to a client
    # that goes away): the flag always, the handler's task only before its point of no return.
    for committed in (False, True):
        cancellation = Cancellation()
        if committed:
            assert cancellation.commit()
        work = asyncio.get_running_loop().create_task(asyncio.sleep(0.05, "finished"))
        cancellation.cancel_running(work)
        assert cancellation.cancelled
        if committed:
            assert await work == "finished"
        else:
            with pytest.raises(asyncio.CancelledError):
                await work
    Cancellation().cancel_running(None)  # a request whose task has not started yet


def test_a_request_cancelled_before_its_mark_cannot_pass_it() -> None:
    cancellation = Cancellation()
    ctx = context(cancellation)
    assert cancellation.cancel_unless_committed()
    with pytest.raises(RequestCancelled):
        ctx.point_of_no_return()
    assert not ctx.past_point_of_no_return
    with pytest.raises(RequestCancelled):
        ctx.check_cancelled()


def test_a_stopping_server_does_not_cancel_a_request_past_its_mark() -> None:
    cancellation = Cancellation()
    ctx = context(cancellation)
    ctx.point_of_no_return()
    assert not cancellation.cancel_unless_committed()
    assert not ctx.cancelled


def test_mark_and_stop_racing_from_two_threads_always_agree() -> None:
    # Either the stop wins (and the mark raises) or the mark wins (and the stop leaves the
    # request alone); never both, never neither -- 1,000 races.
    for _ in range(1000):
        cancellation = Cancellation()
        ctx = context(cancellation)
        marked: list[bool] = []

        def mark(ctx: Context = ctx, marked: list[bool] = marked) -> None:
            try:
                ctx.point_of_no_return()
                marked.append(True)
            except RequestCancelled:
                marked.append(False)

        thread = threading.Thread(target=mark)
        thread.start()
        stopped = cancellation.cancel_unless_committed()
        thread.join()
        assert marked == [not stopped]


# -- stdio: signals and end of input -----------------------------------------------------------


@pytest.mark.anyio
async def test_a_client_cancel_past_the_mark_lets_the_work_finish_and_sends_nothing(
    shutdown_command: list[str], tmp_path: Path
) -> None:
    marker = tmp_path / "marker"
    with anyio.fail_after(BOUND):
        async with raw_server(shutdown_command, server_env()) as process:
            stdout = reader(process)
            await send(process, call(1, "commit_async_then_finish", 1, marker))
            await wait_for(marker)
            cancel = {"requestId": 1, "reason": "the user pressed stop"}
            await send(
                process, {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": cancel}
            )
            while marker.read_text() != "finished":  # noqa: ASYNC110 -- the tool's own file
                await anyio.sleep(0.02)
            await send(process, request(2, "ping"))
            assert process.stdin is not None
            await process.stdin.aclose()
            messages = await read_until_end(stdout)
            stderr = await read_stderr(process)
            returncode = await process.wait()
    assert_clean_exit(returncode, stderr)
    # The work was not abandoned halfway; the cancelled request itself gets no answer.
    assert [message.get("id") for message in messages] == [2]


@pytest.mark.anyio
@pytest.mark.parametrize("how", ["SIGTERM", "SIGINT", "EOF"])
async def test_a_request_past_its_point_of_no_return_gets_its_real_result_within_the_grace(
    shutdown_command: list[str], tmp_path: Path, how: str
) -> None:
    # The tool's work takes 2 s, well inside the 5 s grace; the unmarked one would take 60 s.
    marked, unmarked = tmp_path / "marked", tmp_path / "unmarked"
    responses, returncode, stderr, took = await stop_after_marks(
        shutdown_command,
        [call(1, "commit_then_wait", 2, marked), call(2, "wait_unmarked", 60, unmarked)],
        [marked, unmarked],
        how=how,
    )
    assert_clean_exit(returncode, stderr)
    assert sorted(responses, key=str) == [1, 2]
    assert text_of(responses[1]["result"]) == "carried out after 2 s"
    stopped = responses[2]["error"]
    assert stopped["code"] == -32603
    assert stopped["message"].startswith("Server stopping")
    assert stopped["message"].endswith("it was not completed")
    _logger.info("%s: exited %.2f s after the stop", how, took)
    assert took < EXIT_BOUND


@pytest.mark.anyio
@pytest.mark.parametrize("how", ["SIGTERM", "EOF"])
async def test_a_request_that_outlives_the_grace_past_its_mark_may_have_been_carried_out(
    shutdown_command: list[str], tmp_path: Path, how: str
) -> None:
    marked = tmp_path / "marked"
    responses, returncode, stderr, took = await stop_after_marks(
        shutdown_command, [call(1, "commit_then_wait", 600, marked)], [marked], how=how
    )
    assert_clean_exit(returncode, stderr)
    error = responses[1]["error"]
    assert error["code"] == -32603
    assert error["message"].startswith("Server stopping")
    assert "may have been carried out" in error["message"]
    assert "call the tool again with the same arguments" in error["message"]
    assert "not completed" not in error["message"]
    _logger.info("%s: exited %.2f s after the stop, the tool's thread still blocked", how, took)
    assert took < EXIT_BOUND


@pytest.mark.anyio
async def test_a_request_not_yet_marked_is_stopped_at_once_on_sigterm(
    shutdown_command: list[str], tmp_path: Path
) -> None:
    # Nothing waits for it: the answer comes before the grace has run (its thread polls the
    # cancellation and ends), and a request sent after the signal is refused unstarted.
    unmarked = tmp_path / "unmarked"
    with anyio.fail_after(BOUND + EXIT_BOUND):
        async with raw_server(shutdown_command, server_env()) as process:
            stdout = reader(process)
            await send(process, call(1, "wait_unmarked", 60, unmarked))
            await wait_for(unmarked)
            process.send_signal(signal.SIGTERM)
            first = await read_message(stdout)
            # The server may be gone already (nothing held it): then nothing started either.
            with contextlib.suppress(anyio.BrokenResourceError, anyio.ClosedResourceError):
                await send(process, call(2, "wait_unmarked", 60, tmp_path / "never"))
            rest = await read_until_end(stdout)
            stderr = await read_stderr(process)
            returncode = await process.wait()
    assert_clean_exit(returncode, stderr)
    assert first["id"] == 1
    assert first["error"]["message"].endswith("it was not completed")
    assert all(message.get("id") == 2 for message in rest)
    for message in rest:
        assert message["error"]["message"].endswith("it was not completed")
    assert not (tmp_path / "never").exists()
