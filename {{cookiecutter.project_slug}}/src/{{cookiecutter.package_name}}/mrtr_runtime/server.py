"""What the project's ``app.py`` needs: its `Project`, the command line that runs it, the server,
its stdio and HTTP entries, and its signing-key setup. The HTTP names load on first use, so
serving stdio never imports them."""

from __future__ import annotations

import importlib
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ._config import SigningConfigError, WeakSigningKey, codec_from_environment
from ._project import Project
from ._router import Server
from ._stdio import configure_logging, serve_stdio
from ._wire import LEGACY_VERSIONS, MODERN_VERSIONS

if TYPE_CHECKING:
    from .http import HttpSettings, serve_http

_LAZY = {"HttpSettings": ".http", "serve_http": ".http"}


def run_command_line(project: Project, argv: Sequence[str] | None = None) -> int:
    """``<slug> [serve | http | health | config | keygen | bundle]`` for ``project``; the exit
    status. ``argv`` defaults to the process's arguments."""
    # Imported here: the command line's modules (argparse, host configs) are not needed to build
    # a server in a test.
    from .cli import main

    return main(project, argv)


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module, __package__), name)
    globals()[name] = value
    return value


__all__ = (
    "LEGACY_VERSIONS",
    "MODERN_VERSIONS",
    "HttpSettings",
    "Project",
    "Server",
    "SigningConfigError",
    "WeakSigningKey",
    "codec_from_environment",
    "configure_logging",
    "run_command_line",
    "serve_http",
    "serve_stdio",
)
