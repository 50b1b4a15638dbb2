"""The official MCP conformance suite against a baked project's own Streamable HTTP endpoint.

`<slug> http --port 0` serves the fixtures of tests/peers/conformance_tools.py (dropped into a
freshly baked project, as for the stdio module) and @modelcontextprotocol/conformance (pinned in
tests/peers/package.json, installed by tests/peers/node.py) talks to it directly: no adapter, so
every status code, header and stream the suite checks is the server's own. One CLI process runs
every 2026-07-28 server scenario (`server --suite all --spec-version 2026-07-28`; the extension
scenarios, tasks-* and sep-2640-*, belong to no protocol version and are not part of it), and
the results are read back per scenario from each `checks.json`, as tests/test_conformance.py
does; the scenario lists and the reading are that module's. Then the ten scenarios of the tasks
extension run against the same process, one CLI process each, as that module runs them; the
suite does not score them, so each check is judged here and each must be SUCCESS (the one
exception: tasks-status-notifications, which this suite version skips itself). Over HTTP
nothing is left out of them either: tasks-request-headers' Mcp-Method / Mcp-Name checks pass.

Over HTTP nothing is set aside and nothing is expected to fail: every scenario of the era,
the transport's own included (Host/Origin validation against DNS rebinding, the
Mcp-Method/Mcp-Name and Mcp-Param headers of SEP-2243 with their HTTP statuses, several
concurrent streams, progress on an SSE stream), passes with no failure and no warning. (The
stdio module's expected failures are all HTTP checks a stdio server cannot pass; here they pass.)
The 2025-11-25 era stays a stdio feature: a plain `initialize` over HTTP must get HTTP 400 and
an error naming 2026-07-28.

The server's log must show no traceback (protocol_error_job ends its task with a JSON-RPC
error, an answer rather than a crash, which is not logged whole), and SIGTERM must stop it
with status 0. The module
writes a table, scenario | checks passed / total | note, to `scenario-table.md` in its tmp
directory and prints it from `test_scenario_table` (visible with `pytest -rA`); its note is
what the suite reported without scoring it (INFO checks; for a tasks scenario, that the suite
does not score it, or skipped it). The server gets a per-user state directory of its own
(`XDG_STATE_HOME`), so the default task store holds this run's tasks only.
"""

from __future__ import annotations

import itertools
import json
import re
import sys
import urllib.error
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import pytest
from peers.node import NodePeers, PeersUnavailableError, ensure_node_peers
from peers.project import BakedProject, bake, serve_http
from test_conformance import (
    HTTP_SCENARIOS,
    MODERN,
    SCENARIOS,
    TASKS_SCENARIOS,
    ScenarioRun,
    _read_checks,
    _run_era,
    assert_tasks_run_passed,
    run_tasks_scenarios,
    tasks_note,
)

#: Every 2026-07-28 server scenario of the pinned suite (`conformance list --server`).
ERA_SCENARIOS = (*SCENARIOS[MODERN], *HTTP_SCENARIOS[MODERN])
#: Their probes are raw HTTP requests the suite does not schema-check (no wire-schema-valid).
UNOBSERVED = ("server-stateless", "dns-rebinding-protection", "server-sse-multiple-streams")

LEGACY_INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-11-25",
        "capabilities": {},
        "clientInfo": {"name": "legacy-probe", "version": "1.0.0"},
    },
}
#: 2026-07-28 basic/index "Error Codes": UnsupportedProtocolVersionError.
UNSUPPORTED_PROTOCOL_VERSION = -32022
#: Where each record of the server's log begins (logging's default asctime, then the level).
LOG_RECORD = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} ", re.MULTILINE)


@dataclass(frozen=True)
class HttpSuite:
    runs: Mapping[str, ScenarioRun]  # scenario -> its run
    output: str  # the CLI's
    legacy_initialize: tuple[int, dict[str, Any]]  # HTTP status, JSON-RPC response
    server_log: str  # its end, for messages
    server_log_whole: str
    server_exit: int
    table: str

    def run(self, scenario: str) -> ScenarioRun:
        found = self.runs.get(scenario)
        assert found is not None, f"{scenario} did not run:\n{self.output[-3000:]}"
        return found


def _post(url: str, message: Mapping[str, Any]) -> tuple[int, dict[str, Any]]:
    """POST one JSON-RPC message as a bare HTTP client would; the status and the JSON body."""
    request = urllib.request.Request(  # noqa: S310 (our own loopback server)
        url,
        data=json.dumps(message).encode(),
        headers={"Content-Type": "application/json", "Accept": "application/json"},
        method="POST",
    )
    try:
        with urllib.request.urlopen(request, timeout=30) as response:  # noqa: S310
            return int(response.status), json.load(response)
    except urllib.error.HTTPError as error:
        return error.code, json.load(error)


def _info(run: ScenarioRun) -> str:
    """What the suite observed without scoring it, e.g. that streams came back as JSON."""
    notes = [
        str(check["details"].get("message") or check["id"])
        if isinstance(check.get("details"), dict)
        else check["id"]
        for check in run.checks
        if check["status"] == "INFO"
    ]
    return "; ".join(notes)


def _table(runs: Mapping[str, ScenarioRun]) -> str:
    lines = ["| scenario | checks passed / total | note |", "|---|---|---|"]
    for scenario in (*ERA_SCENARIOS, *TASKS_SCENARIOS):
        run = runs.get(scenario)
        if run is None:
            lines.append(f"| {scenario} | - | did not run |")
            continue
        note = tasks_note(run) if scenario in TASKS_SCENARIOS else _info(run)
        lines.append(f"| {scenario} | {run.passed()} / {run.scored()} | {note} |")
    return "\n".join(lines) + "\n"


@pytest.fixture(scope="module")
def node_peers() -> NodePeers:
    try:
        return ensure_node_peers()
    except PeersUnavailableError as error:
        pytest.fail(f"cannot install the conformance peer: {error}")


@pytest.fixture(scope="module")
def fixture_project(tmp_path_factory: pytest.TempPathFactory) -> BakedProject:
    project = bake(tmp_path_factory.mktemp("conformance-http"), project_name="Conformance Peer")
    project.add_conformance_tools()
    return project


@pytest.fixture(scope="module")
def suite(
    node_peers: NodePeers, fixture_project: BakedProject, tmp_path_factory: pytest.TempPathFactory
) -> HttpSuite:
    """The whole era against one `http` process, a legacy probe, then SIGTERM."""
    work = tmp_path_factory.mktemp("suite-http")
    state = {"XDG_STATE_HOME": str(work / "state")}  # the default task store: this run's own
    with serve_http(fixture_project, work / "server.log", state) as server:
        output = _run_era(node_peers, server.url, MODERN, work / MODERN)
        tasks = run_tasks_scenarios(node_peers, server.url, work / "tasks")
        legacy = _post(server.url, LEGACY_INITIALIZE)
        server_exit = server.stop()
        log = server.log()
        whole = server.log_path.read_text(encoding="utf-8", errors="replace")
    runs = {
        scenario: run for (_, scenario), run in _read_checks(work / MODERN, MODERN, output).items()
    }
    runs.update(tasks)
    table = _table(runs)
    (work / "scenario-table.md").write_text(table, encoding="utf-8")
    return HttpSuite(runs, output, legacy, log, whole, server_exit, table)


# -- the scenarios -----------------------------------------------------------------------------


@pytest.mark.parametrize("scenario", ERA_SCENARIOS)
def test_scenario_passes(scenario: str, suite: HttpSuite) -> None:
    run = suite.run(scenario)

    assert run.checks, run.report()
    assert run.problems() == [], run.report()
    assert run.passed() > 0, run.report()
    wire = [check["status"] for check in run.checks if check["id"] == "wire-schema-valid"]
    assert wire == ([] if scenario in UNOBSERVED else ["SUCCESS"]), run.report()


@pytest.mark.parametrize("scenario", TASKS_SCENARIOS)
def test_tasks_scenario_passes(scenario: str, suite: HttpSuite) -> None:
    assert_tasks_run_passed(suite.run(scenario))  # over HTTP, nothing listed


def test_every_scenario_of_the_era_and_of_tasks_runs(suite: HttpSuite) -> None:
    assert set(suite.runs) == {*ERA_SCENARIOS, *TASKS_SCENARIOS}


def test_a_2025_11_25_initialize_gets_400_naming_the_supported_version(suite: HttpSuite) -> None:
    status, body = suite.legacy_initialize

    assert status == 400, body
    assert body["id"] == 1
    assert body["error"]["code"] == UNSUPPORTED_PROTOCOL_VERSION, body
    assert MODERN in body["error"]["data"]["supported"], body
    assert MODERN in body["error"]["message"], body


def _tracebacks(log: str) -> list[str]:
    """The records of `log` that hold a traceback, each from its first line to its last."""
    starts = sorted({0, *(match.start() for match in LOG_RECORD.finditer(log)), len(log)})
    records = [log[start:end] for start, end in itertools.pairwise(starts)]
    return [record.strip() for record in records if "Traceback" in record]


def test_server_logged_no_traceback_and_stopped_cleanly(suite: HttpSuite) -> None:
    tracebacks = _tracebacks(suite.server_log_whole)

    assert tracebacks == [], "\n\n".join(tracebacks)
    assert suite.server_exit == 0, suite.server_log


def test_scenario_table(suite: HttpSuite) -> None:
    rows = [
        line for line in suite.table.splitlines() if line.startswith("| ") and "---" not in line
    ]

    assert len(rows) - 1 == len(ERA_SCENARIOS) + len(TASKS_SCENARIOS)
    sys.stdout.write("\n" + suite.table)  # shown by `pytest -rA`
