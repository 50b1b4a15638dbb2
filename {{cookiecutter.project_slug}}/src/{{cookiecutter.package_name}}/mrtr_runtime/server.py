"""What `app.py` and `cli.py` need: the server, its stdio and HTTP entries, and its signing-key
setup. The HTTP names load on first use, so serving stdio never imports them."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from ._config import (
    PREVIOUS_KEYS_FILE_NAME,
    Rotation,
    Settings,
    SigningConfigError,
    WeakSigningKey,
    codec_from_environment,
    codec_from_settings,
    default_previous_keys_file,
    per_user_key_path,
    rotate_key_file,
    write_key_file,
)
from ._router import Server
from ._stdio import configure_logging, serve_stdio
from ._tokens import DEFAULT_TTL_SECONDS, MAX_TTL_SECONDS
from ._wire import LEGACY_VERSIONS, MODERN_VERSIONS

if TYPE_CHECKING:
    from ._http import HttpApp, HttpSettings
    from ._uvicorn import serve_http

_LAZY = {"HttpApp": "._http", "HttpSettings": "._http", "serve_http": "._uvicorn"}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module, __package__), name)
    globals()[name] = value
    return value


__all__ = (
    "DEFAULT_TTL_SECONDS",
    "LEGACY_VERSIONS",
    "MAX_TTL_SECONDS",
    "MODERN_VERSIONS",
    "PREVIOUS_KEYS_FILE_NAME",
    "HttpApp",
    "HttpSettings",
    "Rotation",
    "Server",
    "Settings",
    "SigningConfigError",
    "WeakSigningKey",
    "codec_from_environment",
    "codec_from_settings",
    "configure_logging",
    "default_previous_keys_file",
    "per_user_key_path",
    "rotate_key_file",
    "serve_http",
    "serve_stdio",
    "write_key_file",
)
