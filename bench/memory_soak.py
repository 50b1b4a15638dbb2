#!/usr/bin/env python3
"""Memory soak: 100,000 requests against one baked server process, its RSS sampled as it goes.

    python3 bench/memory_soak.py [--requests 100000] [--every 10000] [--window 256]
                                 [--project PATH] [--out FILE.json]

Bakes the template (or uses ``--project``, a baked project directory), drops
``tests/reliability_tools.py`` into its ``tools/`` package and runs ``python -m <package>`` with
this interpreter and ``PYTHONPATH=<project>/src`` (so this Python needs anyio and pydantic).
The mix is the reliability suite's: fast calls, MRTR round 1 and round 2 (presenting tokens),
failing tools, ToolError, blocking ``def`` tools, slow calls, stray prints, cancelled calls and
unparseable lines. A reader thread checks that every stdout line is one strict JSON message and
every id is answered once; every ``--every`` responses it reads VmRSS from ``/proc/<pid>/status``.

It prints the series and the growth from the first sample (after warm-up) to the last. Not part
of any test run and nothing is asserted: memory depends on the machine. Linux only (``/proc``).
Exit status 0 when nothing was lost or duplicated and stdout stayed clean, 1 otherwise.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
TOOLS = REPO / "tests" / "reliability_tools.py"
META = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientCapabilities": {"elicitation": {"form": {}}},
}
KEY_HEX = bytes(range(11, 43)).hex()
ACCEPT = {"action": "accept", "content": {"name": "Ada"}}
KINDS = (
    ["fast"] * 7
    + ["mrtr1"] * 3
    + ["mrtr2"] * 3
    + ["slow"] * 2
    + ["failing", "tool_error", "blocking", "printing", "cancelled"]
)
TOKENS = 16


def bake(out: Path) -> Path:
    command = [
        sys.executable,
        "-m",
        "cookiecutter",
        "--no-input",
        "-f",
        "-o",
        str(out),
        str(REPO),
        "include_aws_example=no",
    ]
    subprocess.run(command, check=True, capture_output=True, timeout=300)
    (project,) = [path for path in out.iterdir() if (path / "pyproject.toml").is_file()]
    return project


def package_of(project: Path) -> str:
    (package,) = [p.name for p in (project / "src").iterdir() if (p / "mrtr_runtime").is_dir()]
    return package


def line(message: dict[str, Any]) -> bytes:
    return json.dumps(message, separators=(",", ":")).encode() + b"\n"


def call(request_id: object, name: str, arguments: dict[str, Any], **extra: Any) -> bytes:
    params = {"name": name, "arguments": arguments, "_meta": META, **extra}
    return line({"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": params})


def say(text: str) -> None:
    sys.stdout.write(text + "\n")


def _not_json(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def vm(pid: int, field: str) -> int | None:
    try:
        for row in Path(f"/proc/{pid}/status").read_text().splitlines():
            if row.startswith(field + ":"):
                return int(row.split()[1])
    except OSError:
        return None
    return None


class Soak:
    def __init__(
        self, process: subprocess.Popen[bytes], total: int, every: int, window: int
    ) -> None:
        self.process = process
        self.total = total
        self.every = every
        self.window = threading.BoundedSemaphore(window)
        self.answers: Counter[object] = Counter()
        self.responses = 0
        self.violations: list[str] = []
        self.samples: list[tuple[int, int | None, float]] = []
        self.started = time.monotonic()
        self.all_answered = threading.Event()
        self.expected: set[object] = set()
        self.tokens: dict[int, str] = {}
        self.tokens_ready = threading.Event()
        self.warm_rss: int | None = None

    def read(self) -> None:
        assert self.process.stdout is not None
        for raw in self.process.stdout:
            try:
                message = json.loads(raw, parse_constant=_not_json)
            except ValueError:
                self.violations.append(raw[:120].decode("utf-8", "replace"))
                continue
            if (
                not isinstance(message, dict)
                or message.get("jsonrpc") != "2.0"
                or "id" not in message
            ):
                self.violations.append(raw[:120].decode("utf-8", "replace"))
                continue
            request_id = message["id"]
            self.answers[request_id] += 1
            if isinstance(request_id, str) and request_id.startswith("token-"):
                self.tokens[int(request_id[6:])] = message["result"]["requestState"]
                if len(self.tokens) == TOKENS:
                    self.tokens_ready.set()
                continue
            if request_id is None:
                continue  # the answer to a bad line (no id to give)
            self.window.release()
            self.responses += 1
            if self.responses % self.every == 0:
                self.samples.append((self.responses, vm(self.process.pid, "VmRSS"), self.elapsed()))
            if self.responses >= len(self.expected) and self.expected and self.answered_all():
                self.all_answered.set()

    def answered_all(self) -> bool:
        return all(self.answers[i] for i in self.expected)

    def elapsed(self) -> float:
        return time.monotonic() - self.started

    def write(self) -> None:
        stdin = self.process.stdin
        assert stdin is not None
        stdin.write(b"".join(call(f"token-{n}", "rel_mrtr", {"n": n}) for n in range(TOKENS)))
        stdin.flush()
        self.tokens_ready.wait(60)
        self.warm_rss = vm(self.process.pid, "VmRSS")
        plan = [(i, KINDS[i % len(KINDS)]) for i in range(1, self.total + 1)]
        self.expected = {i for i, kind in plan if kind != "cancelled"}
        batch: list[bytes] = []
        for i, kind in plan:
            if kind != "cancelled":
                self.window.acquire()
            batch.append(self.request(i, kind))
            if len(batch) >= 32:
                stdin.write(b"".join(batch))
                stdin.flush()
                batch = []
        stdin.write(b"".join(batch))
        stdin.flush()

    def request(self, i: int, kind: str) -> bytes:
        n = i % TOKENS
        if kind == "fast":
            return call(i, "rel_fast", {"n": i})
        if kind == "mrtr1":
            return call(i, "rel_mrtr", {"n": n})
        if kind == "mrtr2":
            return call(
                i,
                "rel_mrtr",
                {"n": n},
                requestState=self.tokens[n],
                inputResponses={"name": ACCEPT},
            )
        if kind == "slow":
            return call(i, "rel_slow", {"seconds": 0.001, "n": i})
        if kind == "failing":
            return call(i, "rel_failing", {"n": i})
        if kind == "tool_error":
            return call(i, "rel_tool_error", {"n": i})
        if kind == "blocking":
            return call(i, "rel_blocking", {"seconds": 0, "n": i})
        if kind == "printing":
            return call(i, "rel_printing", {"n": i}) + b"not json at all\n"
        cancel = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": i}}
        return call(i, "rel_slow", {"seconds": 30, "n": i}) + line(cancel)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=100_000)
    parser.add_argument("--every", type=int, default=10_000, help="sample VmRSS every N responses")
    parser.add_argument("--window", type=int, default=256, help="requests in flight at most")
    parser.add_argument("--project", type=Path, help="an already baked project (else bake one)")
    parser.add_argument("--out", type=Path, help="also write the figures as JSON here")
    args = parser.parse_args()
    if not Path("/proc/self/status").exists():
        sys.stderr.write("memory_soak: needs Linux /proc\n")
        return 2

    with tempfile.TemporaryDirectory(prefix="mrtr-soak-") as scratch:
        project = args.project or bake(Path(scratch))
        package = package_of(project)
        (project / "src" / package / "tools" / TOOLS.name).write_bytes(TOOLS.read_bytes())
        env = {k: v for k, v in os.environ.items() if not k.startswith("MRTR_")}
        env.update(
            PYTHONPATH=str(project / "src"), MRTR_SIGNING_KEY=KEY_HEX, MRTR_LOG_LEVEL="WARNING"
        )
        with open(Path(scratch) / "stderr.log", "wb") as stderr:
            process = subprocess.Popen(
                [sys.executable, "-m", package],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=stderr,
                env=env,
                cwd=project,
            )
            soak = Soak(process, args.requests, args.every, args.window)
            reader = threading.Thread(target=soak.read, daemon=True)
            reader.start()
            soak.write()
            finished = soak.all_answered.wait(600)
            if soak.responses % args.every:
                soak.samples.append((soak.responses, vm(process.pid, "VmRSS"), soak.elapsed()))
            peak = vm(process.pid, "VmHWM")
            assert process.stdin is not None
            process.stdin.close()
            code = process.wait(60)
            reader.join(10)
            log_bytes = (Path(scratch) / "stderr.log").stat().st_size

    lost = [i for i in soak.expected if soak.answers[i] == 0]
    duplicated = [i for i, count in soak.answers.items() if count > 1 and i is not None]
    cancelled_answered = [
        i for i in range(1, args.requests + 1) if i not in soak.expected and soak.answers[i]
    ]
    say(
        f"memory soak: {args.requests} requests ({len(soak.expected)} answered kinds, "
        f"{args.requests - len(soak.expected)} cancelled) against {package} in {project}"
    )
    say(f"server RSS when warm (after {TOKENS} MRTR round-1 calls): {soak.warm_rss} KiB")
    say(f"{'responses':>10} {'VmRSS KiB':>10} {'vs first':>9} {'seconds':>8}")
    first = soak.samples[0][1] if soak.samples and soak.samples[0][1] is not None else None
    for count, rss, seconds in soak.samples:
        delta = f"{rss - first:+d}" if rss is not None and first is not None else "?"
        say(f"{count:>10} {rss!s:>10} {delta:>9} {seconds:>8.1f}")
    growth = None
    if first is not None and soak.samples[-1][1] is not None and len(soak.samples) > 1:
        growth = soak.samples[-1][1] - first
        span = soak.samples[-1][0] - soak.samples[0][0]
        say(
            f"growth from the first sample to the last: {growth:+d} KiB over {span} responses "
            f"({growth * 1024 / span:+.1f} bytes per request)"
        )
    say(
        f"peak RSS (VmHWM) {peak} KiB; stderr log {log_bytes} bytes; exit code {code}; "
        f"all answered: {finished}"
    )
    say(
        f"lost {len(lost)}, duplicated {len(duplicated)}, answered after cancel "
        f"{len(cancelled_answered)}, stdout violations {len(soak.violations)}"
    )
    if args.out is not None:
        args.out.write_text(
            json.dumps(
                {
                    "requests": args.requests,
                    "samples": soak.samples,
                    "warm_rss_kib": soak.warm_rss,
                    "growth_kib": growth,
                    "lost": len(lost),
                    "duplicated": len(duplicated),
                    "violations": soak.violations[:20],
                    "exit_code": code,
                },
                indent=2,
            )
        )
    clean = not (lost or duplicated or cancelled_answered or soak.violations) and code == 0
    return 0 if clean else 1


if __name__ == "__main__":
    sys.exit(main())
