"""Which task store a server uses, and opening it: ``MRTR_TASK_STORE`` turned into a `TaskStore`.

- ``sqlite:///abs/path.db``: that SQLite file (``_sqlite_store``).
- ``redis://host:port/db`` or ``rediss://...`` (TLS): Redis, shared by replicas (the ``redis``
  wing; the project's ``redis`` extra installs redis-py).
- ``memory:``: this process's memory; tasks end with the process.
- unset: ``tasks.sqlite3`` in this user's state directory for the server, beside the per-user
  signing key (``per_user_key_path``'s directory), so a task outlives the stdio process that
  started it; in memory when there is no home to keep it in.

Nothing is opened or imported when the server starts (stdio start-up must not change): the task
engine calls `TaskBackend.open` on the first task operation, and at start only asks
`TaskBackend.may_hold_tasks` (for SQLite a ``stat`` of the file) whether there are tasks to resume.
``MRTR_TASK_MAX_STORED`` bounds the unexpired tasks every store holds, and
``MRTR_TASK_MAX_PER_OWNER`` those of one owner (principal and server). Choosing the store
imports nothing but ``_config`` (start-up's imports do not grow): the stores load in ``open``.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Final, Literal

from ._config import (
    DEFAULT_TASK_MAX_BYTES_PER_OWNER,
    DEFAULT_TASK_MAX_PER_OWNER,
    DEFAULT_TASK_MAX_ROUND_BYTES_PER_OWNER,
    TASK_MAX_BYTES_PER_OWNER_VARIABLE,
    TASK_MAX_PER_OWNER_VARIABLE,
    TASK_MAX_ROUND_BYTES_PER_OWNER_VARIABLE,
    TASK_MAX_STORED_VARIABLE,
    TASK_STORE_VARIABLE,
    Settings,
    shown_store_url,
)

if TYPE_CHECKING:
    from ._task_store import TaskStore

__all__ = ("TASKS_FILE_NAME", "TaskBackend", "open_task_store", "task_backend")

#: The default store's file, in the per-user state directory beside the signing key.
TASKS_FILE_NAME: Final = "tasks.sqlite3"

_logger = logging.getLogger("mrtr_runtime")


@dataclass(frozen=True)
class TaskBackend:
    """The task store the settings name, not opened yet; `open` opens it (each call a new one)."""

    #: "refused": the settings name no usable store; `open` raises `problem`.
    kind: Literal["sqlite", "redis", "memory", "refused"]
    #: What messages and logs call it: the file, or the URL without its password.
    location: str
    max_tasks: int
    #: The bound on one owner's unexpired tasks.
    max_per_owner: int = DEFAULT_TASK_MAX_PER_OWNER
    #: The bound on the bytes of one owner's unexpired tasks.
    max_bytes_per_owner: int = DEFAULT_TASK_MAX_BYTES_PER_OWNER
    #: The bound on the bytes of one owner's live round records (single use's).
    max_round_bytes_per_owner: int = DEFAULT_TASK_MAX_ROUND_BYTES_PER_OWNER
    #: The SQLite file; None for the others.
    path: Path | None = None
    #: Whether opening may create the file's missing parent directories: only for the default
    #: file, in the per-user state directory (made as the key's is). A configured file's
    #: directory is created only if its own parent exists: a typo must not build a tree.
    make_parents: bool = False
    #: The Redis URL, password included (never shown).
    url: str = field(default="", repr=False)
    #: The Redis keys' namespace: the server's name.
    namespace: str = "mrtr"
    #: The distribution to name in "install the redis extra".
    project: str = "mrtr-server"
    #: Why the settings were refused (kind "refused").
    problem: str = ""
    #: Memory only because there is no state directory (no home) for the default file.
    homeless: bool = False

    def may_hold_tasks(self) -> bool:
        """Whether a store opened now could hold tasks to resume; opens and imports nothing.
        SQLite: the file exists (a ``stat``). Redis: always (it is another process's). Memory:
        never (a new process's memory is empty)."""
        if self.kind == "sqlite":
            return self.path is not None and os.path.lexists(self.path)
        return self.kind == "redis"

    async def open(self) -> TaskStore:
        """The store, opened: ``TaskStoreUnavailable`` says why not (and what to do)."""
        # Imported here, not above: choosing a store happens at start-up, whose imports must
        # not grow (the tasks' modules load with the first task).
        from ._sqlite_store import open_sqlite_store
        from ._task_store import MemoryTaskStore, TaskStoreUnavailable
        from ._wings import has_wing, load_wing, missing_wing

        if self.kind == "refused":
            raise TaskStoreUnavailable(self.problem)
        if self.kind == "memory":
            if self.homeless:
                # Said once, when the first task operation opens the store: nobody asked for
                # memory, and what it costs (a replayed confirmation running again after a
                # restart) is not visible anywhere else.
                _logger.warning(
                    "tasks are kept in memory, not durably: there is no per-user state "
                    "directory (neither HOME nor XDG_STATE_HOME is set), so tasks end with "
                    "this process and a confirmation replayed after a restart runs again; "
                    "set %s (e.g. sqlite:///abs/path/tasks.sqlite3) or give the server a home",
                    TASK_STORE_VARIABLE,
                )
            return MemoryTaskStore(
                max_tasks=self.max_tasks,
                max_per_owner=self.max_per_owner,
                max_bytes_per_owner=self.max_bytes_per_owner,
                max_round_bytes_per_owner=self.max_round_bytes_per_owner,
            )
        if self.path is not None:  # sqlite
            return await open_sqlite_store(
                self.path,
                max_tasks=self.max_tasks,
                max_per_owner=self.max_per_owner,
                max_bytes_per_owner=self.max_bytes_per_owner,
                max_round_bytes_per_owner=self.max_round_bytes_per_owner,
                make_parents=self.make_parents,
            )
        if not has_wing("redis"):
            raise TaskStoreUnavailable(
                f"{TASK_STORE_VARIABLE} names a Redis store ({self.location}), but "
                f"{missing_wing('redis')}"
            )
        try:
            # Imported only here: the redis extra is optional, and a stdio server never needs it.
            wing = load_wing("redis")
        except ModuleNotFoundError as exc:
            if exc.name not in ("redis", "redis.asyncio", "redis.exceptions"):
                raise
            raise TaskStoreUnavailable(
                f"{TASK_STORE_VARIABLE} names a Redis store ({self.location}), but redis-py is "
                f"not installed; install the project's redis extra: pip install "
                f"'{self.project}[redis]'"
            ) from None
        store: TaskStore = await wing.open_redis_store(
            self.url,
            namespace=self.namespace,
            max_tasks=self.max_tasks,
            max_per_owner=self.max_per_owner,
            max_bytes_per_owner=self.max_bytes_per_owner,
            max_round_bytes_per_owner=self.max_round_bytes_per_owner,
            label=self.location,
        )
        return store


def task_backend(
    settings: Settings, state_dir: Path | None, *, namespace: str, project: str | None = None
) -> TaskBackend:
    """The store the settings ask for; opens nothing, never raises. ``state_dir``: this server's
    per-user state directory (the signing key's), where the default file goes; None when there
    is none. Refused settings give a backend of kind "refused" whose `open` raises the reason:
    a server whose tools never start a task runs as before."""
    distribution = project or namespace
    bound = settings.task_max_stored
    per_owner = settings.task_max_per_owner
    bytes_per_owner = settings.task_max_bytes_per_owner
    round_bytes = settings.task_max_round_bytes_per_owner
    for variable in (
        TASK_STORE_VARIABLE,
        TASK_MAX_STORED_VARIABLE,
        TASK_MAX_PER_OWNER_VARIABLE,
        TASK_MAX_BYTES_PER_OWNER_VARIABLE,
        TASK_MAX_ROUND_BYTES_PER_OWNER_VARIABLE,
    ):
        if problem := settings.problems.get(variable):
            return TaskBackend(
                "refused", "refused", bound, per_owner, project=distribution, problem=problem
            )
    url = settings.task_store
    if url.startswith(("redis://", "rediss://")):
        return TaskBackend(
            "redis",
            shown_store_url(url),
            bound,
            per_owner,
            bytes_per_owner,
            round_bytes,
            url=url,
            namespace=namespace,
            project=distribution,
        )
    if url == "memory:" or (not url and state_dir is None):
        return TaskBackend(
            "memory",
            "memory",
            bound,
            per_owner,
            bytes_per_owner,
            round_bytes,
            namespace=namespace,
            project=distribution,
            homeless=url != "memory:",
        )
    path = Path(url.removeprefix("sqlite://")) if url else Path(state_dir or "") / TASKS_FILE_NAME
    return TaskBackend(
        "sqlite",
        str(path),
        bound,
        per_owner,
        bytes_per_owner,
        round_bytes,
        path=path,
        make_parents=not url,
        namespace=namespace,
        project=distribution,
    )


async def open_task_store(
    settings: Settings, state_dir: Path | None, *, namespace: str = "mrtr"
) -> TaskStore:
    """``await task_backend(settings, state_dir, namespace=namespace).open()``."""
    return await task_backend(settings, state_dir, namespace=namespace).open()
