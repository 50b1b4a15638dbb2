"""What `app.py` and `cli.py` need: the server, its stdio entry, and its signing-key setup."""

from __future__ import annotations

from ._config import (
    PREVIOUS_KEYS_FILE_NAME,
    Rotation,
    SigningConfigError,
    WeakSigningKey,
    codec_from_environment,
    default_previous_keys_file,
    per_user_key_path,
    rotate_key_file,
    write_key_file,
)
from ._router import Server
from ._stdio import configure_logging, serve_stdio
from ._tokens import DEFAULT_TTL_SECONDS, MAX_TTL_SECONDS
from ._wire import LEGACY_VERSIONS, MODERN_VERSIONS

__all__ = (
    "DEFAULT_TTL_SECONDS",
    "LEGACY_VERSIONS",
    "MAX_TTL_SECONDS",
    "MODERN_VERSIONS",
    "PREVIOUS_KEYS_FILE_NAME",
    "Rotation",
    "Server",
    "SigningConfigError",
    "WeakSigningKey",
    "codec_from_environment",
    "configure_logging",
    "default_previous_keys_file",
    "per_user_key_path",
    "rotate_key_file",
    "serve_stdio",
    "write_key_file",
)
