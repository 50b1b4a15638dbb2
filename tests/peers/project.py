"""A baked project for the peer tests, with the conformance fixtures dropped in on request.

The server runs as `python -m <package>` from the project's `src/` (PYTHONPATH), with this
interpreter: the template's test environment already has what the generated project needs at run
time (anyio, pydantic; boto3 for the AWS example; uvicorn for `http`), and that skips a venv and
an install per test run. Installing a baked project is tested elsewhere; here what matters is the
server. `serve_http` runs its `http` command (Streamable HTTP) for as long as a test needs it.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import IO

HERE = Path(__file__).resolve().parent
TEMPLATE = HERE.parent.parent
#: Where a bake keeps the conformance suite's fixtures, its stdio bridge and expected failures.
PROJECT_CONFORMANCE = Path("tests", "conformance")
#: What `<slug> http` writes to stderr once it listens (the URL of its endpoint).
SERVING = re.compile(r"serving MCP at (http://\S+/mcp)")
#: A cold start (uvicorn's import included) on a loaded 2-core machine takes a few seconds.
HTTP_START_SECONDS = 60
HTTP_STOP_SECONDS = 30


@dataclass(frozen=True)
class BakedProject:
    root: Path
    package: str

    @property
    def tools_dir(self) -> Path:
        return self.root / "src" / self.package / "tools"

    def server_command(self) -> list[str]:
        return [sys.executable, "-m", self.package]

    def http_command(self) -> list[str]:
        """`<slug> http` on a free loopback port (the default host)."""
        return [*self.server_command(), "http", "--port", "0"]

    def server_env(self, extra: Mapping[str, str] | None = None) -> dict[str, str]:
        """What the server process needs besides a minimal environment (HOME, PATH)."""
        env = {"PYTHONPATH": str(self.root / "src"), "PYTHONUNBUFFERED": "1"}
        env.update(extra or {})
        return env

    def state_env(self, extra: Mapping[str, str] | None = None) -> dict[str, str]:
        """`server_env` with a state directory of the bake's own (the default task store)."""
        return self.server_env({"XDG_STATE_HOME": str(self.root.parent / "state"), **(extra or {})})

    def stdio_launch(self, extra: Mapping[str, str] | None = None) -> dict[str, object]:
        """How a host starts the stdio server: command, args, a minimal env, a cwd elsewhere."""
        command = self.server_command()
        env = {"PATH": "/usr/bin:/bin", "HOME": str(self.root.parent), **self.state_env(extra)}
        return {
            "command": command[0],
            "args": command[1:],
            "env": env,
            "cwd": str(self.root.parent),
        }

    def tool_modules(self) -> list[str]:
        return sorted(
            path.stem for path in self.tools_dir.glob("*.py") if not path.name.startswith("_")
        )

    def add_conformance_tools(self) -> None:
        """Drop the bake's own conformance fixtures (`tests/conformance/fixtures.py`) in as one
        more tools module, so the plain server serves them (the registry finds it)."""
        fixtures = self.root / PROJECT_CONFORMANCE / "fixtures.py"
        shutil.copyfile(fixtures, self.tools_dir / "conformance_fixtures.py")


def bake(output_dir: Path, *, project_name: str = "Peer Check", aws: bool = True) -> BakedProject:
    """Bake the template into `output_dir` with its hooks (they write the signing key)."""
    from cookiecutter.main import cookiecutter

    root = Path(
        cookiecutter(
            str(TEMPLATE),
            no_input=True,
            output_dir=str(output_dir),
            overwrite_if_exists=False,
            accept_hooks=True,
            extra_context={
                "project_name": project_name,
                "include_aws_example": "yes" if aws else "no",
                # The peers speak to it over stdio and Streamable HTTP, on every store.
                "include_http": "yes",
                "include_redis_store": "yes",
                "include_bundle": "yes",
                "include_skills": "yes",
            },
        )
    )
    packages = [
        path.parent.name
        for path in (root / "src").glob("*/__init__.py")
        if (path.parent / "mrtr_runtime").is_dir()
    ]
    if len(packages) != 1:
        raise RuntimeError(f"expected one package with a vendored runtime in {root}/src")
    return BakedProject(root=root, package=packages[0])


@dataclass
class HttpServer:
    """A running `<slug> http`: its endpoint, and its stderr in a log file."""

    process: subprocess.Popen[bytes]
    url: str
    log_path: Path

    def log(self) -> str:
        return self.log_path.read_text(encoding="utf-8", errors="replace")[-6000:]

    def stop(self) -> int:
        """SIGTERM, as a process manager stops it; its exit status."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        try:
            return self.process.wait(timeout=HTTP_STOP_SECONDS)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
            raise AssertionError(f"`http` ignored SIGTERM:\n{self.log()}") from None


def _wait_for_url(process: subprocess.Popen[bytes], log_path: Path) -> str:
    deadline = time.monotonic() + HTTP_START_SECONDS
    while time.monotonic() < deadline:
        found = SERVING.search(log_path.read_text(encoding="utf-8", errors="replace"))
        if found:
            return found.group(1)
        if process.poll() is not None:
            break
        time.sleep(0.05)
    log = log_path.read_text(encoding="utf-8", errors="replace")[-6000:]
    raise AssertionError(f"`http` did not start (exit {process.poll()}):\n{log}")


@contextlib.contextmanager
def serve_http(
    project: BakedProject, log_path: Path, extra_env: Mapping[str, str] | None = None
) -> Iterator[HttpServer]:
    """`<slug> http --port 0` with a minimal environment; stopped (SIGTERM) on the way out."""
    env = {key: os.environ[key] for key in ("HOME", "PATH", "LANG") if key in os.environ}
    env.update(project.server_env(extra_env))
    log: IO[bytes] = log_path.open("wb")
    process = subprocess.Popen(
        project.http_command(),
        stdin=subprocess.DEVNULL,
        stdout=log,
        stderr=subprocess.STDOUT,
        env=env,
        cwd=project.root,
    )
    try:
        server = HttpServer(process, _wait_for_url(process, log_path), log_path)
        yield server
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
        log.close()
