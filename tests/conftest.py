"""Fixtures for the template's tests; the helpers behind them are in ``bakery.py``."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest
from bakery import PIP_CACHE, Bake, BakeFactory, Installed, bake_and_install, bake_into

# The runtime's suite and the samples suite run inside each installed bake, with that bake's
# python (test_baked_project.py), never with this venv: they import the baked package by name.
collect_ignore = ["runtime", "samples"]


@pytest.fixture
def bake(
    tmp_path_factory: pytest.TempPathFactory, capfd: pytest.CaptureFixture[str]
) -> BakeFactory:
    """``bake(**answers)``: a fresh bake in its own temporary directory, with the hooks' output."""

    def make(**answers: str) -> Bake:
        output = tmp_path_factory.mktemp("bake") / "out"
        output.mkdir()
        return bake_into(output, capfd, **answers)

    return make


@pytest.fixture(scope="session")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Callable[[str], Installed]]:
    """``installed("aws" | "no-aws")``: a bake with ``pip install -e .[dev(,aws)]`` done in its own
    ``.venv``, exactly as its README says; one per combination, shared by the whole session."""
    cache: dict[str, Installed] = {}

    def get(combination: str) -> Installed:
        if combination not in cache:
            output = tmp_path_factory.mktemp(f"installed-{combination}") / "out"
            output.mkdir()
            cache[combination] = bake_and_install(output, combination)
        return cache[combination]

    yield get


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "baked_checks: installs a baked project in its own venv and runs its own checks (slow)",
    )
    # The template's tests and the baked projects' pip share one cache inside the checkout.
    PIP_CACHE.mkdir(parents=True, exist_ok=True)
