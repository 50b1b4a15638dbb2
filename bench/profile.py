#!/usr/bin/env python3
"""Profile the baked server under the benchmark's loads and print where its time goes.

    python3 bench/profile.py [--seconds 6] [--rate 250] [--out-dir .cache/bench/profiles]

It bakes the template like `run.py` (same tools module, same venv), then for each load
(sequential echo, pipelined echo, two-round MRTR) spawns the server on pipes, attaches py-spy
(`py-spy record --pid`, installed into `.cache/bench/tools`; attached rather than launched because
py-spy prints to the stdout it shares with a child, which is the wire) and drives the load until
py-spy stops. Start-up is profiled with `PYTHONPROFILEIMPORTTIME=1` (imports dominate start-up).

Reported per load: the top functions by self and by inclusive time, as a share of the samples in
which the server was busy (py-spy leaves out idle threads, e.g. the event loop waiting in epoll),
and the busy share of wall time. Raw collapsed stacks are kept in the out dir for flame graphs.
"""

from __future__ import annotations

import argparse
import collections
import os
import pstats
import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import driver  # the bench directory is not a package: this is run as a script
import envs

BENCH = Path(__file__).resolve().parent
TOP = 15


def _short(frame: str) -> str:
    """`func (path/to/file.py:123)` -> `path/file.py:func`; the runtime's files from mrtr_runtime/.

    py-spy already writes installed packages' paths relative to their sys.path entry
    (`anyio/_core/_tasks.py`); absolute paths are scripts and the stdlib's frozen modules."""
    name, _, where = frame.partition(" (")
    path = where.rstrip(")").rsplit(":", 1)[0]
    parts = Path(path).parts
    if "mrtr_runtime" in parts:
        path = "/".join(parts[parts.index("mrtr_runtime") :])
    elif "site-packages" in parts:
        path = "/".join(parts[parts.index("site-packages") + 1 :])
    elif Path(path).is_absolute():
        path = "/".join(parts[-2:])
    return f"{path}:{name}"


def _group(frame: str) -> str:
    path = frame.split(":", 1)[0]
    if path.startswith("mrtr_runtime/"):
        return "mrtr_runtime (the vendored runtime)"
    for lib in ("anyio", "pydantic", "pydantic_core", "asyncio", "json", "selectors", "logging"):
        if path.startswith(f"{lib}/") or path == f"{lib}.py":
            return lib
    return "other"


def analyse(raw: Path) -> tuple[int, dict[str, list[tuple[str, float]]]]:
    """Samples, and ranked tables (percent of samples): self time by function and by library,
    inclusive time of the runtime's own functions."""
    self_counts: collections.Counter[str] = collections.Counter()
    groups: collections.Counter[str] = collections.Counter()
    incl_counts: collections.Counter[str] = collections.Counter()
    total = 0
    for line in raw.read_text().splitlines():
        stack, _, count_text = line.rpartition(" ")
        if not stack or not count_text.isdigit():
            continue
        count = int(count_text)
        frames = [_short(f) for f in stack.split(";") if f]
        if not frames:
            continue
        total += count
        self_counts[frames[-1]] += count
        groups[_group(frames[-1])] += count
        for frame in set(frames):
            if frame.startswith("mrtr_runtime/"):
                incl_counts[frame] += count
    if not total:
        return 0, {}

    def top(counter: collections.Counter[str]) -> list[tuple[str, float]]:
        return [(name, 100.0 * n / total) for name, n in counter.most_common(TOP)]

    return total, {"self": top(self_counts), "library": top(groups), "runtime": top(incl_counts)}


def _columns(tables: dict[str, list[tuple[str, float]]]) -> list[str]:
    heads = [("self", "self % (function)"), ("runtime", "inclusive % (runtime function)")]
    lines = [
        "| " + " | | ".join(f"% | {title}" for _, title in heads) + " |",
        "|" + "|".join(["---:|---|"] * len(heads)) + "|",
    ]
    lines[1] = "|---:|---|---|---:|---|"
    rows = max(len(tables.get(key, [])) for key, _ in heads)
    for i in range(rows):
        cells = []
        for key, _ in heads:
            entries = tables.get(key, [])
            name, share = entries[i] if i < len(entries) else ("", 0.0)
            cells.append(f"{share:.1f} | `{name}`" if name else " | ")
        lines.append("| " + " | | ".join(cells) + " |")
    libraries = ", ".join(f"{name} {share:.0f}%" for name, share in tables.get("library", []))
    return [f"Self time by library: {libraries}.", "", *lines]


def profile_load(
    spec: driver.ServerSpec,
    name: str,
    step: Callable[[driver.Peer], object],
    *,
    py_spy: Path,
    seconds: float,
    rate: int,
    out_dir: Path,
) -> str:
    raw = out_dir / f"{name.split()[0]}.raw.txt"
    with driver.Peer(spec, envs.LOGS / "profile.stderr.log", timeout=seconds + 120) as peer:
        driver.first_discover(peer)
        step(peer)  # warm
        recorder = subprocess.Popen(
            [
                str(py_spy),
                "record",
                "--pid",
                str(peer.pid),
                "--rate",
                str(rate),
                "--duration",
                str(int(seconds)),
                "--format",
                "raw",
                "--gil",  # only samples running Python: not waiting in epoll, not in write()
                "--output",
                str(raw),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        try:
            time.sleep(0.3)  # let py-spy attach before the load starts
            started = time.perf_counter()
            while recorder.poll() is None:
                step(peer)
            wall = time.perf_counter() - started
        finally:
            if recorder.poll() is None:  # the load failed: do not leave py-spy attached
                recorder.kill()
            recorder.wait()
        stderr = recorder.stderr.read().decode() if recorder.stderr else ""
    if recorder.returncode != 0 or not raw.exists():
        return f"### {name}\n\npy-spy failed ({recorder.returncode}): {stderr.strip()[-500:]}\n"
    samples, tables = analyse(raw)
    expected = rate * min(wall, seconds)
    lines = [
        f"### py-spy: {name}",
        "",
        (
            f"{samples} samples holding the GIL at {rate} Hz over ~{seconds:.0f} s: the server "
            f"ran Python about {100 * samples / expected:.0f}% of wall time. Raw stacks: {raw}."
        ),
        "",
        *_columns(tables),
    ]
    return "\n".join(lines) + "\n"


_CPROFILE_SCRIPT = """
import cProfile, sys, time
from {package}.cli import main
profile = cProfile.Profile(time.process_time)
try:
    profile.runcall(main, [])
except SystemExit:
    pass
profile.dump_stats({out!r})
"""


def cprofile_sequential(baked: envs.Baked, spec: driver.ServerSpec, out_dir: Path) -> str:
    """Deterministic profile on a CPU clock: calls and CPU per sequential echo call."""
    out = out_dir / "sequential.cprofile"
    code = _CPROFILE_SCRIPT.format(package=baked.package, out=str(out))
    profiled = driver.ServerSpec(spec.name, [str(baked.python), "-c", code], spec.env, spec.cwd)
    calls = 3000
    with driver.Peer(profiled, envs.LOGS / "profile.stderr.log") as peer:
        driver.first_discover(peer)
        driver.sequential_echo(peer, calls)
    stats = pstats.Stats(str(out))
    rows = []
    for (path, line, func), entry in stats.stats.items():  # type: ignore[attr-defined]
        _, ncalls, tottime, cumtime, _ = entry
        rows.append((tottime, ncalls, cumtime, f"{_short(f'{func} ({path}:{line})')}:{line}"))
    rows.sort(reverse=True)
    total = sum(r[0] for r in rows)
    lines = [
        "### cProfile (CPU clock): sequential echo",
        "",
        (
            f"{calls} calls; profiled CPU {total / calls * 1e6:.0f} us per call (cProfile's own "
            "overhead included, so read the shares and the call counts, not the absolute time)."
        ),
        "",
        "| CPU % | calls per request | function |",
        "|---:|---:|---|",
    ]
    lines += [
        f"| {100 * t / total:.1f} | {n / calls:.2f} | `{name}` |" for t, n, _, name in rows[:20]
    ]
    return "\n".join(lines) + "\n"


def _strace_counts(spec: driver.ServerSpec, calls: int, out: Path) -> dict[str, int]:
    traced = driver.ServerSpec(
        spec.name, ["strace", "-f", "-c", "-o", str(out), *spec.argv], spec.env, spec.cwd
    )
    with driver.Peer(traced, envs.LOGS / "profile.stderr.log") as peer:
        driver.first_discover(peer)
        if calls:
            driver.sequential_echo(peer, calls)
    counts: dict[str, int] = {}
    for line in out.read_text().splitlines():
        parts = line.split()
        if len(parts) >= 5 and parts[0][0].isdigit() and parts[-1] != "total":
            counts[parts[-1]] = int(parts[3])
    return counts


def syscalls(specs: dict[str, driver.ServerSpec], out_dir: Path) -> str:
    """System calls per sequential echo call: (discover + N calls) minus (discover alone)."""
    if shutil.which("strace") is None:
        return "### system calls\n\nstrace is not installed (apt-get install strace).\n"
    calls = 2000
    per_call: dict[str, dict[str, float]] = {}
    for name, spec in specs.items():
        base = _strace_counts(spec, 0, out_dir / f"strace-{name}-0.txt")
        loaded = _strace_counts(spec, calls, out_dir / f"strace-{name}-{calls}.txt")
        per_call[name] = {
            call: (loaded.get(call, 0) - base.get(call, 0)) / calls for call in loaded
        }
    names = sorted(
        {c for table in per_call.values() for c, v in table.items() if v >= 0.05},
        key=lambda c: -max(t.get(c, 0.0) for t in per_call.values()),
    )
    lines = [
        "### system calls per sequential echo call (strace -c)",
        "",
        "| syscall | " + " | ".join(per_call) + " |",
        "|---|" + "---:|" * len(per_call),
    ]
    for call in names:
        lines.append(
            f"| {call} | " + " | ".join(f"{t.get(call, 0.0):.2f}" for t in per_call.values()) + " |"
        )
    totals = " | ".join(f"**{sum(v for v in t.values() if v > 0):.1f}**" for t in per_call.values())
    lines.append(f"| all | {totals} |")
    return "\n".join(lines) + "\n"


def reference(specs: dict[str, driver.ServerSpec], reps: int = 5) -> str:
    """Sequential and pipelined echo, wall rate and server CPU per call, interleaved medians."""
    keys = ("sequential", "cpu_sequential", "pipelined", "cpu_pipelined")
    values: dict[str, dict[str, list[float]]] = {n: {k: [] for k in keys} for n in specs}
    for _ in range(reps):
        for name, spec in specs.items():
            with driver.Peer(spec, envs.LOGS / "profile.stderr.log") as peer:
                driver.first_discover(peer)
                for key, rate in (
                    ("sequential", driver.sequential_echo(peer, 3000)),
                    ("pipelined", driver.pipelined_echo(peer, 2000)),
                ):
                    values[name][key].append(rate.per_second)
                    if rate.server_cpu_us is not None:
                        values[name][f"cpu_{key}"].append(rate.server_cpu_us)
    lines = [
        "### reference: how much of the gap is the event loop",
        "",
        (
            "`asyncio_floor.py` is the least an asyncio server can do (protocols, no anyio, no "
            "validation); `--tasks` runs each request as a Task. Medians of "
            f"{reps} interleaved runs:"
        ),
        "",
        "| server | sequential calls/s | CPU us/call | pipelined calls/s | CPU us/call |",
        "|---|---:|---:|---:|---:|",
    ]
    for name, table in values.items():
        cells = [
            f"{statistics.median(table[k]):,.0f}"
            if k in ("sequential", "pipelined") and table[k]
            else (f"{statistics.median(table[k]):.1f}" if table[k] else "-")
            for k in keys
        ]
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def profile_imports(spec: driver.ServerSpec, baked_package: str) -> str:
    """Spawn once with PYTHONPROFILEIMPORTTIME=1, answer one discover, rank imports by cost."""
    log = envs.LOGS / "importtime.stderr.log"
    log.unlink(missing_ok=True)
    env = {**spec.env, "PYTHONPROFILEIMPORTTIME": "1"}
    timed = driver.ServerSpec(spec.name, spec.argv, env, spec.cwd)
    with driver.Peer(timed, log) as peer:
        elapsed = driver.first_discover(peer)
    rows: list[tuple[int, int, str]] = []
    for line in log.read_text(errors="replace").splitlines():
        if not line.startswith("import time:") or "|" not in line or "self [us]" in line:
            continue
        self_text, cumulative_text, package = (p.strip() for p in line[12:].split("|"))
        rows.append((int(cumulative_text), int(self_text), package))
    by_root: collections.Counter[str] = collections.Counter()
    for _, self_us, package in rows:
        root = package.split(".")[0]
        by_root[root if root != baked_package else f"{root} (the project + runtime)"] += self_us
    total = sum(by_root.values())
    lines = [
        "### start-up (PYTHONPROFILEIMPORTTIME)",
        "",
        (
            f"spawn -> first discover {elapsed * 1e3:.0f} ms with import profiling on. The "
            f"process imported modules for {total / 1e3:.0f} ms in all (some may load after the "
            "first response). Import time by top-level package (self time of all its modules):"
        ),
        "",
        "| ms | package |",
        "|---:|---|",
    ]
    lines += [f"| {us / 1e3:.1f} | `{root}` |" for root, us in by_root.most_common(TOP)]
    heavy = sorted(rows, reverse=True)
    lines += [
        "",
        "Heaviest single imports (cumulative: with everything they pull in):",
        "",
        "| ms | module |",
        "|---:|---|",
    ]
    lines += [f"| {c / 1e3:.1f} | `{p}` |" for c, _, p in heavy[:TOP]]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=6.0, help="py-spy duration per load")
    parser.add_argument("--rate", type=int, default=250, help="py-spy samples per second")
    parser.add_argument("--out-dir", type=Path, default=envs.CACHE / "profiles")
    args = parser.parse_args(argv)
    args.out_dir = args.out_dir.resolve()  # the servers run in other working directories
    args.out_dir.mkdir(parents=True, exist_ok=True)
    for stale in args.out_dir.iterdir():
        if stale.is_file():
            stale.unlink()
    sys.stderr.write("baking and installing the baked project ...\n")
    baked, note = envs.bake(BENCH / "bench_tools.py", reuse_on_failure=True)
    if note:
        sys.stderr.write(f"WARNING {note}\n")
    tools = envs.tools_python()
    envs.ensure_installed(tools, "py-spy", "tools-venv.log")
    py_spy = tools.parent / "py-spy"
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "LANG": "C.UTF-8",
        "MRTR_SIGNING_KEY": os.urandom(32).hex(),
    }
    spec = driver.ServerSpec("baked", baked.command, env, baked.project)
    driver.pin()  # the same placement as run.py: driver on one CPU, the server on another
    loads: list[tuple[str, Callable[[driver.Peer], object]]] = [
        ("sequential echo", lambda p: driver.sequential_echo(p, 500)),
        ("pipelined echo (2000 at once)", lambda p: driver.pipelined_echo(p, 2000)),
        ("two-round MRTR (2026-07-28)", lambda p: driver.mrtr_modern(p, 100)),
    ]
    sections = [
        (
            f"## Profile of the baked server (runtime {envs.runtime_digest(baked.project)}, "
            f"template {envs.git_revision()})\n"
        )
    ]
    for name, step in loads:
        sys.stderr.write(f"profiling {name} ...\n")
        sections.append(
            profile_load(
                spec,
                name,
                step,
                py_spy=py_spy,
                seconds=args.seconds,
                rate=args.rate,
                out_dir=args.out_dir,
            )
        )
    sys.stderr.write("profiling with cProfile ...\n")
    sections.append(cprofile_sequential(baked, spec, args.out_dir))
    sys.stderr.write("counting system calls ...\n")
    floor = driver.ServerSpec(
        "floor", [str(envs.floor_python()), str(BENCH / "floor_server.py")], env, BENCH
    )
    sections.append(syscalls({"baked": spec, "floor": floor}, args.out_dir))
    sys.stderr.write("measuring the asyncio reference ...\n")
    floor_python = str(envs.floor_python())
    references = {
        "floor (stdlib loop)": floor,
        "asyncio, eager": driver.ServerSpec(
            "asyncio", [floor_python, str(BENCH / "asyncio_floor.py")], env, BENCH
        ),
        "asyncio, a Task per request": driver.ServerSpec(
            "asyncio-tasks", [floor_python, str(BENCH / "asyncio_floor.py"), "--tasks"], env, BENCH
        ),
        "baked": spec,
    }
    sections.append(reference(references))
    sys.stderr.write("profiling start-up imports ...\n")
    sections.append(profile_imports(spec, baked.package))
    report = "\n".join(sections)
    (args.out_dir / "profile.md").write_text(report)
    sys.stdout.write(report + f"\nwrote {args.out_dir / 'profile.md'}\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
