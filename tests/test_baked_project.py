"""THE HEAVY ONE: every combination, installed in its own venv, passes its own checks.

For each option combination (AWS example on/off) one bake gets its own ``.venv`` with
``pip install -e .[dev(,aws)]`` (the README's quick start, pip cache shared), and then runs what its
README promises: ``ruff check``, ``ruff format --check``, ``mypy`` and ``pytest``. Slow (a minute
or two per combination, most of it pip), and part of every ``python3 dev.py test``.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
from bakery import COMBINATIONS, Installed, run

pytestmark = pytest.mark.baked_checks

CHECKS = {
    "ruff-check": ["ruff", "check", "."],
    "ruff-format": ["ruff", "format", "--check", "."],
    "mypy": ["mypy"],
    "pytest": ["pytest", "-q", "-p", "no:cacheprovider"],
}


@pytest.mark.parametrize("check", list(CHECKS))
@pytest.mark.parametrize("combination", sorted(COMBINATIONS))
def test_baked_project_passes_its_own_checks(
    installed: Callable[[str], Installed], combination: str, check: str
) -> None:
    project = installed(combination)
    tool, *args = CHECKS[check]
    run([project.tool(tool), *args], cwd=project.project, timeout=1200)
