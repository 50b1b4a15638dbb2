"""What the runtime needs to know about the project it serves, and how it builds its `Server`.

The project's own ``app.py`` declares one `Project`: its name, title and version, its tools
package, and what its host configurations need (``uv`` extras, environment variables to pass
through). Everything else, where the signing key comes from included, is the runtime's.

Where the signing key comes from, first match wins: ``MRTR_SIGNING_KEY``, then
``MRTR_SIGNING_KEY_FILE``, then the project's own ``.mrtr-signing-key`` (a source checkout),
then this user's key file for this server (created on first start: what a wheel, ``uvx`` or a
bundle uses). See ``_config.py``.
"""

from __future__ import annotations

import functools
import logging
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Final

from ._config import PER_USER_KEY_FILE_NAME, Settings, codec_from_settings, per_user_key_path
from ._registry import Registry
from ._router import Server, SkillCatalog
from ._task_backends import TaskBackend, task_backend
from ._wings import has_wing, load_wing, missing_wing

__all__ = ("KEY_FILE_NAME", "Project")

_logger = logging.getLogger("mrtr_runtime")

#: The signing key file of a source checkout, beside ``pyproject.toml`` (git-ignored): the same
#: name as in the per-user directory, so one ``.gitignore`` / ``.dockerignore`` line covers both.
KEY_FILE_NAME: Final = PER_USER_KEY_FILE_NAME


@dataclass(frozen=True)
class Project:
    """One MCP server project: who it is, and where its tools are.

    ``tools`` is the project's tools package (a module with a ``registry``): its modules are
    loaded on first need, right after the server's first answer.
    """

    name: str
    title: str
    version: str
    tools: ModuleType
    #: ``uv run --extra`` / ``uvx --from pkg[extras]`` for optional dependencies the tools need.
    uv_extras: tuple[str, ...] = ()
    #: Hosts pass only HOME/PATH-like variables; these are copied into printed configs when set.
    pass_through_env: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if not isinstance(getattr(self.tools, "registry", None), Registry):
            raise TypeError(
                f"Project(tools=...) needs the tools package, whose `registry` is a Registry; "
                f"{self.tools.__name__} has none"
            )

    @property
    def registry(self) -> Registry:
        registry: Registry = self.tools.registry
        return registry

    @property
    def package(self) -> str:
        """The project's import name (``python -m <package>`` starts it)."""
        return self.tools.__name__.rpartition(".")[0]

    def root(self) -> Path | None:
        """The project directory when the package runs from its source tree (``pip install -e``).

        Hosts start the server from any working directory, so the checkout is found from the
        package's location (``<root>/src/<package>/``), never from the cwd. None for a wheel.
        """
        tools_file = self.tools.__file__
        if tools_file is None:
            return None
        package_dir = Path(tools_file).resolve().parent.parent
        root = package_dir.parents[1]
        if (root / "pyproject.toml").is_file() and package_dir.parent.name == "src":
            return root
        return None

    def skills(self, environ: Mapping[str, str]) -> SkillCatalog | None:
        """The project's skills: ``skills/`` beside ``tools/`` when it holds a SKILL.md (the
        skills extension); None otherwise. Only looked at here: read on first use, with the
        signing keys this server could hold (`environ`'s and its key files'), which no skill
        file may contain."""
        tools_file = self.tools.__file__
        if tools_file is None:
            return None
        directory = Path(tools_file).resolve().parent.parent / "skills"
        if not directory.is_dir():
            return None
        if not has_wing("skills"):
            # A skills/ folder in a project generated without the wing: the tools still
            # serve; the author reads why the skills do not.
            _logger.warning("%s is not served: %s", directory, missing_wing("skills"))
            return None
        # Where the build's artifact rule looks for keys (imported here: the command line's
        # package imports this module).
        from .cli._artifacts import key_sources, read_keys

        root = self.root() or directory.parent
        sources = key_sources(root, self.name, environ)
        shelf: SkillCatalog | None = load_wing("skills").SkillShelf.found_in(
            directory, functools.partial(read_keys, sources, environ)
        )
        return shelf

    def default_key_file(self) -> Path | None:
        """The checkout's key file (written at bake time or by ``keygen``); None for a wheel."""
        root = self.root()
        return root / KEY_FILE_NAME if root is not None else None

    def user_key_file(self, environ: Mapping[str, str] | None = None) -> Path | None:
        """This user's key file for this server, in the platform's state directory.

        None when the environment names no home directory to keep it in.
        """
        return per_user_key_path(self.name, os.environ if environ is None else environ)

    def task_backend(
        self, settings: Settings, environ: Mapping[str, str] | None = None
    ) -> TaskBackend:
        """Where this server keeps its tasks (``MRTR_TASK_STORE``; default ``tasks.sqlite3``
        beside this user's key file), not opened: the task engine calls ``.open()`` on the
        first task operation and ``.may_hold_tasks()`` (a stat) at start."""
        key_file = self.user_key_file(environ)
        return task_backend(
            settings,
            key_file.parent if key_file is not None else None,
            namespace=self.name,
            project=self.name,
        )

    def build_server(
        self, environ: Mapping[str, str] | None = None, *, settings: Settings | None = None
    ) -> Server:
        """The server, its tools loaded on first need (right after the first answer).

        Raises ``SigningConfigError`` (``WeakSigningKey`` for a bad key) with a message fit for
        a person; the command line prints it and exits 2.
        """
        self.registry.defer_package(self.tools.__name__)
        environ = os.environ if environ is None else environ
        if settings is None:
            # Every MRTR_* variable, read here once; the server hands it to its transports.
            settings = Settings.from_environment(environ)
        signing = codec_from_settings(
            settings,
            default_key_file=self.default_key_file(),
            per_user_key_file=self.user_key_file(environ),
            # Tokens are bound to this server's identity: another server that shares the key (a
            # copied key file, one key for a whole fleet) cannot replay them here, nor ours there.
            audience=self.name,
        )
        # Not opened here: the engine opens it on the first task operation, and its loop
        # (after the first answer) only if `may_hold_tasks` says there is something to resume.
        tasks = self.task_backend(settings, environ)
        return Server(
            skills=self.skills(environ),
            name=self.name,
            version=self.version,
            registry=self.registry,
            signing=signing,
            title=self.title,
            settings=settings,
            task_store=tasks.open,
            task_store_exists=tasks.may_hold_tasks,
        )
