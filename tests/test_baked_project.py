"""THE HEAVY ONE: every combination, installed in its own venv, passes its own checks and the
runtime's suite.

For each option combination (AWS example on/off) one bake gets its own ``.venv`` with
``pip install -e .[dev(,aws)]`` (the README's quick start, pip cache shared), and then runs what its
README promises: ``ruff check``, ``ruff format --check``, ``mypy`` and ``pytest``. Then the
template's runtime suite (``tests/runtime``: protocol, tokens, fuzz, bad input, stdio end to end,
legacy bridge, clients) runs with that venv's python against the baked package
(``MRTR_PACKAGE``), under its own ``pytest.ini`` so neither this directory's conftest nor the
project's settings apply. Slow (a few minutes per combination), and part of every
``python3 dev.py test``.
"""

from __future__ import annotations

from collections.abc import Callable

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


@pytest.mark.parametrize("check", list(CHECKS))
@pytest.mark.parametrize("combination", sorted(COMBINATIONS))
def test_baked_project_passes_its_own_checks(
    installed: Callable[[str], Installed], combination: str, check: str
) -> None:
    project = installed(combination)
    tool, *args = CHECKS[check]
    run([project.tool(tool), *args], cwd=project.project, timeout=1200)


@pytest.mark.parametrize("combination", sorted(COMBINATIONS))
def test_the_runtime_suite_passes_against_every_combination(
    installed: Callable[[str], Installed], combination: str
) -> None:
    project = installed(combination)
    settings = ["-c", RUNTIME_SUITE / "pytest.ini", "--rootdir", RUNTIME_SUITE]
    run(
        [project.python, "-m", "pytest", *settings, RUNTIME_SUITE, "-q"],
        cwd=project.project,
        timeout=1200,
        env={"MRTR_PACKAGE": DEFAULT_PACKAGE},
    )
