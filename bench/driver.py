"""A tiny raw stdio JSON-RPC driver: no client library in the timed path.

One `Peer` is one spawned server process. Requests are written as single newline-terminated
lines of pre-serialised JSON; responses are read line by line and matched by id. The driver also
plays the client side of the 2025-11-25 era: server->client `elicitation/create` requests that
arrive on stdout are answered from the requested schema (see `answer_elicitation`).

Every workload returns plain numbers; nothing here asserts timings (machines are noisy).
"""

from __future__ import annotations

import io
import json
import os
import subprocess
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Self, cast

MODERN = "2026-07-28"
LEGACY = "2025-11-25"
CAPABILITIES: dict[str, Any] = {"elicitation": {"form": {}}}
CLIENT_INFO = {"name": "mrtr-bench", "version": "1"}
# 2026-07-28 basic/index: every request carries params._meta with the version and capabilities.
META: dict[str, Any] = {
    "io.modelcontextprotocol/protocolVersion": MODERN,
    "io.modelcontextprotocol/clientCapabilities": CAPABILITIES,
    "io.modelcontextprotocol/clientInfo": CLIENT_INFO,
}
ECHO_TEXT = "hello, benchmark"
DEPLOY_ARGS = {"stack": "prod-api", "region": "eu-west-1"}
ROLE_ARN = "arn:aws:iam::123456789012:role/deployer"


#: CPUs for spawned servers (None: wherever the scheduler puts them). See `pin`.
_SERVER_CPUS: set[int] | None = None


def pin(enabled: bool = True) -> dict[str, list[int]] | None:
    """Put this driver on one CPU and every server spawned from now on on another.

    On a 2-core machine a ping-pong between two processes costs twice as much when the
    scheduler happens to move them between cores mid-run as when it leaves them apart, and it
    does both within one run; pinning keeps every repetition and every server on the same
    footing (driver and server on different cores, as a host and its server usually are)."""
    global _SERVER_CPUS
    try:
        cpus = sorted(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return None
    if not enabled or len(cpus) < 2:
        _SERVER_CPUS = None
        return None
    os.sched_setaffinity(0, {cpus[0]})
    _SERVER_CPUS = {cpus[1]}
    return {"driver": [cpus[0]], "servers": [cpus[1]]}


class BenchError(RuntimeError):
    """A server misbehaved (lost/duplicated/wrong answer, exited, timed out)."""


@dataclass(frozen=True)
class ServerSpec:
    name: str
    argv: Sequence[str]
    env: Mapping[str, str]
    cwd: Path


@dataclass(frozen=True)
class Rate:
    """A workload's outcome: operations per wall-clock second, and the server's CPU per op."""

    per_second: float
    server_cpu_us: float | None  # on-CPU time of all the server's threads, per operation


class _Timing:
    """Wall clock and the server's CPU time, started together."""

    def __init__(self, peer: Peer) -> None:
        self._peer = peer
        self._cpu = peer.cpu_seconds()
        self._wall = time.perf_counter()

    def spent(self) -> tuple[float, float | None]:
        """Wall seconds and server CPU seconds since this timing started."""
        wall = time.perf_counter() - self._wall
        cpu = self._peer.cpu_seconds()
        return wall, None if cpu is None or self._cpu is None else cpu - self._cpu

    def rate(self, count: int) -> Rate:
        if count <= 0:
            return Rate(0.0, None)
        wall = time.perf_counter() - self._wall
        cpu = self._peer.cpu_seconds()
        per_op = None if cpu is None or self._cpu is None else (cpu - self._cpu) / count * 1e6
        return Rate(count / wall, per_op)


def _dumps(message: object) -> bytes:
    return json.dumps(message, separators=(",", ":")).encode() + b"\n"


def _template(method: str, params: Mapping[str, Any]) -> tuple[bytes, bytes]:
    """Split a request into (prefix, suffix) around its id so ids are cheap to stamp."""
    marker = "__BENCH_ID__"
    line = _dumps({"jsonrpc": "2.0", "id": marker, "method": method, "params": params})
    prefix, suffix = line.split(b'"' + marker.encode() + b'"')
    return prefix, suffix


def modern(params: Mapping[str, Any]) -> dict[str, Any]:
    return {**params, "_meta": META}


ECHO_MODERN = _template("tools/call", modern({"name": "echo", "arguments": {"text": ECHO_TEXT}}))
ECHO_LEGACY = _template("tools/call", {"name": "echo", "arguments": {"text": ECHO_TEXT}})


def answer_elicitation(params: Mapping[str, Any]) -> dict[str, Any]:
    """Accept a form elicitation, filling each requested property by its type and name."""
    schema = params.get("requestedSchema") or {}
    content: dict[str, object] = {}
    for key, prop in (schema.get("properties") or {}).items():
        kind = prop.get("type") if isinstance(prop, dict) else None
        if kind == "boolean":
            content[key] = True
        elif kind in ("number", "integer"):
            content[key] = 1
        elif "arn" in key.lower() or "role" in key.lower():
            content[key] = ROLE_ARN
        else:
            content[key] = "yes"
    return {"action": "accept", "content": content}


def answer_inputs(requests: Mapping[str, Any]) -> dict[str, Any]:
    answers: dict[str, Any] = {}
    for key, request in requests.items():
        if request.get("method") != "elicitation/create":
            raise BenchError(f"unexpected input request {request.get('method')!r}")
        answers[key] = answer_elicitation(request.get("params") or {})
    return answers


class Peer:
    """One spawned server on pipes. Use as a context manager: it always reaps the process."""

    def __init__(self, spec: ServerSpec, stderr_log: Path, *, timeout: float = 300.0) -> None:
        self.spec = spec
        self._log = stderr_log.open("ab")
        self.spawned_at = time.perf_counter()
        self.proc = subprocess.Popen(
            list(spec.argv),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._log,
            env=dict(spec.env),
            cwd=spec.cwd,
            bufsize=0,
        )
        if _SERVER_CPUS is not None:
            os.sched_setaffinity(self.proc.pid, _SERVER_CPUS)
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self._fd = self.proc.stdin.fileno()
        raw = cast("io.RawIOBase", self.proc.stdout)  # a FileIO: Popen(bufsize=0)
        self._reader = io.BufferedReader(raw, buffer_size=1 << 16)
        self._next_id = 0
        # A hung server must not hang the benchmark: kill it, readline then sees EOF.
        self._watchdog = threading.Timer(timeout, self._on_timeout)
        self._watchdog.daemon = True
        self._watchdog.start()
        self.timed_out = False

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def pid(self) -> int:
        return self.proc.pid

    def _on_timeout(self) -> None:
        self.timed_out = True
        self.proc.kill()

    def new_id(self) -> int:
        self._next_id += 1
        return self._next_id

    def write(self, data: bytes) -> None:
        view = memoryview(data)
        while view:
            try:
                written = os.write(self._fd, view)
            except BrokenPipeError as exc:
                raise BenchError(f"{self.spec.name}: server closed its stdin") from exc
            view = view[written:]

    def read_message(self) -> dict[str, Any]:
        line = self._reader.readline()
        if not line:
            why = "timed out" if self.timed_out else f"exited ({self.proc.poll()})"
            raise BenchError(f"{self.spec.name}: no response, server {why}")
        message = json.loads(line)
        if not isinstance(message, dict):
            raise BenchError(f"{self.spec.name}: non-object line {line[:200]!r}")
        return message

    def read_response(self, request_id: object) -> dict[str, Any]:
        """Read until the response to `request_id`; answer server->client requests on the way."""
        while True:
            message = self.read_message()
            if "method" in message:
                if "id" in message:
                    self._answer_server_request(message)
                continue  # notifications (progress, logging) are not what we time
            if message.get("id") != request_id:
                raise BenchError(
                    f"{self.spec.name}: response for {message.get('id')!r}, expected {request_id!r}"
                )
            if "error" in message:
                raise BenchError(f"{self.spec.name}: error {message['error']}")
            result = message.get("result")
            if not isinstance(result, dict):
                raise BenchError(f"{self.spec.name}: response without a result object")
            return result

    def _answer_server_request(self, message: Mapping[str, Any]) -> None:
        if message.get("method") == "elicitation/create":
            result: dict[str, Any] = answer_elicitation(message.get("params") or {})
            self.write(_dumps({"jsonrpc": "2.0", "id": message["id"], "result": result}))
        elif message.get("method") == "ping":
            self.write(_dumps({"jsonrpc": "2.0", "id": message["id"], "result": {}}))
        else:
            error = {"code": -32601, "message": "Method not found"}
            self.write(_dumps({"jsonrpc": "2.0", "id": message["id"], "error": error}))

    def request(self, method: str, params: Mapping[str, Any]) -> dict[str, Any]:
        request_id = self.new_id()
        self.write(_dumps({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}))
        return self.read_response(request_id)

    def notify(self, method: str, params: Mapping[str, Any] | None = None) -> None:
        message: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
        if params is not None:
            message["params"] = params
        self.write(_dumps(message))

    def memory_kib(self) -> dict[str, int]:
        """VmHWM (peak resident) and VmRSS of the server process, from /proc, in KiB."""
        out: dict[str, int] = {}
        try:
            status = Path(f"/proc/{self.pid}/status").read_text()
        except OSError:
            return out
        for line in status.splitlines():
            key, _, value = line.partition(":")
            if key in ("VmHWM", "VmRSS"):
                out[key] = int(value.split()[0])
        return out

    def cpu_seconds(self) -> float | None:
        """On-CPU seconds of the server's live threads (/proc/<pid>/task/*/schedstat, ns)."""
        total = 0
        try:
            for task in Path(f"/proc/{self.pid}/task").iterdir():
                try:
                    total += int((task / "schedstat").read_text().split()[0])
                except (OSError, IndexError, ValueError):
                    continue  # a thread that ended meanwhile
        except OSError:
            return None
        return total / 1e9

    def close(self, grace: float = 10.0) -> float | None:
        """Close stdin (EOF asks the server to exit); kill after `grace`. Returns exit seconds."""
        self._watchdog.cancel()
        started = time.perf_counter()
        exit_seconds: float | None = None
        if self.proc.stdin is not None and not self.proc.stdin.closed:
            try:
                self.proc.stdin.close()
            except OSError:
                pass
        try:
            self.proc.wait(timeout=grace)
            exit_seconds = time.perf_counter() - started
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self._reader.close()
        self._log.close()
        return exit_seconds


# -- workloads ---------------------------------------------------------------------------------


def first_discover(peer: Peer) -> float:
    """Seconds from spawn to the first `server/discover` response (2026-07-28 era)."""
    result = peer.request("server/discover", {"_meta": META})
    if MODERN not in (result.get("supportedVersions") or []):
        raise BenchError(f"{peer.spec.name}: discover does not offer {MODERN}: {result}")
    return time.perf_counter() - peer.spawned_at


def first_initialize(peer: Peer) -> float:
    """Seconds from spawn to the first `initialize` response; then selects the legacy era."""
    params = {"protocolVersion": LEGACY, "capabilities": CAPABILITIES, "clientInfo": CLIENT_INFO}
    result = peer.request("initialize", params)
    elapsed = time.perf_counter() - peer.spawned_at
    if result.get("protocolVersion") != LEGACY:
        raise BenchError(f"{peer.spec.name}: initialize answered {result.get('protocolVersion')}")
    peer.notify("notifications/initialized")
    return elapsed


def _check_echo(peer: Peer, result: Mapping[str, Any]) -> None:
    content = result.get("content") or [{}]
    if content[0].get("text") != ECHO_TEXT or result.get("isError"):
        raise BenchError(f"{peer.spec.name}: wrong echo result {result}")


def sequential_echo(peer: Peer, count: int, *, legacy: bool = False) -> Rate:
    """Sequential `tools/call` echo round trips per second (one in flight at a time)."""
    prefix, suffix = ECHO_LEGACY if legacy else ECHO_MODERN
    _check_echo(peer, peer.read_response(_send(peer, prefix, suffix)))
    timing = _Timing(peer)
    for _ in range(count):
        request_id = peer.new_id()
        peer.write(prefix + str(request_id).encode() + suffix)
        result = peer.read_response(request_id)
        if result.get("isError"):
            raise BenchError(f"{peer.spec.name}: echo failed {result}")
    return timing.rate(count)


def _send(peer: Peer, prefix: bytes, suffix: bytes) -> int:
    request_id = peer.new_id()
    peer.write(prefix + str(request_id).encode() + suffix)
    return request_id


def pipelined_echo(peer: Peer, count: int) -> Rate:
    """N echo requests written at once (one write, from another thread so a full stdout pipe
    cannot deadlock us); every id must come back exactly once. Returns requests per second."""
    prefix, suffix = ECHO_MODERN
    ids = [peer.new_id() for _ in range(count)]
    payload = b"".join(prefix + str(i).encode() + suffix for i in ids)
    failure: list[Exception] = []

    def write_all() -> None:
        try:
            peer.write(payload)
        except (OSError, BenchError) as exc:  # reported below, after the reader gives up
            failure.append(exc)

    pending = set(ids)
    timing = _Timing(peer)
    writer = threading.Thread(target=write_all, daemon=True)
    writer.start()
    errors = 0
    while pending:
        message = peer.read_message()
        if "method" in message:
            continue
        request_id = message.get("id")
        if request_id not in pending:
            raise BenchError(f"{peer.spec.name}: unexpected or duplicate id {request_id!r}")
        pending.discard(request_id)
        if "error" in message or (message.get("result") or {}).get("isError"):
            errors += 1
    rate = timing.rate(count)
    writer.join()
    if failure:
        raise BenchError(f"{peer.spec.name}: pipelined write failed: {failure[0]}")
    if errors:
        raise BenchError(f"{peer.spec.name}: {errors} of {count} pipelined calls failed")
    return rate


def _check_deploy(peer: Peer, result: Mapping[str, Any]) -> None:
    content = result.get("content") or [{}]
    text = content[0].get("text", "")
    if result.get("resultType", "complete") != "complete" or not text.startswith("Deployed"):
        raise BenchError(f"{peer.spec.name}: deploy did not complete: {result}")


class _Mrtr:
    """The two-round flow on 2026-07-28, prepared once per session.

    Construction runs one completion as a warm-up and a full correctness check; it also fixes
    the answers, so `complete` only stamps the id and the echoed `requestState` into
    pre-serialised bytes (the driver's own JSON work must stay small next to the server's)."""

    def __init__(self, peer: Peer) -> None:
        self.peer = peer
        first = modern({"name": "deploy", "arguments": DEPLOY_ARGS})
        self.round1_prefix, self.round1_suffix = _template("tools/call", first)
        round1 = self._round1()
        answers = answer_inputs(round1.get("inputRequests") or {})
        marker = "__BENCH_STATE__"
        retry = {**first, "inputResponses": answers, "requestState": marker}
        self.retry_prefix, retry_suffix = _template("tools/call", retry)
        state_at = retry_suffix.index(b'"' + marker.encode() + b'"')
        self.before_state = retry_suffix[:state_at]
        self.after_state = retry_suffix[state_at + len(marker) + 2 :]
        _check_deploy(peer, self._round2(round1.get("requestState")))

    def _round1(self) -> dict[str, Any]:
        round1 = self.peer.read_response(_send(self.peer, self.round1_prefix, self.round1_suffix))
        if round1.get("resultType") != "input_required":
            raise BenchError(f"{self.peer.spec.name}: round 1 was not input_required: {round1}")
        return round1

    def _round2(self, state: object) -> dict[str, Any]:
        request_id = self.peer.new_id()
        self.peer.write(
            self.retry_prefix
            + str(request_id).encode()
            + self.before_state
            + json.dumps(state).encode()
            + self.after_state
        )
        return self.peer.read_response(request_id)

    def complete(self) -> None:
        result = self._round2(self._round1().get("requestState"))
        if result.get("resultType") != "complete" or result.get("isError"):
            raise BenchError(f"{self.peer.spec.name}: round 2 did not complete: {result}")


def mrtr_modern(peer: Peer, count: int) -> Rate:
    """Two-round MRTR completions per second on 2026-07-28: round 1 -> answers -> round 2."""
    flow = _Mrtr(peer)
    timing = _Timing(peer)
    for _ in range(count):
        flow.complete()
    return timing.rate(count)


@dataclass(frozen=True)
class Cost:
    """What one MRTR completion costs in plain calls: wall-clock time, and server CPU."""

    wall: float
    cpu: float | None


def mrtr_cost(peer: Peer, *, blocks: int = 10, calls: int = 100, completions: int = 25) -> Cost:
    """Alternate blocks of plain echo calls and MRTR completions in one session and compare the
    time per operation, so that drifts of a busy machine hit both sides alike (a ratio of two
    rates measured seconds apart moves by 30% between runs; this one much less)."""
    flow = _Mrtr(peer)
    prefix, suffix = ECHO_MODERN
    spent = {"echo": [0.0, 0.0], "mrtr": [0.0, 0.0]}
    cpu_known = True
    for _ in range(blocks):
        timing = _Timing(peer)
        for _ in range(calls):
            result = peer.read_response(_send(peer, prefix, suffix))
            if result.get("isError"):
                raise BenchError(f"{peer.spec.name}: echo failed {result}")
        wall, cpu = timing.spent()
        spent["echo"][0] += wall
        spent["echo"][1] += cpu or 0.0
        cpu_known &= cpu is not None
        timing = _Timing(peer)
        for _ in range(completions):
            flow.complete()
        wall, cpu = timing.spent()
        spent["mrtr"][0] += wall
        spent["mrtr"][1] += cpu or 0.0
        cpu_known &= cpu is not None
    per_call = [v / (blocks * calls) for v in spent["echo"]]
    per_completion = [v / (blocks * completions) for v in spent["mrtr"]]
    cpu_ratio = per_completion[1] / per_call[1] if cpu_known and per_call[1] else None
    return Cost(per_completion[0] / per_call[0], cpu_ratio)


def mrtr_legacy(peer: Peer, count: int) -> Rate:
    """The same flow through the 2025-11-25 bridge: after `initialize`, one `tools/call`; the
    server asks with real `elicitation/create` requests, which `read_response` answers."""
    prefix, suffix = _template("tools/call", {"name": "deploy", "arguments": DEPLOY_ARGS})
    _check_deploy(peer, peer.read_response(_send(peer, prefix, suffix)))
    timing = _Timing(peer)
    for _ in range(count):
        result = peer.read_response(_send(peer, prefix, suffix))
        if result.get("isError"):
            raise BenchError(f"{peer.spec.name}: legacy deploy failed: {result}")
    return timing.rate(count)
