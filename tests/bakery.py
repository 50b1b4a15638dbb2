"""Helpers for the template's tests: bake the template, install a bake, run things in it.

``bake(**answers)`` renders the template with cookiecutter's API (no prompts) into a fresh
temporary directory and returns the project with the post-gen hook's output. ``installed(aws)``
gives one installed project per option combination for the whole session: a bake whose own
``.venv`` has ``pip install -e .[dev(,aws)]`` done, i.e. what the README tells users to do (with
pip for ``PIP_COMBINATION``, with uv for the others), so host configs printed for it point at that
venv.
"""

from __future__ import annotations

import os
import subprocess
import sys
import venv
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import IO

import pytest
from cookiecutter.main import cookiecutter

if sys.platform == "win32":
    fcntl = None
else:
    import fcntl

REPO = Path(__file__).resolve().parents[1]
PIP_CACHE = REPO / ".cache" / "pip"
UV_CACHE = REPO / ".cache" / "uv"
KEY_FILE = ".mrtr-signing-key"
#: Every optional wing of the runtime, on.
ALL_WINGS: Mapping[str, str] = {
    "include_tasks": "yes",
    "include_http": "yes",
    "include_redis_store": "yes",
    "include_bundle": "yes",
    "include_skills": "yes",
}
#: Named option combinations; every distinct dependency set gets its own venv in the heavy tests.
#: "aws" and "no-aws" carry every wing (the interop, HTTP and replica tests use them);
#: "default" is what cookiecutter bakes with no answers (tests/template/test_bake.py checks it
#: is); "minimal" leaves out everything that can be left out.
COMBINATIONS: Mapping[str, Mapping[str, str]] = {
    "aws": {"include_aws_example": "yes", **ALL_WINGS},
    "no-aws": {"include_aws_example": "no", **ALL_WINGS},
    "default": {
        "include_aws_example": "yes",
        "include_tasks": "yes",
        "include_http": "no",
        "include_redis_store": "no",
        "include_bundle": "no",
        "include_skills": "yes",
    },
    "minimal": {
        "include_aws_example": "no",
        "include_tasks": "no",
        "include_http": "no",
        "include_redis_store": "no",
        "include_bundle": "no",
        "include_skills": "no",
    },
}
#: The combinations that carry every wing: the whole runtime suite runs against them.
FULL_COMBINATIONS = frozenset({"aws", "no-aws"})
#: The combination installed with pip, the README's "Run it" command word for word; the others
#: with uv (``install``), which resolves the same versions (test_baked_checks.py compares them).
PIP_COMBINATION = "minimal"
DEFAULT_SLUG = "mrtr-server"
DEFAULT_PACKAGE = "mrtr_server"
# Directories that are never part of what the template generated.
NOT_GENERATED = frozenset({".venv", ".git", "__pycache__", ".pytest_cache", ".mypy_cache"})


@dataclass(frozen=True)
class Bake:
    """A generated project and what the hooks printed while making it."""

    project: Path
    stdout: str
    stderr: str

    @property
    def package(self) -> Path:
        (package,) = (path.parent for path in self.project.glob("src/*/__main__.py"))
        return package

    def files(self) -> list[Path]:
        """Every generated file, relative to the project, sorted."""
        found = []
        for root, dirs, files in os.walk(self.project):
            dirs[:] = sorted(d for d in dirs if d not in NOT_GENERATED)
            found += [Path(root, name).relative_to(self.project) for name in files]
        return sorted(found)

    def text_files(self) -> dict[Path, str]:
        texts = {}
        for relative in self.files():
            data = (self.project / relative).read_bytes()
            if b"\0" not in data:
                texts[relative] = data.decode("utf-8")
        return texts


def child_env(**extra: str) -> dict[str, str]:
    """Environment for subprocesses: no outer venv or PYTHONPATH leaking into a baked project."""
    env = {
        key: value
        for key, value in os.environ.items()
        if key not in {"VIRTUAL_ENV", "PYTHONPATH", "PYTHONHOME", "CONDA_PREFIX"}
    }
    env.update(PIP_CACHE_DIR=str(PIP_CACHE), PIP_DISABLE_PIP_VERSION_CHECK="1")
    env.update(extra)
    return env


def run(
    command: Sequence[str | Path],
    *,
    cwd: Path,
    timeout: float = 600,
    check: bool = True,
    env: Mapping[str, str] | None = None,
) -> subprocess.CompletedProcess[str]:
    """Run ``command`` in ``cwd`` with ``child_env()`` plus ``env``; fail the test on a non-zero
    status (unless ``check=False``), showing the tail of its output."""
    result = subprocess.run(
        [str(part) for part in command],
        cwd=cwd,
        env=child_env(**(env or {})),
        capture_output=True,
        text=True,
        encoding="utf-8",
        timeout=timeout,
        check=False,
    )
    if check and result.returncode != 0:
        pytest.fail(
            f"{' '.join(map(str, command))} exited {result.returncode}\n"
            f"--- stdout\n{result.stdout[-20000:]}\n--- stderr\n{result.stderr[-20000:]}",
            pytrace=False,
        )
    return result


def cookiecutter_config(directory: Path) -> Path:
    # Keep cookiecutter's replay files and clones out of the user's home directory.
    config = directory / "cookiecutter-config.yaml"
    config.write_text(
        f'cookiecutters_dir: "{directory / "cookiecutters"}"\n'
        f'replay_dir: "{directory / "replay"}"\n',
        encoding="utf-8",
    )
    return config


def bake_project(
    output: Path, *, overwrite: bool = False, state_dir: Path | None = None, **answers: str
) -> Path:
    """Bake into ``output`` with ``answers``; raises what cookiecutter raises. Cookiecutter's own
    config and replay files go to ``state_dir`` (default: next to ``output``)."""
    output.mkdir(parents=True, exist_ok=True)
    state = state_dir or output.parent
    state.mkdir(parents=True, exist_ok=True)
    project = cookiecutter(
        str(REPO),
        no_input=True,
        extra_context=answers,
        output_dir=str(output),
        overwrite_if_exists=overwrite,
        config_file=str(cookiecutter_config(state)),
    )
    return Path(project)


def bake_into(
    output: Path,
    capfd: pytest.CaptureFixture[str],
    *,
    overwrite: bool = False,
    state_dir: Path | None = None,
    **answers: str,
) -> Bake:
    """`bake_project`, with what the hooks printed."""
    capfd.readouterr()
    project = bake_project(output, overwrite=overwrite, state_dir=state_dir, **answers)
    captured = capfd.readouterr()
    return Bake(project, captured.out, captured.err)


BakeFactory = Callable[..., Bake]


def venv_python(venv_dir: Path) -> Path:
    if os.name == "nt":
        return venv_dir / "Scripts" / "python.exe"
    return venv_dir / "bin" / "python"


@dataclass(frozen=True)
class Installed:
    """A baked project installed editable into its own ``.venv``."""

    project: Path
    combination: str

    @property
    def python(self) -> Path:
        return venv_python(self.project / ".venv")

    def tool(self, name: str) -> Path:
        return self.python.parent / (f"{name}.exe" if os.name == "nt" else name)


def dev_pin(name: str) -> str:
    """The exact requirement ``name==version`` that ``requirements-dev.txt`` pins."""
    for line in (REPO / "requirements-dev.txt").read_text(encoding="utf-8").splitlines():
        requirement = line.split("#", 1)[0].strip()
        if requirement.partition("==")[0].strip().lower() == name:
            return requirement
    raise LookupError(f"requirements-dev.txt pins no {name}")


#: What the template's runtime suite (tests/runtime) needs beyond a project's own dev extra
#: (pytest-xdist and execnet: it runs on ``SUITE_WORKERS`` workers; the OpenTelemetry SDK: its
#: telemetry tests export what the runtime records); the samples suite
#: (tests/samples) needs nothing more (moto is in the AWS bake's dev extra).
RUNTIME_SUITE_NEEDS = (
    "hypothesis",
    "pytest-xdist",
    "execnet",
    "opentelemetry-sdk",
    "opentelemetry-semantic-conventions",
    "opentelemetry-exporter-otlp-proto-http",
)
#: A suite's workers in an installed bake (tests/runtime/conftest.py and tests/samples/
#: conftest.py read MRTR_SUITE_WORKERS): one per core, at most 4. The runtime suite is the
#: longest single test of the run (hundreds of server starts); spread over the cores it stays far
#: inside its subprocess timeout on a loaded machine.
CORES = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
SUITE_WORKERS = min(CORES, 4)
#: The runtime suite's: two per core, at most 4. Most of its time is waits (shutdown graces,
#: timeouts a test runs into, servers starting): with one worker per core it kept about 1.25 of
#: 2 cores busy (266 s), with two per core 211 s on a quiet machine, and it is the run's long
#: pole.
RUNTIME_SUITE_WORKERS = min(2 * CORES, 4)


def install(project: Path, extras: str, *, with_pip: bool = True) -> Path:
    """``python -m venv .venv && .venv/bin/pip install -e .[extras]``, with the shared pip cache,
    plus the pinned extras of the template's runtime suite (``RUNTIME_SUITE_NEEDS``). Without
    ``with_pip``, the same requirements go in with ``uv pip install`` (uv: the README's other way):
    pip spends over a minute of CPU on a venv with the AWS example's dependencies (moto and
    botocore are tens of thousands of files, each compiled), uv a few seconds, and every
    combination's venv is on the critical path of the suites that wait for it."""
    venv.EnvBuilder(with_pip=True, clear=True).create(project / ".venv")
    python = venv_python(project / ".venv")
    pins = [dev_pin(name) for name in RUNTIME_SUITE_NEEDS]
    requirements = ["-e", f".[{extras}]", *pins]
    if with_pip:
        command = [python, "-m", "pip", "install", "--quiet", *requirements]
        env = None
    else:
        command = [sys.executable, "-m", "uv", "pip", "install", "--quiet", "--python", python]
        command += requirements
        env = {"UV_CACHE_DIR": str(UV_CACHE)}
    run(command, cwd=project, timeout=900, env=env)
    return python


def bake_every_combination(
    tmp_path_factory: pytest.TempPathFactory,
    label: str,
    combinations: Iterable[str] = COMBINATIONS,
    **answers: str,
) -> dict[str, Path]:
    """One bake per option combination (plus ``answers``), each in its own temporary directory."""
    baked = {}
    for combination in combinations:
        combination_answers = COMBINATIONS[combination]
        output = tmp_path_factory.mktemp(f"{label}-{combination}") / "out"
        output.mkdir()
        baked[combination] = bake_project(output, **combination_answers, **answers)
    return baked


def install_combination(project: Path, combination: str) -> Installed:
    aws = COMBINATIONS[combination]["include_aws_example"] == "yes"
    install(project, "dev,aws" if aws else "dev", with_pip=combination == PIP_COMBINATION)
    return Installed(project, combination)


def shared_temp(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The temporary directory every test process of this run shares: this session's own, or,
    under pytest-xdist (``dev.py test`` runs a worker per core and one more), the run's, whose
    ``popen-gw<N>`` children are the workers' own."""
    base = tmp_path_factory.getbasetemp()
    return base.parent if os.environ.get("PYTEST_XDIST_WORKER") and fcntl else base


#: Beside an installed bake's directory: written once its install ended, how it ended.
INSTALL_DONE = ".installed"
INSTALL_FAILED = ".install-failed"


class Installs:
    """The session's installed bakes, one per combination, started ahead of need, and one per
    combination for the whole run: parallel test workers share them.

    ``start(combination)`` takes the combination's lock in the run's shared temporary directory
    (``shared_temp``) without waiting. The worker that gets it first bakes on the calling thread
    (cookiecutter changes the working directory while it renders, which no other thread may see)
    and hands the venv and its pip install, which wait mostly on downloads and disk, to a thread of
    its own, which records how it ended and lets the lock go; any other worker waits for the lock
    on a thread and takes that bake. Calling the object waits for the install (starting it first
    if nobody did). A failed install fails every test that asks for it, in every worker, with
    pip's output.
    """

    def __init__(self, tmp_path_factory: pytest.TempPathFactory) -> None:
        self._root = shared_temp(tmp_path_factory)
        self._pool = ThreadPoolExecutor(len(COMBINATIONS), thread_name_prefix="install")
        self._installs: dict[str, Future[Installed]] = {}

    def start(self, combination: str) -> None:
        if combination in self._installs:
            return
        directory = self._root / f"installed-{combination}"
        lock = (self._root / f"installed-{combination}.lock").open("a")
        if fcntl is None:
            ours = True  # no file locks (Windows): one process, its own directory
        else:
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
                ours = not directory.exists()
            except BlockingIOError:
                ours = False
        if not ours:
            self._installs[combination] = self._pool.submit(self._taken, lock, directory)
            return
        try:
            output = directory / "out"
            output.mkdir(parents=True)
            project = bake_project(output, **COMBINATIONS[combination])
        except BaseException as exc:
            ended(directory, INSTALL_FAILED, f"baking {combination} failed: {exc!r}")
            lock.close()
            raise
        self._installs[combination] = self._pool.submit(
            self._install, lock, directory, project, combination
        )

    @staticmethod
    def _install(lock: IO[str], directory: Path, project: Path, combination: str) -> Installed:
        try:
            installed = install_combination(project, combination)
        except BaseException as exc:  # pytest.fail's exception is no Exception
            ended(directory, INSTALL_FAILED, str(exc))
            raise
        else:
            ended(directory, INSTALL_DONE, str(project))
            return installed
        finally:
            lock.close()  # lets the lock go

    @staticmethod
    def _taken(lock: IO[str], directory: Path) -> Installed:
        """The install another worker made (waiting for it to end): its project, or its failure."""
        with lock:
            if fcntl is not None:
                fcntl.flock(lock, fcntl.LOCK_EX)
            done, failed = directory / INSTALL_DONE, directory / INSTALL_FAILED
            if done.is_file():
                project = Path(done.read_text(encoding="utf-8"))
                return Installed(project, directory.name.removeprefix("installed-"))
            if failed.is_file():
                pytest.fail(failed.read_text(encoding="utf-8"), pytrace=False)
            pytest.fail(f"the worker installing {directory} stopped before it ended", pytrace=False)

    def __call__(self, combination: str) -> Installed:
        self.start(combination)
        return self._installs[combination].result()

    def close(self) -> None:
        self._pool.shutdown(wait=True, cancel_futures=True)


def ended(directory: Path, name: str, text: str) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    (directory / name).write_text(text, encoding="utf-8")


def run_template_suite(
    project: Installed,
    suite: Path,
    *options: str | Path,
    targets: Sequence[str] = (),
    workers: int = SUITE_WORKERS,
) -> None:
    """Run the template's ``suite`` (``tests/runtime``, ``tests/samples``; or only its tests
    ``targets``) with ``project``'s python, against its package, under the suite's own
    settings: neither the template's conftest nor the project's pytest settings apply."""
    settings: list[str | Path] = ["-c", suite / "pytest.ini", "--rootdir", suite]
    run(
        [project.python, "-m", "pytest", *settings, *options, *(targets or [str(suite)]), "-q"],
        cwd=project.project,
        timeout=1200,
        env={"MRTR_PACKAGE": DEFAULT_PACKAGE, "MRTR_SUITE_WORKERS": str(workers)},
    )
