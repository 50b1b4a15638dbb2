"""The official MCP conformance suite against a baked project's real stdio server, in both eras.

@modelcontextprotocol/conformance 0.2.0-alpha.12 (pinned in tests/peers/package.json) runs on
Node 22, both installed once into .cache/peers by tests/peers/node.py. Its server harness speaks
only HTTP, so the bridge every generated project ships (`tests/conformance/stdio_bridge.py`)
bridges it to `python -m <package>`, which serves the project's conformance fixtures
(`tests/conformance/fixtures.py`) dropped into its tools.

One adapter serves the whole module: 2026-07-28 traffic shares one stateless child; each
2025-11-25 `initialize` gets a session and a fresh child of its own. The CLI runs each era's
scenarios in one Node process (`server --suite all --spec-version <era>`: every scenario of the
protocol timeline that applies at that version, extensions left out), which keeps this module
well inside its time budget; the results are read back per scenario from each `checks.json`.

Every server scenario `conformance list` gives for an era runs, and each must pass with no
failure and no warning, except:
- checks in the project's tests/conformance/expected-failures.yml: only checks that test HTTP
  itself (a status code, a header), each with its reason there and its JSON-RPC half asserted
  here (JSONRPC_HALF);
  listing a check that passes fails the module (a stale entry);
- the scenarios in HTTP_SCENARIOS, which run (the CLI has no way to leave one out of a suite)
  but whose results are not asserted, because they test the Streamable HTTP transport, which
  here is the adapter, not the server: Host/Origin validation against DNS rebinding, the
  Mcp-Method/Mcp-Name and Mcp-Param request headers of SEP-2243, SSE polling and resumption
  (SEP-1699), several concurrent SSE streams. A stdio server has no headers, no status codes and
  no streams to test; tests/interop/test_conformance_http.py asserts every one of them against the
  project's own Streamable HTTP transport (`<slug> http`), with no adapter.

The extension scenarios belong to no protocol version and are part of neither era's run. The
ten of the tasks extension (`io.modelcontextprotocol/tasks`, SEP-2663: TASKS_SCENARIOS) run
after the eras, one CLI process each (`server --scenario <name>`, which runs an extension
scenario at the 2026-07-28 wire), against the same stdio server. The suite's
requirements/2026-07-28.yaml runs them without scoring them (`not_scored`, reason
`extension`), so the suite's exit status says nothing about them: each check is judged here,
and each must be SUCCESS, stricter than for the eras (no INFO, no SKIPPED), with two
exceptions: tasks-status-notifications, which this suite version skips itself (its one check
is SKIPPED, saying its harness is pending; tests/runtime covers notifications/tasks), and the
two checks of tasks-request-headers that compare HTTP headers with the body, listed in
that file like the others (TASKS_HTTP_ONLY). What the suite records
without judging it is asserted too where its description says MUST (TASKS_DETAILS: a cancelled
slow_compute ends `cancelled`). The three of the skills extension (`io.modelcontextprotocol/
skills`, SEP-2640: SKILLS_SCENARIOS) run the same way, against the skill the project ships
(`skills/multi-round-tool`, with a `references/` folder for the directory checks), and every
one of their checks must be SUCCESS too: EXTENSION_SCENARIOS are the two together.

Throughout, the adapter watches every child's stdout for what a stdio server must never write
(its docstring lists the rules, per era), and each child must exit 0 when its stdin closes. The
module writes a table, scenario | era | checks passed / total, to `scenario-table.md` in its tmp
directory and prints it from `test_scenario_table` (visible with `pytest -rA`), the tasks
scenarios included. Each server run gets a per-user state directory of its own
(`XDG_STATE_HOME`), where the default task store lives: no task of one run is found, or
resumed, by the next.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import urllib.error
import urllib.request
from collections.abc import Collection, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import pytest
from peers.node import NodePeers, PeersUnavailableError, ensure_node_peers
from peers.project import BakedProject, bake

REPO = Path(__file__).resolve().parents[2]
#: The project's conformance files (no Jinja in these two: the template's are the bake's).
PROJECT_CONFORMANCE = REPO / "{{cookiecutter.project_slug}}" / "tests" / "conformance"
ADAPTER = PROJECT_CONFORMANCE / "stdio_bridge.py"
EXPECTED_FAILURES = PROJECT_CONFORMANCE / "expected-failures.yml"

MODERN = "2026-07-28"
LEGACY = "2025-11-25"
ERAS = (MODERN, LEGACY)

MRTR_SCENARIOS = tuple(
    f"input-required-result-{name}"
    for name in (
        "basic-elicitation",
        "basic-sampling",
        "basic-list-roots",
        "request-state",
        "multiple-input-requests",
        "multi-round",
        "missing-input-response",
        "non-tool-request",
        "result-type",
        "unsupported-methods",
        "tampered-state",
        "capability-check",
        "ignore-extra-params",
        "validate-input",
    )
)
STATELESS = "server-stateless"

#: In both eras (`conformance list` tags each with 2025-11-25 and 2026-07-28).
BOTH_ERAS = (
    "completion-complete",
    "tools-list",
    "tools-call-simple-text",
    "tools-call-image",
    "tools-call-audio",
    "tools-call-embedded-resource",
    "tools-call-mixed-content",
    "tools-call-error",
    "tools-call-with-progress",
    "json-schema-2020-12",
    "resources-list",
    "resources-read-text",
    "resources-read-binary",
    "resources-templates-read",
    "prompts-list",
    "prompts-get-simple",
    "prompts-get-with-args",
    "prompts-get-embedded-resource",
    "prompts-get-with-image",
)

#: The scenarios whose checks are asserted, per era.
SCENARIOS: Mapping[str, tuple[str, ...]] = {
    MODERN: (
        STATELESS,
        *BOTH_ERAS,
        "sep-2164-resource-not-found",
        "caching",
        *MRTR_SCENARIOS,
    ),
    LEGACY: (
        "server-initialize",
        "server-session-lifecycle",
        "ping",
        "logging-set-level",
        *BOTH_ERAS,
        "tools-call-with-logging",
        "tools-call-sampling",
        "tools-call-elicitation",
        "elicitation-sep1034-defaults",
        "elicitation-sep1330-enums",
        "resources-subscribe",
        "resources-unsubscribe",
    ),
}

#: Scenarios that test the HTTP transport itself (see the module docstring), per era.
HTTP_SCENARIOS: Mapping[str, tuple[str, ...]] = {
    MODERN: (
        "dns-rebinding-protection",
        "http-header-validation",
        "http-custom-header-server-validation",
        "server-sse-multiple-streams",
    ),
    LEGACY: ("dns-rebinding-protection", "server-sse-polling", "server-sse-multiple-streams"),
}

#: For each HTTP-only check in expected-failures.yml: the JSON-RPC error code the server must
#: still have answered. None: the scenario checks that half separately (and it passes);
#: -32022 for the header check: stdio has no headers, so _meta's (unsupported) version rules.
JSONRPC_HALF: Mapping[str, int | None] = {
    "sep-2575-http-server-meta-invalid-400": -32602,
    "sep-2575-http-server-unsupported-version-400": None,
    "sep-2575-http-server-header-mismatch-400": -32022,
    "sep-2575-missing-capability-http-400": -32021,
    "sep-2575-http-server-method-not-found-404-initialize": -32601,
    "sep-2575-http-server-method-not-found-404-ping": -32601,
    "sep-2575-http-server-method-not-found-404-logging-setlevel": -32601,
    "sep-2575-http-server-method-not-found-404-resources-subscribe": -32601,
    "sep-2575-http-server-method-not-found-404-resources-unsubscribe": -32601,
    "sep-2575-http-server-method-not-found-404": -32601,
}

#: The server-stateless checks that apply to stdio: each must run and succeed, not just not fail.
STDIO_CHECKS = (
    "sep-2575-request-meta-invalid-missing-meta",  # -32602
    "sep-2575-request-meta-invalid-missing-protocol-version",  # -32602
    "sep-2575-request-meta-invalid-missing-client-capabilities",  # -32602
    "sep-2575-request-meta-client-info-optional",
    "sep-2575-server-implements-discover",
    "sep-2575-server-identifies-in-result-meta",
    "sep-2575-server-declares-prompts-in-discover",
    "sep-2575-discover-capabilities-match-handlers",
    "sep-2575-server-unsupported-version-error",  # -32022, data.supported / data.requested
    "sep-2575-server-rejects-undeclared-capability",  # -32021, data.requiredCapabilities
    "sep-2575-http-server-no-independent-requests-on-stream",  # test_streaming_elicitation
    "sep-2575-server-no-log-without-loglevel",  # test_logging_tool
    "sep-2575-http-server-error-jsonrpc-id",
    # subscriptions/listen: acknowledged first, tagged, filtered, list changes delivered
    "sep-2575-server-sends-subscription-ack",
    "sep-2575-server-tags-subscription-id",
    "sep-2575-server-honors-notification-filter",
    "sep-2575-server-sends-prompts-list-changed-on-subscription",  # test_trigger_prompt_change
    "sep-2575-server-sends-tools-list-changed-on-subscription",  # test_trigger_tool_change
)

#: Their probes are raw HTTP requests the suite does not schema-check (no wire-schema-valid).
UNOBSERVED = ("server-stateless", "server-session-lifecycle")

#: The tasks extension's server scenarios (`conformance list`: tagged `extension`).
TASKS_SCENARIOS = (
    "tasks-lifecycle",
    "tasks-capability-negotiation",
    "tasks-wire-fields",
    "tasks-request-state-removal",
    "tasks-mrtr-input",
    "tasks-request-headers",
    "tasks-dispatch-and-envelope",
    "tasks-status-notifications",
    "tasks-required-task-error",
    "tasks-mrtr-composition",
)
#: The skills extension's server scenarios (SEP-2640): skills/list and skills/get, the SKILL.md
#: resources, resources/directory/read (the project declares directoryRead).
SKILLS_SCENARIOS = (
    "sep-2640-skills-enumeration",
    "sep-2640-skills-manifest",
    "sep-2640-skills-directory",
)
#: Every extension scenario: each runs in a CLI process of its own, every check judged here.
EXTENSION_SCENARIOS = TASKS_SCENARIOS + SKILLS_SCENARIOS
#: The suite's own skip: its one check, SKIPPED ("pending subscriptions/listen rewrite").
TASKS_SUITE_SKIPS = {"tasks-status-notifications": "tasks-status-notifications"}
#: The checks of tasks-request-headers that compare an HTTP header with the body (SEP-2243,
#: SEP-2663 "Streamable HTTP: Routing Headers"), listed in expected-failures.yml: a stdio
#: server has no headers, so it answers the body, and what the suite then reports is asserted
#: (the start of the check's errorMessage): the request was answered, not refused.
TASKS_HTTP_ONLY: Mapping[str, str] = {
    "tasks-headers-reject-mismatched-method": (
        "tools/call with Mcp-Method: tasks/get returned a successful response"
    ),
    "sep-2663-server-rejects-mismatched-mcp-name-on-tasks-get": (
        "tasks/get with mismatched Mcp-Name returned a result"
    ),
}
TASKS_HEADERS = "tasks-request-headers"
#: What the suite records in a check's details but does not judge, and is judged here: its
#: description says a running slow_compute "MUST settle to `cancelled` (not
#: `completed`/`failed`) when `tasks/cancel` arrives" (scenario, check id -> detail, value).
TASKS_DETAILS: Mapping[tuple[str, str], tuple[str, object]] = {
    ("tasks-lifecycle", "sep-2663-cancel-ack-empty-result"): ("statusAfterCancel", "cancelled"),
}
#: Per scenario, for the CLI (`--timeout`) and for its process: the longest (tasks-lifecycle)
#: waits for several tasks, each polled for up to 10 s.
TASKS_SCENARIO_TIMEOUT_SECONDS = 180

#: Generous per era: on a loaded 2-core machine the 2025-11-25 run (a server start per
#: session) takes about a minute.
ERA_TIMEOUT_SECONDS = 600
PROBLEM_STATUSES = ("FAILURE", "WARNING")
SCORED_STATUSES = ("SUCCESS", "FAILURE", "WARNING")


# -- the peers ---------------------------------------------------------------------------------


class Adapter:
    """The HTTP->stdio bridge running the baked server, as a subprocess."""

    def __init__(
        self, project: BakedProject, log_path: Path, extra_env: Mapping[str, str] | None = None
    ) -> None:
        env = {key: os.environ[key] for key in ("HOME", "PATH", "LANG") if key in os.environ}
        env.update(project.server_env(extra_env))
        self._log: IO[str] = log_path.open("w", encoding="utf-8")
        self.log_path = log_path
        self.process = subprocess.Popen(
            [sys.executable, str(ADAPTER), "--", *project.server_command()],
            stdout=subprocess.PIPE,
            stderr=self._log,
            env=env,
            cwd=project.root,
            text=True,
        )
        assert self.process.stdout is not None
        self.url = self.process.stdout.readline().strip()
        if not self.url.startswith("http://127.0.0.1:"):
            self.stop()
            raise AssertionError(f"the adapter did not start:\n{self.log()}")

    def status(self) -> dict[str, Any]:
        base = self.url.rsplit("/", 1)[0]
        with urllib.request.urlopen(f"{base}/adapter/status", timeout=10) as response:  # noqa: S310
            status: dict[str, Any] = json.load(response)
        return status

    def log(self) -> str:
        if not self._log.closed:
            self._log.flush()
        return self.log_path.read_text(encoding="utf-8")[-6000:]

    def stop(self) -> int:
        """SIGTERM: the adapter closes every server's stdin and reports how that went."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        try:
            returncode = self.process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.process.kill()
            returncode = self.process.wait()
        if self.process.stdout is not None:
            self.process.stdout.close()
        self._log.close()
        return returncode


@dataclass(frozen=True)
class ScenarioRun:
    scenario: str
    era: str
    checks: list[dict[str, Any]]
    output: str

    def problems(self) -> list[dict[str, Any]]:
        return [check for check in self.checks if check["status"] in PROBLEM_STATUSES]

    def not_succeeded(self) -> list[dict[str, Any]]:
        """The tasks judgment: every check that is not SUCCESS but the suite's own skip."""
        skip = TASKS_SUITE_SKIPS.get(self.scenario)
        return [
            check
            for check in self.checks
            if check["status"] != "SUCCESS"
            and not (check["status"] == "SKIPPED" and check["id"] == skip)
        ]

    def passed(self) -> int:
        return sum(check["status"] == "SUCCESS" for check in self.checks)

    def scored(self) -> int:
        return sum(check["status"] in SCORED_STATUSES for check in self.checks)

    def report(self) -> str:
        lines = [f"{self.scenario} at {self.era}:"]
        for check in self.not_succeeded():
            lines.append(f"  {check['status']} {check['id']}: {check.get('errorMessage')}")
            lines.append(f"    details: {json.dumps(check.get('details'))[:1500]}")
        own = self.output.split(f"=== Running scenario: {self.scenario} ===")
        lines.append(own[1].split("=== Running scenario:")[0][-3000:] if len(own) > 1 else "")
        return "\n".join(lines)


@dataclass(frozen=True)
class SuiteRuns:
    runs: Mapping[tuple[str, str], ScenarioRun]  # (era, scenario) -> its run
    outputs: Mapping[str, str]  # era -> the CLI's output
    adapter_status: Mapping[str, Any]
    adapter_exit: int
    adapter_log: str
    table: str

    def run(self, era: str, scenario: str) -> ScenarioRun:
        found = self.runs.get((era, scenario))
        assert found is not None, f"{scenario} did not run at {era}:\n{self.outputs[era][-3000:]}"
        return found


def _run_era(peers: NodePeers, url: str, era: str, output_dir: Path) -> str:
    command = peers.conformance_command(
        "server", "--url", url, "--suite", "all", "--spec-version", era, "-o", str(output_dir)
    )
    env = {**os.environ, "NO_COLOR": "1", "FORCE_COLOR": "0"}
    done = subprocess.run(
        command,
        capture_output=True,
        text=True,
        timeout=ERA_TIMEOUT_SECONDS,
        env=env,
        check=False,
    )
    # Its exit status is 1 whenever a check failed, the HTTP scenarios' included: the checks
    # are judged one by one below. A run that never reached its summary crashed.
    assert "Total:" in done.stdout, f"the {era} run did not finish:\n{done.stdout}{done.stderr}"
    return done.stdout + done.stderr


def run_extension_scenarios(peers: NodePeers, url: str, output_dir: Path) -> dict[str, ScenarioRun]:
    """Each extension scenario in a CLI process of its own, in order; its run, by scenario."""
    runs: dict[str, ScenarioRun] = {}
    for scenario in EXTENSION_SCENARIOS:
        command = peers.conformance_command(
            "server",
            "--url",
            url,
            "--scenario",
            scenario,
            "--timeout",
            str(TASKS_SCENARIO_TIMEOUT_SECONDS * 1000),
            "-o",
            str(output_dir / scenario),
        )
        env = {**os.environ, "NO_COLOR": "1", "FORCE_COLOR": "0"}
        done = subprocess.run(
            command,
            capture_output=True,
            text=True,
            timeout=TASKS_SCENARIO_TIMEOUT_SECONDS + 60,
            env=env,
            check=False,
        )
        # As for the eras: exit status 1 on any failure; a run with no results crashed.
        output = f"=== Running scenario: {scenario} ===\n{done.stdout}{done.stderr}"
        assert "Test Results:" in done.stdout, f"{scenario} did not finish:\n{output}"
        found = _read_checks(output_dir / scenario, MODERN, output)
        assert list(found) == [(MODERN, scenario)], f"{scenario}: {sorted(found)}\n{output}"
        runs[scenario] = found[(MODERN, scenario)]
    return runs


def extension_note(run: ScenarioRun) -> str:
    """The table's note for an extension scenario: judged here; or the suite's own skip."""
    if any(check["status"] == "SKIPPED" for check in run.checks):
        return "extension: skipped by the suite itself (its notifications/tasks harness is pending)"
    return "extension: not scored by the suite, every check judged here"


def _read_checks(output_dir: Path, era: str, output: str) -> dict[tuple[str, str], ScenarioRun]:
    runs: dict[tuple[str, str], ScenarioRun] = {}
    for checks_file in output_dir.glob("server-*/checks.json"):
        match = re.fullmatch(r"server-(.+)-\d{4}-\d\d-\d\dT[\d-]+Z", checks_file.parent.name)
        assert match, checks_file
        scenario = match.group(1)
        runs[(era, scenario)] = ScenarioRun(
            scenario, era, json.loads(checks_file.read_text()), output
        )
    return runs


def _table(runs: Mapping[tuple[str, str], ScenarioRun]) -> str:
    listed = _listed_checks()
    lines = ["| scenario | era | checks passed / total | note |", "|---|---|---|---|"]
    for era in ERAS:
        for scenario in (*SCENARIOS[era], *HTTP_SCENARIOS[era]):
            run = runs.get((era, scenario))
            if scenario in HTTP_SCENARIOS[era]:
                lines.append(f"| {scenario} | {era} | - | not asserted: tests HTTP itself |")
                continue
            if run is None:
                lines.append(f"| {scenario} | {era} | - | did not run |")
                continue
            expected = [c for c in run.problems() if f"{scenario}:{c['id']}" in listed]
            note = f"{len(expected)} HTTP-only checks fail as expected" if expected else ""
            lines.append(f"| {scenario} | {era} | {run.passed()} / {run.scored()} | {note} |")
    for scenario in EXTENSION_SCENARIOS:
        run = runs.get((MODERN, scenario))
        if run is None:
            lines.append(f"| {scenario} | {MODERN} | - | did not run |")
            continue
        expected = [c for c in run.problems() if f"{scenario}:{c['id']}" in listed]
        note = extension_note(run)
        if expected:
            note += f"; {len(expected)} HTTP-only checks fail as expected"
        lines.append(f"| {scenario} | {MODERN} | {run.passed()} / {run.scored()} | {note} |")
    return "\n".join(lines) + "\n"


@pytest.fixture(scope="module")
def node_peers() -> NodePeers:
    try:
        return ensure_node_peers()
    except PeersUnavailableError as error:
        pytest.fail(f"cannot install the conformance peer: {error}")


@pytest.fixture(scope="module")
def fixture_project(tmp_path_factory: pytest.TempPathFactory) -> BakedProject:
    project = bake(tmp_path_factory.mktemp("conformance"), project_name="Conformance Peer")
    project.add_conformance_tools()
    return project


@pytest.fixture(scope="module")
def suite(
    node_peers: NodePeers, fixture_project: BakedProject, tmp_path_factory: pytest.TempPathFactory
) -> SuiteRuns:
    """Both eras through one adapter; every child closed and its exit status known at the end."""
    work = tmp_path_factory.mktemp("suite")
    state = {"XDG_STATE_HOME": str(work / "state")}  # the default task store: this run's own
    adapter = Adapter(fixture_project, work / "adapter.log", state)
    runs: dict[tuple[str, str], ScenarioRun] = {}
    outputs: dict[str, str] = {}
    try:
        for era in ERAS:
            outputs[era] = _run_era(node_peers, adapter.url, era, work / era)
            runs.update(_read_checks(work / era, era, outputs[era]))
        tasks = run_extension_scenarios(node_peers, adapter.url, work / "extensions")
        runs.update({(MODERN, scenario): run for scenario, run in tasks.items()})
        status = adapter.status()
    finally:
        adapter_exit = adapter.stop()
    table = _table(runs)
    (work / "scenario-table.md").write_text(table, encoding="utf-8")
    return SuiteRuns(runs, outputs, status, adapter_exit, adapter.log(), table)


# -- the scenarios -----------------------------------------------------------------------------


def _listed_checks() -> set[str]:
    """The `scenario:check-id` entries of expected-failures.yml (one `- a:b` per line)."""
    pattern = re.compile(r"^\s*-\s*(\S+:\S+)\s*$")
    lines = EXPECTED_FAILURES.read_text(encoding="utf-8").splitlines()
    return {match.group(1) for line in lines if (match := pattern.match(line))}


@pytest.mark.parametrize(
    ("era", "scenario"), [(era, scenario) for era in ERAS for scenario in SCENARIOS[era]]
)
def test_scenario_passes(era: str, scenario: str, suite: SuiteRuns) -> None:
    run = suite.run(era, scenario)
    listed = _listed_checks()

    assert run.checks, run.report()
    unexpected = [c for c in run.problems() if f"{scenario}:{c['id']}" not in listed]
    assert unexpected == [], run.report()
    wire = [check["status"] for check in run.checks if check["id"] == "wire-schema-valid"]
    assert wire == ([] if scenario in UNOBSERVED else ["SUCCESS"]), run.report()


def assert_extension_run_passed(run: ScenarioRun, listed: Collection[str] = ()) -> None:
    """Every check SUCCESS, but the suite's own skip and the `scenario:check` ids `listed`."""
    assert run.checks, run.report()
    unexpected = [c for c in run.not_succeeded() if f"{run.scenario}:{c['id']}" not in listed]
    assert unexpected == [], run.report()
    if run.scenario in TASKS_SUITE_SKIPS:
        assert [(c["id"], c["status"]) for c in run.checks] == [
            (TASKS_SUITE_SKIPS[run.scenario], "SKIPPED")
        ], run.report()
        return
    assert run.passed() > 0, run.report()
    wire = [check["status"] for check in run.checks if check["id"] == "wire-schema-valid"]
    assert wire == ["SUCCESS"], run.report()
    for (scenario, check_id), (detail, value) in TASKS_DETAILS.items():
        if scenario == run.scenario:
            details = [c.get("details") or {} for c in run.checks if c["id"] == check_id]
            assert [d.get(detail) for d in details] == [value], f"{check_id}: {details}"


@pytest.mark.parametrize("scenario", EXTENSION_SCENARIOS)
def test_extension_scenario_passes(scenario: str, suite: SuiteRuns) -> None:
    assert_extension_run_passed(suite.run(MODERN, scenario), _listed_checks())


def test_tasks_header_checks_got_the_body_answered_over_stdio(suite: SuiteRuns) -> None:
    run = suite.run(MODERN, TASKS_HEADERS)

    for check_id, answered in TASKS_HTTP_ONLY.items():
        found = [c for c in run.checks if c["id"] == check_id]
        assert [c["status"] for c in found] == ["FAILURE"], f"{check_id}\n{run.report()}"
        assert str(found[0].get("errorMessage")).startswith(answered), run.report()


def test_every_scenario_of_each_era_runs_and_is_accounted_for(suite: SuiteRuns) -> None:
    for era in ERAS:
        ran = {scenario for (run_era, scenario) in suite.runs if run_era == era}
        extensions = EXTENSION_SCENARIOS if era == MODERN else ()
        assert ran == {*SCENARIOS[era], *HTTP_SCENARIOS[era], *extensions}, era


def test_expected_failures_list_only_http_checks() -> None:
    text = EXPECTED_FAILURES.read_text(encoding="utf-8")
    entries = [line for line in text.splitlines() if line.strip().startswith("- ")]

    assert len(entries) == len(_listed_checks()), "every entry is <scenario>:<check-id>"
    assert sorted(_listed_checks()) == sorted(
        [f"{STATELESS}:{check}" for check in JSONRPC_HALF]
        + [f"{TASKS_HEADERS}:{check}" for check in TASKS_HTTP_ONLY]
    )


def test_expected_failures_are_not_stale(suite: SuiteRuns) -> None:
    """Each listed check still runs and fails: a check that passes comes off the list."""
    for entry in sorted(_listed_checks()):
        scenario, check_id = entry.split(":", 1)
        statuses = {c["status"] for c in suite.run(MODERN, scenario).checks if c["id"] == check_id}
        assert statuses == {"FAILURE"}, f"{entry}: {statuses or 'not run'}"


def test_server_stateless_answers_the_jsonrpc_half_of_its_http_checks(suite: SuiteRuns) -> None:
    run = suite.run(MODERN, STATELESS)

    for check_id in STDIO_CHECKS:
        statuses = {check["status"] for check in run.checks if check["id"] == check_id}
        assert statuses == {"SUCCESS"}, f"{check_id}: {statuses or 'not run'}\n{run.report()}"
    for check in run.checks:
        want = JSONRPC_HALF.get(check["id"])
        if want is not None:
            assert _jsonrpc_code(check) == want, f"{check['id']}: {json.dumps(check)[:1500]}"


def _jsonrpc_code(check: Mapping[str, Any]) -> int | None:
    """The JSON-RPC error code the probe behind `check` received, from its details or message."""
    details = check.get("details") or {}
    response = details.get("response") if isinstance(details, dict) else None
    if isinstance(response, dict) and isinstance(response.get("error"), dict):
        return int(response["error"]["code"])
    found = re.search(r"code (-?\d+)\s*$", check.get("errorMessage") or "")
    return int(found.group(1)) if found else None


def test_servers_broke_no_stdio_rule_and_exited_cleanly(suite: SuiteRuns) -> None:
    status = suite.adapter_status

    assert status["alive"] is True, suite.adapter_log
    assert status["violations"] == [], suite.adapter_log
    # One 2025-11-25 session per connection: the legacy scenarios really ran in that era.
    assert status["sessions"]["opened"] >= len(SCENARIOS[LEGACY]), status
    assert suite.adapter_exit == 0, suite.adapter_log


def test_scenario_table(suite: SuiteRuns) -> None:
    rows = [
        line for line in suite.table.splitlines() if line.startswith("| ") and "---" not in line
    ]

    eras = sum(len(SCENARIOS[e]) + len(HTTP_SCENARIOS[e]) for e in ERAS)
    assert len(rows) - 1 == eras + len(EXTENSION_SCENARIOS)
    sys.stdout.write("\n" + suite.table)  # shown by `pytest -rA`


# -- the adapter's own rules, against a scripted stand-in server -------------------------------
# The assertions above are only as good as the adapter's checks: each rule is shown to catch
# what it names, and the session and stream handling to do what the suite relies on.

SCRIPTED_SERVER = """
import json, sys
for line in sys.stdin:
    message = json.loads(line)
    if "id" not in message or "method" not in message:
        continue
    params = message.get("params") or {}
    for raw in params.get("write", []):
        sys.stdout.write(raw + "\\n")
        sys.stdout.flush()
    result = {"echo": message["method"]}
    if params.get("await_answer"):
        result["answer"] = json.loads(sys.stdin.readline())
    sys.stdout.write(json.dumps({"jsonrpc": "2.0", "id": message["id"], "result": result}) + "\\n")
    sys.stdout.flush()
sys.exit(int(sys.argv[1]) if len(sys.argv) > 1 else 0)
"""

MODERN_META = {
    "io.modelcontextprotocol/protocolVersion": MODERN,
    "io.modelcontextprotocol/clientCapabilities": {},
}


class ScriptedAdapter:
    """The adapter in front of SCRIPTED_SERVER, which writes whatever a request tells it to."""

    def __init__(self, tmp_path: Path, exit_status: int = 0) -> None:
        script = tmp_path / "scripted_server.py"
        script.write_text(SCRIPTED_SERVER, encoding="utf-8")
        self._log = (tmp_path / "adapter.log").open("w", encoding="utf-8")
        self.process = subprocess.Popen(
            [sys.executable, str(ADAPTER), "--", sys.executable, str(script), str(exit_status)],
            stdout=subprocess.PIPE,
            stderr=self._log,
            text=True,
        )
        assert self.process.stdout is not None
        self.url = self.process.stdout.readline().strip()
        self._ids = iter(range(1, 1000))

    def post(
        self, message: Mapping[str, Any], session: str | None = None
    ) -> tuple[int, Mapping[str, str], list[dict[str, Any]]]:
        """POST one message: the status, the headers and the JSON-RPC messages that came back."""
        headers = {
            "Content-Type": "application/json",
            "Accept": "application/json, text/event-stream",
        }
        if session:
            headers["Mcp-Session-Id"] = session
        request = urllib.request.Request(  # noqa: S310 (our own loopback adapter)
            self.url, data=json.dumps(message).encode(), headers=headers, method="POST"
        )
        try:
            with urllib.request.urlopen(request, timeout=30) as response:  # noqa: S310
                return response.status, dict(response.headers), _messages(response.read())
        except urllib.error.HTTPError as error:
            return error.code, dict(error.headers), _messages(error.read())

    def request(
        self, method: str, params: Mapping[str, Any], session: str | None = None
    ) -> tuple[int, Mapping[str, str], list[dict[str, Any]]]:
        message = {"jsonrpc": "2.0", "id": next(self._ids), "method": method, "params": params}
        return self.post(message, session)

    def delete(self, session: str) -> int:
        request = urllib.request.Request(  # noqa: S310
            self.url, headers={"Mcp-Session-Id": session}, method="DELETE"
        )
        try:
            with urllib.request.urlopen(request, timeout=30) as response:  # noqa: S310
                return int(response.status)
        except urllib.error.HTTPError as error:
            return error.code

    def violations(self) -> list[str]:
        base = self.url.rsplit("/", 1)[0]
        with urllib.request.urlopen(f"{base}/adapter/status", timeout=10) as response:  # noqa: S310
            violations: list[str] = json.load(response)["violations"]
        return violations

    def stop(self) -> int:
        self.process.send_signal(signal.SIGTERM)
        returncode = self.process.wait(timeout=60)
        assert self.process.stdout is not None
        self.process.stdout.close()
        self._log.close()
        return returncode


def _messages(body: bytes) -> list[dict[str, Any]]:
    text = body.decode("utf-8")
    if not text.strip():
        return []
    if text.lstrip().startswith("{"):
        return [json.loads(text)]
    return [json.loads(line[5:]) for line in text.splitlines() if line.startswith("data:")]


@pytest.fixture
def scripted(tmp_path: Path) -> Iterator[ScriptedAdapter]:
    adapter = ScriptedAdapter(tmp_path)
    try:
        yield adapter
    finally:
        if adapter.process.poll() is None:
            adapter.stop()


def _line(message: Mapping[str, Any]) -> str:
    return json.dumps({"jsonrpc": "2.0", **message})


def _open_session(adapter: ScriptedAdapter, capabilities: Mapping[str, Any]) -> str:
    status, headers, body = adapter.request(
        "initialize", {"protocolVersion": LEGACY, "capabilities": capabilities}
    )
    assert status == 200, body
    return headers["Mcp-Session-Id"]


def test_adapter_counts_a_line_on_stdout_that_is_not_json_rpc(scripted: ScriptedAdapter) -> None:
    status, _, body = scripted.request("tools/list", {"_meta": MODERN_META, "write": ["hello"]})

    assert (status, body[0]["result"]) == (200, {"echo": "tools/list"})
    assert [v for v in scripted.violations() if "non-JSON-RPC" in v], scripted.violations()
    assert scripted.stop() == 1


def test_adapter_counts_a_2026_server_request_and_answers_it_with_an_error(
    scripted: ScriptedAdapter,
) -> None:
    ask = _line({"id": "s1", "method": "sampling/createMessage", "params": {}})
    status, _, body = scripted.request(
        "tools/call", {"_meta": MODERN_META, "write": [ask], "await_answer": True}
    )

    assert status == 200
    assert body[-1]["result"]["answer"]["error"]["code"] == -32603  # never reached a client
    assert [v for v in scripted.violations() if "server-to-client request" in v]


@pytest.mark.parametrize(
    ("meta", "violated"),
    [
        ({}, True),
        ({"io.modelcontextprotocol/logLevel": "error"}, True),
        ({"io.modelcontextprotocol/logLevel": "info"}, False),
    ],
)
def test_adapter_streams_2026_log_messages_only_at_the_requested_level(
    meta: Mapping[str, Any], violated: bool, scripted: ScriptedAdapter
) -> None:
    log = _line({"method": "notifications/message", "params": {"level": "info", "data": "x"}})
    status, headers, body = scripted.request(
        "tools/call", {"_meta": {**MODERN_META, **meta}, "write": [log]}
    )

    assert status == 200
    assert headers["Content-Type"] == "text/event-stream"
    assert [m.get("method") for m in body] == ["notifications/message", None]
    assert bool(scripted.violations()) is violated, scripted.violations()


def test_adapter_streams_progress_of_the_request_and_counts_a_foreign_token(
    scripted: ScriptedAdapter,
) -> None:
    def progress(token: str) -> str:
        params = {"progressToken": token, "progress": 1}
        return _line({"method": "notifications/progress", "params": params})

    meta = {**MODERN_META, "progressToken": "mine"}
    _, _, body = scripted.request("tools/call", {"_meta": meta, "write": [progress("mine")]})
    assert [m.get("method") for m in body] == ["notifications/progress", None]
    assert scripted.violations() == []

    scripted.request("tools/call", {"_meta": meta, "write": [progress("not-active")]})
    assert [v for v in scripted.violations() if "progress for a token" in v]


def test_adapter_gives_each_2025_session_its_own_server_until_delete(
    scripted: ScriptedAdapter,
) -> None:
    first = _open_session(scripted, {})
    second = _open_session(scripted, {})
    assert first != second and re.fullmatch(r"[\x21-\x7e]+", first)

    status, _, body = scripted.request("ping", {}, session=first)
    assert (status, body[0]["result"]) == (200, {"echo": "ping"})
    assert scripted.delete(first) == 200
    assert scripted.request("ping", {}, session=first)[0] == 404  # basic/transports: ended
    assert scripted.request("ping", {}, session="no-such-session")[0] == 404
    assert scripted.delete(first) == 404
    assert scripted.request("ping", {}, session=second)[0] == 200
    assert scripted.violations() == []
    assert scripted.stop() == 0


def test_adapter_relays_a_2025_server_request_and_the_client_answer(
    scripted: ScriptedAdapter,
) -> None:
    session = _open_session(scripted, {"sampling": {}})
    ask = _line({"id": 7, "method": "sampling/createMessage", "params": {}})

    def answer_when_asked() -> None:
        reply = {"jsonrpc": "2.0", "id": 7, "result": {"model": "m"}}
        for _ in range(100):  # until the child has sent its request (ids are the child's)
            if scripted.post(reply, session)[0] == 202:
                return
            threading.Event().wait(0.05)

    answering = threading.Thread(target=answer_when_asked)
    answering.start()
    status, headers, body = scripted.request(
        "tools/call", {"write": [ask], "await_answer": True}, session=session
    )
    answering.join()

    assert (status, headers["Content-Type"]) == (200, "text/event-stream")
    assert body[0]["method"] == "sampling/createMessage"
    assert body[-1]["result"]["answer"] == {"jsonrpc": "2.0", "id": 7, "result": {"model": "m"}}
    assert scripted.violations() == []


def test_adapter_counts_a_2025_request_for_an_undeclared_capability(
    scripted: ScriptedAdapter,
) -> None:
    session = _open_session(scripted, {"sampling": {}})
    ask = _line({"id": 8, "method": "elicitation/create", "params": {}})

    scripted.request("tools/call", {"write": [ask]}, session=session)

    assert [v for v in scripted.violations() if "did not declare 'elicitation'" in v]


def test_adapter_counts_a_2025_log_below_the_session_level(scripted: ScriptedAdapter) -> None:
    session = _open_session(scripted, {})
    scripted.request("logging/setLevel", {"level": "warning"}, session=session)
    log = _line({"method": "notifications/message", "params": {"level": "info", "data": "x"}})
    scripted.request("tools/call", {"write": [log]}, session=session)

    assert [v for v in scripted.violations() if "below the session's level" in v]


def test_adapter_fails_when_a_server_exits_badly(tmp_path: Path) -> None:
    adapter = ScriptedAdapter(tmp_path, exit_status=3)
    adapter.request("tools/list", {"_meta": MODERN_META})

    assert adapter.stop() == 1
