#!/usr/bin/env python3
"""Benchmark the baked server against the official SDK's MCPServer, FastMCP and a stdlib floor.

    python3 bench/run.py [--quick] [--out bench/results.json] [--reps N] [--servers a,b,c]
                         [--sections stdio,http,tasks]

Stdlib only. It bakes the template, drops `bench/bench_tools.py` into the baked project, makes
the venvs it needs under `.cache/bench/` (see `envs.py`), then measures the four servers
**interleaved** (round-robin per repetition, the order rotated each time) over raw
newline-delimited JSON-RPC on pipes (`driver.py`; no client library in the timed path), prints a
table with medians and ratios, checks the goals of issue 6 and writes JSON.

The HTTP section (`http_bench.py`) then measures the baked project's `<slug> http` against the
SDK's and FastMCP's Streamable HTTP servers (stateless, JSON responses), the HTTP floor and two
replicas of itself,
under a lean asyncio load client in this process, and checks the goal of issue 13.

The tasks section (`tasks_bench.py`) measures MCP tasks over stdio: create -> completed latency
and `tasks/get` per second of the baked server on its SQLite and Redis stores, side by side with
FastMCP + `fastmcp-tasks` on its `memory://` and Redis backends, against one real `redis-server`
(`redis_harness.py`), and checks the goals of issue 21.

Not part of `dev.py test`: timings are never asserted anywhere. The exit status is 0 when every
server ran every workload correctly (goals may still fail: they are reported, not enforced), 1
when a server was missing or misbehaved, 2 on a setup failure.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime as dt
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import driver  # the bench directory is not a package: run.py is run as a script
import envs
import http_bench
import oauth_stub
import tasks_bench

BENCH = Path(__file__).resolve().parent
SERVERS = ("baked", "sdk", "fastmcp", "floor")
#: The peers the baked server's figures are divided by, in the table's order.
PEERS = ("sdk", "fastmcp", "floor")
SECTIONS = ("stdio", "http", "tasks")
TITLES = {"baked": "baked", "sdk": "SDK", "fastmcp": "FastMCP", "floor": "floor"}


@dataclass(frozen=True)
class Metric:
    key: str
    label: str
    unit: str
    higher_is_better: bool
    scale: float = 1.0  # display multiplier (seconds -> ms)
    digits: int = 0


METRICS = (
    Metric("startup_discover", "spawn -> first server/discover response", "ms", False, 1e3, 1),
    Metric("startup_initialize", "spawn -> first initialize response", "ms", False, 1e3, 1),
    Metric("sequential", "sequential tools/call echo", "calls/s", True),
    Metric("pipelined", "pipelined echo, N written at once", "calls/s", True),
    Metric("mrtr_modern", "two-round MRTR, 2026-07-28", "completions/s", True),
    Metric("mrtr_legacy", "two-round via 2025-11-25 bridge", "completions/s", True),
    Metric("mrtr_cost", "MRTR completion / one plain call", "x", False, 1.0, 2),
    Metric("mrtr_cost_cpu", "the same in server CPU", "x", False, 1.0, 2),
    Metric("cpu_sequential", "server CPU per sequential call", "us", False, 1.0, 1),
    Metric("cpu_pipelined", "server CPU per pipelined call", "us", False, 1.0, 1),
    Metric("cpu_mrtr_modern", "server CPU per MRTR completion", "us", False, 1.0, 1),
    Metric("cpu_mrtr_legacy", "server CPU per legacy completion", "us", False, 1.0, 1),
    Metric("peak_rss", "peak RSS (VmHWM)", "MiB", False, 1 / 1024, 1),
    Metric("exit_after_eof", "stdin EOF -> exit", "ms", False, 1e3, 1),
)


@dataclass(frozen=True)
class Config:
    reps: int
    sequential: int
    pipelined: int
    mrtr: int
    legacy: int
    cost_blocks: int  # blocks of 100 echo calls + 25 MRTR completions, alternated


FULL = Config(reps=7, sequential=3000, pipelined=2000, mrtr=500, legacy=500, cost_blocks=10)
QUICK = Config(reps=3, sequential=300, pipelined=500, mrtr=100, legacy=100, cost_blocks=2)


@dataclass
class Samples:
    values: dict[str, dict[str, list[float]]] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)

    def add(self, server: str, metric: str, value: float) -> None:
        self.values.setdefault(server, {}).setdefault(metric, []).append(value)


# -- setup ----------------------------------------------------------------------------------------


def _base_env() -> dict[str, str]:
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LANG": "C.UTF-8"}
    if "HOME" in os.environ:
        env["HOME"] = os.environ["HOME"]
    return env


def setup(
    wanted: Sequence[str], log: Callable[[str], None], project: Path | None = None
) -> tuple[dict[str, driver.ServerSpec], dict[str, Any], list[str]]:
    """Build what each wanted server needs; a server that cannot be set up is reported, not fatal."""
    specs: dict[str, driver.ServerSpec] = {}
    info: dict[str, Any] = {}
    errors: list[str] = []
    if "baked" in wanted:
        try:
            # A state directory of the run's own: the default task store (confirmations'
            # records, since 0.8.0) starts empty each run, and the user's own stays untouched.
            state = envs.CACHE / "state"
            shutil.rmtree(state, ignore_errors=True)
            env = {
                **_base_env(),
                "MRTR_SIGNING_KEY": os.urandom(32).hex(),
                "XDG_STATE_HOME": str(state),
            }
            if project is None:
                log("baking the template and installing the baked project ...")
                baked, note = envs.bake(BENCH / "bench_tools.py", reuse_on_failure=True)
            else:
                log(f"using the baked project {project} (no bake) ...")
                baked, note = envs.existing(project, BENCH / "bench_tools.py"), None
                env["PYTHONPATH"] = str(baked.project / "src")
            if note:
                log(f"WARNING {note}")
            specs["baked"] = driver.ServerSpec("baked", baked.command, env, baked.project)
            info["baked"] = {
                "command": " ".join(Path(a).name for a in baked.command),
                "package": baked.package,
                "python": str(baked.python),
                "runtime_digest": envs.runtime_digest(baked.project),
                "pythonpath": env.get("PYTHONPATH"),
                "bake_note": note,
                "versions": envs.package_versions(
                    baked.python, envs.baked_dependencies(baked.project)
                ),
            }
        except envs.SetupError as exc:
            errors.append(f"baked: {exc}")
    if "sdk" in wanted:
        log(f"preparing the SDK venv ({envs.SDK_REQUIREMENT}) ...")
        try:
            python = envs.sdk_python()
            argv = [str(python), str(BENCH / "sdk_server.py")]
            specs["sdk"] = driver.ServerSpec("sdk", argv, _base_env(), BENCH)
            info["sdk"] = {
                "command": "python sdk_server.py",
                "python": str(python),
                "versions": envs.package_versions(python, envs.SDK_PACKAGES),
            }
        except envs.SetupError as exc:
            errors.append(f"sdk: {exc}")
    if "fastmcp" in wanted:
        log(f"preparing the FastMCP venv ({envs.FASTMCP_REQUIREMENT}) ...")
        try:
            python = envs.fastmcp_python()
            argv = [str(python), str(BENCH / "fastmcp_server.py")]
            env = {**_base_env(), **envs.FASTMCP_ENV}
            specs["fastmcp"] = driver.ServerSpec("fastmcp", argv, env, BENCH)
            info["fastmcp"] = {
                "command": "python fastmcp_server.py",
                "python": str(python),
                "versions": envs.package_versions(python, envs.FASTMCP_PACKAGES),
            }
        except envs.SetupError as exc:
            errors.append(f"fastmcp: {exc}")
    if "floor" in wanted:
        # Same interpreter as the other two, in an empty venv of its own so that it pays the
        # same site start-up as they do (no .pth files from the system site-packages).
        try:
            python = envs.floor_python()
            argv = [str(python), str(BENCH / "floor_server.py")]
            specs["floor"] = driver.ServerSpec("floor", argv, _base_env(), BENCH)
            info["floor"] = {
                "command": "python floor_server.py",
                "python": str(python),
                "versions": envs.package_versions(python, ()),
            }
        except envs.SetupError as exc:
            errors.append(f"floor: {exc}")
    return specs, info, errors


def setup_http(
    specs: Mapping[str, driver.ServerSpec],
    info: Mapping[str, Any],
    log: Callable[[str], None],
    *,
    floor: bool,
) -> tuple[dict[str, http_bench.HttpServerSpec], list[str]]:
    """The HTTP servers, from the stdio ones: `<slug> http` with the same command, key and
    directory, the SDK's `http_sdk_server.py` and FastMCP's `http_fastmcp_server.py` on the baked
    venv's HTTP stack, and (with `floor`) `http_floor_server.py` in the baked venv."""
    http_specs: dict[str, http_bench.HttpServerSpec] = {}
    errors: list[str] = []
    if "baked" in specs:
        baked = specs["baked"]
        http_specs["baked"] = http_bench.HttpServerSpec(
            "baked",
            [*baked.argv, "http", "--host", "127.0.0.1", "--port", "0"],
            baked.env,
            baked.cwd,
            exits_zero_on_sigterm=True,
        )
        try:
            stub = oauth_stub.start(Path(info["baked"]["python"]))
            http_specs["baked oauth"] = http_bench.HttpServerSpec(
                "baked oauth",
                [*baked.argv, "http", "--host", "127.0.0.1", "--port", "0"],
                {**baked.env, **stub.env},
                baked.cwd,
                exits_zero_on_sigterm=True,
                bearer=stub.token,
            )
        except oauth_stub.Unavailable as exc:
            errors.append(f"http baked oauth: {exc}")
        if floor:
            argv = [info["baked"]["python"], str(BENCH / "http_floor_server.py"), "{port}"]
            http_specs["floor"] = http_bench.HttpServerSpec(
                "floor", argv, _base_env(), BENCH, legacy=False
            )
        if "sdk" in specs:
            log("preparing the SDK venv's HTTP stack (the baked venv's uvicorn, httptools, uvloop)")
            try:
                python = envs.sdk_http_python(Path(info["baked"]["python"]))
                argv = [str(python), str(BENCH / "http_sdk_server.py"), "{port}"]
                http_specs["sdk"] = http_bench.HttpServerSpec("sdk", argv, _base_env(), BENCH)
            except envs.SetupError as exc:
                errors.append(f"http sdk: {exc}")
        if "fastmcp" in specs:
            log("preparing the FastMCP venv's HTTP stack (the baked venv's uvicorn, ...)")
            try:
                python = envs.fastmcp_http_python(Path(info["baked"]["python"]))
                argv = [str(python), str(BENCH / "http_fastmcp_server.py"), "{port}"]
                http_specs["fastmcp"] = http_bench.HttpServerSpec(
                    "fastmcp", argv, specs["fastmcp"].env, BENCH
                )
            except envs.SetupError as exc:
                errors.append(f"http fastmcp: {exc}")
    for name in ("sdk", "fastmcp"):
        if name in specs and "baked" not in specs:
            errors.append(f"http {name}: needs the baked venv's HTTP stack; measure baked as well")
    return http_specs, errors


def setup_tasks(
    specs: Mapping[str, driver.ServerSpec],
    info: dict[str, Any],
    log: Callable[[str], None],
    *,
    fastmcp: bool,
) -> tuple[list[tasks_bench.TaskServer], list[str]]:
    """The tasks section's configurations: the baked server (its tool `task_job` from
    `bench_task_tools.py`) on SQLite and Redis, and `fastmcp_tasks_server.py` in its own venv
    (FastMCP + fastmcp-tasks) on memory:// and Redis. Each store is set per session."""
    servers: list[tasks_bench.TaskServer] = []
    errors: list[str] = []
    if "baked" in specs:
        baked = specs["baked"]
        if envs.has_tasks(Path(baked.cwd)):
            http = http_bench.HttpServerSpec(
                "ours",
                [*baked.argv, "http", "--host", "127.0.0.1", "--port", "0"],
                baked.env,
                baked.cwd,
                exits_zero_on_sigterm=True,
            )
            for store in ("sqlite", "redis"):
                servers.append(tasks_bench.TaskServer(f"ours {store}", baked, store, http))
        else:
            errors.append("tasks: the baked runtime has no tasks (no Context.start_task)")
    if fastmcp:
        log(f"preparing the FastMCP tasks venv ({', '.join(envs.FASTMCP_TASKS_REQUIREMENTS)}) ...")
        try:
            python = envs.fastmcp_tasks_python()
            argv = [str(python), str(BENCH / "fastmcp_tasks_server.py")]
            env = {**_base_env(), **envs.FASTMCP_ENV}
            spec = driver.ServerSpec("fastmcp-tasks", argv, env, BENCH)
            if "baked" in info:  # over HTTP on the baked venv's uvicorn, httptools, uvloop
                envs.fastmcp_tasks_http_python(Path(info["baked"]["python"]))
            argv = [str(python), str(BENCH / "http_fastmcp_tasks_server.py"), "{port}"]
            http = http_bench.HttpServerSpec("fastmcp-tasks", argv, env, BENCH)
            for store in ("memory", "redis"):
                servers.append(tasks_bench.TaskServer(f"fastmcp {store}", spec, store, http))
            info["fastmcp-tasks"] = {
                "command": "python fastmcp_tasks_server.py",
                "python": str(python),
                "versions": envs.package_versions(python, envs.FASTMCP_TASKS_PACKAGES),
            }
        except envs.SetupError as exc:
            errors.append(f"tasks fastmcp: {exc}")
    return servers, errors


# -- measuring ------------------------------------------------------------------------------------


def _stderr_log(name: str) -> Path:
    envs.LOGS.mkdir(parents=True, exist_ok=True)
    return envs.LOGS / f"{name}.stderr.log"


def _add_rate(samples: Samples, server: str, key: str, rate: driver.Rate) -> float:
    samples.add(server, key, rate.per_second)
    if rate.server_cpu_us is not None:
        samples.add(server, f"cpu_{key}", rate.server_cpu_us)
    return rate.per_second


def modern_session(spec: driver.ServerSpec, cfg: Config, samples: Samples) -> None:
    with driver.Peer(spec, _stderr_log(spec.name)) as peer:
        samples.add(spec.name, "startup_discover", driver.first_discover(peer))
        _add_rate(samples, spec.name, "sequential", driver.sequential_echo(peer, cfg.sequential))
        _add_rate(samples, spec.name, "mrtr_modern", driver.mrtr_modern(peer, cfg.mrtr))
        cost = driver.mrtr_cost(peer, blocks=cfg.cost_blocks)
        samples.add(spec.name, "mrtr_cost", cost.wall)
        if cost.cpu is not None:
            samples.add(spec.name, "mrtr_cost_cpu", cost.cpu)
        _add_rate(samples, spec.name, "pipelined", driver.pipelined_echo(peer, cfg.pipelined))
        hwm = peer.memory_kib().get("VmHWM")
        exit_seconds = peer.close()
    if hwm is not None:
        samples.add(spec.name, "_rss_modern", hwm)
    if exit_seconds is not None:
        samples.add(spec.name, "exit_after_eof", exit_seconds)


def legacy_session(spec: driver.ServerSpec, cfg: Config, samples: Samples) -> None:
    with driver.Peer(spec, _stderr_log(spec.name)) as peer:
        samples.add(spec.name, "startup_initialize", driver.first_initialize(peer))
        _add_rate(samples, spec.name, "mrtr_legacy", driver.mrtr_legacy(peer, cfg.legacy))
        hwm = peer.memory_kib().get("VmHWM")
    if hwm is not None:
        samples.add(spec.name, "_rss_legacy", hwm)


def warm_up(specs: dict[str, driver.ServerSpec], samples: Samples) -> dict[str, driver.ServerSpec]:
    """One untimed pass per server (fills .pyc and page caches, checks every workload works)."""
    tiny = Config(reps=1, sequential=5, pipelined=20, mrtr=2, legacy=2, cost_blocks=1)
    scratch = Samples()
    working: dict[str, driver.ServerSpec] = {}
    for name, spec in specs.items():
        try:
            modern_session(spec, tiny, scratch)
            legacy_session(spec, tiny, scratch)
            working[name] = spec
        except (driver.BenchError, OSError, ValueError) as exc:
            samples.errors.append(f"{name}: warm-up failed: {exc}")
    return working


def measure(
    specs: dict[str, driver.ServerSpec], cfg: Config, log: Callable[[str], None]
) -> Samples:
    samples = Samples()
    specs = warm_up(specs, samples)
    names = list(specs)
    for rep in range(cfg.reps):
        order = names[rep % len(names) :] + names[: rep % len(names)] if names else []
        log(f"repetition {rep + 1}/{cfg.reps}: {' -> '.join(order)}")
        for session in (modern_session, legacy_session):
            for name in order:
                try:
                    session(specs[name], cfg, samples)
                except (driver.BenchError, OSError, ValueError) as exc:
                    samples.errors.append(f"{name}: rep {rep + 1} {session.__name__}: {exc}")
        for name in order:  # peak RSS of the repetition: the larger of the two sessions' VmHWM
            per = samples.values.get(name, {})
            highs = [per[k][-1] for k in ("_rss_modern", "_rss_legacy") if per.get(k)]
            if highs:
                samples.add(name, "peak_rss", max(highs))
            for k in ("_rss_modern", "_rss_legacy"):
                per.pop(k, None)
    return samples


def token_bench(info: Mapping[str, Any], log: Callable[[str], None]) -> dict[str, Any]:
    log("token mint/verify micro-benchmark ...")
    commands: dict[str, list[str]] = {}
    token_env: dict[str, str] | None = None
    if "baked" in info and info["baked"].get("pythonpath"):
        token_env = {**os.environ, "PYTHONPATH": info["baked"]["pythonpath"]}
    if "baked" in info:
        commands["baked"] = [
            info["baked"]["python"],
            "tokens.py",
            "baked",
            info["baked"]["package"],
        ]
    if "sdk" in info:
        commands["sdk"] = [info["sdk"]["python"], "tokens.py", "sdk"]
    if "fastmcp" in info:
        commands["fastmcp"] = [info["fastmcp"]["python"], "tokens.py", "fastmcp"]
    if "floor" in info:
        commands["floor"] = [info["floor"]["python"], "tokens.py", "floor"]
    out: dict[str, Any] = {}
    for name, argv in commands.items():
        done = subprocess.run(
            argv,
            check=False,
            cwd=BENCH,
            capture_output=True,
            text=True,
            timeout=600,
            env=token_env if name == "baked" else None,
        )
        if done.returncode == 0:
            out[name] = json.loads(done.stdout)
        else:
            out[name] = {"error": done.stderr.strip().splitlines()[-1:] or ["failed"]}
    return out


# -- reporting ------------------------------------------------------------------------------------


def _median(samples: Samples, server: str, key: str) -> float | None:
    values = samples.values.get(server, {}).get(key)
    return statistics.median(values) if values else None


def summarise(samples: Samples) -> dict[str, Any]:
    metrics: dict[str, Any] = {}
    for metric in METRICS:
        row: dict[str, Any] = {
            "label": metric.label,
            "unit": metric.unit,
            "higher_is_better": metric.higher_is_better,
        }
        for server in SERVERS:
            values = samples.values.get(server, {}).get(metric.key)
            if values:
                row[server] = {"median": statistics.median(values), "samples": values}
        for other in PEERS:
            mine = _median(samples, "baked", metric.key)
            theirs = _median(samples, other, metric.key)
            if mine is not None and theirs:
                row[f"baked_over_{other}"] = mine / theirs
        metrics[metric.key] = row
    return metrics


def goals(metrics: Mapping[str, Any]) -> list[dict[str, Any]]:
    def ratio(key: str, other: str) -> float | None:
        value = metrics.get(key, {}).get(f"baked_over_{other}")
        return float(value) if value is not None else None

    def own(key: str) -> float | None:
        value = metrics.get(key, {}).get("baked", {}).get("median")
        return float(value) if value is not None else None

    checks = [
        ("start-up (discover) <= 0.25 x SDK", ratio("startup_discover", "sdk"), 0.25, False),
        ("start-up (initialize) <= 0.25 x SDK", ratio("startup_initialize", "sdk"), 0.25, False),
        ("sequential >= 5 x SDK", ratio("sequential", "sdk"), 5.0, True),
        ("sequential >= 0.5 x floor", ratio("sequential", "floor"), 0.5, True),
        ("pipelined >= 5 x SDK", ratio("pipelined", "sdk"), 5.0, True),
        ("pipelined >= 0.5 x floor", ratio("pipelined", "floor"), 0.5, True),
        ("peak memory <= 0.5 x SDK", ratio("peak_rss", "sdk"), 0.5, False),
        ("two-round MRTR <= 2.3 x one plain call", own("mrtr_cost"), 2.3, False),
    ]
    out = []
    for name, value, threshold, at_least in checks:
        passed = None if value is None else (value >= threshold if at_least else value <= threshold)
        out.append({"goal": name, "value": value, "threshold": threshold, "pass": passed})
    return out


def _fmt(value: float | None, metric: Metric) -> str:
    if value is None:
        return "-"
    shown = value * metric.scale
    return f"{shown:,.{metric.digits}f}"


def _ratio(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def table(metrics: Mapping[str, Any], tokens: Mapping[str, Any]) -> str:
    titles = [TITLES[s] for s in SERVERS] + [f"baked/{TITLES[p]}" for p in PEERS]
    lines = [
        f"| metric | unit | {' | '.join(titles)} |",
        "|---|---|" + "---:|" * len(titles),
    ]
    for metric in METRICS:
        row = metrics.get(metric.key, {})
        cells = [_fmt(row.get(s, {}).get("median"), metric) for s in SERVERS]
        cells += [_ratio(row.get(f"baked_over_{p}")) for p in PEERS]
        lines.append(f"| {metric.label} | {metric.unit} | {' | '.join(cells)} |")
    for n in ("0", "1", "5", "20"):
        for field_name, label, unit, digits in (
            ("mint_us", "mint", "us", 1),
            ("verify_us", "verify", "us", 1),
            ("bytes", "size", "B", 0),
        ):
            values: list[float | None] = []
            for server in SERVERS:
                entry = (
                    tokens.get(server, {}).get(n) if isinstance(tokens.get(server), dict) else None
                )
                values.append(float(entry[field_name]) if entry else None)
            fake = Metric(field_name, "", unit, False, 1.0, digits)
            ratios = [
                values[0] / other if values[0] is not None and other else None
                for other in values[1:]  # SERVERS after baked: PEERS, in order
            ]
            lines.append(
                f"| token {label}, {n} answers | {unit} | "
                f"{' | '.join(_fmt(v, fake) for v in values)} | "
                f"{' | '.join(_ratio(r) for r in ratios)} |"
            )
    return "\n".join(lines)


def goal_lines(results: Sequence[Mapping[str, Any]]) -> str:
    lines = []
    for goal in results:
        verdict = {True: "PASS", False: "FAIL", None: "n/a "}[goal["pass"]]
        value = "-" if goal["value"] is None else f"{goal['value']:.3f}"
        lines.append(f"  {verdict}  {goal['goal']}  (measured {value})")
    return "\n".join(lines)


def render(report: Mapping[str, Any]) -> str:
    """The human-readable report (also what the README shows) from a results JSON."""
    machine = report["machine"]
    config = report["config"]
    lines = [
        (
            f"machine: {machine['cpu']}, {machine['cores']} cores, {machine['memory_gib']} GiB, "
            f"Python {machine['driver_python']}, kernel {machine['kernel']}; load average "
            f"{machine.get('load_average_before', '?')} before, {machine['load_average']} after"
        ),
    ]
    for name, entry in report["servers"].items():
        if name not in TITLES:  # the tasks section's own servers: listed there
            continue
        versions = ", ".join(f"{k} {v}" for k, v in entry.get("versions", {}).items())
        extra = f", runtime {entry['runtime_digest']}" if entry.get("runtime_digest") else ""
        lines.append(f"{TITLES[name]}: {entry['command']} ({versions}{extra})")
        if entry.get("bake_note"):
            lines.append(f"  NOTE {entry['bake_note']}")
    if report["metrics"]:  # a run of the HTTP section alone has no stdio figures
        lines += [
            (
                f"{report['when']}, template {report['template_revision']}: medians of "
                f"{config['reps']} interleaved repetitions; per repetition sequential "
                f"{config['sequential']}, pipelined {config['pipelined']}, MRTR {config['mrtr']}, "
                f"legacy {config['legacy']}; CPUs {config.get('cpus') or 'not pinned'}"
            ),
            "",
            table(report["metrics"], report["tokens"]),
            "",
            "goals (baked):",
            goal_lines(report["goals"]),
        ]
    if report.get("http"):
        lines += ["", http_bench.render(report["http"])]
    if report.get("tasks"):
        lines += ["", tasks_bench.render(report["tasks"])]
    lines += [f"ERROR {error}" for error in report["errors"]]
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="3 short repetitions (a smoke run)")
    parser.add_argument("--out", type=Path, default=BENCH / "results.json", help="JSON output")
    parser.add_argument(
        "--reps", type=int, help="repetitions per section (default 7 stdio, 5 HTTP; 3 and 2 quick)"
    )
    parser.add_argument(
        "--servers", default=",".join(SERVERS), help="subset, e.g. baked,fastmcp (default: all)"
    )
    parser.add_argument("--render", type=Path, help="only print the report of a results JSON")
    parser.add_argument(
        "--project",
        type=Path,
        help="measure this already-baked project (e.g. a copy of an older bake) instead of baking",
    )
    parser.add_argument(
        "--no-pin", action="store_true", help="let the scheduler place the driver and the servers"
    )
    parser.add_argument(
        "--sections",
        default=",".join(SECTIONS),
        help="stdio, http, tasks, or a comma-separated mix (default: all three); http: baked "
        "(one and two replicas), sdk, fastmcp and floor; tasks: baked and fastmcp",
    )
    args = parser.parse_args(argv)
    if args.render:
        saved = json.loads(args.render.read_text())
        sys.stdout.write(render(saved) + "\n")
        return 0
    cfg = QUICK if args.quick else FULL
    if args.reps:
        cfg = Config(
            args.reps, cfg.sequential, cfg.pipelined, cfg.mrtr, cfg.legacy, cfg.cost_blocks
        )
    http_cfg = http_bench.QUICK if args.quick else http_bench.FULL
    if args.reps:
        http_cfg = dataclasses.replace(http_cfg, reps=args.reps)
    tasks_cfg = tasks_bench.QUICK if args.quick else tasks_bench.FULL
    if args.reps:
        tasks_cfg = dataclasses.replace(tasks_cfg, reps=args.reps)
    sections = [s for s in args.sections.split(",") if s in SECTIONS]
    wanted = [s for s in args.servers.split(",") if s in SERVERS]
    if "stdio" not in sections:
        wanted = [s for s in wanted if s != "floor"]  # the HTTP floor runs in the baked venv
    tasks_fastmcp = "tasks" in sections and "fastmcp" in wanted  # its own venv (4.1.4)
    if sections == ["tasks"]:
        wanted = [s for s in wanted if s == "baked"]  # FastMCP 4.2.3 serves no tasks
    started = time.perf_counter()

    def log(text: str) -> None:
        sys.stderr.write(f"[bench {time.perf_counter() - started:6.1f}s] {text}\n")
        sys.stderr.flush()

    machine_before = envs.describe_machine()
    load_before = str(machine_before["load_average"])
    busy = float(load_before.split()[0] or 0) if load_before else 0.0
    if busy > float(str(machine_before["usable_cores"])):
        log(
            f"WARNING load average {load_before} on {machine_before['usable_cores']} cores: "
            "other work is running, expect noisy figures (ratios within a run hold up best)"
        )
    specs, info, setup_errors = setup(wanted, log, args.project)
    for error in setup_errors:
        log(f"SETUP FAILED {error}")
    if not specs and not tasks_fastmcp:
        return 2
    placement = driver.pin(not args.no_pin)
    samples = Samples()
    tokens: dict[str, Any] = {}
    metrics: dict[str, Any] = {}
    goal_results: list[dict[str, Any]] = []
    if "stdio" in sections:
        log(f"measuring {', '.join(specs)} ({cfg.reps} repetitions, interleaved; CPUs {placement})")
        samples = measure(specs, cfg, log)
        tokens = token_bench(info, log)
        metrics = summarise(samples)
        goal_results = goals(metrics)
    http_report: dict[str, Any] | None = None
    if "http" in sections:
        floor = "floor" in args.servers.split(",")
        http_specs, http_errors = setup_http(specs, info, log, floor=floor)
        setup_errors += http_errors
        # One replica runs on the servers' CPU; the second of `baked x2` on the driver's, which
        # the load client shares with it (its own CPU share is in the table).
        placements: list[set[int] | None] = (
            [set(placement["servers"]), set(placement["driver"])] if placement else [None]
        )
        log(f"HTTP: measuring {', '.join(http_specs)} ({http_cfg.reps} repetitions, interleaved)")
        http_samples = http_bench.measure(http_specs, http_cfg, placements, log)
        samples.errors += http_samples.errors
        http_metrics = http_bench.summarise(http_samples)
        http_report = {
            "config": {**http_cfg.__dict__, "cpus": placement},
            "servers": http_bench.describe(http_specs, info),
            "metrics": http_metrics,
            "goals": http_bench.goals(http_metrics),
        }
    tasks_report: dict[str, Any] | None = None
    if "tasks" in sections:
        task_servers, tasks_errors = setup_tasks(specs, info, log, fastmcp=tasks_fastmcp)
        setup_errors += tasks_errors
        log(
            f"tasks: measuring {', '.join(s.config for s in task_servers)} "
            f"({tasks_cfg.reps} repetitions, interleaved)"
        )
        tasks_samples, tasks_info = tasks_bench.measure(task_servers, tasks_cfg, log)
        samples.errors += tasks_samples.errors
        tasks_metrics = tasks_bench.summarise(tasks_samples)
        tasks_report = {
            "config": {**tasks_cfg.__dict__, "cpus": placement},
            "servers": {s: info[s] for s in ("baked", "fastmcp-tasks") if s in info},
            **tasks_info,
            "metrics": tasks_metrics,
            "goals": tasks_bench.goals(tasks_metrics),
        }
    report = {
        "when": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "template_revision": envs.git_revision(),
        "machine": {**envs.describe_machine(), "load_average_before": load_before},
        "servers": info,
        "config": {**cfg.__dict__, "quick": args.quick, "cpus": placement},
        "metrics": metrics,
        "tokens": tokens,
        "goals": goal_results,
        "errors": setup_errors + samples.errors,
        "http": http_report,
        "tasks": tasks_report,
        "duration_s": round(time.perf_counter() - started, 1),
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n")
    sys.stdout.write(render(report) + f"\nwrote {args.out} in {report['duration_s']} s\n")
    complete = all(s in specs for s in wanted) and not report["errors"]
    return 0 if complete else 1


if __name__ == "__main__":
    raise SystemExit(main())
