"""The tasks section of the benchmark (issue 21): MCP tasks (`io.modelcontextprotocol/tasks`)
on our server and on FastMCP with `fastmcp-tasks`, over stdio, side by side in one run.

Four configurations, each spawned fresh per repetition (the order rotated), over the raw
newline-delimited JSON-RPC of `driver.py` (no client library in the timed path):

- `ours sqlite`: the baked server with `MRTR_TASK_STORE=sqlite:///<tmp>/tasks-<n>.sqlite3`, a
  fresh file for every session;
- `ours redis`: the same with `MRTR_TASK_STORE=redis://127.0.0.1:<port>/0`;
- `fastmcp memory`: `fastmcp_tasks_server.py` with `FASTMCP_DOCKET_URL=memory://` (Docket's
  in-process backend, FastMCP's default);
- `fastmcp redis`: the same with `FASTMCP_DOCKET_URL=redis://127.0.0.1:<port>/1`.

Both Redis configurations use one real `redis-server` (`redis_harness.py`), emptied before every
session. The tool is `task_job(seconds)` on both servers (`bench_task_tools.py`,
`fastmcp_tasks_server.py`); every request declares the extension in
`_meta[io.modelcontextprotocol/clientCapabilities].extensions`.

What a session measures, in this order:

1. spawn -> first `server/discover` response (and that it advertises the extension); then
   whether the task store was already opened (our SQLite file exists / a client is connected to
   Redis) before the first task: ours must open it on the first task, not at start;
2. create -> completed latency for `seconds` 0 (returns at once) and 0.1: from writing the
   `tools/call` to reading the `tasks/get` whose status is `completed` (result checked), for N
   tasks one after another, two ways:
   - *back to back*: the next `tasks/get` is sent as soon as the previous answer is read (the
     engine's own latency, whatever it advertises);
   - *at pollIntervalMs*: before each `tasks/get` the client sleeps the `pollIntervalMs` of the
     last answer (as the spec says clients SHOULD; both servers advertise 1000 ms here), so the
     figure is what a client that follows the spec sees;
3. `tasks/get` per second on one completed task: sequential (one in flight) and pipelined
   (M requests written at once, every id back exactly once, every answer `completed`);
4. server CPU per operation (schedstat of all its threads) and peak RSS.

Latencies are the median and p95 over every task of every repetition; rates and start-up are
medians over repetitions. Stdlib only, like `run.py`; timings are never asserted.
"""

from __future__ import annotations

import dataclasses
import http.client
import json
import statistics
import tempfile
import threading
import time
import urllib.parse
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import driver
import envs
import http_bench
import redis_harness

EXTENSION = "io.modelcontextprotocol/tasks"
CAPABILITIES: dict[str, Any] = {**driver.CAPABILITIES, "extensions": {EXTENSION: {}}}
META: dict[str, Any] = {**driver.META, "io.modelcontextprotocol/clientCapabilities": CAPABILITIES}
TOOL = "task_job"
TERMINAL = frozenset({"completed", "failed", "cancelled"})
CONFIGS = ("ours sqlite", "ours redis", "fastmcp memory", "fastmcp redis")
TITLES = {
    "ours sqlite": "ours, SQLite",
    "ours redis": "ours, Redis",
    "fastmcp memory": "FastMCP, memory://",
    "fastmcp redis": "FastMCP, Redis",
}
#: Which FastMCP configuration each of ours is compared with: the embedded defaults, and Redis.
PAIRS = (("ours sqlite", "fastmcp memory"), ("ours redis", "fastmcp redis"))
SLEEPS = (("now", 0.0), ("0.1 s", 0.1))
#: A poll that never sees `completed` within this many seconds fails the session.
TASK_TIMEOUT = 30.0


@dataclass(frozen=True)
class TasksConfig:
    reps: int
    paced: int  # tasks per tool polled at pollIntervalMs (each takes about that long)
    back_to_back: int  # tasks per tool polled back to back
    gets_sequential: int
    gets_pipelined: int
    http_back_to_back: int  # over HTTP: tasks per tool polled back to back (0: no HTTP)
    http_gets: int  # over HTTP: sequential tasks/get on one keep-alive connection


FULL = TasksConfig(
    reps=3,
    paced=3,
    back_to_back=30,
    gets_sequential=300,
    gets_pipelined=600,
    http_back_to_back=15,
    http_gets=200,
)
QUICK = TasksConfig(
    reps=1,
    paced=2,
    back_to_back=10,
    gets_sequential=100,
    gets_pipelined=200,
    http_back_to_back=5,
    http_gets=100,
)


@dataclass(frozen=True)
class TaskServer:
    """One configuration: the server's command (its store set per session) and its store."""

    config: str
    spec: driver.ServerSpec
    store: str  # "sqlite", "redis" or "memory"
    #: The same server over Streamable HTTP (None: measured over stdio only).
    http: http_bench.HttpServerSpec | None = None

    @property
    def ours(self) -> bool:
        return self.config.startswith("ours")


@dataclass
class TasksSamples:
    values: dict[str, dict[str, list[float]]] = field(default_factory=dict)
    flags: dict[str, dict[str, bool]] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)

    def add(self, config: str, metric: str, value: float) -> None:
        self.values.setdefault(config, {}).setdefault(metric, []).append(value)

    def extend(self, config: str, metric: str, values: Sequence[float]) -> None:
        self.values.setdefault(config, {}).setdefault(metric, []).extend(values)

    def flag(self, config: str, name: str, value: bool) -> None:
        flags = self.flags.setdefault(config, {})
        flags[name] = flags.get(name, False) or value


# -- one session ------------------------------------------------------------------------------


class _Tasks:
    """The tasks flows on one `Peer` over stdio, with pre-serialised requests (only ids are
    stamped in). `_HttpTasks` is the same over Streamable HTTP."""

    def __init__(self, peer: driver.Peer) -> None:
        self.peer: Any = peer
        self.name = peer.spec.name
        self._calls: dict[float, tuple[bytes, bytes]] = {
            seconds: driver._template(
                "tools/call",
                {"name": TOOL, "arguments": {"seconds": seconds}, "_meta": META},
            )
            for _, seconds in SLEEPS
        }

    def _fail(self, what: str, message: object) -> driver.BenchError:
        return driver.BenchError(f"{self.name}: {what}: {str(message)[:300]}")

    def exchange(self, method: str, name: str, template: tuple[bytes, bytes]) -> dict[str, Any]:
        """Send one request built from `template` and return its result. `name` is what the
        request names (the tool, or the task id): HTTP's `Mcp-Name` header carries it."""
        request_id = self.peer.new_id()
        self.peer.write(template[0] + str(request_id).encode() + template[1])
        result: dict[str, Any] = self.peer.read_response(request_id)
        return result

    def create(self, seconds: float) -> dict[str, Any]:
        result = self.exchange("tools/call", TOOL, self._calls[seconds])
        if result.get("resultType") != "task" or not isinstance(result.get("taskId"), str):
            raise self._fail("tools/call did not create a task", result)
        return result

    def get_template(self, task_id: str) -> tuple[bytes, bytes]:
        return driver._template("tasks/get", {"taskId": task_id, "_meta": META})

    def get(self, task_id: str, template: tuple[bytes, bytes]) -> dict[str, Any]:
        return self.exchange("tasks/get", task_id, template)

    def check_completed(self, task: Mapping[str, Any]) -> None:
        if task.get("status") != "completed":
            raise self._fail("task did not complete", task)
        content = (task.get("result") or {}).get("content") or [{}]
        if not str(content[0].get("text", "")).startswith("done after"):
            raise self._fail("wrong task result", task)

    def run(self, seconds: float, *, paced: bool) -> tuple[float, str]:
        """One task from `tools/call` to `completed`; its latency in seconds, and its id."""
        started = time.perf_counter()
        task = self.create(seconds)
        task_id = task["taskId"]
        template = self.get_template(task_id)
        while task.get("status") not in TERMINAL:
            if paced:
                interval = task.get("pollIntervalMs")
                if not isinstance(interval, int) or interval < 0:
                    raise self._fail("no integer pollIntervalMs", task)
                time.sleep(interval / 1000)
            task = self.get(task_id, template)
            if time.perf_counter() - started > TASK_TIMEOUT:
                raise self._fail(f"task not done after {TASK_TIMEOUT} s", task)
        if "result" not in task:  # a CreateTaskResult that is already terminal has no result
            task = self.get(task_id, template)
        latency = time.perf_counter() - started
        self.check_completed(task)
        return latency, task_id

    def gets_sequential(self, task_id: str, count: int) -> driver.Rate:
        template = self.get_template(task_id)
        timing = driver._Timing(self.peer)
        for _ in range(count):
            task = self.get(task_id, template)
            if task.get("status") != "completed":
                raise self._fail("tasks/get changed its answer", task)
        return timing.rate(count)

    def gets_pipelined(self, task_id: str, count: int) -> driver.Rate:
        """`count` tasks/get written at once (from a writer thread, so that a full stdout pipe
        cannot deadlock us); every id must come back once, each saying `completed`."""
        prefix, suffix = self.get_template(task_id)
        ids = [self.peer.new_id() for _ in range(count)]
        payload = b"".join(prefix + str(i).encode() + suffix for i in ids)
        failure: list[Exception] = []

        def write_all() -> None:
            try:
                self.peer.write(payload)
            except (OSError, driver.BenchError) as exc:  # reported below
                failure.append(exc)

        pending = set(ids)
        wrong = 0
        timing = driver._Timing(self.peer)
        writer = threading.Thread(target=write_all, daemon=True)
        writer.start()
        while pending:
            message = self.peer.read_message()
            if "method" in message:
                continue
            request_id = message.get("id")
            if request_id not in pending:
                raise self._fail("unexpected or duplicate id", request_id)
            pending.discard(request_id)
            if (message.get("result") or {}).get("status") != "completed":
                wrong += 1
        rate = timing.rate(count)
        writer.join()
        if failure:
            raise self._fail("pipelined write failed", failure[0])
        if wrong:
            raise self._fail("pipelined tasks/get", f"{wrong} of {count} not completed")
        return rate


class _HttpTasks(_Tasks):
    """The same flows over Streamable HTTP (2026-07-28, JSON responses) on one keep-alive
    connection (`http.client`): each POST carries the version and routing headers, `Mcp-Name`
    being the tool for `tools/call` and the task id for `tasks/*` (the tasks extension's
    "Streamable HTTP: Routing Headers")."""

    def __init__(self, replica: http_bench.Replica) -> None:
        self.peer = replica
        self.name = replica.spec.name
        self._calls = {
            seconds: driver._template(
                "tools/call",
                {"name": TOOL, "arguments": {"seconds": seconds}, "_meta": META},
            )
            for _, seconds in SLEEPS
        }
        url = urllib.parse.urlsplit(replica.url)
        self._path = url.path or http_bench.MCP_PATH
        self._conn = http.client.HTTPConnection(url.hostname or "127.0.0.1", url.port, timeout=60)
        self._next_id = 0

    def close(self) -> None:
        self._conn.close()

    def exchange(self, method: str, name: str, template: tuple[bytes, bytes]) -> dict[str, Any]:
        self._next_id += 1
        body = template[0] + str(self._next_id).encode() + template[1]
        headers = {
            "Content-Type": "application/json",
            "Accept": "application/json, text/event-stream",
            "MCP-Protocol-Version": driver.MODERN,
            "Mcp-Method": method,
            "Mcp-Name": name,
        }
        self._conn.request("POST", self._path, body, headers)
        response = self._conn.getresponse()
        data = response.read()
        if response.status != 200:
            raise self._fail(f"{method}: HTTP {response.status}", data)
        message = json.loads(data)
        if "error" in message or not isinstance(message.get("result"), dict):
            raise self._fail(f"{method}: error", message)
        result: dict[str, Any] = message["result"]
        return result


def _store_opened(server: TaskServer, env: Mapping[str, str], redis: Any) -> bool:
    """Whether the task store is open now: our SQLite file exists, or Redis has a client."""
    if server.store == "sqlite":
        return Path(env["MRTR_TASK_STORE"].removeprefix("sqlite://")).exists()
    if server.store == "redis":
        return bool(redis.connected_clients())
    return False  # memory://: nothing outside the process to look at


def _check_store_used(
    server: TaskServer, env: Mapping[str, str], redis: redis_harness.RedisServer | None
) -> None:
    """After tasks ran, the store the environment names must hold them: the SQLite file exists,
    the Redis database has keys. Otherwise the server kept its tasks somewhere else (in memory,
    say) and the figures would not be the store's."""
    if server.store == "sqlite":
        used = Path(env["MRTR_TASK_STORE"].removeprefix("sqlite://")).exists()
    elif server.store == "redis":
        assert redis is not None
        used = redis.keys(0 if server.ours else 1) > 0
    else:
        return
    if not used:
        where = env.get("MRTR_TASK_STORE") or env.get("FASTMCP_DOCKET_URL")
        raise driver.BenchError(f"{server.config}: tasks ran, but the store {where} holds none")


def session_env(
    server: TaskServer,
    redis: redis_harness.RedisServer | None,
    scratch: Path,
    n: int,
    *,
    http: bool = False,
) -> dict[str, str]:
    """The server's environment with its store set; a SQLite store is a new file each time."""
    env = dict(server.http.env if http and server.http is not None else server.spec.env)
    if server.ours:
        if server.store == "sqlite":
            file = f"tasks-{n}{'-http' if http else ''}.sqlite3"
            env["MRTR_TASK_STORE"] = f"sqlite://{scratch / file}"
        else:
            assert redis is not None
            env["MRTR_TASK_STORE"] = redis.url(0)
    elif server.store == "redis":
        assert redis is not None
        env["FASTMCP_DOCKET_URL"] = redis.url(1)
    else:
        env["FASTMCP_DOCKET_URL"] = "memory://"
    return env


def _sample_gets(samples: TasksSamples, name: str, key: str, rate: driver.Rate) -> None:
    samples.add(name, key, rate.per_second)
    if rate.server_cpu_us is not None:
        samples.add(name, f"cpu_{key}", rate.server_cpu_us)


def http_session(
    server: TaskServer,
    cfg: TasksConfig,
    samples: TasksSamples,
    redis: redis_harness.RedisServer | None,
    scratch: Path,
    n: int,
) -> None:
    """Over HTTP: back-to-back latency of both tools and sequential tasks/get, a fresh store."""
    assert server.http is not None
    if redis is not None:
        redis.flush_all()
    env = session_env(server, redis, scratch, n, http=True)
    spec = dataclasses.replace(server.http, name=server.config, env=env)
    envs.LOGS.mkdir(parents=True, exist_ok=True)
    log = envs.LOGS / f"tasks-http-{server.config.replace(' ', '-')}.stderr.log"
    name = server.config
    with http_bench.Replica(spec, log, driver._SERVER_CPUS) as replica:
        flow = _HttpTasks(replica)
        try:
            last = ""
            for label, seconds in SLEEPS:
                flow.run(seconds, paced=False)  # untimed, as over stdio
                latencies = [flow.run(seconds, paced=False) for _ in range(cfg.http_back_to_back)]
                samples.extend(name, f"http_latency_b2b_{label}", [s for s, _ in latencies])
                last = latencies[-1][1] if latencies else last
            if not last:
                last = flow.run(0.0, paced=False)[1]
            _sample_gets(samples, name, "http_gets", flow.gets_sequential(last, cfg.http_gets))
            _check_store_used(server, env, redis)
        finally:
            flow.close()
        status = replica.stop()
    if spec.exits_zero_on_sigterm and status != 0:
        raise driver.BenchError(f"{name}: HTTP server's SIGTERM exit status {status}, expected 0")


def run_session(
    server: TaskServer,
    cfg: TasksConfig,
    samples: TasksSamples,
    redis: redis_harness.RedisServer | None,
    scratch: Path,
    n: int,
) -> None:
    if redis is not None:
        redis.flush_all()
    env = session_env(server, redis, scratch, n)
    spec = driver.ServerSpec(server.config, server.spec.argv, env, server.spec.cwd)
    log = envs.LOGS / f"tasks-{server.config.replace(' ', '-')}.stderr.log"
    envs.LOGS.mkdir(parents=True, exist_ok=True)
    name = server.config
    with driver.Peer(spec, log) as peer:
        discover = peer.request("server/discover", {"_meta": META})
        samples.add(name, "startup_discover", time.perf_counter() - peer.spawned_at)
        extensions = (discover.get("capabilities") or {}).get("extensions") or {}
        if EXTENSION not in extensions:
            raise driver.BenchError(f"{name}: server/discover does not advertise {EXTENSION}")
        samples.flag(name, "store_open_at_start", _store_opened(server, env, redis))
        flow = _Tasks(peer)
        last = ""
        for label, seconds in SLEEPS:
            flow.run(seconds, paced=False)  # untimed: the first task of a kind warms its path
            latencies = [flow.run(seconds, paced=False) for _ in range(cfg.back_to_back)]
            samples.extend(name, f"latency_b2b_{label}", [s for s, _ in latencies])
        for label, seconds in SLEEPS:
            timing = driver._Timing(peer)
            paced = [flow.run(seconds, paced=True) for _ in range(cfg.paced)]
            samples.extend(name, f"latency_paced_{label}", [s for s, _ in paced])
            _, cpu = timing.spent()
            if cpu is not None and paced:
                samples.add(name, f"cpu_paced_{label}", cpu / len(paced) * 1e6)
            last = paced[-1][1] if paced else last
        if not last:
            last = flow.run(0.0, paced=False)[1]
        _sample_gets(
            samples, name, "gets_sequential", flow.gets_sequential(last, cfg.gets_sequential)
        )
        _sample_gets(samples, name, "gets_pipelined", flow.gets_pipelined(last, cfg.gets_pipelined))
        hwm = peer.memory_kib().get("VmHWM")
        if hwm is not None:
            samples.add(name, "peak_rss", hwm)
        _check_store_used(server, env, redis)
    if server.http is not None and cfg.http_back_to_back:
        http_session(server, cfg, samples, redis, scratch, n)


def measure(
    servers: Sequence[TaskServer], cfg: TasksConfig, log: Callable[[str], None]
) -> tuple[TasksSamples, dict[str, Any]]:
    """Every configuration once untimed, then `cfg.reps` interleaved repetitions."""
    samples = TasksSamples()
    info: dict[str, Any] = {}
    needs_redis = any(s.store == "redis" for s in servers)
    redis: redis_harness.RedisServer | None = None
    with tempfile.TemporaryDirectory(prefix="bench-tasks-") as tmp:
        scratch = Path(tmp)
        try:
            if needs_redis:
                redis = redis_harness.RedisServer()
                info["redis"] = {"version": redis.version, "binary": redis.binary}
                log(f"tasks: redis-server {redis.version} on 127.0.0.1:{redis.port}")
        except redis_harness.RedisError as exc:
            samples.errors.append(f"tasks: {exc}")
            servers = [s for s in servers if s.store != "redis"]
        try:
            working: list[TaskServer] = []
            tiny = TasksConfig(
                reps=1,
                paced=1,
                back_to_back=2,
                gets_sequential=5,
                gets_pipelined=5,
                http_back_to_back=1 if cfg.http_back_to_back else 0,
                http_gets=5,
            )
            n = 0
            for server in servers:  # warm-up: .pyc and page caches, and every flow works
                n += 1
                try:
                    run_session(server, tiny, TasksSamples(), redis, scratch, n)
                    working.append(server)
                except (driver.BenchError, OSError, ValueError) as exc:
                    samples.errors.append(f"{server.config}: tasks warm-up failed: {exc}")
            for rep in range(cfg.reps):
                shift = rep % len(working) if working else 0
                order = working[shift:] + working[:shift]
                log(
                    f"tasks repetition {rep + 1}/{cfg.reps}: {' -> '.join(s.config for s in order)}"
                )
                for server in order:
                    n += 1
                    try:
                        run_session(server, cfg, samples, redis, scratch, n)
                    except (driver.BenchError, OSError, ValueError) as exc:
                        samples.errors.append(f"{server.config}: tasks rep {rep + 1}: {exc}")
        finally:
            if redis is not None:
                redis.stop()
    return samples, info


# -- reporting --------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Row:
    key: str
    label: str
    unit: str
    higher_is_better: bool
    statistic: str = "median"  # of the samples: "median" or "p95"
    scale: float = 1.0
    digits: int = 0


ROWS = (
    _Row(
        "startup_discover", "spawn -> first server/discover response", "ms", False, "median", 1e3, 1
    ),
    *(
        _Row(
            f"latency_{how}_{label}",
            f"create -> completed, {label}, {text}, {stat}",
            "ms",
            False,
            stat,
            1e3,
            1,
        )
        for how, text in (("b2b", "polled back to back"), ("paced", "polled at pollIntervalMs"))
        for label, _ in SLEEPS
        for stat in ("median", "p95")
    ),
    _Row("gets_sequential", "tasks/get, sequential", "gets/s", True),
    _Row("gets_pipelined", "tasks/get, pipelined (M written at once)", "gets/s", True),
    _Row("cpu_gets_sequential", "server CPU per sequential tasks/get", "us", False, digits=1),
    _Row("cpu_gets_pipelined", "server CPU per pipelined tasks/get", "us", False, digits=1),
    *(
        _Row(
            f"cpu_paced_{label}",
            f"server CPU per task polled at pollIntervalMs, {label}",
            "ms",
            False,
            "median",
            1e-3,
            2,
        )
        for label, _ in SLEEPS
    ),
    _Row("peak_rss", "peak RSS (VmHWM)", "MiB", False, "median", 1 / 1024, 1),
    *(
        _Row(
            f"http_latency_b2b_{label}",
            f"HTTP: create -> completed, {label}, polled back to back, {stat}",
            "ms",
            False,
            stat,
            1e3,
            1,
        )
        for label, _ in SLEEPS
        for stat in ("median", "p95")
    ),
    _Row("http_gets", "HTTP: tasks/get, sequential (one connection)", "gets/s", True),
    _Row("cpu_http_gets", "HTTP: server CPU per tasks/get", "us", False, digits=1),
)


def _statistic(values: Sequence[float], statistic: str) -> float:
    if statistic == "p95":
        ordered = sorted(values)
        return ordered[min(len(ordered) - 1, max(0, round(0.95 * len(ordered)) - 1))]
    return statistics.median(values)


def summarise(samples: TasksSamples) -> dict[str, Any]:
    metrics: dict[str, Any] = {}
    for row in ROWS:
        entry: dict[str, Any] = {
            "label": row.label,
            "unit": row.unit,
            "higher_is_better": row.higher_is_better,
        }
        source = row.key
        for config in CONFIGS:
            values = samples.values.get(config, {}).get(source)
            if values:
                entry[config] = {
                    "value": _statistic(values, row.statistic),
                    "statistic": row.statistic,
                    "samples": values,
                }
        for ours, theirs in PAIRS:
            mine = entry.get(ours, {}).get("value")
            other = entry.get(theirs, {}).get("value")
            if mine is not None and other:
                entry[f"{ours} / {theirs}"] = mine / other
        metrics[row.key + ("" if row.statistic == "median" else f"_{row.statistic}")] = entry
    metrics["store_open_at_start"] = {
        "label": "task store opened before the first task",
        **{c: samples.flags.get(c, {}).get("store_open_at_start") for c in CONFIGS},
    }
    return metrics


def _metric_key(row: _Row) -> str:
    return row.key + ("" if row.statistic == "median" else f"_{row.statistic}")


def goals(metrics: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Issue 21: ahead of FastMCP on every figure, each of our stores against its FastMCP
    counterpart (`PAIRS`), and our store opened only on the first task. One goal per row; it
    passes when both pairs are ahead."""
    out: list[dict[str, Any]] = []
    for row in ROWS:
        entry = metrics.get(_metric_key(row), {})
        ratios = {f"{a} / {b}": entry.get(f"{a} / {b}") for a, b in PAIRS}
        verdicts = [
            None if r is None else (r > 1 if row.higher_is_better else r < 1)
            for r in ratios.values()
        ]
        passed = None if None in verdicts else all(verdicts)
        out.append({"goal": f"{row.label}: ahead of FastMCP", "ratios": ratios, "pass": passed})
    opened = metrics.get("store_open_at_start", {})
    for ours, _ in PAIRS:
        value = opened.get(ours)
        out.append(
            {
                "goal": f"{TITLES[ours]}: store not opened before the first task",
                "ratios": {},
                "pass": None if value is None else not value,
            }
        )
    return out


def _fmt(value: float | None, row: _Row) -> str:
    return "-" if value is None else f"{value * row.scale:,.{row.digits}f}"


def _short(pair: str) -> str:
    """`ours sqlite / fastmcp memory` -> `SQLite / memory://`: a ratio column's title."""
    a, b = pair.split(" / ")
    return f"{TITLES[a].split(', ')[1]} / {TITLES[b].split(', ')[1]}"


def table(metrics: Mapping[str, Any]) -> str:
    titles = [TITLES[c] for c in CONFIGS] + [_short(f"{a} / {b}") for a, b in PAIRS]
    lines = [f"| metric | unit | {' | '.join(titles)} |", "|---|---|" + "---:|" * len(titles)]
    for row in ROWS:
        entry = metrics.get(_metric_key(row), {})
        cells = [_fmt(entry.get(c, {}).get("value"), row) for c in CONFIGS]
        for a, b in PAIRS:
            ratio = entry.get(f"{a} / {b}")
            cells.append("-" if ratio is None else f"{ratio:.2f}")
        lines.append(f"| {row.label} | {row.unit} | {' | '.join(cells)} |")
    opened = metrics.get("store_open_at_start", {})
    cells = [{True: "yes", False: "no", None: "-"}[opened.get(c)] for c in CONFIGS]
    if opened.get("fastmcp memory") is not None:
        cells[CONFIGS.index("fastmcp memory")] = "(in-process)"
    lines.append(
        f"| {opened.get('label', 'task store opened before the first task')} | | "
        f"{' | '.join(cells)} |{' |' * len(PAIRS)}"
    )
    return "\n".join(lines)


def render(report: Mapping[str, Any]) -> str:
    config = report["config"]
    lines = [
        (
            "tasks (io.modelcontextprotocol/tasks over stdio): "
            f"{config['reps']} interleaved repetitions; per repetition and tool "
            f"{config['back_to_back']} tasks polled back to back, {config['paced']} polled at "
            f"pollIntervalMs; tasks/get sequential {config['gets_sequential']}, pipelined "
            f"{config['gets_pipelined']}; latencies: median and p95 over all tasks"
        ),
    ]
    for name, entry in report.get("servers", {}).items():
        versions = ", ".join(f"{k} {v}" for k, v in entry.get("versions", {}).items())
        lines.append(f"{name}: {entry['command']} ({versions})")
    if report.get("redis"):
        lines.append(f"redis-server {report['redis']['version']} (persistence off, for both)")
    lines += ["", table(report["metrics"]), "", "goals (tasks):"]
    for goal in report["goals"]:
        verdict = {True: "PASS", False: "FAIL", None: "n/a "}[goal["pass"]]
        shown = [
            f"{_short(pair)} {'-' if ratio is None else f'{ratio:.2f}'}"
            for pair, ratio in goal["ratios"].items()
        ]
        ratios = f"  ({', '.join(shown)})" if shown else ""
        lines.append(f"  {verdict}  {goal['goal']}{ratios}")
    return "\n".join(lines)
