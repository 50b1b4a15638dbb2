"""The samples suite: the engines behind the project's sample tools, which the template maintains
like the runtime (plan_release over real pipes; with the AWS example, in ``aws/``, the
CloudFormation change-set engine and deploy_to_aws end to end against moto). A project keeps only
the tests of its tools' handlers. Run it with a baked project's own interpreter:

    MRTR_PACKAGE=mrtr_server <project>/.venv/bin/python -m pytest \\
        -c tests/samples/pytest.ini --rootdir tests/samples tests/samples

(``--ignore tests/samples/aws`` for a project baked without the AWS example). The tests import
the project's modules by name, ``importlib.import_module(f"{PACKAGE}.tools._cloudformation")``:
this directory is not rendered, so it holds no Jinja.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

if not os.environ.get("MRTR_PACKAGE", "").isidentifier():
    raise pytest.UsageError(
        "set MRTR_PACKAGE to the baked project's import package (e.g. mrtr_server) and run this "
        "suite with that project's python: MRTR_PACKAGE=mrtr_server .venv/bin/python -m pytest "
        "-c <template>/tests/samples/pytest.ini <template>/tests/samples"
    )


#: Set by the template's tests when they run this suite in an installed bake (tests/bakery.py):
#: how many pytest-xdist workers to spread it over, a module per worker, where the bake's
#: interpreter has pytest-xdist and the command line does not choose (``-n``) itself. Most of
#: the suite's time is servers' grace periods and stand-in AWS waits: workers overlap them.
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
