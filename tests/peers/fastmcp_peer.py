"""FastMCP's client with `fastmcp-tasks`, as a test peer: its own venv, made on first use.

FastMCP pins its own `mcp` and brings Docket, redis-py and more, so it never joins the
template's test environment: `fastmcp_python()` makes `.cache/peers/fastmcp-tasks/` (gitignored;
override with MRTR_PEERS_CACHE) with the pinned pair from PyPI, pip's cache `.cache/pip`, and
gives its interpreter; `fastmcp_driver.py` beside this file runs in it. A venv that already has
the pair is used as it is. Nothing here is shipped in a generated project.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
#: The newest pair PyPI installs together (fastmcp 4.1.6 conflicts with fastmcp-tasks 4.1.4).
REQUIREMENTS = ("fastmcp==4.1.4", "fastmcp-tasks==4.1.4")
DRIVER = HERE / "fastmcp_driver.py"
PIP_TIMEOUT_SECONDS = 900


class FastMcpUnavailableError(RuntimeError):
    """The FastMCP peer cannot be installed here (the message says why)."""


def _cache() -> Path:
    return Path(os.environ.get("MRTR_PEERS_CACHE") or REPO / ".cache" / "peers")


def _has(python: Path, requirement: str) -> bool:
    name, _, version = requirement.partition("==")
    code = f"import importlib.metadata as m; print(m.version({name!r}))"
    done = subprocess.run([str(python), "-c", code], check=False, capture_output=True, text=True)
    return done.returncode == 0 and done.stdout.strip() == version


def fastmcp_python() -> Path:
    """The interpreter of a venv holding exactly the pinned FastMCP pair."""
    venv = _cache() / "fastmcp-tasks"
    python = venv / "bin" / "python"
    if not python.exists():
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    if all(_has(python, requirement) for requirement in REQUIREMENTS):
        return python
    env = {
        **os.environ,
        "PIP_CACHE_DIR": str(REPO / ".cache" / "pip"),
        "PIP_DISABLE_PIP_VERSION_CHECK": "1",
    }
    done = subprocess.run(
        [str(python), "-m", "pip", "install", "-q", *REQUIREMENTS],
        check=False,
        capture_output=True,
        text=True,
        env=env,
        timeout=PIP_TIMEOUT_SECONDS,
    )
    if done.returncode != 0:
        raise FastMcpUnavailableError(
            f"pip install {' '.join(REQUIREMENTS)}: {done.stderr[-2000:]}"
        )
    return python
