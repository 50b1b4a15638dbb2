"""The official MCP conformance suite against a baked project's real stdio server.

@modelcontextprotocol/conformance 0.2.0-alpha.12 (pinned in tests/peers/package.json) runs on
Node 22, both installed once into .cache/peers by tests/peers/node.py. Its server harness speaks
only HTTP, so tests/peers/http_stdio_adapter.py bridges it to `python -m <package>`, which serves
the fixtures of tests/peers/conformance_tools.py dropped into a freshly baked project.

- Every `input-required-result-*` scenario (SEP-2322, all required for 2026-07-28) must pass with
  no expected failures and no warnings.
- `server-stateless` (SEP-2575) must pass except for its HTTP-only checks, listed with reasons in
  tests/peers/expected-failures.yml; the JSON-RPC half of each of those is asserted here.
- Throughout, the adapter watches the server's stdout for anything a 2026-07-28 stdio server must
  never write there, and the server must exit 0 when its stdin closes.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import urllib.request
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import pytest
from peers.node import NodePeers, PeersUnavailableError, ensure_node_peers
from peers.project import BakedProject, bake

PEERS = Path(__file__).resolve().parent / "peers"
ADAPTER = PEERS / "http_stdio_adapter.py"
EXPECTED_FAILURES = PEERS / "expected-failures.yml"

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
)

SCENARIO_TIMEOUT_SECONDS = 120


# -- the peers ---------------------------------------------------------------------------------


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


class Adapter:
    """The HTTP->stdio bridge running the baked server, as a subprocess."""

    def __init__(self, project: BakedProject, log_path: Path) -> None:
        env = {key: os.environ[key] for key in ("HOME", "PATH", "LANG") if key in os.environ}
        env.update(project.server_env())
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
        self._log.flush()
        return self.log_path.read_text(encoding="utf-8")[-6000:]

    def stop(self) -> int:
        """SIGTERM: the adapter closes the server's stdin and reports how that went."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        try:
            returncode = self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            returncode = self.process.wait()
        if self.process.stdout is not None:
            self.process.stdout.close()
        self._log.close()
        return returncode


@pytest.fixture(scope="module")
def shared_adapter(
    fixture_project: BakedProject, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Adapter]:
    """One server for all MRTR scenarios: stateless means no scenario may depend on another."""
    adapter = Adapter(fixture_project, tmp_path_factory.mktemp("adapter") / "adapter.log")
    try:
        yield adapter
    finally:
        returncode = adapter.stop()
    assert returncode == 0, f"server or adapter ended badly ({returncode}):\n{adapter.log()}"


@dataclass(frozen=True)
class ScenarioRun:
    scenario: str
    returncode: int
    output: str
    checks: list[dict[str, Any]]

    def problems(self) -> list[dict[str, Any]]:
        return [check for check in self.checks if check["status"] in ("FAILURE", "WARNING")]

    def report(self) -> str:
        lines = [f"{self.scenario}: exit {self.returncode}"]
        for check in self.problems():
            lines.append(f"  {check['status']} {check['id']}: {check.get('errorMessage')}")
            lines.append(f"    details: {json.dumps(check.get('details'))[:1500]}")
        lines.append(self.output[-3000:])
        return "\n".join(lines)


def run_scenario(
    peers: NodePeers,
    url: str,
    scenario: str,
    output_dir: Path,
    extra_args: Sequence[str] = (),
) -> ScenarioRun:
    command = peers.conformance_command(
        "server", "--url", url, "--scenario", scenario, "-o", str(output_dir), *extra_args
    )
    env = {**os.environ, "NO_COLOR": "1", "FORCE_COLOR": "0"}
    done = subprocess.run(
        command,
        capture_output=True,
        text=True,
        timeout=SCENARIO_TIMEOUT_SECONDS,
        env=env,
        check=False,
    )
    found = sorted(output_dir.glob(f"server-{scenario}-*/checks.json"))
    checks: list[dict[str, Any]] = json.loads(found[-1].read_text()) if found else []
    return ScenarioRun(scenario, done.returncode, done.stdout + done.stderr, checks)


# -- the scenarios -----------------------------------------------------------------------------


@pytest.mark.parametrize("scenario", MRTR_SCENARIOS)
def test_input_required_result_scenario_passes(
    scenario: str, node_peers: NodePeers, shared_adapter: Adapter, tmp_path: Path
) -> None:
    run = run_scenario(node_peers, shared_adapter.url, scenario, tmp_path)

    assert run.checks, run.report()
    assert run.returncode == 0, run.report()
    assert run.problems() == [], run.report()
    wire = [check for check in run.checks if check["id"] == "wire-schema-valid"]
    assert [check["status"] for check in wire] == ["SUCCESS"], run.report()
    assert shared_adapter.status() == {"alive": True, "violations": []}, shared_adapter.log()


def _listed_checks() -> list[str]:
    """The check ids expected-failures.yml lists for server-stateless (one `- a:b` per line)."""
    pattern = re.compile(rf"^\s*-\s*{re.escape(STATELESS)}:(\S+)\s*$")
    lines = EXPECTED_FAILURES.read_text(encoding="utf-8").splitlines()
    return [match.group(1) for line in lines if (match := pattern.match(line))]


def _jsonrpc_code(check: Mapping[str, Any]) -> int | None:
    """The JSON-RPC error code the probe behind `check` received, from its details or message."""
    details = check.get("details") or {}
    response = details.get("response") if isinstance(details, dict) else None
    if isinstance(response, dict) and isinstance(response.get("error"), dict):
        return int(response["error"]["code"])
    found = re.search(r"code (-?\d+)\s*$", check.get("errorMessage") or "")
    return int(found.group(1)) if found else None


def test_expected_failures_list_only_http_checks_of_server_stateless() -> None:
    text = EXPECTED_FAILURES.read_text(encoding="utf-8")
    entries = [line for line in text.splitlines() if line.strip().startswith("- ")]

    assert len(entries) == len(_listed_checks()), "every entry is server-stateless:<check-id>"
    assert sorted(_listed_checks()) == sorted(JSONRPC_HALF)
    assert "input-required-result" not in text.replace("input-required-result-*", "")


def test_server_stateless_passes_except_its_http_only_checks(
    node_peers: NodePeers, fixture_project: BakedProject, tmp_path: Path
) -> None:
    # Its own server: this scenario sends `initialize` and removed methods, which must not
    # touch the process the MRTR scenarios share.
    adapter = Adapter(fixture_project, tmp_path / "adapter.log")
    try:
        run = run_scenario(
            node_peers,
            adapter.url,
            STATELESS,
            tmp_path,
            ("--expected-failures", str(EXPECTED_FAILURES)),
        )
        status = adapter.status()
    finally:
        returncode = adapter.stop()

    # Exit 0 means: every failure is listed and every listed check still fails (no stale entry).
    assert run.returncode == 0, run.report()
    listed = set(_listed_checks())
    unlisted = [check for check in run.problems() if check["id"] not in listed]
    assert unlisted == [], run.report()
    for check_id in STDIO_CHECKS:
        statuses = {check["status"] for check in run.checks if check["id"] == check_id}
        assert statuses == {"SUCCESS"}, f"{check_id}: {statuses or 'not run'}\n{run.report()}"
    for check in run.checks:
        want = JSONRPC_HALF.get(check["id"])
        if check["id"] in listed and want is not None:
            assert _jsonrpc_code(check) == want, f"{check['id']}: {json.dumps(check)[:1500]}"
    assert status == {"alive": True, "violations": []}, adapter.log()
    assert returncode == 0, adapter.log()
