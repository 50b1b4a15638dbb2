"""The Redis wing: the task store replicas share (the project's optional ``redis`` extra).

Nothing here is imported unless ``MRTR_TASK_STORE`` names a ``redis://`` or ``rediss://`` URL,
and then only when the first task is made or asked for; without the extra, importing this
package raises ``ModuleNotFoundError`` for ``redis``, which the opener turns into the install
command.

- ``_store.py``: ``RedisTaskStore`` (create-once and compare-and-swap as Lua scripts),
  ``open_redis_store``.
"""

from __future__ import annotations

from ._store import RedisTaskStore, open_redis_store

__all__ = ("RedisTaskStore", "open_redis_store")
