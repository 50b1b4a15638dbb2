"""The store a server's records live in, and what every user of it shares.

Every server keeps round records there (single use, `_once`); one generated with the tasks
wing keeps its tasks there too (`_tasks`). Both reach it through one `Records`: opened on first
use (stdio start-up never waits for it), the one owner key of a principal, the one worker id on
this process's claims, the readiness probe, and the sweep that forgets expired records (a store
that is never swept keeps every round until its bounds refuse new ones).
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import secrets
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Final

from ._jsonrpc import INTERNAL_ERROR, RpcError
from ._tokens import digest_principal

if TYPE_CHECKING:
    # The store's module is imported on first use: a server's first answer never waits for it.
    from ._task_store import TaskStore

__all__ = ("PURGE_SECONDS", "READINESS_PROBE_SECONDS", "Records", "StoreOpener", "memory_store")

#: How often expired records are forgotten (each store also bounds what one owner holds).
PURGE_SECONDS: Final = 60.0
#: How long a readiness probe's round record lives (one per process, rewritten by each probe).
READINESS_PROBE_SECONDS: Final = 60.0
#: How long the background sweep waits before its first look: the first answer goes out first.
_FIRST_LOOK_SECONDS: Final = 0.5

_logger = logging.getLogger("mrtr_runtime")

#: Opens the store on its first use.
StoreOpener = Callable[[], Awaitable["TaskStore"]]


async def memory_store() -> TaskStore:
    """The default opener of a Server built by hand: records in this process's memory."""
    from ._task_store import MemoryTaskStore

    return MemoryTaskStore()


class Records:
    """One server's store: opened once, on first use, and shared by single use and tasks."""

    def __init__(
        self,
        server_name: str,
        open_store: StoreOpener | None = None,
        store_exists: Callable[[], bool] | None = None,
    ) -> None:
        self.server_name = server_name
        self._open_store = open_store or memory_store
        #: Whether there is a store to resume from, without opening anything (the SQLite
        #: file exists); None: only once something uses it.
        self._store_exists = store_exists
        #: This process's name on the claims it holds (a task's lease, a round's).
        self.worker_id = f"{server_name}:{secrets.token_hex(8)}"
        self.current: TaskStore | None = None
        self._opening: asyncio.Lock | None = None
        self._opened: asyncio.Event | None = None
        self._purged_at = 0.0

    async def store(self) -> TaskStore:
        """The store, opened on first use; RpcError (-32603, saying what to do) if it cannot be."""
        if self.current is not None:
            return self.current
        from ._task_store import TaskStoreUnavailable

        if self._opening is None:
            self._opening = asyncio.Lock()
        async with self._opening:
            if self.current is None:
                try:
                    self.current = await self._open_store()
                except TaskStoreUnavailable as error:
                    # The text says what to do (the setting, the file, the extra): the client
                    # and the log get it, and the next operation tries again.
                    _logger.error("the task store cannot be used: %s", error)
                    raise RpcError(INTERNAL_ERROR, str(error)) from None
                if self._opened is not None:
                    self._opened.set()
        return self.current

    def owner(self, principal: str | None) -> str:
        """Whose a record is: the principal (None on stdio) and this server's name."""
        digest = hashlib.sha256()
        digest.update(self.server_name.encode("utf-8", "surrogatepass") + b"\0")
        digest.update(digest_principal(principal).encode("ascii"))
        return digest.hexdigest()

    async def check(self) -> None:
        """Whether the store takes a write now (readiness): opened if need be, then one read of
        a task that does not exist and one write, a round record of this process's own that
        holds nothing (free at once, gone in a minute). A store that reads but cannot write (a
        full disk, a file turned read-only, a Redis demoted to a replica) would take requests
        and fail every confirmation and task. Raises TaskStoreUnavailable or RpcError saying
        why not."""
        from ._task_store import RoundRecord, TaskStoreFull

        store = await self.store()
        await store.load("readiness-probe")
        now = time.time()
        probe = RoundRecord(
            key=f"readiness-probe:{self.worker_id}",
            expires_at=now + READINESS_PROBE_SECONDS,
            lease_expires=now,
            owner="readiness-probe",
        )
        with contextlib.suppress(TaskStoreFull):
            # Refused for a bound (MRTR_TASK_MAX_ROUND_BYTES_PER_OWNER set below a few
            # replicas' probes): the store answered the write, so it works.
            await store.claim_round(probe, now)

    async def opened(self) -> TaskStore:
        """The store, for a background loop: opened now if one exists already (there may be
        work to resume), else once the first request uses it."""
        if self.current is None and self._store_exists is not None and self._store_exists():
            # A store that cannot be opened is said in the log; the first use tries again.
            with contextlib.suppress(RpcError):
                await self.store()
        if self.current is None:
            if self._opened is None:
                self._opened = asyncio.Event()
            await self._opened.wait()
        return await self.store()  # opened by whoever set the event

    async def purge_if_due(self, now: float) -> None:
        """Forget expired records, at most every PURGE_SECONDS (a failure is logged)."""
        if self.current is not None and now - self._purged_at > PURGE_SECONDS:
            await self._purge(self.current, now)

    async def _purge(self, store: TaskStore, now: float) -> None:
        self._purged_at = now
        try:
            await store.purge(now)
        except Exception:
            _logger.exception("forgetting expired tasks failed")

    async def run(self) -> None:
        """The background loop of a server without the tasks wing (the task engine's own loop
        does this beside its work): forget expired round records for the server's life."""
        await asyncio.sleep(_FIRST_LOOK_SECONDS)
        store = await self.opened()
        while True:
            await self._purge(store, time.time())
            await asyncio.sleep(PURGE_SECONDS)
