#!/usr/bin/env python3
"""Developer commands for the mrtr-server template. Standard library only, Python 3.11 or newer.

    python3 dev.py demo                      bake the defaults into build/demo/ and run the server
    python3 dev.py test [PYTEST ARGS...]     run every test of the template (what CI runs)
    python3 dev.py bake [--no-aws] OUT [key=value ...]   bake the template into OUT

The pinned tools of requirements-dev.txt live in .venv/ at the repository root; it is created on
first use and rebuilt when that file (or the Python running this script) changes. pip's cache is
.cache/pip/, so a rebuild needs the network only for what is not cached yet.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import os
import shutil
import subprocess
import sys
import venv
from collections.abc import Iterator, Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parent
DEV_VENV = ROOT / ".venv"
REQUIREMENTS = ROOT / "requirements-dev.txt"
CACHE = ROOT / ".cache"
PIP_CACHE = CACHE / "pip"
DEMO_OUT = ROOT / "build" / "demo"
STAMP = ".dev-py-stamp"
WINDOWS = os.name == "nt"
MIN_PYTHON = (3, 11)
#: pytest's "no tests were collected" exit status.
NO_TESTS_COLLECTED = 5


def say(message: str) -> None:
    sys.stderr.write(f"dev.py: {message}\n")
    sys.stderr.flush()


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


def run(command: Sequence[str | Path], *, cwd: Path | None = None, to_stderr: bool = False) -> None:
    result = subprocess.run(
        [str(part) for part in command],
        cwd=cwd,
        env=clean_env(),
        stdout=sys.stderr if to_stderr else None,
        check=False,
    )
    if result.returncode != 0:
        raise SystemExit(f"dev.py: failed ({result.returncode}): {' '.join(map(str, command))}")


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


def ensure_venv(venv_dir: Path, install: Sequence[str], fingerprint: str) -> Path:
    """A venv at ``venv_dir`` with ``pip install <install>`` done; rebuilt when the fingerprint
    (what was installed, with which Python) changes. Returns its python."""
    python = venv_bin(venv_dir, "python")
    stamp = venv_dir / STAMP
    digest = hashlib.sha256(
        "\n".join([fingerprint, sys.version, sys.executable]).encode("utf-8")
    ).hexdigest()
    with locked(hashlib.sha256(str(venv_dir).encode()).hexdigest()[:16]):
        if python.exists() and stamp.exists() and stamp.read_text(encoding="utf-8") == digest:
            return python
        say(f"creating {venv_dir} (pip cache: {PIP_CACHE})")
        try:
            venv.EnvBuilder(with_pip=True, clear=True).create(venv_dir)
        except (OSError, subprocess.CalledProcessError) as error:
            raise SystemExit(
                f"dev.py: cannot create a virtual environment ({error}); on Debian/Ubuntu install "
                "the python3-venv package"
            ) from None
        run([python, "-m", "pip", "install", "--quiet", *install])
        stamp.write_text(digest, encoding="utf-8")
    return python


def dev_python() -> Path:
    requirements = REQUIREMENTS.read_text(encoding="utf-8")
    return ensure_venv(DEV_VENV, ["-r", str(REQUIREMENTS)], requirements)


def bake(
    output: Path,
    *,
    aws: bool,
    extra: Sequence[str] = (),
    overwrite: bool = False,
    to_stderr: bool = False,
) -> None:
    command: list[str | Path] = [dev_python(), "-m", "cookiecutter", "--no-input"]
    if overwrite:
        command.append("--overwrite-if-exists")
    command += ["--output-dir", output, ROOT, f"include_aws_example={'yes' if aws else 'no'}"]
    run([*command, *extra], to_stderr=to_stderr)


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
    # Re-bake over the last demo but keep its venv and signing key (the post-gen hook keeps an
    # existing key), so a second run takes seconds and in-flight rounds stay valid.
    for project in DEMO_OUT.iterdir():
        if project.is_dir():
            clear_except(project, {".venv", ".mrtr-signing-key"})
    # The hook's next steps go to stderr: stdout is about to become the server's wire.
    bake(DEMO_OUT, aws=True, overwrite=True, to_stderr=True)
    projects = [path for path in DEMO_OUT.iterdir() if (path / "pyproject.toml").is_file()]
    if len(projects) != 1:
        raise SystemExit(f"dev.py: expected one project in {DEMO_OUT}, found {len(projects)}")
    project = projects[0]
    pyproject = (project / "pyproject.toml").read_text(encoding="utf-8")
    python = ensure_venv(project / ".venv", ["-e", f"{project}[aws]"], pyproject)
    package = package_of(project)
    say(f"baked {project}")
    say(f"host configs: {venv_bin(project / '.venv', project.name)} config all")
    say(
        "starting the stdio server: it waits for JSON-RPC, one message per line on stdin; "
        "Ctrl-D or Ctrl-C stops it"
    )
    argv = [str(python), "-m", package]
    if WINDOWS:  # os.exec* on Windows does not replace the process; keep stdio attached instead
        return subprocess.call(argv, cwd=project, env=clean_env())
    os.chdir(project)
    os.execve(argv[0], argv, clean_env())


def command_test(pytest_args: Sequence[str]) -> int:
    python = dev_python()
    command = [str(python), "-m", "pytest", "tests/", *pytest_args]
    say(" ".join(command))
    code = subprocess.call(command, cwd=ROOT, env=clean_env())
    if code == NO_TESTS_COLLECTED:
        say("pytest collected no tests: a wrong path or -k expression? That is an error here.")
    return code


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
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv[:1] == ["test"]:
        return command_test(argv[1:])
    args = parser.parse_args(argv)
    code: int = args.handler(args)
    return code


if __name__ == "__main__":
    sys.exit(main())
