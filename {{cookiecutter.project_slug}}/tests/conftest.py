"""Fixtures shared by this project's tests: how to start the real server, and with which key."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

PACKAGE = "{{ cookiecutter.package_name }}"
#: A fixed test key (never used outside tests): a second server process started with it can
#: finish a round the first one started.
TEST_KEY_HEX = "8b0f2e4d6c1a3957e8f0b2d4c6a81357e9f1b3d5c7a90246f8e0d2b4c6a81357"
#: Where a server looks for this user's key and task store, on every platform.
HOME_VARIABLES = ("HOME", "USERPROFILE", "LOCALAPPDATA", "XDG_STATE_HOME")


@pytest.fixture(autouse=True)
def private_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A temporary home for every test: a server that finds no key (a checkout without its
    git-ignored key file, as in CI) makes this user's key file there, never in the real home."""
    for name in HOME_VARIABLES:
        monkeypatch.setenv(name, str(tmp_path / "home"))


@pytest.fixture(scope="session")
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="session")
def server_command() -> list[str]:
    """Starts this project's server the way hosts do: ``python -m <package>``."""
    return [sys.executable, "-m", PACKAGE]


@pytest.fixture
def server_env() -> dict[str, str]:
    """This environment without any ``MRTR_*`` setting, signing with ``TEST_KEY_HEX``."""
    env = {name: value for name, value in os.environ.items() if not name.startswith("MRTR_")}
    env["MRTR_SIGNING_KEY"] = TEST_KEY_HEX
    return env


@pytest.fixture(scope="module")
def module_server_env(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """``server_env`` for a server that several tests of a module share: its own temporary
    home (the per-test one is gone after the first test)."""
    home = tmp_path_factory.mktemp("home")
    env = {name: value for name, value in os.environ.items() if not name.startswith("MRTR_")}
    env.update(dict.fromkeys(HOME_VARIABLES, str(home)), MRTR_SIGNING_KEY=TEST_KEY_HEX)
    return env
