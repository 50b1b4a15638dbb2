"""The conformance run every generated project ships, as its CI job runs it.

A generated project carries the official conformance suite's fixtures, its stdio bridge, its
expected failures and a runner (`tests/conformance/run.py`); its check workflow's `conformance`
job installs the project and runs that script (tests/template/test_project_ci.py holds the job
to it). Here the script runs as the job runs it, in a bake with the HTTP wing: both transports,
both eras, the tasks and skills extensions, nothing failed. Its judging is held to what it must
catch, on checks.json files written the way the suite writes them: a check that fails and is
not listed fails the run, a listed check that passes is stale and fails it too, a listed check
over HTTP is no excuse, and the HTTP transport's own scenarios are not judged over stdio only.
A bake without the HTTP wing runs stdio alone and says why it cannot run HTTP.

The suite is the pinned copy tests/peers/node.py installs (MRTR_CONFORMANCE_CLI), the one
`npx` would fetch in the job.
"""

from __future__ import annotations

import importlib.util
import json
import re
import shlex
import sys
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from bakery import Installed, run
from peers.node import NodePeers, PeersUnavailableError, ensure_node_peers

pytestmark = pytest.mark.baked_checks

#: The runner's bound per era is 15 minutes; a whole run here takes about a minute and a half.
RUN_TIMEOUT_SECONDS = 1800


@pytest.fixture(scope="module")
def peers() -> NodePeers:
    try:
        return ensure_node_peers()
    except PeersUnavailableError as error:
        pytest.fail(f"cannot install the conformance suite: {error}")


def conformance_env(peers: NodePeers) -> dict[str, str]:
    return {"MRTR_CONFORMANCE_CLI": shlex.join(peers.conformance_command())}


def load_runner(project: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        f"conformance_run_{id(project)}", project / "tests" / "conformance" / "run.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def test_the_projects_conformance_job_passes_over_stdio_and_http(
    installed: Callable[[str], Installed], peers: NodePeers, tmp_path: Path
) -> None:
    project = installed("aws")
    done = run(
        [str(project.python), "tests/conformance/run.py", "--output-dir", str(tmp_path)],
        cwd=project.project,
        env=conformance_env(peers),
        check=False,
        timeout=RUN_TIMEOUT_SECONDS,
    )
    print(done.stdout)  # noqa: T201 (the table this test exists to show)
    assert done.returncode == 0, done.stdout[-6000:] + done.stderr[-3000:]
    assert "\nstdio: " in done.stdout and "\nhttp: " in done.stdout
    assert "stdio: 86 scenarios, nothing failed (14 expected HTTP-only failures)" in done.stdout
    assert "http: 86 scenarios, nothing failed\n" in done.stdout
    for transport in ("stdio", "http"):
        for scenario in ("sep-2640-skills-manifest", "tasks-mrtr-input", "tools-list"):
            row = rf"^\| {transport} \| [^|]+ \| {scenario} \| (\d+) / \1 \|"
            assert re.search(row, done.stdout, re.MULTILINE), (transport, scenario)
    # The suite's own files stay where the CI job uploads them from.
    assert sorted(path.name for path in tmp_path.iterdir()) == [".conformance-run", "http", "stdio"]


def test_a_project_without_the_http_wing_runs_stdio_and_says_why_not_http(
    installed: Callable[[str], Installed], peers: NodePeers
) -> None:
    project = installed("default")
    refused = run(
        [str(project.python), "tests/conformance/run.py", "--transport", "http"],
        cwd=project.project,
        env=conformance_env(peers),
        check=False,
    )
    assert refused.returncode == 2
    assert "generated without the HTTP transport (include_http=no)" in refused.stderr


def write_checks(root: Path, scenario: str, checks: list[dict[str, Any]]) -> None:
    folder = root / f"server-{scenario}-2026-12-07T10-00-00-000Z"
    folder.mkdir(parents=True)
    (folder / "checks.json").write_text(json.dumps(checks), encoding="utf-8")


def check(check_id: str, status: str) -> dict[str, Any]:
    return {"id": check_id, "status": status, "description": f"{check_id} described"}


@pytest.mark.parametrize("transport", ["stdio", "http"])
def test_the_runner_fails_what_is_not_listed_and_what_is_listed_but_passed(
    installed: Callable[[str], Installed], tmp_path: Path, transport: str
) -> None:
    runner = load_runner(installed("aws").project)
    listed = "server-stateless:sep-2575-http-server-ping-404"
    stale = "server-stateless:sep-2575-http-server-gone-404"
    write_checks(
        tmp_path,
        "server-stateless",
        [
            check("sep-2575-http-server-ping-404", "FAILURE"),  # listed: expected over stdio
            check("sep-2575-http-server-gone-404", "SUCCESS"),  # listed, but it passed
            check("sep-2575-discover", "SUCCESS"),
        ],
    )
    write_checks(tmp_path, "tools-call-image", [check("content-is-image", "WARNING")])
    write_checks(tmp_path, "dns-rebinding-protection", [check("rejects-bad-host", "FAILURE")])
    verdict = runner.Verdict(transport)
    seen: set[str] = set()
    expected = frozenset({listed, stale}) if transport == "stdio" else frozenset()
    runner.judge(tmp_path, "2026-07-28", verdict, expected, seen)
    assert "2026-07-28 tools-call-image:content-is-image: WARNING" in " ".join(verdict.failures)
    if transport == "stdio":
        assert seen == {listed}  # the stale one never failed: run_transport reports it
        assert verdict.expected == 1
        assert not any("dns-rebinding" in failure for failure in verdict.failures)
        rows = {row[1]: row for row in verdict.rows}
        assert rows["dns-rebinding-protection"][3].startswith("not judged over stdio")
    else:
        # Over HTTP nothing is listed and the transport's own scenarios are judged too.
        assert any(listed.split(":")[1] in failure for failure in verdict.failures)
        assert any("dns-rebinding-protection" in failure for failure in verdict.failures)


def test_the_expected_failures_are_read_as_scenario_check_pairs(
    installed: Callable[[str], Installed],
) -> None:
    runner = load_runner(installed("aws").project)
    entries = runner.expected_failures()
    assert len(entries) == 12
    assert all(entry.count(":") == 1 and " " not in entry for entry in entries)
    assert "server-stateless:sep-2575-http-server-method-not-found-404-ping" in entries


def test_the_runner_empties_only_a_directory_it_made(
    installed: Callable[[str], Installed], tmp_path: Path
) -> None:
    runner = load_runner(installed("aws").project)
    precious = tmp_path / "precious"
    precious.mkdir()
    (precious / "important.txt").write_text("my work", encoding="utf-8")
    with pytest.raises(RuntimeError, match="not empty and no earlier run"):
        runner.clear(precious)
    assert (precious / "important.txt").read_text(encoding="utf-8") == "my work"
    made = tmp_path / "made"
    runner.clear(made)
    (made / "stdio").mkdir()
    runner.clear(made)  # its own: emptied again
    assert sorted(path.name for path in made.iterdir()) == [runner.MARKER]


#: A stand-in for the suite's CLI: results for every scenario it is asked for, but none for
#: `sep-2640-skills-manifest`, as a crash or a name the suite does not know would leave.
FAKE_SUITE = """
import json, sys, pathlib
args = sys.argv[1:]
out = pathlib.Path(args[args.index("-o") + 1])
if "--scenario" in args:
    names = [args[args.index("--scenario") + 1]]
else:
    names = ["tools-list"]
    print("Total: 1 passed")
for name in names:
    if name == "sep-2640-skills-manifest":
        print("Unknown scenario", name)
        sys.exit(1)
    folder = out / f"server-{name}-2026-12-07T10-00-00-000Z"
    folder.mkdir(parents=True)
    (folder / "checks.json").write_text(json.dumps([{"id": "ok", "status": "SUCCESS"}]))
"""


def test_a_scenario_that_wrote_no_results_fails_the_run(
    installed: Callable[[str], Installed], tmp_path: Path
) -> None:
    project = installed("aws")
    fake = tmp_path / "fake_suite.py"
    fake.write_text(FAKE_SUITE, encoding="utf-8")
    done = run(
        [
            str(project.python),
            "tests/conformance/run.py",
            "--transport",
            "stdio",
            "--output-dir",
            str(tmp_path / "out"),
        ],
        cwd=project.project,
        env={"MRTR_CONFORMANCE_CLI": shlex.join([str(project.python), str(fake)])},
        check=False,
    )
    assert done.returncode == 1, done.stdout + done.stderr
    assert "sep-2640-skills-manifest did not run:" in done.stdout
    assert "Unknown scenario sep-2640-skills-manifest" in done.stdout
    # The HTTP-only checks it lists never failed here: each is stale, and says so.
    assert "listed in expected-failures.yml but did not fail" in done.stdout


def test_a_suite_that_cannot_start_is_said_not_a_traceback(
    installed: Callable[[str], Installed], tmp_path: Path
) -> None:
    project = installed("aws")
    done = run(
        [
            str(project.python),
            "tests/conformance/run.py",
            "--transport",
            "stdio",
            "--output-dir",
            str(tmp_path / "out"),
        ],
        cwd=project.project,
        env={"MRTR_CONFORMANCE_CLI": "/nonexistent/node suite.js"},
        check=False,
    )
    assert done.returncode == 1
    assert "cannot start the suite (/nonexistent/node suite.js server" in done.stdout
    assert "Traceback" not in done.stdout + done.stderr
