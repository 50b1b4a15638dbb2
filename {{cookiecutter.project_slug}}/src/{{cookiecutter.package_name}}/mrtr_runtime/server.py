"""What the project's ``app.py`` needs: its `Project`, the command line that runs it, the server,
its stdio and HTTP entries, and its signing-key setup. The HTTP names (``HttpSettings``,
``serve_http``) come from the HTTP wing on first use: serving stdio never imports them, and a
project generated without that wing is told which option to add (`_wings`)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ._config import SigningConfigError, WeakSigningKey, codec_from_environment
from ._project import Project
from ._router import Server
from ._stdio import configure_logging, serve_stdio
from ._wings import load_wing
from ._wire import LEGACY_VERSIONS, MODERN_VERSIONS

#: Names of the HTTP wing served from here (loaded by name: a project may not have the wing).
_HTTP_NAMES = frozenset({"HttpSettings", "serve_http"})


def run_command_line(project: Project, argv: Sequence[str] | None = None) -> int:
    """``<slug> [serve | http | health | config | keygen | bundle]`` for ``project``; the exit
    status. ``argv`` defaults to the process's arguments."""
    # Imported here: the command line's modules (argparse, host configs) are not needed to build
    # a server in a test.
    from .cli import main

    return main(project, argv)


def __getattr__(name: str) -> Any:
    if name not in _HTTP_NAMES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(load_wing("http"), name)
    globals()[name] = value
    return value


__all__ = (
    "LEGACY_VERSIONS",
    "MODERN_VERSIONS",
    "Project",
    "Server",
    "SigningConfigError",
    "WeakSigningKey",
    "codec_from_environment",
    "configure_logging",
    "run_command_line",
    "serve_stdio",
)
