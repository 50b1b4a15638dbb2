"""Everything the benchmark needs on disk: the baked project, four virtual environments and a
description of the machine. Stdlib only; all of it lives under `<repo>/.cache/bench/`.

- tools venv (`.cache/bench/tools`): cookiecutter, used only when the repo has no dev `.venv`.
- the baked project (`.cache/bench/baked/<slug>`), re-baked every run, with `bench_tools.py`
  (and, where the runtime has tasks, `bench_task_tools.py`) dropped into its `tools/` package,
  and its venv (`.cache/bench/baked-venv`, `pip install -e '<project>[http,oauth,redis]'`: the
  `http` extra for the HTTP section, `oauth` for its row with authorization on, `redis` for the
  tasks section, each where the project offers it).
- the SDK venv (`.cache/bench/sdk`): `mcp==2.3.0`, reused while that version is installed; for
  the HTTP section it also gets the baked venv's versions of uvicorn, httptools and uvloop
  (`sdk_http_python`), so both servers run on the same HTTP stack.
- the FastMCP venv (`.cache/bench/fastmcp`): `fastmcp==4.2.3`, likewise reused, and likewise given
  the baked venv's HTTP stack for the HTTP section (`fastmcp_http_python`).
- the FastMCP tasks venv (`.cache/bench/fastmcp-tasks`): `fastmcp==4.1.4` with
  `fastmcp-tasks==4.1.4` (the newest pair PyPI installs together), for the tasks section.
pip's cache is `<repo>/.cache/pip` so repeated runs do not download again.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
CACHE = REPO / ".cache" / "bench"
LOGS = CACHE / "logs"
PIP_CACHE = REPO / ".cache" / "pip"
SDK_REQUIREMENT = "mcp==2.3.0"
SDK_PACKAGES = ("mcp", "mcp-types", "pydantic", "pydantic-core", "anyio", "cryptography")
FASTMCP_REQUIREMENT = "fastmcp==4.2.3"
FASTMCP_PACKAGES = ("fastmcp", "mcp", "pydantic", "pydantic-core", "anyio", "cryptography")
# FastMCP's tasks (SEP-2663) come as the separate `fastmcp-tasks`, pinned to its own FastMCP
# release (`fastmcp-slim[server]==<same version>`). FastMCP 4.2.3's `tasks` extra asks for
# `fastmcp-tasks==4.2.3`, which PyPI does not have (its newest is 4.1.4), so the tasks section
# runs the newest pair that installs together, in a venv of its own beside 4.2.3's.
FASTMCP_TASKS_REQUIREMENTS = ("fastmcp==4.1.4", "fastmcp-tasks==4.1.4")
FASTMCP_TASKS_PACKAGES = (
    "fastmcp",
    "fastmcp-tasks",
    "pydocket",
    "redis",
    "mcp",
    "pydantic",
    "anyio",
)
# FastMCP's CLI banner asks PyPI for a newer release at every start (fastmcp/utilities/
# version_check.py, cached 12 hours): a network round trip is no part of a server's start-up,
# and the bench must not query a registry, so its servers run with the check off.
FASTMCP_ENV = {"FASTMCP_CHECK_FOR_UPDATES": "off"}
# The ASGI server and its fast paths: the baked `http` extra installs them; uvicorn uses
# httptools and uvloop whenever they are importable, for our server and the SDK's alike.
HTTP_STACK = ("uvicorn", "httptools", "uvloop")


class SetupError(RuntimeError):
    """A setup step failed; the message names its log file."""


@dataclass(frozen=True)
class Baked:
    project: Path
    package: str
    python: Path
    command: list[str]


def _run(argv: list[str], log_name: str, *, cwd: Path | None = None) -> None:
    LOGS.mkdir(parents=True, exist_ok=True)
    log = LOGS / log_name
    env = {**os.environ, "PIP_CACHE_DIR": str(PIP_CACHE), "PIP_DISABLE_PIP_VERSION_CHECK": "1"}
    with log.open("ab") as out:
        out.write(("\n$ " + " ".join(argv) + "\n").encode())
        out.flush()
        done = subprocess.run(
            argv, check=False, stdout=out, stderr=subprocess.STDOUT, cwd=cwd, env=env
        )
    if done.returncode != 0:
        raise SetupError(f"`{' '.join(argv[:3])} ...` failed ({done.returncode}); see {log}")


def _venv(path: Path, log_name: str) -> Path:
    python = path / "bin" / "python"
    if not python.exists():
        _run([sys.executable, "-m", "venv", str(path)], log_name)
    return python


def _has(python: Path, requirement: str) -> bool:
    name, _, version = requirement.partition("==")
    code = f"import importlib.metadata as m; print(m.version({name!r}))"
    done = subprocess.run([str(python), "-c", code], check=False, capture_output=True, text=True)
    return done.returncode == 0 and (not version or done.stdout.strip() == version)


def cookiecutter_command() -> list[str]:
    """The repo's dev venv's cookiecutter if there is one, else our own."""
    dev = REPO / ".venv" / "bin" / "cookiecutter"
    if dev.exists():
        return [str(dev)]
    python = _venv(CACHE / "tools", "tools-venv.log")
    if not _has(python, "cookiecutter"):
        _run([str(python), "-m", "pip", "install", "-q", "cookiecutter"], "tools-venv.log")
    return [str(CACHE / "tools" / "bin" / "cookiecutter")]


def bake(tools_module: Path, *, reuse_on_failure: bool = False) -> tuple[Baked, str | None]:
    """Bake the template (no AWS example), drop in the bench tools, install it.

    The bake goes to a staging directory first and replaces the previous one only when it
    worked. Several people edit this checkout at once, so a half-edited template file can make
    a bake fail; with `reuse_on_failure` the previous good bake is used instead, and the second
    value returned says so (None when this run's bake was used)."""
    out = CACHE / "baked"
    staging = CACHE / "baked.new"
    if staging.exists():
        shutil.rmtree(staging)
    staging.mkdir(parents=True)
    note: str | None = None
    try:
        _run(
            [
                *cookiecutter_command(),
                "--no-input",
                "-f",
                "--accept-hooks",
                "yes",  # the post-gen hook removes the AWS example: bake what a user gets
                "-o",
                str(staging),
                str(REPO),
                "include_aws_example=no",
                # The HTTP and Redis rows measure those wings: bake them in.
                "include_http=yes",
                "include_redis_store=yes",
            ],
            "bake.log",
        )
        _project_in(staging)
    except SetupError as exc:
        shutil.rmtree(staging, ignore_errors=True)
        if not (reuse_on_failure and out.exists()):
            raise
        note = f"baking failed ({exc}); measured the previous bake of {_mtime(out)}"
    else:
        if out.exists():
            shutil.rmtree(out)
        staging.rename(out)
    project = _project_in(out)
    tools_inits = sorted(project.glob("src/*/tools/__init__.py"))
    if len(tools_inits) != 1:
        raise SetupError(f"no src/<package>/tools/ in {project}")
    _drop_tools(tools_module, tools_inits[0].parent)
    package = tools_inits[0].parent.parent.name
    venv = CACHE / "baked-venv"
    python = _venv(venv, "baked-venv.log")
    extras = ",".join(baked_extras(project))
    _run(
        [str(python), "-m", "pip", "install", "-q", "-e", f"{project}[{extras}]"], "baked-venv.log"
    )
    script = venv / "bin" / project.name
    command = [str(script)] if script.exists() else [str(python), "-m", package]
    return Baked(project=project, package=package, python=python, command=command), note


def baked_extras(project: Path) -> list[str]:
    """The extras the bench installs: `http` for the HTTP section, `oauth` (PyJWT) for its row
    with authorization on, and `redis` (redis-py, for `MRTR_TASK_STORE=redis://...`) for the
    tasks section, the last two where the project has them."""
    import tomllib

    data = tomllib.loads((project / "pyproject.toml").read_text())
    offered = data.get("project", {}).get("optional-dependencies", {})
    wanted = ("http", "oauth", "redis")
    return [extra for extra in wanted if extra == "http" or extra in offered]


def existing(project: Path, tools_module: Path) -> Baked:
    """An already-baked project (say, a copy of an older bake), run from the bench's baked venv
    with `PYTHONPATH=<project>/src` ahead of the installed one. Needs one normal run first."""
    project = project.resolve()
    tools_inits = sorted(project.glob("src/*/tools/__init__.py"))
    if len(tools_inits) != 1:
        raise SetupError(f"no src/<package>/tools/ in {project}")
    _drop_tools(tools_module, tools_inits[0].parent)
    package = tools_inits[0].parent.parent.name
    python = CACHE / "baked-venv" / "bin" / "python"
    if not python.exists():
        raise SetupError("no baked venv yet: run bench/run.py once without --project")
    return Baked(
        project=project, package=package, python=python, command=[str(python), "-m", package]
    )


#: The tasks section's tool, dropped in only where the runtime has tasks (an older bake measured
#: with `--project` would fail to import it, and every section with it).
TASK_TOOLS = Path(__file__).resolve().parent / "bench_task_tools.py"


def has_tasks(project: Path) -> bool:
    """Whether the baked runtime offers tasks to tools (`Context.start_task`, issue 21)."""
    return any(
        "def start_task(" in path.read_text()
        for path in project.glob("src/*/mrtr_runtime/_context.py")
    )


def _drop_tools(tools_module: Path, tools_dir: Path) -> None:
    shutil.copyfile(tools_module, tools_dir / "bench_tools.py")
    task_tools = tools_dir / TASK_TOOLS.name
    if has_tasks(tools_dir.parent.parent.parent):
        shutil.copyfile(TASK_TOOLS, task_tools)
    else:
        task_tools.unlink(missing_ok=True)


def _project_in(out: Path) -> Path:
    projects = [p for p in out.iterdir() if (p / "pyproject.toml").exists()]
    if len(projects) != 1:
        raise SetupError(f"expected one baked project in {out}, found {projects}")
    return projects[0]


def _mtime(path: Path) -> str:
    import datetime as dt

    return dt.datetime.fromtimestamp(path.stat().st_mtime).isoformat(timespec="seconds")


def sdk_python() -> Path:
    python = _venv(CACHE / "sdk", "sdk-venv.log")
    if not _has(python, SDK_REQUIREMENT):
        _run([str(python), "-m", "pip", "install", "-q", SDK_REQUIREMENT], "sdk-venv.log")
    return python


def sdk_http_python(baked_python: Path) -> Path:
    """The SDK venv with the same uvicorn, httptools and uvloop as the baked venv (the SDK
    itself requires only uvicorn): the HTTP section then compares the MCP layers, not two
    HTTP parsers or event loops."""
    return _with_http_stack(sdk_python(), baked_python, "sdk-venv.log")


def fastmcp_python() -> Path:
    python = _venv(CACHE / "fastmcp", "fastmcp-venv.log")
    if not _has(python, FASTMCP_REQUIREMENT):
        _run([str(python), "-m", "pip", "install", "-q", FASTMCP_REQUIREMENT], "fastmcp-venv.log")
    return python


def fastmcp_tasks_python() -> Path:
    """FastMCP with `fastmcp-tasks` (its Docket-backed task engine), pinned as a pair."""
    python = _venv(CACHE / "fastmcp-tasks", "fastmcp-tasks-venv.log")
    if not all(_has(python, r) for r in FASTMCP_TASKS_REQUIREMENTS):
        argv = [str(python), "-m", "pip", "install", "-q", *FASTMCP_TASKS_REQUIREMENTS]
        _run(argv, "fastmcp-tasks-venv.log")
    return python


def fastmcp_tasks_http_python(baked_python: Path) -> Path:
    """The FastMCP tasks venv on the baked venv's HTTP stack (the tasks section over HTTP)."""
    return _with_http_stack(fastmcp_tasks_python(), baked_python, "fastmcp-tasks-venv.log")


def fastmcp_http_python(baked_python: Path) -> Path:
    """The FastMCP venv on the baked venv's HTTP stack, for the same reason as the SDK's."""
    return _with_http_stack(fastmcp_python(), baked_python, "fastmcp-venv.log")


def _with_http_stack(python: Path, baked_python: Path, log_name: str) -> Path:
    wanted = package_versions(baked_python, HTTP_STACK)
    if "uvicorn" not in wanted:
        raise SetupError("the baked venv has no uvicorn: is the project's `http` extra there?")
    for name in HTTP_STACK:
        if name in wanted:  # uvloop is left out where the extra leaves it out (Windows)
            ensure_installed(python, f"{name}=={wanted[name]}", log_name)
    return python


def floor_python() -> Path:
    """An empty venv: the floor needs only the standard library."""
    return _venv(CACHE / "floor", "floor-venv.log")


def tools_python() -> Path:
    """A venv for profilers (py-spy, pyinstrument), the same one that may hold cookiecutter."""
    return _venv(CACHE / "tools", "tools-venv.log")


def ensure_installed(python: Path, package: str, log_name: str) -> None:
    if not _has(python, package):
        _run([str(python), "-m", "pip", "install", "-q", package], log_name)


def package_versions(python: Path, names: tuple[str, ...]) -> dict[str, str]:
    code = (
        "import importlib.metadata as m, json, sys\n"
        "out = {'python': sys.version.split()[0]}\n"
        f"for n in {list(names)!r}:\n"
        "    try: out[n] = m.version(n)\n"
        "    except m.PackageNotFoundError: pass\n"
        "print(json.dumps(out))"
    )
    done = subprocess.run([str(python), "-c", code], check=False, capture_output=True, text=True)
    if done.returncode != 0:
        return {"error": done.stderr.strip()[-300:]}
    versions: dict[str, str] = json.loads(done.stdout)
    return versions


def baked_dependencies(project: Path) -> tuple[str, ...]:
    """The baked project's own name plus the distributions it depends on (from pyproject)."""
    import tomllib

    data = tomllib.loads((project / "pyproject.toml").read_text())
    names = [data.get("project", {}).get("name", project.name)]
    for requirement in data.get("project", {}).get("dependencies", []):
        name = requirement
        for stop in "<>=!~[; ":
            name = name.split(stop)[0]
        names.append(name.strip())
    return tuple(names)


def describe_machine() -> dict[str, Any]:
    cpu = "unknown"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    memory_kib = 0
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                memory_kib = int(line.split()[1])
    except OSError:
        pass
    try:
        usable = len(os.sched_getaffinity(0))
    except AttributeError:
        usable = os.cpu_count() or 0
    try:
        load = Path("/proc/loadavg").read_text().split()[:3]
    except OSError:
        load = []
    return {
        "cpu": cpu,
        "load_average": " ".join(load),
        "cores": os.cpu_count(),
        "usable_cores": usable,
        "memory_gib": round(memory_kib / 1024 / 1024, 1),
        "kernel": platform.release(),
        "driver_python": sys.version.split()[0],
        "platform": platform.platform(),
    }


def runtime_digest(project: Path) -> str:
    """A short digest of the baked runtime's sources, to tell "before" and "after" runs apart."""
    digest = hashlib.sha256()
    for path in sorted(project.glob("src/*/mrtr_runtime/*.py")):
        digest.update(path.name.encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()[:12]


def git_revision() -> str:
    done = subprocess.run(
        ["git", "-C", str(REPO), "describe", "--always", "--dirty"],
        check=False,
        capture_output=True,
        text=True,
    )
    return done.stdout.strip() if done.returncode == 0 else "unknown"
