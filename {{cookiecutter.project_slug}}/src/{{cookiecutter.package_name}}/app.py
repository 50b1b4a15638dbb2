"""Builds the server: its name and version, the tools package, the requestState signing keys.

Where the signing key comes from, first match wins: ``MRTR_SIGNING_KEY``, then
``MRTR_SIGNING_KEY_FILE``, then the project's own ``.mrtr-signing-key`` (a source checkout), then
this user's key file for this server (``user_key_file``, created on first start: what a wheel,
``uvx`` or a bundle uses). See ``mrtr_runtime/_config.py``.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from . import __version__, tools
from .mrtr_runtime.server import Server, codec_from_environment, per_user_key_path
from .tools import registry

#: The server's name in ``serverInfo`` (and the console script's name).
NAME = "{{ cookiecutter.project_slug }}"
#: The human-readable title in ``serverInfo``.
TITLE = {{ cookiecutter.project_name | tojson }}
#: Written at bake time by the template's post-gen hook, or later by ``keygen``. Git-ignored.
KEY_FILE_NAME = ".mrtr-signing-key"


def project_root() -> Path | None:
    """The project directory when this package runs from its source tree (``pip install -e``).

    Hosts start the server from any working directory, so the key file is found from this file's
    location (``<root>/src/<package>/app.py``), never from the cwd. None for a wheel install.
    """
    package_dir = Path(__file__).resolve().parent
    root = package_dir.parents[1]
    if (root / "pyproject.toml").is_file() and package_dir.parent.name == "src":
        return root
    return None


def default_key_file() -> Path | None:
    root = project_root()
    return root / KEY_FILE_NAME if root is not None else None


def user_key_file(environ: Mapping[str, str] | None = None) -> Path | None:
    """This user's key file for this server, in the platform's state directory (see README.md).

    None when the environment names no home directory to keep it in.
    """
    return per_user_key_path(NAME, os.environ if environ is None else environ)


def build_server(environ: Mapping[str, str] | None = None) -> Server:
    """The server, its tools loaded on first need (right after the first answer when serving).

    Raises ``SigningConfigError`` (``WeakSigningKey`` for a bad key) with a message fit for a
    person; the CLI prints it and exits 2.
    """
    registry.defer_package(tools.__name__)
    environ = os.environ if environ is None else environ
    signing = codec_from_environment(
        environ,
        default_key_file=default_key_file(),
        per_user_key_file=user_key_file(environ),
        # Tokens are bound to this server's identity: another server that shares the key (a
        # copied key file, one key for a whole fleet) cannot replay them here, nor ours there.
        audience=NAME,
    )
    return Server(name=NAME, version=__version__, registry=registry, signing=signing, title=TITLE)
