"""Fixtures for the template's tests; the helpers behind them are in ``bakery.py``.

Slow preparations start in the background at the session's first test: the pip installs of the
combinations the collected tests parametrize ``installed`` with, and the Node peers' ``npm ci``
when a collected module imports ``peers.node``. The modules that wait for either run after all
the others, so those others overlap the downloads; under pytest-xdist, first (see
``pytest_collection_modifyitems``). Parallel workers share both: the first to start an install
does it, the others wait for it (``bakery.Installs``; the Node peers' cache has its own lock).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import sys
import tempfile
import threading
from collections.abc import Iterator
from types import ModuleType

import pytest
from bakery import COMBINATIONS, PIP_CACHE, REPO, Bake, BakeFactory, Installs, bake_into

# The runtime's suite and the samples suite run inside each installed bake, with that bake's
# python (test_baked_runtime_suite.py, test_baked_samples.py), never with this venv: they
# import the baked package by name.
collect_ignore = ["runtime", "samples"]
NODE_PEERS_MODULE = "peers.node"


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
def installed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Installs]:
    """``installed("aws" | "no-aws" | ...)``: a bake with ``pip install -e .[dev(,aws)]`` done in
    its own ``.venv``, as its README says (``bakery.install``); one per combination, shared by the
    whole session."""
    installs = Installs(tmp_path_factory)
    yield installs
    installs.close()


def parametrized_combinations(items: list[pytest.Item]) -> list[str]:
    """The combinations collected tests pass to ``installed`` as their ``combination`` parameter
    (a test that names its combination in its body gets it installed when it asks)."""
    wanted: set[str] = set()
    for item in items:
        callspec = getattr(item, "callspec", None)
        if "installed" in getattr(item, "fixturenames", ()) and callspec is not None:
            wanted.add(callspec.params.get("combination"))
    return [combination for combination in COMBINATIONS if combination in wanted]


def imports_node_peers(item: pytest.Item) -> bool:
    module = getattr(item, "module", None)
    return isinstance(module, ModuleType) and any(
        getattr(value, "__module__", None) == NODE_PEERS_MODULE for value in vars(module).values()
    )


def install_node_peers() -> None:
    node = sys.modules[NODE_PEERS_MODULE]
    # Only a head start: the fixture that needs the peers waits on the install's lock while this
    # one runs, and if this one failed, installs them again and reports why.
    with contextlib.suppress(Exception):
        node.ensure_node_peers()


@pytest.fixture(scope="session", autouse=True)
def slow_preparations(request: pytest.FixtureRequest) -> Iterator[None]:
    """Starts, at the session's first test, what the collected tests will wait for."""
    items = request.session.items
    combinations = parametrized_combinations(items)
    if combinations:
        installs: Installs = request.getfixturevalue("installed")
        for combination in combinations:
            installs.start(combination)
    peers: threading.Thread | None = None
    if any(map(imports_node_peers, items)):
        peers = threading.Thread(target=install_node_peers, name="node-peers")
        peers.start()
    yield
    if peers is not None:
        peers.join()


def waits_in_the_background(item: pytest.Item) -> bool:
    return "installed" in getattr(item, "fixturenames", ()) or imports_node_peers(item)


#: Under pytest-xdist, the modules that take longest, longest first: a module handed out last
#: that runs for minutes leaves the other core idle. The baked suites were one module, 28 of a
#: 30-minute run on one core; split, the two longest start at once on the two workers.
LONGEST_FIRST = (
    "tests/template/test_baked_samples.py",
    "tests/template/test_baked_runtime_suite.py",
    "tests/template/test_baked_checks.py",
)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Modules with a test that waits for a background preparation go last, in their order: the
    others overlap the installs. Under pytest-xdist (``dev.py test``: ``--dist loadfile``, modules
    handed out in this order) they go first instead: they are the longest, and while the first
    ones wait for the installs those keep the cores busy; the many short modules then even out
    the workers' ends."""
    late = {item.path for item in items if waits_in_the_background(item)}
    parallel = bool(os.environ.get("PYTEST_XDIST_WORKER"))

    def longest_first(item: pytest.Item) -> int:
        relative = item.path.relative_to(REPO).as_posix()
        return LONGEST_FIRST.index(relative) if relative in LONGEST_FIRST else len(LONGEST_FIRST)

    items.sort(
        key=lambda item: ((item.path in late) != parallel, longest_first(item) if parallel else 0)
    )


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "baked_checks: installs a baked project in its own venv and runs its own checks (slow)",
    )
    # The template's tests and the baked projects' pip share one cache inside the checkout.
    PIP_CACHE.mkdir(parents=True, exist_ok=True)
    # Servers these tests start keep their default task store and per-user key under
    # $XDG_STATE_HOME/<slug>/: this process's own directory, never the user's (a test that needs
    # its own state, or none, says so in the server's environment).
    # (Each pytest-xdist worker runs this hook too, and gets a directory of its own.)
    state = tempfile.mkdtemp(prefix="mrtr-test-state-")
    os.environ["XDG_STATE_HOME"] = state
    config.add_cleanup(lambda: shutil.rmtree(state, ignore_errors=True))
