#!/usr/bin/env python3
"""Developer commands for the mrtr-server template. Standard library only, Python 3.11 or newer.

    python3 dev.py demo                      bake the defaults into build/demo/ and run the server
    python3 dev.py test [PYTEST ARGS...]     run every test of the template (what CI runs)
    python3 dev.py bake [--no-aws] OUT [key=value ...]   bake the template into OUT
    python3 dev.py runtime-hash [--replace] [--at REV]   record the runtime's hash for its version

`demo` and `bake` need only build/demo/.venv/, a small venv with cookiecutter (the version
requirements-dev.txt pins) and, once `demo` has baked, the demo project with its runtime
dependencies. Only `test` builds .venv/ at the repository root with every pinned tool of
requirements-dev.txt. A venv is created on first use and rebuilt when what it installs (or the
Python running this script) changes; nothing already done is done, or announced, again. pip's
cache is .cache/pip/, so a rebuild needs the network only for what is not cached yet.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import venv
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parent
DEV_VENV = ROOT / ".venv"
REQUIREMENTS = ROOT / "requirements-dev.txt"
CACHE = ROOT / ".cache"
PIP_CACHE = CACHE / "pip"
UV_CACHE = CACHE / "uv"
DEMO_OUT = ROOT / "build" / "demo"
BAKE_VENV = DEMO_OUT / ".venv"
STAMP = ".dev-py-stamp"
DEMO_STAMP = ".dev-py-demo-stamp"
#: The vendored runtime, as the template holds it (copied into every bake byte for byte).
RUNTIME = "{{cookiecutter.project_slug}}/src/{{cookiecutter.package_name}}/mrtr_runtime"
#: {version: runtime_hash} of every version the template has had;
#: tests/template/test_runtime_version.py fails when the runtime hashes differently from the
#: entry of its `__version__`.
RUNTIME_VERSIONS = ROOT / "tests" / "runtime_versions.json"
RUNTIME_VERSION_LINE = re.compile(r'^__version__ = "([0-9]+\.[0-9]+\.[0-9]+)"$', re.MULTILINE)
WINDOWS = os.name == "nt"
MIN_PYTHON = (3, 11)
#: pytest's "no tests were collected" exit status.
NO_TESTS_COLLECTED = 5
#: A run of every test uses one pytest-xdist worker per core and one more, at most this many: the
#: suite is mostly subprocesses (servers, npm, mypy), and much of its time is waits (servers'
#: graces and timeouts): with a worker per core, a run on 2 cores kept 1.5 of them busy on
#: average, its end mostly waiting.
MAX_TEST_WORKERS = 4
#: Options that say how to run in parallel (or not at all), or that need a single process.
OWN_PARALLELISM = ("-n", "--numprocesses", "--dist", "--pdb", "--trace", "no:xdist")
#: What `demo` offers to paste: a complete MCP 2026-07-28 request on one line (server/discover:
#: no parameters beyond the per-request `_meta`).
DISCOVER_LINE = json.dumps(
    {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "server/discover",
        "params": {
            "_meta": {
                "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                "io.modelcontextprotocol/clientInfo": {"name": "dev.py demo", "version": "1"},
                "io.modelcontextprotocol/clientCapabilities": {},
            }
        },
    },
    separators=(",", ":"),
)


def say(message: str) -> None:
    sys.stderr.write(f"dev.py: {message}\n")
    sys.stderr.flush()


def shown(path: Path) -> str:
    """``path`` as messages name it: relative to the repository when inside it."""
    return str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else str(path)


def command_line(parts: Sequence[str | Path]) -> str:
    """A command the user can paste into this platform's shell."""
    words = [str(part) for part in parts]
    return subprocess.list2cmdline(words) if WINDOWS else shlex.join(words)


def venv_bin(venv_dir: Path, name: str) -> Path:
    if WINDOWS:
        return venv_dir / "Scripts" / f"{name}.exe"
    return venv_dir / "bin" / name


def clean_env() -> dict[str, str]:
    """The environment for child processes: no outer venv leaking in, a shared pip cache."""
    env = dict(os.environ)
    for name in ("VIRTUAL_ENV", "PYTHONHOME", "PYTHONPATH", "CONDA_PREFIX"):
        env.pop(name, None)
    env["PIP_CACHE_DIR"] = str(PIP_CACHE)
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    return env


def run(command: Sequence[str | Path], *, cwd: Path | None = None, quiet: bool = False) -> None:
    """Run ``command``; ``quiet`` keeps its output unless it fails."""
    result = subprocess.run(
        [str(part) for part in command],
        cwd=cwd,
        env=clean_env(),
        capture_output=quiet,
        text=True,
        check=False,
    )
    if result.returncode != 0:
        if quiet:
            sys.stderr.write(result.stdout + result.stderr)
        raise SystemExit(f"dev.py: failed ({result.returncode}): {command_line(command)}")


@contextlib.contextmanager
def locked(name: str) -> Iterator[None]:
    """Serialise venv builds between concurrent dev.py runs in one checkout (POSIX only)."""
    CACHE.mkdir(parents=True, exist_ok=True)
    try:
        import fcntl
    except ImportError:  # Windows: no advisory locks in the stdlib; run one build at a time
        yield
        return
    with open(CACHE / f"{name}.lock", "w", encoding="utf-8") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def stamp_digest(fingerprint: str) -> str:
    # The base interpreter, resolved: python3, its versioned name and any venv made from it
    # are one Python and must not rebuild each other's venvs.
    interpreter = os.path.realpath(getattr(sys, "_base_executable", sys.executable))
    return hashlib.sha256("\n".join([fingerprint, sys.version, interpreter]).encode()).hexdigest()


def is_current(stamp: Path, digest: str) -> bool:
    return stamp.is_file() and stamp.read_text(encoding="utf-8") == digest


def venv_lock(venv_dir: Path) -> contextlib.AbstractContextManager[None]:
    return locked(hashlib.sha256(str(venv_dir).encode()).hexdigest()[:16])


def pip_install(venv_dir: Path, install: Sequence[str]) -> None:
    """``pip install <install>`` into the venv from the repository root; quiet unless it fails."""
    python = venv_bin(venv_dir, "python")
    run([python, "-m", "pip", "install", "--quiet", *install], cwd=ROOT, quiet=True)


def uv_install(venv_dir: Path, install: Sequence[str]) -> None:
    """``<install>`` into the venv with uv, at the version requirements-dev.txt pins (pip
    installs it first): pip spends well over a minute of CPU on the test tools, uv seconds.
    uv reads no pip configuration, so where it cannot install (an index only pip.conf names,
    say), pip does the whole install instead, and says why."""
    python = venv_bin(venv_dir, "python")
    try:
        pip_install(venv_dir, [pinned("uv")])
        uv = [python, "-m", "uv", "pip", "install", "--quiet", "--python", python, *install]
        result = subprocess.run(
            [str(part) for part in uv],
            cwd=ROOT,
            env={**clean_env(), "UV_CACHE_DIR": str(UV_CACHE)},
            capture_output=True,
            text=True,
            check=False,
        )
    except SystemExit as error:  # pip could not install uv itself
        reason = str(error)
    else:
        if result.returncode == 0:
            return
        reason = (result.stderr.strip().splitlines() or ["no output"])[-1]
    say(f"uv could not install ({reason}); pip installs instead")
    pip_install(venv_dir, install)


def ensure_venv(
    venv_dir: Path, install: Sequence[str], fingerprint: str, *, with_uv: bool = False
) -> Path:
    """A venv at ``venv_dir`` with ``pip install <install>`` done (``with_uv``: ``uv pip
    install``); rebuilt when the fingerprint (what was installed, with which Python) changes.
    Returns its python."""
    python = venv_bin(venv_dir, "python")
    stamp = venv_dir / STAMP
    digest = stamp_digest(fingerprint)
    with venv_lock(venv_dir):
        if python.exists() and is_current(stamp, digest):
            return python
        if Path(sys.prefix).resolve() == venv_dir.resolve():
            raise SystemExit(
                f"dev.py: {shown(venv_dir)} needs rebuilding, and this is its own python; "
                "run dev.py with python3"
            )
        installer = "uv pip install" if with_uv else "pip install"
        say(f"creating {shown(venv_dir)}: {installer} {command_line(install)}")
        try:
            venv.EnvBuilder(with_pip=True, clear=True).create(venv_dir)
        except (OSError, subprocess.CalledProcessError) as error:
            raise SystemExit(
                f"dev.py: cannot create a virtual environment ({error}); on Debian/Ubuntu install "
                "the python3-venv package"
            ) from None
        (uv_install if with_uv else pip_install)(venv_dir, install)
        stamp.write_text(digest, encoding="utf-8")
    return python


def ensure_installed(venv_dir: Path, install: Sequence[str], fingerprint: str) -> None:
    """``pip install <install>`` into an existing venv, again only when the fingerprint changes
    (a new venv has no stamp, so it gets it too)."""
    stamp = venv_dir / DEMO_STAMP
    digest = stamp_digest(fingerprint)
    with venv_lock(venv_dir):
        if is_current(stamp, digest):
            return
        say(f"installing into {shown(venv_dir)}: pip install {command_line(install)}")
        pip_install(venv_dir, install)
        stamp.write_text(digest, encoding="utf-8")


def dev_python() -> Path:
    requirements = REQUIREMENTS.read_text(encoding="utf-8")
    return ensure_venv(DEV_VENV, ["-r", shown(REQUIREMENTS)], requirements, with_uv=True)


def pinned(name: str) -> str:
    """The ``name==version`` line of requirements-dev.txt."""
    for line in REQUIREMENTS.read_text(encoding="utf-8").splitlines():
        requirement = line.split("#", 1)[0].strip()
        if requirement.partition("==")[0].strip().lower() == name:
            return requirement
    raise SystemExit(f"dev.py: {shown(REQUIREMENTS)} pins no {name}")


def bake_python() -> Path:
    cookiecutter = pinned("cookiecutter")
    return ensure_venv(BAKE_VENV, [cookiecutter], cookiecutter)


def bake(
    output: Path,
    *,
    aws: bool,
    extra: Sequence[str] = (),
    overwrite: bool = False,
    quiet: bool = False,
) -> None:
    command: list[str | Path] = [bake_python(), "-m", "cookiecutter", "--no-input"]
    if overwrite:
        command.append("--overwrite-if-exists")
    command += ["--output-dir", output, ROOT, f"include_aws_example={'yes' if aws else 'no'}"]
    run([*command, *extra], quiet=quiet)


def package_of(project: Path) -> str:
    mains = sorted(project.glob("src/*/__main__.py"))
    if len(mains) != 1:
        raise SystemExit(f"dev.py: cannot find the package of {project}")
    return mains[0].parent.name


def clear_except(project: Path, keep: set[str]) -> None:
    for child in project.iterdir():
        if child.name in keep:
            continue
        if child.is_dir() and not child.is_symlink():
            shutil.rmtree(child)
        else:
            child.unlink()


def command_demo(_: argparse.Namespace) -> int:
    DEMO_OUT.mkdir(parents=True, exist_ok=True)
    # Re-bake over the last demo but keep its signing key (the post-gen hook keeps an existing
    # key), so in-flight rounds stay valid; the venv beside it makes a second run take seconds.
    for project in DEMO_OUT.iterdir():
        if (project / "pyproject.toml").is_file():
            clear_except(project, {".mrtr-signing-key"})
    # Quiet: the hook's next steps (make a venv, install, paste a config) are done or printed
    # below, and stdout is about to become the server's wire.
    bake(DEMO_OUT, aws=True, overwrite=True, quiet=True)
    projects = [path for path in DEMO_OUT.iterdir() if (path / "pyproject.toml").is_file()]
    if len(projects) != 1:
        raise SystemExit(f"dev.py: expected one project in {DEMO_OUT}, found {len(projects)}")
    project = projects[0]
    pyproject = (project / "pyproject.toml").read_text(encoding="utf-8")
    ensure_installed(BAKE_VENV, ["-e", f"{shown(project)}[aws]"], pyproject)
    package = package_of(project)
    argv = [str(venv_bin(BAKE_VENV, "python")), "-m", package]
    configs: list[str | Path] = [venv_bin(BAKE_VENV, project.name), "config", "all"]
    say(f"host configurations: {command_line(configs)}")
    inspector = ["npx", "@modelcontextprotocol/inspector", *argv]
    say(f"the MCP Inspector (needs Node.js): {command_line(inspector)}")
    say(
        f"serving {shown(project)} on stdin/stdout, one JSON-RPC message per line; Ctrl-D or "
        "Ctrl-C stops it. Paste this line to ask it what it offers:"
    )
    sys.stderr.write(DISCOVER_LINE + "\n")
    sys.stderr.flush()
    if WINDOWS:  # os.exec* on Windows does not replace the process; keep stdio attached instead
        return subprocess.call(argv, cwd=project, env=clean_env())
    os.chdir(project)
    os.execve(argv[0], argv, clean_env())


def names_a_path(argument: str) -> bool:
    """Whether a pytest argument selects tests by path (``tests/test_x.py``, ``...::test_y``)."""
    return not argument.startswith("-") and (ROOT / argument.split("::", 1)[0]).exists()


def test_workers() -> int:
    """The cores this process may run on and one more, at most ``MAX_TEST_WORKERS``; one on
    one core."""
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        cores = os.cpu_count() or 1
    return 1 if cores < 2 else min(cores + 1, MAX_TEST_WORKERS)


def parallel_options(pytest_args: Sequence[str], workers: int) -> list[str]:
    """``-n <workers> --dist loadfile`` for a run of every test (what CI runs): each module runs
    whole on one worker, so its module fixtures are made once, handed out in the order
    tests/conftest.py sorts them (not by size), and the installed bakes are shared by the workers
    (tests/bakery.py). None when the arguments name their own paths (a developer's
    loop stays one process, with its output as it comes), choose their own parallelism (``-n 0``
    turns it off), or there is one core."""
    if workers < 2 or any(map(names_a_path, pytest_args)):
        return []
    if any(argument.startswith(OWN_PARALLELISM) for argument in pytest_args):
        return []
    return ["-n", str(workers), "--dist", "loadfile", "--no-loadscope-reorder"]


def command_test(pytest_args: Sequence[str]) -> int:
    python = dev_python()
    # Every test unless the arguments name their own paths: then only those.
    everything = [] if any(map(names_a_path, pytest_args)) else ["tests/"]
    parallel = parallel_options(pytest_args, test_workers())
    command = [str(python), "-m", "pytest", *everything, *parallel, *pytest_args]
    say(" ".join(command))
    code = subprocess.call(command, cwd=ROOT, env=clean_env())
    if code == NO_TESTS_COLLECTED:
        say("pytest collected no tests: a wrong path or -k expression? That is an error here.")
    return code


def runtime_hash(files: Mapping[str, bytes]) -> str:
    """SHA-256 over the runtime's modules: each relative path (sorted) and its bytes, framed.

    A path and a length precede each file's bytes, so moving code between files, renaming a
    file or adding an empty one changes the hash as surely as editing a line does.
    """
    digest = hashlib.sha256()
    for path in sorted(files):
        data = files[path]
        digest.update(f"{path}\0{len(data)}\0".encode())
        digest.update(data)
    return digest.hexdigest()


def runtime_files(root: Path = ROOT) -> dict[str, bytes]:
    """The runtime's modules in a checkout of the template, by path relative to the runtime."""
    runtime = root / RUNTIME
    return {
        path.relative_to(runtime).as_posix(): path.read_bytes()
        for path in runtime.rglob("*.py")
        if "__pycache__" not in path.parts
    }


def runtime_files_at(revision: str) -> dict[str, bytes]:
    """The runtime's modules at a git revision of this repository."""
    listing = subprocess.run(
        ["git", "ls-tree", "-r", "-z", "--name-only", revision, "--", f"{RUNTIME}/"],
        cwd=ROOT,
        capture_output=True,
        check=True,
    ).stdout.decode()
    files: dict[str, bytes] = {}
    for path in filter(None, listing.split("\0")):
        if path.endswith(".py"):
            shown_file = ["git", "show", f"{revision}:{path}"]
            data = subprocess.run(shown_file, cwd=ROOT, capture_output=True, check=True).stdout
            files[path.removeprefix(f"{RUNTIME}/")] = data
    return files


def runtime_version(files: Mapping[str, bytes]) -> str:
    found = RUNTIME_VERSION_LINE.search(files["__init__.py"].decode())
    if not found:
        raise SystemExit('dev.py: mrtr_runtime/__init__.py has no __version__ = "X.Y.Z" line')
    return found[1]


def recorded_runtime_versions() -> dict[str, str]:
    if not RUNTIME_VERSIONS.exists():
        return {}
    recorded: dict[str, str] = json.loads(RUNTIME_VERSIONS.read_text(encoding="utf-8"))
    return recorded


def command_runtime_hash(args: argparse.Namespace) -> int:
    files = runtime_files() if args.at is None else runtime_files_at(args.at)
    version, digest = runtime_version(files), runtime_hash(files)
    recorded = recorded_runtime_versions()
    if recorded.get(version, digest) != digest and not args.replace:
        say(
            f"runtime {version} is recorded with another hash ({recorded[version]}). If {version} "
            "is released, the runtime needs a new version: bump __version__ in mrtr_runtime/"
            "__init__.py (the docstring and the line) and add its CHANGELOG.md heading. If "
            f"{version} is not released yet, record the new hash: dev.py runtime-hash --replace"
        )
        return 1
    recorded[version] = digest
    ordered = dict(sorted(recorded.items(), key=lambda item: tuple(map(int, item[0].split(".")))))
    RUNTIME_VERSIONS.write_text(json.dumps(ordered, indent=2) + "\n", encoding="utf-8")
    say(f"runtime {version}: {digest} (recorded in {shown(RUNTIME_VERSIONS)})")
    return 0


def command_bake(args: argparse.Namespace) -> int:
    bake(Path(args.output).absolute(), aws=not args.no_aws, extra=args.extra)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    if sys.version_info < MIN_PYTHON:
        found = ".".join(map(str, sys.version_info[:3]))
        raise SystemExit(f"dev.py: needs Python 3.11 or newer; this is {found}")
    parser = argparse.ArgumentParser(prog="dev.py", description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True, metavar="command")
    demo = commands.add_parser("demo", help="bake the defaults into build/demo/ and serve")
    demo.set_defaults(handler=command_demo)
    # Parsed by hand below so that every option after "test" reaches pytest untouched.
    commands.add_parser("test", help="run the template's tests; extra args go to pytest")
    bake_parser = commands.add_parser("bake", help="bake the template into OUT")
    bake_parser.add_argument("--no-aws", action="store_true", help="include_aws_example=no")
    bake_parser.add_argument("output", metavar="OUT")
    bake_parser.add_argument("extra", nargs="*", metavar="key=value", help="more answers")
    bake_parser.set_defaults(handler=command_bake)
    hash_parser = commands.add_parser(
        "runtime-hash", help="record the runtime's hash for its __version__ (tests check it)"
    )
    hash_parser.add_argument(
        "--replace", action="store_true", help="change the hash of an unreleased version"
    )
    hash_parser.add_argument("--at", metavar="REV", help="the runtime at a git revision")
    hash_parser.set_defaults(handler=command_runtime_hash)
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv[:1] == ["test"]:
        return command_test(argv[1:])
    args = parser.parse_args(argv)
    code: int = args.handler(args)
    return code


if __name__ == "__main__":
    sys.exit(main())
