"""The official MCP conformance suite against a baked project's own Streamable HTTP endpoint.

`<slug> http --port 0` serves the project's conformance fixtures (tests/conformance/fixtures.py,
dropped into a freshly baked project's tools, as for the stdio module) and
@modelcontextprotocol/conformance (pinned in tests/peers/package.json, installed by
tests/peers/node.py) talks to it directly: no adapter, so
every status code, header and stream the suite checks is the server's own. One CLI process runs
every 2026-07-28 server scenario (`server --suite all --spec-version 2026-07-28`; the extension
scenarios, tasks-* and sep-2640-*, belong to no protocol version and are not part of it), and
the results are read back per scenario from each `checks.json`, as tests/interop/test_conformance.py
does; the scenario lists and the reading are that module's. Then the ten scenarios of the tasks
extension and the three of the skills extension (sep-2640-*, against the skill the project
ships) run against the same process, one CLI process each, as that module runs them; the suite
does not score them, so each check is judged here and each must be SUCCESS (the one exception:
tasks-status-notifications, which this suite version skips itself). Over HTTP
nothing is left out of them either: tasks-request-headers' Mcp-Method / Mcp-Name checks pass.

Over HTTP nothing is set aside and nothing is expected to fail: every scenario of the era,
the transport's own included (Host/Origin validation against DNS rebinding, the
Mcp-Method/Mcp-Name and Mcp-Param headers of SEP-2243 with their HTTP statuses, several
concurrent streams, progress on an SSE stream), passes with no failure and no warning. (The
stdio module's expected failures are all HTTP checks a stdio server cannot pass; here they pass.)

The 2025-11-25 era runs against the same process, natively: `server --suite all
--spec-version 2025-11-25`, each scenario's client opening a session of its own with
`initialize` (Mcp-Session-Id), its server-to-client requests (sampling, elicitation) on the
request's SSE stream and answered by POST, the session's GET stream, DELETE and the 404 after
it (server-session-lifecycle), SSE priming events (server-sse-multiple-streams), and SSE polling
(server-sse-polling: the server runs with MRTR_HTTP_SSE_POLL_SECONDS=1, so the fixture
`test_reconnection`, which outlasts that, has its POST connection closed mid-call with a `retry`
field, and its result comes on the GET that resumes the stream with Last-Event-ID). Every
scenario of that era passes too, with no failure and no warning; what the suite only reports
(INFO) is the table's note.

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
    EXTENSION_SCENARIOS,
    HTTP_SCENARIOS,
    LEGACY,
    MODERN,
    SCENARIOS,
    ScenarioRun,
    _read_checks,
    _run_era,
    assert_extension_run_passed,
    extension_note,
    run_extension_scenarios,
)

ERAS = (MODERN, LEGACY)
#: Every server scenario of the pinned suite (`conformance list --server`), per era.
ERA_SCENARIOS = {era: (*SCENARIOS[era], *HTTP_SCENARIOS[era]) for era in ERAS}
#: Their probes are raw HTTP requests the suite does not schema-check (no wire-schema-valid).
UNOBSERVED = {
    MODERN: ("server-stateless", "dns-rebinding-protection", "server-sse-multiple-streams"),
    LEGACY: (
        "server-session-lifecycle",
        "dns-rebinding-protection",
        "server-sse-polling",
        "server-sse-multiple-streams",
    ),
}

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
#: Scenarios whose every check is one the suite reports without scoring (INFO), with why.
UNSCORED: Mapping[str, Mapping[str, str]] = {}
#: 2025-11-25 basic/transports "Sending Messages" 6.: the server may close a stream's connection
#: after an event with an id, SHOULD send `retry` first, and the client resumes with
#: Last-Event-ID. The server's poll bound (seconds) under the suite; `test_reconnection` in
#: the project's tests/conformance/fixtures.py outlasts it.
SSE_POLL_SECONDS = "1"
#: Where each record of the server's log begins (logging's default asctime, then the level).
LOG_RECORD = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} ", re.MULTILINE)


@dataclass(frozen=True)
class HttpSuite:
    runs: Mapping[tuple[str, str], ScenarioRun]  # (era, scenario) -> its run
    output: str  # the CLIs'
    legacy_initialize: tuple[int, dict[str, Any], str | None]  # status, response, session id
    server_log: str  # its end, for messages
    server_log_whole: str
    server_exit: int
    table: str

    def run(self, era: str, scenario: str) -> ScenarioRun:
        found = self.runs.get((era, scenario))
        assert found is not None, f"{scenario} did not run at {era}:\n{self.output[-3000:]}"
        return found


def _post(url: str, message: Mapping[str, Any]) -> tuple[int, dict[str, Any], str | None]:
    """POST one JSON-RPC message as a bare HTTP client would; the status, the JSON body and
    the Mcp-Session-Id header."""
    request = urllib.request.Request(  # noqa: S310 (our own loopback server)
        url,
        data=json.dumps(message).encode(),
        headers={"Content-Type": "application/json", "Accept": "application/json"},
        method="POST",
    )
    try:
        with urllib.request.urlopen(request, timeout=30) as response:  # noqa: S310
            return int(response.status), json.load(response), response.headers["mcp-session-id"]
    except urllib.error.HTTPError as error:
        return error.code, json.load(error), error.headers["mcp-session-id"]


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


def _table(runs: Mapping[tuple[str, str], ScenarioRun]) -> str:
    lines = ["| scenario | era | checks passed / total | note |", "|---|---|---|---|"]
    rows = [(era, scenario) for era in ERAS for scenario in ERA_SCENARIOS[era]]
    rows += [(MODERN, scenario) for scenario in EXTENSION_SCENARIOS]
    for era, scenario in rows:
        run = runs.get((era, scenario))
        if run is None:
            lines.append(f"| {scenario} | {era} | - | did not run |")
            continue
        note = extension_note(run) if scenario in EXTENSION_SCENARIOS else _info(run)
        unscored = UNSCORED.get(era, {}).get(scenario)
        if unscored is not None:
            note = f"not scored: {unscored} (the suite: {note})"
        lines.append(f"| {scenario} | {era} | {run.passed()} / {run.scored()} | {note} |")
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
    """Both eras against one `http` process, a legacy probe, then SIGTERM."""
    work = tmp_path_factory.mktemp("suite-http")
    state = {
        "XDG_STATE_HOME": str(work / "state"),  # the default task store: this run's own
        "MRTR_HTTP_SSE_POLL_SECONDS": SSE_POLL_SECONDS,
    }
    runs: dict[tuple[str, str], ScenarioRun] = {}
    outputs = []
    with serve_http(fixture_project, work / "server.log", state) as server:
        for era in ERAS:
            output = _run_era(node_peers, server.url, era, work / era)
            outputs.append(output)
            runs.update(_read_checks(work / era, era, output))
        tasks = run_extension_scenarios(node_peers, server.url, work / "extensions")
        legacy = _post(server.url, LEGACY_INITIALIZE)
        server_exit = server.stop()
        log = server.log()
        whole = server.log_path.read_text(encoding="utf-8", errors="replace")
    runs.update({(MODERN, scenario): run for scenario, run in tasks.items()})
    output = "\n".join(outputs)
    table = _table(runs)
    (work / "scenario-table.md").write_text(table, encoding="utf-8")
    return HttpSuite(runs, output, legacy, log, whole, server_exit, table)


# -- the scenarios -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("era", "scenario"), [(era, scenario) for era in ERAS for scenario in ERA_SCENARIOS[era]]
)
def test_scenario_passes(era: str, scenario: str, suite: HttpSuite) -> None:
    run = suite.run(era, scenario)

    assert run.checks, run.report()
    assert run.problems() == [], run.report()
    assert run.passed() > 0 or scenario in UNSCORED.get(era, {}), run.report()
    wire = [check["status"] for check in run.checks if check["id"] == "wire-schema-valid"]
    assert wire == ([] if scenario in UNOBSERVED[era] else ["SUCCESS"]), run.report()


def test_sse_polling_closes_mid_call_and_resumes(suite: HttpSuite) -> None:
    # SEP-1699, 2025-11-25 basic/transports "Sending Messages" 6. and "Resumability and
    # Redelivery": the priming event first, `retry` before the server closes the POST's
    # connection, and the result on the stream the client resumes by GET with Last-Event-ID.
    # The suite scores the resume as INFO when the result comes on the POST instead (the
    # connection was never closed), so each check is named and must be SUCCESS.
    run = suite.run(LEGACY, "server-sse-polling")
    statuses = {
        check["id"]: check["status"]
        for check in run.checks
        if check["id"].startswith("server-sse-")
    }

    assert statuses == {
        "server-sse-priming-event": "SUCCESS",
        "server-sse-retry-field": "SUCCESS",
        "server-sse-disconnect-resume": "SUCCESS",
    }, run.report()


@pytest.mark.parametrize("scenario", EXTENSION_SCENARIOS)
def test_extension_scenario_passes(scenario: str, suite: HttpSuite) -> None:
    assert_extension_run_passed(suite.run(MODERN, scenario))  # over HTTP, nothing listed


def test_every_scenario_of_each_era_and_of_tasks_runs(suite: HttpSuite) -> None:
    expected = {(era, scenario) for era in ERAS for scenario in ERA_SCENARIOS[era]}
    assert set(suite.runs) == expected | {(MODERN, scenario) for scenario in EXTENSION_SCENARIOS}


def test_a_2025_11_25_initialize_opens_a_session(suite: HttpSuite) -> None:
    # 2026-07-28 basic/versioning "Backward Compatibility": "Legacy | Dual-era | Works. The
    # server answers initialize and serves the client according to the negotiated legacy
    # revision"; 2025-11-25 basic/transports "Session Management" 1.: the id in Mcp-Session-Id.
    status, body, session_id = suite.legacy_initialize

    assert status == 200, body
    assert body["id"] == 1
    assert body["result"]["protocolVersion"] == LEGACY, body
    assert "resultType" not in body["result"], body  # a 2025-11-25 result
    assert session_id is not None
    assert re.fullmatch(r"[\x21-\x7e]{32,}", session_id)


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

    assert len(rows) - 1 == sum(map(len, ERA_SCENARIOS.values())) + len(EXTENSION_SCENARIOS)
    sys.stdout.write("\n" + suite.table)  # shown by `pytest -rA`
