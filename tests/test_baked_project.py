"""THE HEAVY ONE: every combination, installed in its own venv, passes its own checks and the
runtime's suite.

For each option combination (AWS example on/off) one bake gets its own ``.venv`` with
``pip install -e .[dev(,aws)]`` (the README's quick start, pip cache shared), and then runs what its
README promises: ``ruff check``, ``ruff format --check``, ``mypy`` and ``pytest``. Then the
template's runtime suite (``tests/runtime``: protocol, tokens, fuzz, bad input, stdio end to end,
legacy bridge, clients) runs with that venv's python against the baked package
(``MRTR_PACKAGE``), under its own ``pytest.ini`` so neither this directory's conftest nor the
project's settings apply; so does the samples suite (``tests/samples``: the engines behind the
sample tools, end to end over pipes; ``tests/samples/aws`` only where the AWS example is baked).
Slow (a few minutes per combination), and part of every ``python3 dev.py test``.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from bakery import COMBINATIONS, DEFAULT_PACKAGE, REPO, Installed, run

pytestmark = pytest.mark.baked_checks

CHECKS = {
    "ruff-check": ["ruff", "check", "."],
    "ruff-format": ["ruff", "format", "--check", "."],
    "mypy": ["mypy"],
    "pytest": ["pytest", "-q", "-p", "no:cacheprovider"],
}
RUNTIME_SUITE = REPO / "tests" / "runtime"
SAMPLES_SUITE = REPO / "tests" / "samples"
#: The samples of the AWS example (the CloudFormation engine, deploy_to_aws end to end).
AWS_SAMPLES = SAMPLES_SUITE / "aws"


@pytest.mark.parametrize("check", list(CHECKS))
@pytest.mark.parametrize("combination", sorted(COMBINATIONS))
def test_baked_project_passes_its_own_checks(
    installed: Callable[[str], Installed], combination: str, check: str
) -> None:
    project = installed(combination)
    tool, *args = CHECKS[check]
    run([project.tool(tool), *args], cwd=project.project, timeout=1200)


def run_suite(project: Installed, suite: Path, *options: str | Path) -> None:
    """Run the template's ``suite`` with ``project``'s python, under the suite's own settings."""
    settings = ["-c", suite / "pytest.ini", "--rootdir", suite]
    run(
        [project.python, "-m", "pytest", *settings, *options, suite, "-q"],
        cwd=project.project,
        timeout=1200,
        env={"MRTR_PACKAGE": DEFAULT_PACKAGE},
    )


@pytest.mark.parametrize("combination", sorted(COMBINATIONS))
def test_the_runtime_suite_passes_against_every_combination(
    installed: Callable[[str], Installed], combination: str
) -> None:
    run_suite(installed(combination), RUNTIME_SUITE)


@pytest.mark.parametrize("combination", sorted(COMBINATIONS))
def test_the_samples_suite_passes_against_every_combination(
    installed: Callable[[str], Installed], combination: str
) -> None:
    aws = COMBINATIONS[combination]["include_aws_example"] == "yes"
    run_suite(installed(combination), SAMPLES_SUITE, *([] if aws else ["--ignore", AWS_SAMPLES]))
