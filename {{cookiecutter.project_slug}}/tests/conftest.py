"""Fixtures shared by this project's tests: how to start the real server, and with which key."""

from __future__ import annotations

import os
import sys

import pytest

PACKAGE = "{{ cookiecutter.package_name }}"
#: A fixed test key (never used outside tests): a second server process started with it can
#: finish a round the first one started.
TEST_KEY_HEX = "8b0f2e4d6c1a3957e8f0b2d4c6a81357e9f1b3d5c7a90246f8e0d2b4c6a81357"


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
