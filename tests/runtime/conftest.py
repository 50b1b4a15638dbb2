"""Fixtures of the runtime suite. Run it with a baked project's own interpreter:

    MRTR_PACKAGE=mrtr_server <project>/.venv/bin/python -m pytest tests/runtime -p no:cacheprovider

``import support`` (first, below) registers that project's ``<package>.mrtr_runtime`` as
``mrtr_runtime``; the helpers the tests share live there, the fixtures here.
"""

from __future__ import annotations

import os
import sys
from collections import Counter
from collections.abc import Callable, Mapping
from pathlib import Path

import pytest

import support
from mrtr_runtime.server import Server
from mrtr_runtime.testing import MemoryClient

# Test modules share helpers across folders (`from test_http_app import Client`): every folder
# of tests is importable by module name, as this one is.
sys.path[1:1] = [str(folder) for folder in support.IMPORT_PATH[1:] if str(folder) not in sys.path]

#: Set by the template's tests when they run this suite in an installed bake (tests/bakery.py):
#: how many pytest-xdist workers to spread it over, a module per worker, where the bake's
#: interpreter has pytest-xdist and the command line does not choose (``-n``) itself.
WORKERS = "MRTR_SUITE_WORKERS"


@pytest.hookimpl(tryfirst=True)
def pytest_cmdline_main(config: pytest.Config) -> None:
    # Before pytest-xdist's own hook turns -n into workers (it runs later: registered earlier).
    workers = os.environ.get(WORKERS, "")
    if not workers.isdigit() or int(workers) < 2 or os.environ.get("PYTEST_XDIST_WORKER"):
        return
    if config.pluginmanager.hasplugin("xdist") and config.option.numprocesses is None:
        config.option.numprocesses = int(workers)
        config.option.dist = "loadfile"


@pytest.fixture(scope="session")
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(autouse=True)
def private_state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each test's servers keep their default task store (``$XDG_STATE_HOME/<slug>/``) in that
    test's own directory: never the user's, never another test's (tasks of one test are not
    found by the next, and parallel workers do not share one SQLite file)."""
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))


@pytest.fixture
def calls() -> Counter[str]:
    """Handler runs of `support.build_registry`, by tool name."""
    return Counter()


@pytest.fixture
def client(calls: Counter[str]) -> MemoryClient:
    """A modern in-process client of `support.make_server(calls=calls)`."""
    return MemoryClient(support.make_server(calls=calls), capabilities=support.ALL_CAPABILITIES)


@pytest.fixture
def command(tmp_path: Path) -> list[str]:
    """Starts `support.make_server()` over stdio (with `support.server_env()`)."""
    script = tmp_path / "serve_support.py"
    script.write_text(support.SERVER_SCRIPT, encoding="utf-8")
    return [sys.executable, str(script)]


@pytest.fixture(scope="session")
def package_name() -> str:
    """The baked project's import package (``MRTR_PACKAGE``)."""
    return support.PACKAGE


@pytest.fixture(scope="session")
def project_dir() -> Path:
    """The baked project's directory (it is installed editable)."""
    return support.PROJECT


@pytest.fixture(scope="session")
def server_command() -> list[str]:
    """Starts the project's real server: ``python -m <package>``."""
    return [sys.executable, "-m", support.PACKAGE]


@pytest.fixture(scope="session")
def build_server() -> Callable[[Mapping[str, str] | None], Server]:
    """The project's ``app.build_server(environ)``: its tools, its name, keys from ``environ``."""
    app = __import__(f"{support.PACKAGE}.app", fromlist=["build_server"])
    built: Callable[[Mapping[str, str] | None], Server] = app.build_server
    return built
