"""Run the official MCP conformance suite against this project's own server.

    python tests/conformance/run.py                     # every transport this project serves
    python tests/conformance/run.py --transport stdio   # or http (the `http` wing)

Needs Node.js 22 or newer: the suite is `@modelcontextprotocol/conformance`, pinned below and
run with `npx` (set MRTR_CONFORMANCE_CLI to another command line, e.g. `node /path/to/dist/
index.js`, to use an installed copy). The server is this project's, with the suite's fixtures
(`fixtures.py`, through `serve.py`). Over stdio the suite, which speaks only HTTP, reaches it
through `stdio_bridge.py`; over HTTP it talks to `<slug> http` directly.

Per transport it runs every server scenario of both protocol eras (2026-07-28, 2025-11-25), then
each scenario of the tasks and skills extensions, and judges every check the suite wrote
(`checks.json`): a FAILURE or WARNING fails the run unless `expected-failures.yml` lists it
(stdio only; a listed check that passes is stale and fails the run too), and over stdio the
bridge must have seen the server break no stdio rule and exit cleanly. It prints a table of
every scenario and exits 0 only when nothing failed. The suite's own files stay in
`--output-dir` (default `build/conformance/`).
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

HERE = Path(__file__).resolve().parent
PROJECT_ROOT = HERE.parent.parent
#: The suite, pinned: a newer one may add scenarios, which this project then has to meet.
SUITE = "@modelcontextprotocol/conformance@0.2.0-alpha.12"
MIN_NODE_MAJOR = 22  # the suite's own requirement (it uses fs.globSync)
ERAS = ("2026-07-28", "2025-11-25")
#: Extension scenarios belong to no protocol version: each runs in a CLI process of its own, and
#: only for a wing this project was generated with (the runtime module that serves it).
EXTENSION_SCENARIOS = {
    "_tasks": (
        "tasks-lifecycle",
        "tasks-capability-negotiation",
        "tasks-wire-fields",
        "tasks-request-state-removal",
        "tasks-mrtr-input",
        "tasks-request-headers",
        "tasks-status-notifications",
        "tasks-dispatch-and-envelope",
        "tasks-required-task-error",
        "tasks-mrtr-composition",
    ),
    "_skills": (
        "sep-2640-skills-enumeration",
        "sep-2640-skills-manifest",
        "sep-2640-skills-directory",
    ),
}
#: Scenarios that test the HTTP transport itself (status codes, DNS rebinding, SSE streams and
#: polling, SEP-2243 headers): over stdio the bridge, not the server, answers those, so they
#: run but are not judged there. Over HTTP every one is judged.
STDIO_UNJUDGED = {
    "2026-07-28": frozenset(
        {
            "dns-rebinding-protection",
            "http-header-validation",
            "http-custom-header-server-validation",
            "server-sse-multiple-streams",
        }
    ),
    "2025-11-25": frozenset(
        {"dns-rebinding-protection", "server-sse-polling", "server-sse-multiple-streams"}
    ),
}
PROBLEMS = frozenset({"FAILURE", "WARNING"})
#: The 2025-11-25 stream poll bound under the suite (server-sse-polling): a call that outlasts
#: it has its stream closed with `retry` and resumed, as that scenario checks.
SSE_POLL_SECONDS = "1"
ERA_TIMEOUT_SECONDS = 900
SCENARIO_TIMEOUT_SECONDS = 300
SERVER_START_SECONDS = 60
#: Variables that would make the HTTP server ask for credentials the suite does not have.
AUTH_VARIABLES = ("MRTR_HTTP_TOKEN", "MRTR_HTTP_TOKENS_FILE", "MRTR_OAUTH_ISSUER")
#: Marks a directory as this script's output, so a later run may empty it.
MARKER = ".conformance-run"
CHECKS_DIR = re.compile(r"server-(.+)-\d{4}-\d\d-\d\dT[\d-]+Z")
LISTENING = re.compile(r"serving MCP at (http://\S+)")


@dataclass
class Verdict:
    """What one transport's run found."""

    transport: str
    rows: list[tuple[str, str, str, str]] = field(default_factory=list)  # era, scenario, ...
    failures: list[str] = field(default_factory=list)
    expected: int = 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    parser.add_argument("--transport", choices=("stdio", "http"), action="append")
    parser.add_argument("--output-dir", type=Path, default=PROJECT_ROOT / "build" / "conformance")
    options = parser.parse_args(argv)
    transports = options.transport or ["stdio", *(["http"] if serves_http() else [])]
    if "http" in transports and not serves_http():
        parser.error("this project was generated without the HTTP transport (include_http=no)")
    try:
        cli = suite_command()
    except RuntimeError as error:
        sys.stderr.write(f"conformance: {error}\n")
        return 2
    output_dir: Path = options.output_dir.resolve()
    try:
        clear(output_dir)
    except RuntimeError as error:
        sys.stderr.write(f"conformance: {error}\n")
        return 2
    verdicts = [run_transport(cli, transport, output_dir / transport) for transport in transports]
    report(verdicts)
    return 1 if any(verdict.failures for verdict in verdicts) else 0


def clear(output_dir: Path) -> None:
    """Empty `output_dir` for this run: only a new or empty directory, or one an earlier run
    marked as its own; any other is refused, never deleted."""
    marker = output_dir / MARKER
    if output_dir.exists() and any(output_dir.iterdir()) and not marker.is_file():
        raise RuntimeError(
            f"{output_dir} is not empty and no earlier run of this script made it; give "
            "--output-dir a new or empty directory"
        )
    if output_dir.exists():
        for child in output_dir.iterdir():
            if child.is_dir() and not child.is_symlink():
                shutil.rmtree(child)
            else:
                child.unlink()
    output_dir.mkdir(parents=True, exist_ok=True)
    marker.write_text("written by tests/conformance/run.py\n", encoding="utf-8")


def serves_http() -> bool:
    return serves("http")


def serves(wing_module: str) -> bool:
    """Whether this project's runtime holds the wing (include_http, include_tasks, ...)."""
    package = f"{{ cookiecutter.package_name }}.mrtr_runtime.{wing_module}"
    return importlib.util.find_spec(package) is not None


def extension_scenarios() -> list[str]:
    """The extension scenarios of the wings this project was generated with."""
    return [
        scenario
        for wing_module, scenarios in EXTENSION_SCENARIOS.items()
        if serves(wing_module)
        for scenario in scenarios
    ]


def suite_command() -> list[str]:
    """The suite's command line: MRTR_CONFORMANCE_CLI, or the pinned version through npx."""
    configured = os.environ.get("MRTR_CONFORMANCE_CLI")
    if configured:
        return shlex.split(configured)
    npx, node = shutil.which("npx"), shutil.which("node")
    if npx is None or node is None:
        raise RuntimeError(
            f"needs Node.js {MIN_NODE_MAJOR}+ with npx on PATH (nodejs.org), or "
            "MRTR_CONFORMANCE_CLI naming the suite's command line"
        )
    version = subprocess.run(
        [node, "--version"], capture_output=True, text=True, check=False, timeout=30
    ).stdout.strip()
    major = re.match(r"v(\d+)", version)
    if major is None or int(major.group(1)) < MIN_NODE_MAJOR:
        raise RuntimeError(
            f"the suite needs Node.js {MIN_NODE_MAJOR}+, and `node` here is {version or '?'}"
        )
    return [npx, "--yes", SUITE]


# -- one transport ----------------------------------------------------------------------------


def run_transport(cli: Sequence[str], transport: str, work: Path) -> Verdict:
    work.mkdir(parents=True)
    verdict = Verdict(transport)
    expected = expected_failures() if transport == "stdio" else frozenset()
    seen_expected: set[str] = set()
    with serving(transport, work, verdict) as url:
        for era in ERAS:
            selection = ["--suite", "all", "--spec-version", era]
            output = run_suite(cli, selection, url, work / era)
            if "Total:" not in output or not ran(work / era):
                verdict.failures.append(f"{era}: the suite did not finish:\n{output[-3000:]}")
            judge(work / era, era, verdict, expected, seen_expected)
        extensions = work / "extensions"
        for scenario in extension_scenarios():
            selection = ["--scenario", scenario]
            output = run_suite(cli, selection, url, extensions, SCENARIO_TIMEOUT_SECONDS)
            if scenario not in ran(extensions):
                verdict.failures.append(f"{scenario} did not run:\n{output[-3000:]}")
        judge(extensions, "extension", verdict, expected, seen_expected)
    for stale in sorted(expected - seen_expected):
        verdict.failures.append(
            f"{stale}: listed in expected-failures.yml but did not fail: remove the entry"
        )
    return verdict


def ran(output_dir: Path) -> set[str]:
    """The scenarios the suite wrote results for under `output_dir`."""
    return {
        match.group(1)
        for checks in output_dir.glob("server-*/checks.json")
        if (match := CHECKS_DIR.fullmatch(checks.parent.name)) is not None
    }


def run_suite(
    cli: Sequence[str],
    selection: Sequence[str],
    url: str,
    output_dir: Path,
    timeout: float = ERA_TIMEOUT_SECONDS,
) -> str:
    command = [*cli, "server", "--url", url, *selection, "-o", str(output_dir)]
    env = {**os.environ, "NO_COLOR": "1", "FORCE_COLOR": "0"}
    try:
        # A session of its own, so a timeout stops npx's node too, not only npx.
        process = subprocess.Popen(
            command,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            env=env,
            start_new_session=True,
        )
    except OSError as error:
        output = f"cannot start the suite ({shlex.join(command)}): {error}"
    else:
        try:
            output, _ = process.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            if sys.platform == "win32":
                process.kill()
            else:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(process.pid, signal.SIGKILL)
            output, _ = process.communicate()
            output += f"\n(stopped after {timeout:.0f} s)"
    # Its exit status is 1 whenever a check failed, expected ones included: run.py judges.
    output_dir.mkdir(parents=True, exist_ok=True)
    with (output_dir / "cli.log").open("a", encoding="utf-8") as log:
        log.write(f"$ {shlex.join(command)}\n{output}\n")
    return output


def judge(
    output_dir: Path, era: str, verdict: Verdict, expected: frozenset[str], seen: set[str]
) -> None:
    """Every scenario's checks.json under `output_dir`: a table row each, and its failures."""
    for checks_file in sorted(output_dir.glob("server-*/checks.json")):
        match = CHECKS_DIR.fullmatch(checks_file.parent.name)
        if match is None:
            continue
        scenario = match.group(1)
        checks: list[dict[str, Any]] = json.loads(checks_file.read_text(encoding="utf-8"))
        scored = [check for check in checks if check.get("status") in {"SUCCESS", *PROBLEMS}]
        passed = sum(check["status"] == "SUCCESS" for check in scored)
        if verdict.transport == "stdio" and scenario in STDIO_UNJUDGED.get(era, ()):
            note = "not judged over stdio: it tests HTTP itself"
            verdict.rows.append((era, scenario, f"{passed} / {len(scored)}", note))
            continue
        listed = 0
        for check in checks:
            key = f"{scenario}:{check.get('id')}"
            if key in expected:
                if check.get("status") in PROBLEMS:
                    seen.add(key)
                    listed += 1
                continue
            if check.get("status") in PROBLEMS:
                message = check.get("errorMessage") or check.get("description") or ""
                verdict.failures.append(f"{era} {key}: {check['status']}: {message}")
        if all(check.get("status") == "SKIPPED" for check in checks):
            note = "skipped by the suite itself"
        else:
            note = f"{listed} HTTP-only checks fail as expected" if listed else ""
        verdict.expected += listed
        verdict.rows.append((era, scenario, f"{passed} / {len(scored)}", note))


def expected_failures() -> frozenset[str]:
    """The `scenario:check` entries of expected-failures.yml (`- scenario:check` lines)."""
    text = (HERE / "expected-failures.yml").read_text(encoding="utf-8")
    return frozenset(re.findall(r"^\s*-\s*(\S+:\S+)\s*$", text, flags=re.MULTILINE))


# -- the server under test ----------------------------------------------------------------------


@contextlib.contextmanager
def serving(transport: str, work: Path, verdict: Verdict) -> Iterator[str]:
    """The server (over stdio: behind the bridge), its URL, then its stop and exit status."""
    env = {key: value for key, value in os.environ.items() if key not in AUTH_VARIABLES}
    env.update(
        {
            "XDG_STATE_HOME": str(work / "state"),  # the task store: this run's own
            "MRTR_HTTP_SSE_POLL_SECONDS": SSE_POLL_SECONDS,
            "PYTHONUNBUFFERED": "1",
        }
    )
    serve = [sys.executable, str(HERE / "serve.py")]
    if transport == "stdio":
        command = [sys.executable, str(HERE / "stdio_bridge.py"), "--", *serve]
    else:
        command = [*serve, "http", "--host", "127.0.0.1", "--port", "0"]
    log_path = work / "server.log"
    with log_path.open("w", encoding="utf-8") as log:
        process = subprocess.Popen(
            command,
            cwd=PROJECT_ROOT,
            env=env,
            stdout=subprocess.PIPE if transport == "stdio" else log,
            stderr=log,
            text=True,
        )
        try:
            url = _url_of(process, transport, log_path)
            yield url
            if transport == "stdio":
                for violation in _bridge_status(url).get("violations", []):
                    verdict.failures.append(f"stdio rule broken: {violation}")
        finally:
            status = _stop(process)
    if status != 0:
        tail = log_path.read_text(encoding="utf-8")[-3000:]
        verdict.failures.append(f"the {transport} server exited {status}:\n{tail}")


def _url_of(process: subprocess.Popen[str], transport: str, log_path: Path) -> str:
    if transport == "stdio":
        assert process.stdout is not None
        line = process.stdout.readline().strip()  # the bridge prints its URL, then nothing
        if line.startswith("http://"):
            return line
    else:
        deadline = time.monotonic() + SERVER_START_SECONDS
        while time.monotonic() < deadline and process.poll() is None:
            found = LISTENING.search(log_path.read_text(encoding="utf-8"))
            if found:
                return found.group(1)
            time.sleep(0.1)
    raise RuntimeError(f"the {transport} server did not start:\n{_tail(log_path)}")


def _bridge_status(url: str) -> Mapping[str, Any]:
    base = url.rsplit("/", 1)[0]
    with urllib.request.urlopen(f"{base}/adapter/status", timeout=10) as response:  # noqa: S310
        status: dict[str, Any] = json.load(response)
    return status


def _stop(process: subprocess.Popen[str]) -> int:
    """SIGTERM (the bridge closes every server's stdin), then the exit status."""
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
    try:
        status = process.wait(timeout=60)
    except subprocess.TimeoutExpired:
        process.kill()
        status = process.wait()
    stdout: IO[str] | None = process.stdout
    if stdout is not None:
        stdout.close()
    return status


def _tail(path: Path) -> str:
    return path.read_text(encoding="utf-8")[-3000:] if path.exists() else ""


# -- the report ---------------------------------------------------------------------------------


def report(verdicts: Sequence[Verdict]) -> None:
    lines = [
        "| transport | era | scenario | checks passed / scored | note |",
        "|---|---|---|---|---|",
    ]
    for verdict in verdicts:
        for era, scenario, counts, note in verdict.rows:
            lines.append(f"| {verdict.transport} | {era} | {scenario} | {counts} | {note} |")
    print("\n".join(lines))  # noqa: T201 -- the report is this script's output
    for verdict in verdicts:
        scenarios = len(verdict.rows)
        if verdict.failures:
            print(f"\n{verdict.transport}: {len(verdict.failures)} failed:")  # noqa: T201
            for failure in verdict.failures:
                print(f"  {failure}")  # noqa: T201
        else:
            print(  # noqa: T201
                f"\n{verdict.transport}: {scenarios} scenarios, nothing failed"
                + (f" ({verdict.expected} expected HTTP-only failures)" if verdict.expected else "")
            )


if __name__ == "__main__":
    raise SystemExit(main())
