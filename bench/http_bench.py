"""The HTTP section of the benchmark: Streamable HTTP servers under a lean load client.

`run.py` calls `measure` with one `HttpServerSpec` per server; each repetition starts every
configuration fresh (the order rotated), loads it for a fixed time and stops it with SIGTERM:

- `baked`: the baked project's `<slug> http --port 0`, one process;
- `sdk`: `http_sdk_server.py`, the official SDK's Streamable HTTP server, stateless, JSON;
- `fastmcp`: `http_fastmcp_server.py`, FastMCP 4.x's Streamable HTTP server, stateless, JSON;
- `floor`: `http_floor_server.py`, the stdio floor's answers behind the same uvicorn;
- `baked x2`: two `<slug> http` processes with the same signing key. Calls are spread over both;
  every MRTR completion runs round 1 on one replica and round 2 on the other.
- `baked oauth`: `<slug> http` as an OAuth resource server (`MRTR_OAUTH_ISSUER`), every request
  carrying a JWT access token it verifies (RS256), the keys served by `oauth_stub.py`: what
  authorization costs per call.

The load client is this process: asyncio `Protocol`s on keep-alive HTTP/1.1 connections, each
request built from pre-serialised bytes (only the JSON-RPC id, the `requestState` and the
`Content-Length` are stamped in), each response cut out of the byte stream by its
`Content-Length` with no HTTP library. Every response is checked (status 200 and the expected
content; round 1 is parsed as JSON, since its `requestState` goes into round 2). The client's own
CPU share is reported next to each rate: a share near 100% would mean the client, not the
server, set the pace.

Stdlib only, like `run.py`; timings are never asserted.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import socket
import statistics
import subprocess
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Self

import driver
import envs

MCP_PATH = "/mcp"
# The transport announces its address on stderr once it listens (see `Replica`).
URL_PATTERN = re.compile(r"(http://\S+/mcp)")
CONFIGS = ("baked", "sdk", "fastmcp", "floor", "baked x2", "baked oauth")
#: The single servers the baked server's figures are divided by, in the table's order.
PEERS = ("sdk", "fastmcp", "floor")
TITLES = {"sdk": "SDK", "fastmcp": "FastMCP", "floor": "floor"}
STARTUP_TIMEOUT = 60.0
ECHO_IN_BODY = json.dumps(driver.ECHO_TEXT).encode()  # the echoed text, as it appears in JSON
STOP_GRACE = 10.0


class _Failed(driver.BenchError):
    """A server answered wrongly; the message quotes the start of its answer."""


class _NoLegacy(driver.BenchError):
    """The server refuses `initialize` over HTTP (a bake from before the 2025-11-25 era was
    served there): the legacy row is left empty for it."""


class _BadExit(driver.BenchError):
    """A server that promises exit status 0 on SIGTERM ended otherwise (its figures stand)."""


@dataclass(frozen=True)
class HttpServerSpec:
    """How to start one server process. `argv` may hold `{port}`: then the bench picks a free
    port and waits until it accepts connections; otherwise the server must print its URL."""

    name: str
    argv: Sequence[str]
    env: Mapping[str, str]
    cwd: Path
    # Our transport promises exit status 0 on SIGTERM; uvicorn as the SDK and FastMCP run it
    # re-raises the signal after its graceful shutdown (status -15), which is not an error.
    exits_zero_on_sigterm: bool = False
    #: Serves 2025-11-25 clients over HTTP (`initialize`, then calls in that era). The floor
    #: answers only the 2026-07-28 shapes the other workloads send.
    legacy: bool = True
    #: An access token every request carries (`Authorization: Bearer ...`), or None.
    bearer: str | None = None


@dataclass(frozen=True)
class HttpConfig:
    reps: int
    connections: int  # concurrent keep-alive connections (MRTR: concurrent flows)
    seconds: float  # load time per workload per repetition
    warm_seconds: float  # untimed load before each workload


FULL = HttpConfig(reps=5, connections=16, seconds=1.5, warm_seconds=0.3)
QUICK = HttpConfig(reps=2, connections=16, seconds=0.7, warm_seconds=0.2)


def _cpu_seconds(pid: int) -> float | None:
    """On-CPU seconds of a process's live threads (/proc/<pid>/task/*/schedstat, ns)."""
    total = 0
    try:
        for task in Path(f"/proc/{pid}/task").iterdir():
            try:
                total += int((task / "schedstat").read_text().split()[0])
            except (OSError, IndexError, ValueError):
                continue  # a thread that ended meanwhile
    except OSError:
        return None
    return total / 1e9


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


class Replica:
    """One spawned HTTP server process; its stderr goes to a log file. A context manager that
    always stops the process (SIGTERM, then SIGKILL after `STOP_GRACE`)."""

    def __init__(self, spec: HttpServerSpec, log: Path, cpus: set[int] | None) -> None:
        self.spec = spec
        port = _free_port() if any("{port}" in a for a in spec.argv) else None
        argv = [a.replace("{port}", str(port)) for a in spec.argv]
        self._log = log.open("ab")
        self._url_found = threading.Event()
        self.url = "" if port is None else f"http://127.0.0.1:{port}{MCP_PATH}"
        self.proc = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,  # stdout carries nothing over HTTP; a stray print is lost
            stderr=subprocess.PIPE,
            env=dict(spec.env),
            cwd=spec.cwd,
        )
        if cpus is not None:
            os.sched_setaffinity(self.proc.pid, cpus)
        self._copier = threading.Thread(target=self._copy_stderr, daemon=True)
        self._copier.start()
        try:
            self._wait_until_listening(port)
        except BaseException:
            self.stop()
            raise

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _copy_stderr(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self._log.write(line)
            if not self._url_found.is_set():
                found = URL_PATTERN.search(line.decode(errors="replace"))
                if found and not self.url:
                    self.url = found.group(1)
                    self._url_found.set()
        self._url_found.set()  # EOF: the process ended; `_wait_until_listening` reports it

    def _wait_until_listening(self, port: int | None) -> None:
        deadline = time.monotonic() + STARTUP_TIMEOUT
        if port is None:
            self._url_found.wait(STARTUP_TIMEOUT)
            if not self.url:
                raise driver.BenchError(
                    f"{self.spec.name}: no `serving MCP at http://...` line on stderr "
                    f"(exit status {self.proc.poll()}); see {self._log.name}"
                )
            return
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise driver.BenchError(
                    f"{self.spec.name}: exited ({self.proc.returncode}); see {self._log.name}"
                )
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                return
            except OSError:
                time.sleep(0.02)
        raise driver.BenchError(f"{self.spec.name}: port {port} not listening after start-up")

    def cpu_seconds(self) -> float | None:
        return _cpu_seconds(self.proc.pid)

    def stop(self) -> int | None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            status = self.proc.wait(timeout=STOP_GRACE)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            status = None
        self._copier.join(timeout=STOP_GRACE)
        self._log.close()
        return status


# -- the load client ------------------------------------------------------------------------------


class _Connection(asyncio.Protocol):
    """One keep-alive HTTP/1.1 connection, one exchange at a time."""

    def __init__(self) -> None:
        self._buffer = bytearray()
        self._waiter: asyncio.Future[tuple[int, bytes]] | None = None
        self._transport: asyncio.Transport | None = None
        #: The head of the last response as sent (the legacy workload reads its session id).
        self.last_head = b""

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self._transport = transport

    def data_received(self, data: bytes) -> None:
        self._buffer += data
        waiter = self._waiter
        if waiter is None or waiter.done():
            return
        try:
            response = self._cut_response()
        except driver.BenchError as exc:
            waiter.set_exception(exc)
            return
        if response is not None:
            waiter.set_result(response)

    def connection_lost(self, exc: Exception | None) -> None:
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_exception(
                driver.BenchError(f"connection closed by the server ({exc})")
            )

    def _cut_response(self) -> tuple[int, bytes] | None:
        end = self._buffer.find(b"\r\n\r\n")
        if end < 0:
            return None
        raw_head = bytes(self._buffer[:end])
        head = raw_head.lower()
        at = head.find(b"\r\ncontent-length:")
        if at < 0:
            raise driver.BenchError(f"response without Content-Length: {head[:300]!r}")
        stop = head.find(b"\r\n", at + 2)
        length = int(head[at + 17 : stop if stop >= 0 else end])
        total = end + 4 + length
        if len(self._buffer) < total:
            return None
        status = int(head[9:12])
        body = bytes(self._buffer[end + 4 : total])
        del self._buffer[:total]
        self.last_head = raw_head
        return status, body

    async def exchange(self, request: bytes) -> tuple[int, bytes]:
        assert self._transport is not None
        self._waiter = asyncio.get_running_loop().create_future()
        self._transport.write(request)
        return await self._waiter

    def close(self) -> None:
        if self._transport is not None:
            self._transport.close()


async def _connect(url: str) -> _Connection:
    host, _, port = url.split("/")[2].rpartition(":")
    loop = asyncio.get_running_loop()
    _, connection = await loop.create_connection(_Connection, host, int(port))  # TCP_NODELAY set
    return connection


class _Post:
    """A POST to `/mcp`, pre-serialised as head and body halves around the JSON-RPC id; a NUL in
    `suffix` (never in JSON text) marks where `build` puts a completion's `requestState`."""

    def __init__(
        self,
        host: str,
        method: str,
        name: str,
        params: Mapping[str, Any],
        *,
        legacy_session: str | None = None,
        bearer: str | None = None,
    ) -> None:
        marker = "__BENCH_ID__"
        body = json.dumps(
            {"jsonrpc": "2.0", "id": marker, "method": method, "params": params},
            separators=(",", ":"),
        ).encode()
        self.prefix, self.suffix = body.split(b'"' + marker.encode() + b'"')
        # 2026-07-28 basic/transports (Streamable HTTP): the version and routing headers mirror
        # the body; Accept lists both response types, as every client does.
        if legacy_session is None:
            routing = (
                f"MCP-Protocol-Version: {driver.MODERN}\r\nMcp-Method: {method}\r\n"
                f"Mcp-Name: {name}\r\n"
            )
        else:
            # 2025-11-25 basic/transports: the negotiated version, and the session the
            # server named in its InitializeResult (none from a stateless server: "").
            routing = f"MCP-Protocol-Version: {driver.LEGACY}\r\n"
            if legacy_session:
                routing += f"Mcp-Session-Id: {legacy_session}\r\n"
        routing += _authorization(bearer)
        self.head = (
            f"POST {MCP_PATH} HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\n"
            f"Accept: application/json, text/event-stream\r\n{routing}Content-Length: "
        ).encode()

    def build(self, request_id: int, state: bytes = b"") -> bytes:
        body = self.prefix + str(request_id).encode() + self.suffix.replace(b"\0", state, 1)
        return self.head + str(len(body)).encode() + b"\r\n\r\n" + body


def _authorization(bearer: str | None) -> str:
    return "" if bearer is None else f"Authorization: Bearer {bearer}\r\n"


def _expect(status: int, body: bytes, marker: bytes, what: str) -> None:
    if status != 200 or marker not in body or b'"isError":true' in body:
        raise _Failed(f"{what}: HTTP {status}, {body[:300]!r}")


@dataclass(frozen=True)
class Load:
    """One timed workload: operations per second, server CPU per operation (all replicas), and
    the share of one CPU the client itself used meanwhile."""

    per_second: float
    server_cpu_us: float | None
    client_busy: float


@dataclass
class _Flows:
    """Pre-built requests for one replica: an echo call, and the two rounds of `deploy`."""

    echo: _Post
    round1: _Post
    round2: _Post | None = None


#: Header names are case-insensitive; the session id itself is not.
_SESSION_HEADER = re.compile(rb"\r\n(?i:mcp-session-id):[ \t]*([!-~]+)")


async def _legacy_echo_post(
    conn: _Connection, host: str, request_id: int, bearer: str | None
) -> _Post:
    """Open a 2025-11-25 session on `conn` (initialize, then notifications/initialized) and
    return the echo call of that session."""
    initialize = {
        "jsonrpc": "2.0",
        "id": request_id,
        "method": "initialize",
        "params": {
            "protocolVersion": driver.LEGACY,
            "capabilities": {},
            "clientInfo": {"name": "bench", "version": "1"},
        },
    }
    body = json.dumps(initialize).encode()
    head = (
        f"POST {MCP_PATH} HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\n"
        f"Accept: application/json, text/event-stream\r\n{_authorization(bearer)}"
        f"Content-Length: {len(body)}\r\n\r\n"
    ).encode()
    status, answer = await conn.exchange(head + body)
    if status == 400 and b"-32022" in answer:
        raise _NoLegacy(f"initialize refused: {answer[:200]!r}")
    if status != 200 or b'"protocolVersion"' not in answer:
        raise _Failed(f"initialize: HTTP {status}, {answer[:300]!r}")
    found = _SESSION_HEADER.search(conn.last_head)
    session = found.group(1).decode() if found else ""
    initialized = json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}).encode()
    routing = f"MCP-Protocol-Version: {driver.LEGACY}\r\n{_authorization(bearer)}"
    if session:
        routing += f"Mcp-Session-Id: {session}\r\n"
    head = (
        f"POST {MCP_PATH} HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\n"
        f"Accept: application/json, text/event-stream\r\n{routing}"
        f"Content-Length: {len(initialized)}\r\n\r\n"
    ).encode()
    status, answer = await conn.exchange(head + initialized)
    if status not in (200, 202):
        raise _Failed(f"notifications/initialized: HTTP {status}, {answer[:300]!r}")
    params = {"name": "echo", "arguments": {"text": driver.ECHO_TEXT}}
    return _Post(host, "tools/call", "echo", params, legacy_session=session, bearer=bearer)


def _echo_post(host: str, bearer: str | None) -> _Post:
    params = driver.modern({"name": "echo", "arguments": {"text": driver.ECHO_TEXT}})
    return _Post(host, "tools/call", "echo", params, bearer=bearer)


def _round1_post(host: str, bearer: str | None) -> _Post:
    params = driver.modern({"name": "deploy", "arguments": driver.DEPLOY_ARGS})
    return _Post(host, "tools/call", "deploy", params, bearer=bearer)


def _round2_post(host: str, answers: Mapping[str, Any], bearer: str | None) -> _Post:
    """The retry, with the answers fixed and a NUL where each completion's state goes."""
    marker = "__BENCH_STATE__"
    params = {
        **driver.modern({"name": "deploy", "arguments": driver.DEPLOY_ARGS}),
        "inputResponses": answers,
        "requestState": marker,
    }
    post = _Post(host, "tools/call", "deploy", params, bearer=bearer)
    post.suffix = post.suffix.replace(b'"' + marker.encode() + b'"', b"\0")
    return post


def _round1_state(status: int, body: bytes) -> tuple[str, Mapping[str, Any]]:
    if status != 200:
        raise _Failed(f"round 1: HTTP {status}, {body[:300]!r}")
    result = json.loads(body).get("result") or {}
    state = result.get("requestState")
    if result.get("resultType") != "input_required" or not isinstance(state, str):
        raise _Failed(f"round 1 was not input_required: {body[:300]!r}")
    return state, result.get("inputRequests") or {}


class _Client:
    """Connections to a set of replicas and the workloads over them."""

    def __init__(self, urls: Sequence[str], connections: int, bearer: str | None = None) -> None:
        self.urls = list(urls)
        self.count = connections
        self.bearer = bearer
        self.flows = [
            _Flows(_echo_post(u.split("/")[2], bearer), _round1_post(u.split("/")[2], bearer))
            for u in urls
        ]
        self.conns: list[list[_Connection]] = []  # per worker: one connection to each replica
        #: Per worker: the echo call of the 2025-11-25 session it opened on its first replica
        #: (a session lives in one process: the worker's calls stay on that replica).
        self.legacy: list[_Post] = []
        self._next_id = 0

    async def open(self) -> None:
        for worker in range(self.count):
            # worker i calls replica i % n first: calls spread evenly, MRTR rounds alternate
            order = [self.urls[(worker + k) % len(self.urls)] for k in range(len(self.urls))]
            self.conns.append([await _connect(u) for u in order])
        # one checked completion per replica fixes the answers (the same for any replica: the
        # driver answers from the requested schema)
        for index, flows in enumerate(self.flows):
            conn = next(c[0] for w, c in enumerate(self.conns) if w % len(self.urls) == index)
            state, requests = _round1_state(*await conn.exchange(flows.round1.build(self._id())))
            flows.round2 = _round2_post(
                self.urls[index].split("/")[2], driver.answer_inputs(requests), self.bearer
            )
            status, body = await conn.exchange(
                flows.round2.build(self._id(), json.dumps(state).encode())
            )
            _expect(status, body, b"Deployed ", "round 2")
            _expect(*await conn.exchange(flows.echo.build(self._id())), ECHO_IN_BODY, "echo")

    async def open_legacy(self) -> None:
        for worker, conns in enumerate(self.conns):
            host = self.urls[worker % len(self.urls)].split("/")[2]
            post = await _legacy_echo_post(conns[0], host, self._id(), self.bearer)
            _expect(*await conns[0].exchange(post.build(self._id())), ECHO_IN_BODY, "legacy echo")
            self.legacy.append(post)

    def close(self) -> None:
        for conns in self.conns:
            for conn in conns:
                conn.close()

    def _id(self) -> int:
        self._next_id += 1
        return self._next_id

    def _replica(self, worker: int, hop: int) -> int:
        return (worker + hop) % len(self.urls)

    async def _echo(self, worker: int) -> None:
        request = self.flows[self._replica(worker, 0)].echo.build(self._id())
        status, body = await self.conns[worker][0].exchange(request)
        _expect(status, body, ECHO_IN_BODY, "echo")

    async def _legacy_echo(self, worker: int) -> None:
        status, body = await self.conns[worker][0].exchange(self.legacy[worker].build(self._id()))
        _expect(status, body, ECHO_IN_BODY, "legacy echo")

    async def _mrtr(self, worker: int) -> None:
        first = self.flows[self._replica(worker, 0)]
        state, _ = _round1_state(
            *await self.conns[worker][0].exchange(first.round1.build(self._id()))
        )
        # round 2 to the next replica (the same one when there is only one)
        hop = 1 % len(self.urls)
        second = self.flows[self._replica(worker, hop)]
        assert second.round2 is not None
        request = second.round2.build(self._id(), json.dumps(state).encode())
        status, body = await self.conns[worker][hop].exchange(request)
        _expect(status, body, b"Deployed ", "round 2")

    async def run(self, kind: str, seconds: float, cpu: Callable[[], float | None]) -> Load:
        operation = {"calls": self._echo, "mrtr": self._mrtr, "legacy": self._legacy_echo}[kind]
        done = [0] * self.count
        loop = asyncio.get_running_loop()
        deadline = loop.time() + seconds

        async def worker(index: int) -> None:
            while loop.time() < deadline:
                await operation(index)
                done[index] += 1

        server_before = cpu()
        client_before = time.process_time()
        started = time.perf_counter()
        await asyncio.gather(*(worker(i) for i in range(self.count)))
        wall = time.perf_counter() - started
        client = time.process_time() - client_before
        server_after = cpu()
        total = sum(done)
        server_us = (
            None
            if server_before is None or server_after is None or not total
            else (server_after - server_before) / total * 1e6
        )
        return Load(total / wall, server_us, client / wall)


# -- one configuration, and the repetitions ------------------------------------------------------


@dataclass
class HttpSamples:
    values: dict[str, dict[str, list[float]]] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)

    def add(self, config: str, metric: str, value: float) -> None:
        self.values.setdefault(config, {}).setdefault(metric, []).append(value)


def _logs_dir() -> Path:
    envs.LOGS.mkdir(parents=True, exist_ok=True)
    return envs.LOGS


def _server(config: str) -> str:
    return "baked" if config == "baked x2" else config


def run_config(
    config: str,
    specs: Mapping[str, HttpServerSpec],
    cfg: HttpConfig,
    placements: Sequence[set[int] | None],
    samples: HttpSamples | None,
) -> None:
    """Start the configuration's replicas, load them (calls, then MRTR), stop them. Replica `i`
    runs on the CPUs `placements[i % len(placements)]` (None: wherever the scheduler puts it)."""
    spec = specs[_server(config)]
    count = 2 if config == "baked x2" else 1
    log = _logs_dir() / f"http-{spec.name}.stderr.log"
    replicas: list[Replica] = []
    try:
        for index in range(count):
            replicas.append(Replica(spec, log, placements[index % len(placements)]))

        def cpu() -> float | None:
            seconds = [r.cpu_seconds() for r in replicas]
            return None if None in seconds else sum(s for s in seconds if s is not None)

        async def load() -> None:
            client = _Client([r.url for r in replicas], cfg.connections, spec.bearer)
            try:
                await client.open()
                kinds = ["calls", "mrtr"]
                if spec.legacy:
                    try:
                        await client.open_legacy()
                        kinds.append("legacy")
                    except _NoLegacy:
                        pass
                for kind in kinds:
                    await client.run(kind, cfg.warm_seconds, cpu)
                    outcome = await client.run(kind, cfg.seconds, cpu)
                    if samples is not None:
                        samples.add(config, f"http_{kind}", outcome.per_second)
                        samples.add(config, f"client_{kind}", outcome.client_busy)
                        if outcome.server_cpu_us is not None:
                            samples.add(config, f"cpu_http_{kind}", outcome.server_cpu_us)
            finally:
                client.close()

        asyncio.run(load())
    finally:
        statuses = [r.stop() for r in replicas]
    if spec.exits_zero_on_sigterm and any(s != 0 for s in statuses):
        raise _BadExit(f"{config}: SIGTERM exit statuses {statuses}, expected 0")


def measure(
    specs: Mapping[str, HttpServerSpec],
    cfg: HttpConfig,
    placements: Sequence[set[int] | None],
    log: Callable[[str], None],
) -> HttpSamples:
    samples = HttpSamples()
    configs = [c for c in CONFIGS if _server(c) in specs]
    working = []
    tiny = HttpConfig(reps=1, connections=2, seconds=0.1, warm_seconds=0.05)
    for config in configs:  # untimed pass: fills caches and checks every workload works
        try:
            run_config(config, specs, tiny, placements, None)
            working.append(config)
        except _BadExit as exc:
            samples.errors.append(f"http {config}: warm-up: {exc}")
            working.append(config)
        except (driver.BenchError, OSError, ValueError) as exc:
            samples.errors.append(f"http {config}: warm-up failed: {exc}")
    for rep in range(cfg.reps):
        order = working[rep % len(working) :] + working[: rep % len(working)] if working else []
        log(f"HTTP repetition {rep + 1}/{cfg.reps}: {' -> '.join(order)}")
        for config in order:
            try:
                run_config(config, specs, cfg, placements, samples)
            except (driver.BenchError, OSError, ValueError) as exc:
                samples.errors.append(f"http {config}: rep {rep + 1}: {exc}")
    return samples


# -- summary and table ----------------------------------------------------------------------------


@dataclass(frozen=True)
class _Row:
    key: str
    label: str
    unit: str
    digits: int = 0
    scale: float = 1.0


ROWS = (
    _Row("http_calls", "tools/call echo", "calls/s"),
    _Row("http_mrtr", "two-round MRTR completions", "completions/s"),
    _Row("http_legacy", "tools/call echo, 2025-11-25 session", "calls/s"),
    _Row("cpu_http_calls", "server CPU per call", "us", 1),
    _Row("cpu_http_mrtr", "server CPU per MRTR completion", "us", 1),
    _Row("cpu_http_legacy", "server CPU per 2025-11-25 call", "us", 1),
    _Row("client_calls", "load client's CPU share, calls", "%", 0, 100.0),
    _Row("client_mrtr", "load client's CPU share, MRTR", "%", 0, 100.0),
    _Row("client_legacy", "load client's CPU share, 2025-11-25", "%", 0, 100.0),
)


def summarise(samples: HttpSamples) -> dict[str, Any]:
    metrics: dict[str, Any] = {}
    for row in ROWS:
        entry: dict[str, Any] = {"label": row.label, "unit": row.unit}
        medians: dict[str, float] = {}
        for config in CONFIGS:
            values = samples.values.get(config, {}).get(row.key)
            if values:
                medians[config] = statistics.median(values)
                entry[config] = {"median": medians[config], "samples": values}
        for other in PEERS:
            if "baked" in medians and medians.get(other):
                entry[f"baked_over_{other}"] = medians["baked"] / medians[other]
        if "baked x2" in medians and medians.get("baked"):
            entry["two_over_one"] = medians["baked x2"] / medians["baked"]
        if "baked oauth" in medians and medians.get("baked"):
            entry["oauth_over_baked"] = medians["baked oauth"] / medians["baked"]
        metrics[row.key] = entry
    return metrics


def goals(metrics: Mapping[str, Any]) -> list[dict[str, Any]]:
    out = []
    # The goal is throughput per process; the same ratio in server CPU per operation is
    # what a busy machine disturbs least (SDK CPU / ours, so higher is better on both lines).
    for key, name, inverse in (
        ("http_calls", "HTTP calls", False),
        ("http_mrtr", "HTTP MRTR completions", False),
        ("cpu_http_calls", "HTTP calls, in server CPU,", True),
        ("cpu_http_mrtr", "HTTP MRTR completions, in server CPU,", True),
    ):
        value = metrics.get(key, {}).get("baked_over_sdk")
        if inverse and value:
            value = 1 / value
        passed = None if value is None else value >= 3.0
        out.append(
            {
                "goal": f"{name} >= 3 x SDK per process",
                "value": value,
                "threshold": 3.0,
                "pass": passed,
            }
        )
    return out


def table(metrics: Mapping[str, Any]) -> str:
    titles = [TITLES.get(c, c) for c in CONFIGS]
    titles += [f"baked/{TITLES[p]}" for p in PEERS] + ["x2/baked", "oauth/baked"]
    lines = [f"| metric | unit | {' | '.join(titles)} |", "|---|---|" + "---:|" * len(titles)]
    for row in ROWS:
        entry = metrics.get(row.key, {})
        cells = []
        for config in CONFIGS:
            median = entry.get(config, {}).get("median")
            cells.append("-" if median is None else f"{median * row.scale:,.{row.digits}f}")
        keys = [f"baked_over_{p}" for p in PEERS] + ["two_over_one", "oauth_over_baked"]
        ratios = [entry.get(k) for k in keys]
        shown = ["-" if r is None else f"{r:.2f}" for r in ratios]
        lines.append(f"| {row.label} | {row.unit} | {' | '.join(cells)} | {' | '.join(shown)} |")
    return "\n".join(lines)


def describe(specs: Mapping[str, HttpServerSpec], info: Mapping[str, Any]) -> dict[str, Any]:
    """What ran: each server's command and the versions of its HTTP stack."""
    out: dict[str, Any] = {}
    for name, spec in specs.items():
        baked = name.startswith("baked")
        python = Path(info["baked"]["python"]) if baked else Path(spec.argv[0])
        names = {
            "sdk": ("mcp", *envs.HTTP_STACK, "starlette"),
            "fastmcp": ("fastmcp", "mcp", *envs.HTTP_STACK, "starlette"),
            "baked oauth": (*envs.HTTP_STACK, "pyjwt", "cryptography"),
        }.get(name, envs.HTTP_STACK)
        shown = [Path(a).name for a in spec.argv if "{port}" not in a]
        out[name] = {
            "command": " ".join(shown),
            "versions": envs.package_versions(python, names),
        }
    return out


def render(report: Mapping[str, Any]) -> str:
    """The HTTP section of the report: set-up, table and goal."""
    cfg = report["config"]
    cpus = cfg.get("cpus")
    if cpus:
        where = (
            f"CPUs: load client {cpus['driver']}; baked, SDK, FastMCP and floor {cpus['servers']}; "
            f"baked x2 "
            f"{cpus['servers']} and {cpus['driver']} (its second replica shares the client's CPU: "
            "two replicas need two cores, and this machine has two)"
        )
    else:
        where = "CPUs: nothing pinned"
    lines = [
        (
            "HTTP (Streamable HTTP, POST /mcp, JSON responses; 2026-07-28 unless the row says "
            "2025-11-25: one initialized session per connection, stateless for SDK and FastMCP, "
            "none for the floor): medians of "
            f"{cfg['reps']} interleaved repetitions, {cfg['seconds']} s of load per workload "
            f"after {cfg['warm_seconds']} s untimed"
        ),
        (
            f"load: {cfg['connections']} keep-alive connections (MRTR: as many concurrent flows) "
            "from one asyncio client; baked x2 spreads calls over both replicas and sends every "
            "round 2 to the other replica than its round 1"
        ),
        where,
    ]
    for name, entry in report["servers"].items():
        versions = ", ".join(f"{k} {v}" for k, v in entry.get("versions", {}).items())
        title = {**TITLES, "floor": "HTTP floor"}.get(name, name)
        lines.append(f"{title} over HTTP: {entry['command']} ({versions})")
    lines += [
        "",
        table(report["metrics"]),
        "",
        "goals (baked, HTTP):",
    ]
    for goal in report["goals"]:
        verdict = {True: "PASS", False: "FAIL", None: "n/a "}[goal["pass"]]
        value = "-" if goal["value"] is None else f"{goal['value']:.3f}"
        lines.append(f"  {verdict}  {goal['goal']}  (measured {value})")
    return "\n".join(lines)
