"""Reliability under load and faults: a baked project's real server, driven over its pipes.

The template is baked once per module (with its hooks), ``tests/reliability_tools.py`` is dropped
into the project's ``tools/`` package, and the server runs as ``python -m <package>`` with
``PYTHONPATH=<project>/src``. A raw driver writes newline-delimited JSON-RPC and checks every
stdout line as it arrives: one strict JSON message per line, each response to an id we sent,
exactly once.

Counts (bad inputs tried, requests under load, faults injected, lost) are printed at the end of
the module.

2026-07-28 basic/transports/stdio: "The server MUST NOT write anything to its stdout that is not a
valid MCP message"; after a cancellation the server "MUST NOT send any further messages" for that
request; servers "SHOULD exit promptly when their standard input is closed".
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
from collections import Counter, defaultdict
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import asynccontextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import anyio.abc
import pytest

REPO = Path(__file__).resolve().parents[2]
TOOLS_MODULE = Path(__file__).resolve().parents[1] / "reliability_tools.py"
MODERN = "2026-07-28"
CAPABILITIES = {"elicitation": {"form": {}}}
META = {
    "io.modelcontextprotocol/protocolVersion": MODERN,
    "io.modelcontextprotocol/clientCapabilities": CAPABILITIES,
}
KEY_HEX = bytes(range(7, 39)).hex()
ACCEPT_ADA = {"action": "accept", "content": {"name": "Ada"}}
LOAD_REQUESTS = 10_000
#: The load test's writes: this many messages at a time.
WINDOW_BATCH = 100

COUNTS: Counter[str] = Counter()


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


# --- the baked project -------------------------------------------------------------------------


@dataclass(frozen=True)
class Project:
    root: Path
    package: str
    max_concurrent: int
    drain_seconds: float
    max_backlog: int
    write_grace_seconds: float

    @property
    def capacity(self) -> int:
        """Requests the server takes at once: running plus queued; beyond it, busy errors."""
        return self.max_concurrent + self.max_backlog

    def env(self, **extra: str) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("MRTR_")}
        env["PYTHONPATH"] = str(self.root / "src")
        env["MRTR_SIGNING_KEY"] = KEY_HEX
        env.update(extra)
        return env

    @property
    def command(self) -> list[str]:
        return [sys.executable, "-m", self.package]


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Project:
    from cookiecutter.main import cookiecutter

    out = tmp_path_factory.mktemp("reliability-bake")
    root = Path(
        cookiecutter(
            str(REPO),
            no_input=True,
            output_dir=str(out),
            extra_context={"include_aws_example": "no"},
        )
    )
    package = next(p.name for p in (root / "src").iterdir() if (p / "mrtr_runtime").is_dir())
    shutil.copy(TOOLS_MODULE, root / "src" / package / "tools" / TOOLS_MODULE.name)
    probe = subprocess.run(
        [
            sys.executable,
            "-c",
            (
                f"from {package}.mrtr_runtime._stdio import MAX_CONCURRENT_REQUESTS, DRAIN_SECONDS,"
                " MAX_BACKLOG, WRITE_GRACE_SECONDS;"
                "print(MAX_CONCURRENT_REQUESTS, DRAIN_SECONDS, MAX_BACKLOG, WRITE_GRACE_SECONDS)"
            ),
        ],
        env={**os.environ, "PYTHONPATH": str(root / "src")},
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    max_concurrent, drain, backlog, grace = probe.stdout.split()
    return Project(root, package, int(max_concurrent), float(drain), int(backlog), float(grace))


@pytest.fixture(scope="module", autouse=True)
def report_counts(request: pytest.FixtureRequest) -> Iterator[None]:
    yield
    reporter = request.config.pluginmanager.getplugin("terminalreporter")
    line = (
        f"reliability: bad inputs tried {COUNTS['bad inputs']}, requests under load "
        f"{COUNTS['requests']}, faults injected {COUNTS['faults']}, refused as busy "
        f"{COUNTS['busy']}, lost {COUNTS['lost']}"
    )
    capture = request.config.pluginmanager.getplugin("capturemanager")
    if reporter is not None and capture is not None:
        with capture.global_and_fixture_disabled():
            reporter.write_line(line)


# --- a raw driver --------------------------------------------------------------------------------


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def dumps(message: object) -> bytes:
    return json.dumps(message, separators=(",", ":")).encode() + b"\n"


def request(
    request_id: object, method: str, params: dict[str, Any] | None = None
) -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "id": request_id,
        "method": method,
        "params": {"_meta": META, **(params or {})},
    }


def tool_call(
    request_id: object, name: str, arguments: dict[str, Any] | None = None, **extra: Any
) -> dict[str, Any]:
    return request(request_id, "tools/call", {"name": name, "arguments": arguments or {}, **extra})


def cancel(request_id: object) -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "method": "notifications/cancelled",
        "params": {"requestId": request_id, "reason": "test"},
    }


class Wire:
    """One server process: raw writes, strict line-by-line reads, responses indexed by id."""

    def __init__(self, process: anyio.abc.Process, task_group: anyio.abc.TaskGroup) -> None:
        self.process = process
        self.task_group = task_group
        self.responses: defaultdict[object, list[dict[str, Any]]] = defaultdict(list)
        self.server_requests: list[dict[str, Any]] = []
        self.notifications: list[dict[str, Any]] = []
        self.violations: list[str] = []
        self.stderr = bytearray()
        self.lines = 0
        self.on_server_request: Callable[[dict[str, Any]], Awaitable[None]] | None = None
        self._waiters: dict[object, anyio.Event] = {}
        self._prefix = b""
        self.stdout_done = anyio.Event()
        self.stderr_done = anyio.Event()

    @property
    def pid(self) -> int:
        return self.process.pid

    async def send(self, *messages: dict[str, Any]) -> None:
        await self.send_raw(b"".join(dumps(message) for message in messages))

    async def send_raw(self, data: bytes) -> None:
        assert self.process.stdin is not None
        await self.process.stdin.send(data)

    async def close_stdin(self) -> None:
        assert self.process.stdin is not None
        with suppress(anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
            await self.process.stdin.aclose()

    async def read_one_byte(self) -> None:
        """Take one byte of stdout before the reader starts: proof the server began writing."""
        assert self.process.stdout is not None
        self._prefix = await self.process.stdout.receive(1)

    def start_reading(self) -> None:
        self.task_group.start_soon(self._read_stdout)

    async def wait_for(self, ids: object) -> None:
        for request_id in ids if isinstance(ids, list | set | tuple | range) else [ids]:
            if request_id not in self.responses:
                event = self._waiters.setdefault(request_id, anyio.Event())
                await event.wait()

    async def wait_exit(self) -> int:
        code = await self.process.wait()
        with anyio.move_on_after(5):
            await self.stdout_done.wait()
            await self.stderr_done.wait()
        return code

    def one(self, request_id: object) -> dict[str, Any]:
        found = self.responses[request_id]
        assert len(found) == 1, f"id {request_id!r} answered {len(found)} times"
        return found[0]

    def stderr_text(self) -> str:
        return self.stderr.decode("utf-8", "replace")

    def rss_kib(self) -> int | None:
        try:
            for row in Path(f"/proc/{self.pid}/status").read_text().splitlines():
                if row.startswith("VmRSS:"):
                    return int(row.split()[1])
        except OSError:
            return None
        return None

    async def _read_stdout(self) -> None:
        assert self.process.stdout is not None
        buffer = bytearray(self._prefix)
        try:
            async for chunk in self.process.stdout:
                buffer += chunk
                while (end := buffer.find(b"\n")) >= 0:
                    raw = bytes(buffer[:end])
                    del buffer[: end + 1]
                    await self._on_line(raw)
        except (anyio.ClosedResourceError, anyio.BrokenResourceError):
            pass
        finally:
            if buffer:
                self.violations.append(f"unterminated last line: {bytes(buffer[:80])!r}")
            self.stdout_done.set()
            for event in self._waiters.values():
                event.set()

    async def _on_line(self, raw: bytes) -> None:
        self.lines += 1
        try:
            message = json.loads(raw.decode("utf-8"), parse_constant=_reject_constant)
        except ValueError as error:
            self.violations.append(f"line {self.lines}: {error}: {raw[:80]!r}...{raw[-80:]!r}")
            return
        if not isinstance(message, dict) or message.get("jsonrpc") != "2.0":
            self.violations.append(f"line {self.lines}: not a JSON-RPC message: {raw[:80]!r}")
            return
        if "method" in message:
            if "id" in message:
                self.server_requests.append(message)
                if self.on_server_request is not None:
                    self.task_group.start_soon(self.on_server_request, message)
            else:
                self.notifications.append(message)
            return
        if ("result" in message) == ("error" in message) or "id" not in message:
            self.violations.append(f"line {self.lines}: not a response: {raw[:80]!r}")
            return
        request_id = message["id"]
        self.responses[request_id].append(message)
        if request_id in self._waiters:
            self._waiters[request_id].set()

    async def _read_stderr(self) -> None:
        assert self.process.stderr is not None
        try:
            async for chunk in self.process.stderr:
                self.stderr += chunk
        except (anyio.ClosedResourceError, anyio.BrokenResourceError):
            pass
        finally:
            self.stderr_done.set()


@asynccontextmanager
async def serve(project: Project, *, read: bool = True, **env: str) -> AsyncIterator[Wire]:
    """Run the server for the body; afterwards close stdin, wait (bounded), kill if needed."""
    process = await anyio.open_process(project.command, env=project.env(**env), cwd=project.root)
    try:
        async with anyio.create_task_group() as task_group:
            wire = Wire(process, task_group)
            task_group.start_soon(wire._read_stderr)
            if read:
                wire.start_reading()
            try:
                yield wire
            finally:
                with anyio.CancelScope(shield=True):
                    await wire.close_stdin()
                    with anyio.move_on_after(15):
                        await process.wait()
                    if process.returncode is None:
                        process.kill()
                        await process.wait()
                    with anyio.move_on_after(5):
                        await wire.stdout_done.wait()
                        await wire.stderr_done.wait()
                task_group.cancel_scope.cancel()
    finally:
        with anyio.CancelScope(shield=True):
            await process.aclose()


def text_of(response: dict[str, Any]) -> str:
    return " ".join(block.get("text", "") for block in response["result"]["content"])


def assert_clean_stdout(wire: Wire) -> None:
    assert wire.violations == [], wire.violations[:3]


async def mrtr_tokens(wire: Wire, count: int) -> dict[int, str]:
    """Round 1 of rel_mrtr for n = 0..count-1: the tokens round 2 will present."""
    ids = [f"token-{n}" for n in range(count)]
    await wire.send(*(tool_call(i, "rel_mrtr", {"n": n}) for n, i in enumerate(ids)))
    await wire.wait_for(ids)
    return {n: wire.one(i)["result"]["requestState"] for n, i in enumerate(ids)}


# --- load ---------------------------------------------------------------------------------------


KINDS = (
    ["fast"] * 6
    + ["slow"] * 2
    + ["mrtr1"] * 3
    + ["mrtr2"] * 3
    + ["failing", "tool_error"]
    + ["blocking"] * 2
    + ["printing", "cancelled"]
)


def load_request(i: int, tokens: dict[int, str]) -> tuple[str, dict[str, Any]]:
    kind = KINDS[i % len(KINDS)]
    n = i % len(tokens)
    if kind == "fast":
        return kind, tool_call(i, "rel_fast", {"n": i})
    if kind == "slow":
        return kind, tool_call(i, "rel_slow", {"seconds": 0.01 + (i % 3) / 100, "n": i})
    if kind == "mrtr1":
        return kind, tool_call(i, "rel_mrtr", {"n": n})
    if kind == "mrtr2":
        return kind, tool_call(
            i, "rel_mrtr", {"n": n}, requestState=tokens[n], inputResponses={"name": ACCEPT_ADA}
        )
    if kind == "failing":
        return kind, tool_call(i, "rel_failing", {"n": i})
    if kind == "tool_error":
        return kind, tool_call(i, "rel_tool_error", {"n": i})
    if kind == "blocking":
        return kind, tool_call(i, "rel_blocking", {"seconds": 0.002, "n": i})
    if kind == "printing":
        return kind, tool_call(i, "rel_printing", {"n": i})
    return kind, tool_call(i, "rel_slow", {"seconds": 30, "n": i})


def check_load_response(kind: str, i: int, n: int, response: dict[str, Any]) -> None:
    result = response.get("result")
    assert result is not None, (kind, i, response)
    if kind == "mrtr1":
        assert result["resultType"] == "input_required"
        assert set(result["inputRequests"]) == {"name"} and result["requestState"]
        return
    assert result["resultType"] == "complete"
    expected = {
        "fast": f"fast {i}",
        "slow": f"slow {i}",
        "mrtr2": f"hello Ada {n}",
        "blocking": f"blocked {i}",
        "printing": f"printed {i}",
    }
    if kind in expected:
        assert text_of(response) == expected[kind], (kind, i)
    else:
        assert result.get("isError") is True, (kind, i)


@pytest.mark.anyio
async def test_ten_thousand_pipelined_mixed_calls_are_each_answered_exactly_once(
    project: Project,
) -> None:
    with anyio.fail_after(60):
        async with serve(project) as wire:
            tokens = await mrtr_tokens(wire, 10)
            plan = [load_request(i, tokens) for i in range(1, LOAD_REQUESTS + 1)]
            answered = [message["id"] for kind, message in plan if kind != "cancelled"]

            async def write() -> None:
                # A client that keeps at most the server's capacity outstanding (running plus
                # queued) is never refused as busy; beyond it, see the flood tests below.
                batch: list[dict[str, Any]] = []
                sent: list[object] = []
                for kind, message in plan:
                    batch.append(message)
                    if kind == "cancelled":
                        batch.append(cancel(message["id"]))
                    else:
                        sent.append(message["id"])
                    if len(batch) >= WINDOW_BATCH:
                        await wire.wait_for(sent[: max(0, len(sent) - window)])
                        await wire.send(*batch)
                        batch = []
                await wire.send(*batch)

            window = project.capacity - 2 * WINDOW_BATCH

            async with anyio.create_task_group() as task_group:
                task_group.start_soon(write)
                await wire.wait_for(answered)
            await wire.close_stdin()
            assert await wire.wait_exit() == 0

    COUNTS["requests"] += LOAD_REQUESTS + len(tokens)
    kinds = Counter(kind for kind, _ in plan)
    COUNTS["faults"] += sum(
        kinds[k] for k in ("failing", "tool_error", "blocking", "printing", "cancelled")
    )
    lost = [i for i in answered if not wire.responses.get(i)]
    COUNTS["lost"] += len(lost)
    assert lost == []
    assert_clean_stdout(wire)
    for kind, message in plan:
        i = message["id"]
        if kind == "cancelled":
            assert i not in wire.responses, f"cancelled request {i} was answered"
        else:
            check_load_response(kind, i, i % len(tokens), wire.one(i))
    unexpected = set(wire.responses) - set(answered) - {f"token-{n}" for n in range(len(tokens))}
    assert unexpected == set()
    assert wire.notifications == [] and wire.server_requests == []
    # Stray prints went to stderr, never to the wire.
    assert "stray print" in wire.stderr_text() and "stray fd-1 write" in wire.stderr_text()


@pytest.mark.anyio
async def test_a_cancellation_storm_cancels_in_flight_calls_and_ignores_the_rest(
    project: Project,
) -> None:
    in_flight = [f"slow-{i}" for i in range(project.max_concurrent // 2)]
    junk: list[dict[str, Any]] = [cancel(i) for i in range(100_000, 101_000)]
    junk += [cancel(f"nobody-{i}") for i in range(500)]
    junk += [
        {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": value}}
        for value in (None, True, 1.5, [1], {"id": 1}, "", -1, 2**80)
    ]
    junk += [{"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {}}] * 10
    with anyio.fail_after(30):
        async with serve(project) as wire:
            await wire.send(*(tool_call(i, "rel_slow", {"seconds": 60}) for i in in_flight))
            await wire.send(*(cancel(i) for i in in_flight), *junk, *(cancel(i) for i in in_flight))
            await wire.send(request("after", "tools/list"), tool_call("fast", "rel_fast", {"n": 1}))
            await wire.wait_for(["after", "fast"])
            # Cancelled requests leave no slot taken: stdin EOF finds nothing to drain.
            await wire.close_stdin()
            assert await wire.wait_exit() == 0
    COUNTS["faults"] += len(in_flight)
    COUNTS["bad inputs"] += len(junk)
    COUNTS["requests"] += len(in_flight) + 2
    assert_clean_stdout(wire)
    assert all(i not in wire.responses for i in in_flight)
    assert "result" in wire.one("after") and text_of(wire.one("fast")) == "fast 1"
    assert "abandoning" not in wire.stderr_text()
    assert "Traceback" not in wire.stderr_text()


@pytest.mark.anyio
async def test_the_server_answers_others_while_slow_and_blocking_tools_run(
    project: Project,
) -> None:
    slow = [f"slow-{i}" for i in range(10)]
    blocking = [f"blocking-{i}" for i in range(10)]
    with anyio.fail_after(30):
        async with serve(project) as wire:
            await wire.send(*(tool_call(i, "rel_slow", {"seconds": 2}) for i in slow))
            await wire.send(*(tool_call(i, "rel_blocking", {"seconds": 2}) for i in blocking))
            await wire.send(request("list", "tools/list"), tool_call("fast", "rel_fast", {"n": 7}))
            await wire.wait_for(["list", "fast"])
            still_running = [i for i in slow + blocking if i not in wire.responses]
            await wire.wait_for(slow + blocking)
    COUNTS["requests"] += len(slow) + len(blocking) + 2
    COUNTS["faults"] += len(blocking)
    assert still_running == slow + blocking, "the quick requests must not wait for the slow ones"
    assert_clean_stdout(wire)
    assert [text_of(wire.one(i)) for i in blocking] == ["blocked 0"] * len(blocking)


@pytest.mark.anyio
async def test_concurrency_is_bounded_at_the_documented_limit_and_memory_stays_bounded(
    project: Project,
) -> None:
    # _stdio.MAX_CONCURRENT_REQUESTS run at once, MAX_BACKLOG more wait their turn in order:
    # a burst of exactly that many is served in full, never more than the limit at once.
    held = [f"held-{i}" for i in range(project.capacity)]
    samples: list[int] = []
    with anyio.fail_after(40):
        async with serve(project) as wire:
            await wire.send(request("warm", "tools/list"))
            await wire.wait_for("warm")
            baseline = wire.rss_kib()

            async def sample() -> None:
                while True:
                    if (rss := wire.rss_kib()) is not None:
                        samples.append(rss)
                    await anyio.sleep(0.05)

            async with anyio.create_task_group() as task_group:
                task_group.start_soon(sample)
                await wire.send(*(tool_call(i, "rel_held", {"seconds": 0.2}) for i in held))
                await wire.wait_for(held)
                task_group.cancel_scope.cancel()
            await wire.send(tool_call("peak", "rel_peak"))
            await wire.wait_for("peak")
    COUNTS["requests"] += len(held) + 2
    assert_clean_stdout(wire)
    assert all(text_of(wire.one(i)) == "held" for i in held)
    assert wire.one("peak")["result"]["structuredContent"] == {"peak": project.max_concurrent}
    if baseline is not None and samples:
        assert max(samples) - baseline < 64 * 1024, (baseline, max(samples))


@pytest.mark.anyio
async def test_a_request_id_reused_while_in_flight_is_refused_and_the_first_still_completes(
    project: Project,
) -> None:
    with anyio.fail_after(20):
        async with serve(project) as wire:
            await wire.send(tool_call("dup", "rel_slow", {"seconds": 0.5, "n": 1}))
            await wire.send(tool_call("dup", "rel_fast", {"n": 2}))
            await wire.wait_for("dup")
            await wire.close_stdin()
            assert await wire.wait_exit() == 0
    COUNTS["bad inputs"] += 1
    answers = wire.responses["dup"]
    assert [("error" in a) for a in answers] == [True, False]
    assert answers[0]["error"]["code"] == -32600
    assert text_of(answers[1]) == "slow 1"


# --- shutdown ------------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_stdin_closed_mid_flight_lets_in_flight_calls_finish_and_exits_0(
    project: Project,
) -> None:
    with anyio.fail_after(30):
        async with serve(project) as wire:
            tokens = await mrtr_tokens(wire, 2)
            calls = [
                tool_call(f"slow-{i}", "rel_slow", {"seconds": 0.5, "n": i}) for i in range(10)
            ]
            calls += [
                tool_call(f"blocking-{i}", "rel_blocking", {"seconds": 0.5, "n": i})
                for i in range(5)
            ]
            calls += [
                tool_call(
                    f"mrtr-{n}",
                    "rel_mrtr",
                    {"n": n},
                    requestState=tokens[n],
                    inputResponses={"name": ACCEPT_ADA},
                )
                for n in range(2)
            ]
            await wire.send(*calls)
            await wire.close_stdin()
            assert await wire.wait_exit() == 0
    COUNTS["requests"] += len(calls) + 2
    COUNTS["faults"] += 1
    assert_clean_stdout(wire)
    for message in calls:
        assert "result" in wire.one(message["id"])
    assert "Traceback" not in wire.stderr_text()


@pytest.mark.anyio
async def test_stdin_closed_answers_calls_that_outlive_the_drain_bound_and_exits_0(
    project: Project,
) -> None:
    with anyio.fail_after(project.drain_seconds + 15):
        async with serve(project) as wire:
            await wire.send(
                *(tool_call(f"long-{i}", "rel_slow", {"seconds": 120}) for i in range(3))
            )
            await wire.send(request("list", "tools/list"))
            await wire.wait_for("list")
            await wire.close_stdin()
            with anyio.fail_after(project.drain_seconds + 5):
                assert await wire.wait_exit() == 0
    COUNTS["faults"] += 4
    assert_clean_stdout(wire)
    # Nothing unanswered: each abandoned call is told the server stopped, once.
    stopped = {i: r for i, r in wire.responses.items() if str(i).startswith("long")}
    assert sorted(stopped) == ["long-0", "long-1", "long-2"]
    assert all(len(found) == 1 for found in stopped.values())
    assert all(
        found[0]["error"]["message"].startswith("Server stopping") for found in stopped.values()
    )
    assert "abandoning 3 unfinished request(s)" in wire.stderr_text()
    assert "Traceback" not in wire.stderr_text()


@pytest.mark.anyio
async def test_a_blocking_tool_does_not_hold_the_process_past_the_drain_bound(
    project: Project,
) -> None:
    # A plain `def` tool stuck in time.sleep: stdin EOF must still end the process within
    # DRAIN_SECONDS (plus start-up slack), not when the thread happens to finish.
    with anyio.fail_after(60):
        async with serve(project) as wire:
            await wire.send(
                tool_call("stuck", "rel_blocking", {"seconds": 30}), request("list", "tools/list")
            )
            await wire.wait_for("list")
            await wire.close_stdin()
            with anyio.fail_after(project.drain_seconds + 3):
                assert await wire.wait_exit() == 0
    COUNTS["faults"] += 1
    assert "Traceback" not in wire.stderr_text()


@pytest.mark.anyio
async def test_sigterm_mid_flight_exits_0_promptly_without_a_traceback(project: Project) -> None:
    with anyio.fail_after(30):
        async with serve(project) as wire:
            await wire.send(
                *(tool_call(f"long-{i}", "rel_slow", {"seconds": 120}) for i in range(5))
            )
            await wire.send(tool_call("fast", "rel_fast", {"n": 3}))
            await wire.wait_for("fast")
            wire.process.send_signal(signal.SIGTERM)
            with anyio.fail_after(project.drain_seconds + 3):
                assert await wire.wait_exit() == 0
    COUNTS["faults"] += 6
    assert_clean_stdout(wire)
    assert text_of(wire.one("fast")) == "fast 3"
    assert "Traceback" not in wire.stderr_text()


@pytest.mark.anyio
async def test_sigterm_with_a_blocking_tool_exits_within_the_drain_bound(project: Project) -> None:
    with anyio.fail_after(60):
        async with serve(project) as wire:
            await wire.send(
                tool_call("stuck", "rel_blocking", {"seconds": 30}), request("list", "tools/list")
            )
            await wire.wait_for("list")
            wire.process.send_signal(signal.SIGTERM)
            with anyio.fail_after(project.drain_seconds + 3):
                assert await wire.wait_exit() == 0
    COUNTS["faults"] += 2
    assert "Traceback" not in wire.stderr_text()


# --- faults that used to corrupt or kill ----------------------------------------------------------


@pytest.mark.anyio
async def test_a_response_cancelled_while_being_written_is_never_cut_in_half(
    project: Project,
) -> None:
    # 2 MB cannot fit a pipe, so the server is mid-write (blocked on the full pipe) when the
    # cancellation arrives. Whatever it does, the next message must start on a line of its own.
    with anyio.fail_after(30):
        async with serve(project, read=False) as wire:
            await wire.send(tool_call("big", "rel_big", {"size": 2_000_000}))
            await wire.read_one_byte()
            await wire.send(cancel("big"), request("after", "tools/list"))
            await anyio.sleep(0.2)  # let the server act on the cancel before we drain the pipe
            wire.start_reading()
            await wire.wait_for("after")
    COUNTS["faults"] += 1
    assert_clean_stdout(wire)
    assert "result" in wire.one("after")
    assert len(wire.responses["big"]) <= 1


@pytest.mark.anyio
async def test_sigterm_during_a_large_write_leaves_no_partial_line(project: Project) -> None:
    with anyio.fail_after(30):
        async with serve(project, read=False) as wire:
            await wire.send(tool_call("big", "rel_big", {"size": 2_000_000}))
            await wire.read_one_byte()
            wire.process.send_signal(signal.SIGTERM)
            await anyio.sleep(0.2)
            wire.start_reading()
            await wire.wait_exit()
    COUNTS["faults"] += 1
    assert_clean_stdout(wire)


@pytest.mark.anyio
async def test_a_tool_result_that_is_not_json_does_not_take_the_server_down(
    project: Project,
) -> None:
    with anyio.fail_after(20):
        async with serve(project) as wire:
            await wire.send(tool_call("bad", "rel_bad_result"))
            await wire.wait_for("bad")
            await wire.send(request("after", "tools/list"))
            await wire.wait_for("after")
            await wire.close_stdin()
            assert await wire.wait_exit() == 0
    COUNTS["faults"] += 1
    assert_clean_stdout(wire)
    bad = wire.one("bad")
    assert bad.get("error", {}).get("code") == -32603 or bad["result"].get("isError") is True
    assert "result" in wire.one("after")


@pytest.mark.anyio
async def test_a_number_too_large_for_a_float_never_reaches_stdout_as_infinity(
    project: Project,
) -> None:
    raw = dumps(tool_call("add", "rel_add", {"a": 0, "b": 1})).replace(b'"a":0', b'"a":1e400')
    raw_echo = dumps(tool_call("echo", "rel_echo", {"value": 0})).replace(
        b'"value":0', b'"value":-1e999'
    )
    assert b"1e400" in raw and b"1e999" in raw_echo
    with anyio.fail_after(20):
        async with serve(project) as wire:
            await wire.send_raw(raw + raw_echo)
            await wire.send(request("after", "tools/list"))
            await wire.wait_for(["after"])
            await wire.close_stdin()
            await wire.wait_exit()
    COUNTS["bad inputs"] += 2
    assert_clean_stdout(wire)


@pytest.mark.anyio
async def test_a_client_that_closes_its_end_of_stdout_does_not_crash_the_server(
    project: Project,
) -> None:
    # A host that dies or hangs up: the server's writes hit a closed pipe (EPIPE).
    read_end, write_end = os.pipe()
    stderr = bytearray()
    with anyio.fail_after(30):
        process = await anyio.open_process(
            project.command, env=project.env(), cwd=project.root, stdout=write_end
        )
        os.close(write_end)
        async with process, anyio.create_task_group() as task_group:
            assert process.stdin is not None and process.stderr is not None
            error_stream = process.stderr

            async def drain() -> None:
                async for chunk in error_stream:
                    stderr.extend(chunk)

            task_group.start_soon(drain)
            calls = [tool_call(f"slow-{i}", "rel_slow", {"seconds": 0.3}) for i in range(3)]
            await process.stdin.send(b"".join(dumps(call) for call in calls))
            os.close(read_end)  # the responses, 0.3 s later, go to a pipe nobody holds
            await anyio.sleep(0.6)
            with suppress(anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
                await process.stdin.send(dumps(request("after", "tools/list")))
                await process.stdin.aclose()
            code = await process.wait()
    COUNTS["faults"] += 1
    assert "Traceback" not in stderr.decode("utf-8", "replace")
    assert code == 0


@pytest.mark.anyio
async def test_legacy_calls_needing_input_beyond_the_concurrency_limit_all_complete(
    project: Project,
) -> None:
    # 2025-11-25 era: each call asks with a real elicitation/create and waits for our response.
    # The responses must reach the server even when every request slot is taken.
    count = project.max_concurrent + 1
    ids = [f"legacy-{i}" for i in range(count)]
    with anyio.fail_after(40):
        async with serve(project) as wire:

            async def answer(message: dict[str, Any]) -> None:
                await wire.send({"jsonrpc": "2.0", "id": message["id"], "result": ACCEPT_ADA})

            wire.on_server_request = answer
            await wire.send(
                {
                    "jsonrpc": "2.0",
                    "id": "init",
                    "method": "initialize",
                    "params": {
                        "protocolVersion": "2025-11-25",
                        "capabilities": CAPABILITIES,
                        "clientInfo": {"name": "reliability", "version": "1"},
                    },
                }
            )
            await wire.wait_for("init")
            await wire.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
            await wire.send(
                *(
                    {
                        "jsonrpc": "2.0",
                        "id": i,
                        "method": "tools/call",
                        "params": {"name": "rel_mrtr", "arguments": {"n": n}},
                    }
                    for n, i in enumerate(ids)
                )
            )
            with anyio.fail_after(15):
                await wire.wait_for(ids)
    COUNTS["requests"] += count
    assert_clean_stdout(wire)
    assert [text_of(wire.one(i)) for i in ids] == [f"hello Ada {n}" for n in range(count)]


@pytest.mark.anyio
async def test_cancellations_get_through_when_every_slot_is_busy(project: Project) -> None:
    # Back-pressure must not hold back notifications/cancelled: cancelling is how a client frees
    # the slots it is waiting for.
    ids = [f"slow-{i}" for i in range(project.max_concurrent + 8)]
    with anyio.fail_after(40):
        async with serve(project) as wire:
            await wire.send(*(tool_call(i, "rel_slow", {"seconds": 60}) for i in ids))
            await wire.send(*(cancel(i) for i in ids), request("after", "tools/list"))
            with anyio.fail_after(15):
                await wire.wait_for("after")
    COUNTS["faults"] += len(ids)
    assert_clean_stdout(wire)
    assert [i for i in ids if i in wire.responses] == []


# --- restart -----------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_a_killed_and_restarted_server_completes_a_round_it_minted_before(
    project: Project,
) -> None:
    # 2026-07-28 basic/patterns/mrtr: the server keeps nothing between rounds; the signed
    # requestState carries the round, so a new process with the same key finishes it.
    with anyio.fail_after(40):
        async with serve(project) as first:
            await first.send(tool_call("round-1", "rel_mrtr", {"n": 42}))
            await first.wait_for("round-1")
            token = first.one("round-1")["result"]["requestState"]
            first.process.kill()
            assert await first.wait_exit() == -signal.SIGKILL
        retry = tool_call(
            "round-2",
            "rel_mrtr",
            {"n": 42},
            requestState=token,
            inputResponses={"name": ACCEPT_ADA},
        )
        async with serve(project) as second:
            await second.send(retry)
            await second.wait_for("round-2")
        other_key = bytes(range(90, 122)).hex()
        async with serve(project, MRTR_SIGNING_KEY=other_key) as third:
            await third.send(retry)
            await third.wait_for("round-2")
    COUNTS["faults"] += 2
    COUNTS["requests"] += 3
    assert text_of(second.one("round-2")) == "hello Ada 42"
    assert third.one("round-2")["error"] == {
        "code": -32602,
        "message": "Invalid requestState: unknown key",
    }


# --- floods beyond the bounds: the reader never goes blind ------------------------------------
#
# _stdio: MAX_CONCURRENT_REQUESTS run, MAX_BACKLOG wait; a request beyond both is answered at
# once with a busy error (JSON-RPC -32603, data {"running", "queued"}), and stdin keeps being
# read, so responses to the server's own requests, cancellations and EOF always get through.
# Each flood runs at the bound plus one and at ten times the bound.


def is_busy(response: dict[str, Any], project: Project) -> bool:
    error = response.get("error")
    if error is None:
        return False
    assert error["code"] == -32603, response
    assert error["message"].startswith("Server busy: "), response
    assert error["data"] == {"running": project.max_concurrent, "queued": project.max_backlog}
    return True


def legacy_initialize() -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "id": "init",
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-11-25",
            "capabilities": CAPABILITIES,
            "clientInfo": {"name": "reliability", "version": "1"},
        },
    }


@pytest.mark.anyio
@pytest.mark.parametrize("times", [1, 10], ids=["bound+1", "10x"])
async def test_a_legacy_flood_past_the_backlog_finishes_what_fits_and_refuses_the_rest(
    project: Project, times: int
) -> None:
    # Each call asks one elicitation/create and waits for our answer. With every slot and the
    # whole backlog taken, the answers are the only way forward: they must be read. The client
    # answers once the overflow has been refused, so the counts are exact (an answer read
    # while a request waits for a place, BUSY_WAIT_SECONDS, would let that request in).
    count = project.capacity * times + (1 if times == 1 else 0)
    ids = [f"legacy-{i}" for i in range(count)]
    overflow_refused = anyio.Event()
    with anyio.fail_after(60):
        async with serve(project) as wire:

            async def answer(message: dict[str, Any]) -> None:
                await overflow_refused.wait()
                await wire.send({"jsonrpc": "2.0", "id": message["id"], "result": ACCEPT_ADA})

            wire.on_server_request = answer
            await wire.send(legacy_initialize())
            await wire.wait_for("init")
            await wire.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
            await wire.send(
                *(
                    {
                        "jsonrpc": "2.0",
                        "id": i,
                        "method": "tools/call",
                        "params": {"name": "rel_mrtr", "arguments": {"n": n}},
                    }
                    for n, i in enumerate(ids)
                )
            )
            with anyio.fail_after(30):
                await wire.wait_for(ids[project.capacity :])
                overflow_refused.set()
                await wire.wait_for(ids)
            await wire.close_stdin()
            assert await wire.wait_exit() == 0
    COUNTS["requests"] += count
    busy = [i for i in ids if is_busy(wire.one(i), project)]
    COUNTS["busy"] += len(busy)
    assert_clean_stdout(wire)
    # Everything read before the first refusal fits; the rest arrived with no place left.
    assert busy == ids[project.capacity :]
    fitted = ids[: project.capacity]
    assert [text_of(wire.one(i)) for i in fitted] == [f"hello Ada {n}" for n in range(len(fitted))]
    assert len(wire.server_requests) == len(fitted)


@pytest.mark.anyio
@pytest.mark.parametrize("times", [1, 10], ids=["400", "4000"])
async def test_cancellations_of_a_flood_get_through_and_the_server_answers_at_once(
    project: Project, times: int
) -> None:
    # Without a reader that keeps reading, the cancellations would wait behind the flood for
    # slots that only they can free, and tools/list would never be answered.
    ids = [f"wait-{i}" for i in range(400 * times)]
    with anyio.fail_after(60):
        async with serve(project) as wire:
            await wire.send(*(tool_call(i, "rel_slow", {"seconds": 120}) for i in ids))
            await wire.send(*(cancel(i) for i in ids), request("after", "tools/list"))
            with anyio.fail_after(15):  # "promptly": bounds a hang, measures nothing
                await wire.wait_for("after")
            await wire.close_stdin()
            assert await wire.wait_exit() == 0
    COUNTS["requests"] += len(ids) + 1
    COUNTS["faults"] += len(ids)
    assert_clean_stdout(wire)
    assert "result" in wire.one("after")
    # basic/utilities/cancellation: nothing for a request once it is cancelled. A request
    # refused as busy was answered before its cancellation arrived; nothing else is sent.
    busy = [i for i in ids if i in wire.responses and is_busy(wire.one(i), project)]
    answered = [i for i in ids if i in wire.responses]
    COUNTS["busy"] += len(busy)
    assert answered == busy
    assert len(ids) - len(busy) >= project.capacity
    assert "abandoning" not in wire.stderr_text()
    assert "Traceback" not in wire.stderr_text()


@pytest.mark.anyio
@pytest.mark.parametrize("times", [1, 10], ids=["400", "4000"])
async def test_a_client_that_stops_reading_and_closes_stdin_sees_the_server_exit_in_bound(
    project: Project, times: int
) -> None:
    # Output piles up unread (far more than a pipe holds, far less than the unread-output cap),
    # three calls outlive the drain bound: the server must still notice EOF and leave within
    # DRAIN_SECONDS + WRITE_GRACE_SECONDS.
    calls = [tool_call(f"big-{i}", "rel_big", {"size": 2000}) for i in range(400 * times)]
    calls += [tool_call(f"long-{i}", "rel_slow", {"seconds": 120}) for i in range(3)]
    bound = project.drain_seconds + project.write_grace_seconds + 8
    with anyio.fail_after(bound + 30):
        async with serve(project, read=False) as wire:
            await wire.send(tool_call("first", "rel_fast"))
            await wire.read_one_byte()  # started; from here on nobody reads stdout
            with anyio.fail_after(20):
                await wire.send(*calls)
            await wire.close_stdin()
            with anyio.fail_after(bound):
                code = await wire.process.wait()
    COUNTS["requests"] += len(calls)
    COUNTS["faults"] += 1
    assert code == 0
    assert "Traceback" not in wire.stderr_text()


@pytest.mark.anyio
async def test_past_the_unread_output_cap_the_server_stops_reading_and_loses_nothing(
    project: Project,
) -> None:
    # 40 MB of answers nobody reads: past _stdio.MAX_UNREAD_OUTPUT_BYTES (32 MiB) the server
    # stops reading, so a further flood waits in the pipe, not in its memory. Once the client
    # reads, everything is answered exactly once.
    big = [f"big-{i}" for i in range(40)]
    pings = [f"fast-{i}" for i in range(20_000)]
    flood = b"".join(dumps(tool_call(i, "rel_fast")) for i in pings)
    with anyio.fail_after(90):
        async with serve(project, read=False) as wire:
            await wire.send(*(tool_call(i, "rel_big", {"size": 1_000_000}) for i in big))
            await wire.read_one_byte()
            with anyio.move_on_after(3) as blocked:
                await wire.send_raw(flood)
            wire.start_reading()
            await wire.wait_for(big + pings)
            await wire.close_stdin()
            assert await wire.wait_exit() == 0
    COUNTS["requests"] += len(big) + len(pings)
    COUNTS["faults"] += 1
    assert blocked.cancelled_caught, "the server kept reading with 40 MB unread"
    assert_clean_stdout(wire)
    assert all(len(wire.one(i)["result"]["content"][0]["text"]) == 1_000_000 for i in big)
    busy = sum(is_busy(wire.one(i), project) for i in pings)
    assert all(text_of(wire.one(i)) == "fast 0" for i in pings if "result" in wire.one(i))
    COUNTS["busy"] += busy


@pytest.mark.anyio
async def test_a_cancellation_reaches_a_plain_def_tool_in_its_worker_thread(
    project: Project,
) -> None:
    # The loop cannot interrupt a thread; the tool polls ctx.cancelled and stops. Its return
    # value comes after the cancellation and must not be sent.
    with anyio.fail_after(30):
        async with serve(project) as wire:
            await wire.send(tool_call("watch", "rel_watch", {"seconds": 20, "n": 1}))
            while "rel_watch 1 started" not in wire.stderr_text():
                await anyio.sleep(0.01)
            await wire.send(cancel("watch"))
            with anyio.fail_after(10):
                while "rel_watch 1 saw the cancellation" not in wire.stderr_text():
                    await anyio.sleep(0.01)
            await wire.send(request("after", "tools/list"))
            await wire.wait_for("after")
            await wire.close_stdin()
            assert await wire.wait_exit() == 0
    COUNTS["faults"] += 1
    assert_clean_stdout(wire)
    assert "watch" not in wire.responses
    assert "abandoning" not in wire.stderr_text()
