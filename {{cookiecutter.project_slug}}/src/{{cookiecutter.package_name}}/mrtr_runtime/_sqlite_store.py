"""The default task store: one SQLite file (stdlib ``sqlite3``), shared by this user's processes.

A task must outlive the stdio process that started it (a host restarts the server and polls the
same task id), and two servers of one user may run at once (two hosts, or a restart overlapping
the old process), so the file is the arbiter, never a process's memory:

- **Create once**: ``once_key`` is a ``UNIQUE`` column, and the bound checks (the store's and
  the owner's, counters kept by triggers), the look-up of an
  existing holder and the insert run in one ``BEGIN IMMEDIATE`` transaction, which takes the
  file's write lock first: two processes creating with one key end with one row, and the second
  gets the first one's task.
- **Compare and swap**: one statement, ``UPDATE ... WHERE task_id=? AND version=?``; exactly one of
  any number of writers holding the same version changes the row.
- **Queries**: status, lease and expiry are indexed columns beside the record's JSON (the record
  is the truth; the columns are copies of its fields, written by the same statement).
- **WAL** (readers never wait for the writer) with ``synchronous=NORMAL``: a commit survives
  the process being killed (what a task must survive: the process, not the machine); only an
  OS crash or power loss can take the last commits back. ``busy_timeout`` makes a writer wait
  for another process's write lock instead of failing.

The file must be on a local disk: WAL needs shared memory between the processes, which a
network filesystem (NFS, SMB) does not give. Replicas on several machines share Redis instead.

Where the file lives decides who can read the tasks (their arguments, answers and results), so
it is held to the rules of the signing key's file: a 0600 regular file of ours, not a symlink,
in a directory of ours that no other user can write (created 0700). Anything else is refused
with what to run, never repaired.

Calls run on the event loop, where they take tens of microseconds, with one exception: a
write that would wait. The loop's connection has no busy timeout, so a write that finds another
process (or this one's thread) holding the file's write lock fails at once, having changed
nothing, and is then made again in a worker thread on a second connection that waits for the
lock (``busy_timeout``). So the loop (every other request of a stdio server) never sleeps in
SQLite's busy wait, and the common, uncontended call skips the thread hop, which costs more than
the write itself (measured: swap 0.16 ms on the loop, 0.40 ms through the thread). Reads wait
for nothing in WAL mode (a reader never waits for the writer) but take the same path.
"""

from __future__ import annotations

import contextlib
import math
import os
import sqlite3
import stat
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Final, TypeVar

import anyio
import anyio.to_thread

from ._permissions import open_to_others
from ._task_store import (
    DEFAULT_ROUND_BYTES_PER_OWNER,
    PurgeSchedule,
    RoundRecord,
    TaskRecord,
    TaskStoreFull,
    TaskStoreUnavailable,
)

__all__ = ("SqliteTaskStore", "open_sqlite_store")

_T = TypeVar("_T")
#: WAL pages between automatic checkpoints (SQLite's default: 1000), and the WAL's size limit.
WAL_CHECKPOINT_PAGES: Final = 10_000
WAL_SIZE_LIMIT_BYTES: Final = 64 * 1024 * 1024
#: The per-owner byte bound of a store opened without one (Settings gives the configured one).
DEFAULT_BYTES_PER_OWNER: Final = 64 * 1024 * 1024

#: The schema's version, in ``PRAGMA user_version``: a file written by another schema is refused.
SCHEMA_VERSION: Final = 3
#: How long a write waits for another process's write lock before it fails. Writers hold it for
#: well under a millisecond; seconds mean a stuck process, which an error should name.
BUSY_TIMEOUT_MS: Final = 5000
#: SQLite stores IEEE doubles; "never expires" is +inf in the indexed column (None in the record),
#: so every expiry comparison is one indexed range.
_NEVER: Final = math.inf

#: Schema 3: the round records of single use (`_task_store.RoundRecord`); a schema-2 file
#: (runtime 0.7.0) gets them as it is opened, its tasks kept. No index on the expiry: every
#: confirming round writes a record twice, and an index there cost each round as much as both
#: writes without it (measured: 91 against 53 us); the minutely purge scans instead, in a
#: thread.
_ROUNDS_SCHEMA: Final = (
    """CREATE TABLE IF NOT EXISTS rounds (
        key TEXT PRIMARY KEY NOT NULL,
        version INTEGER NOT NULL,
        expires_at REAL NOT NULL,
        free_from REAL NOT NULL,
        record TEXT NOT NULL
    ) WITHOUT ROWID""",
)

#: Whose each round record is (``rounds.owner``) and each owner's bytes of them (``round_owner
#: .bytes``: the lengths of its records, ASCII JSON, kept by the triggers of every insert, update
#: and delete), for the per-owner bound on round records (runtime 0.12.0). A claim reads its
#: owner's row (a primary-key read); the triggers are one primary-key write beside each of a
#: round's writes. Added to a file that lacks them as it is opened, and only added to: the
#: schema stays 3, so a 0.8.0 to 0.11.0 server sharing the file (a host still running the
#: previous release during an update) keeps working; its records count under no owner ('').
_ROUND_OWNERS_SCHEMA: Final = (
    "ALTER TABLE rounds ADD COLUMN owner TEXT NOT NULL DEFAULT ''",
    """CREATE TABLE IF NOT EXISTS round_owner (
        owner TEXT PRIMARY KEY NOT NULL,
        bytes INTEGER NOT NULL
    ) WITHOUT ROWID""",
    """INSERT INTO round_owner (owner, bytes)
        SELECT owner, sum(length(record)) FROM rounds GROUP BY owner""",
    """CREATE TRIGGER round_added AFTER INSERT ON rounds
        BEGIN
            INSERT INTO round_owner (owner, bytes) VALUES (NEW.owner, length(NEW.record))
                ON CONFLICT (owner) DO UPDATE SET bytes = bytes + length(NEW.record);
        END""",
    """CREATE TRIGGER round_changed AFTER UPDATE OF record ON rounds
        BEGIN
            UPDATE round_owner SET bytes = bytes + length(NEW.record) - length(OLD.record)
                WHERE owner = OLD.owner;
        END""",
    """CREATE TRIGGER round_removed AFTER DELETE ON rounds
        BEGIN
            UPDATE round_owner SET bytes = bytes - length(OLD.record) WHERE owner = OLD.owner;
            DELETE FROM round_owner WHERE owner = OLD.owner AND bytes <= 0;
        END""",
)

#: Schema 3: each owner's bytes beside its count (``owner_count.bytes``: the lengths of its
#: records as stored, kept by the triggers of every insert, update and delete), for the
#: per-owner byte bound; a schema-2 file gets the column, filled in, and the new triggers.
_OWNER_BYTES_SCHEMA: Final = (
    "ALTER TABLE owner_count ADD COLUMN bytes INTEGER NOT NULL DEFAULT 0",
    """UPDATE owner_count SET bytes = (
        SELECT coalesce(sum(length(CAST(record AS BLOB))), 0) FROM tasks
        WHERE tasks.owner = owner_count.owner
    )""",
    "DROP TRIGGER IF EXISTS task_added",
    "DROP TRIGGER IF EXISTS task_removed",
    """CREATE TRIGGER task_added AFTER INSERT ON tasks
        BEGIN
            UPDATE task_count SET stored = stored + 1;
            INSERT INTO owner_count (owner, stored, bytes)
                VALUES (NEW.owner, 1, length(CAST(NEW.record AS BLOB)))
                ON CONFLICT (owner) DO UPDATE SET stored = stored + 1,
                    bytes = bytes + length(CAST(NEW.record AS BLOB));
        END""",
    """CREATE TRIGGER task_removed AFTER DELETE ON tasks
        BEGIN
            UPDATE task_count SET stored = stored - 1;
            UPDATE owner_count SET stored = stored - 1,
                bytes = bytes - length(CAST(OLD.record AS BLOB)) WHERE owner = OLD.owner;
            DELETE FROM owner_count WHERE owner = OLD.owner AND stored <= 0;
        END""",
    """CREATE TRIGGER task_changed AFTER UPDATE OF record ON tasks
        BEGIN
            UPDATE owner_count SET
                bytes = bytes + length(CAST(NEW.record AS BLOB)) - length(CAST(OLD.record AS BLOB))
                WHERE owner = OLD.owner;
        END""",
)

#: The schema, statement by statement. ``task_count`` is the table's row count, kept by triggers
#: in the transaction of every insert and delete: the bound is checked in O(1) while the store
#: holds fewer rows than the bound (expired ones included), and only a store that may be full
#: counts its unexpired tasks (an index range, a fraction of a millisecond per thousand).
#: ``owner_count`` is the same per owner; an owner at its bound first loses its expired rows
#: (found through the expiry index: a few, as purge runs), which makes its counter exact. No
#: index on the owner: counting a thousand index entries took 0.14 ms per create, and an index
#: holding ``expires_at`` added 0.02 ms to every swap (which writes that column).
_SCHEMA: Final = (
    """CREATE TABLE IF NOT EXISTS tasks (
        task_id TEXT PRIMARY KEY NOT NULL,
        version INTEGER NOT NULL,
        status TEXT NOT NULL,
        lease_expires REAL NOT NULL,
        expires_at REAL NOT NULL,
        owner TEXT NOT NULL,
        once_key TEXT UNIQUE,
        record TEXT NOT NULL
    )""",
    "CREATE INDEX IF NOT EXISTS tasks_by_lease ON tasks (status, lease_expires)",
    "CREATE INDEX IF NOT EXISTS tasks_by_expiry ON tasks (expires_at)",
    """CREATE TABLE IF NOT EXISTS task_count (
        one INTEGER PRIMARY KEY CHECK (one = 1),
        stored INTEGER NOT NULL
    )""",
    "INSERT OR IGNORE INTO task_count (one, stored) VALUES (1, 0)",
    """CREATE TABLE IF NOT EXISTS owner_count (
        owner TEXT PRIMARY KEY NOT NULL,
        stored INTEGER NOT NULL
    ) WITHOUT ROWID""",
    *_OWNER_BYTES_SCHEMA,
    *_ROUNDS_SCHEMA,
    f"PRAGMA user_version = {SCHEMA_VERSION}",
)
#: A round's claim, one statement: stored where no live record holds the key, or where the
#: one there is free (`RoundRecord.free_from` has passed) or expired; the version it got back
#: when it was stored, no row when the key is held. Every confirming round runs it, so it is
#: one write (an upsert with RETURNING, SQLite 3.35+), not a read and a write in a transaction.
_CLAIM_ROUND: Final = (
    "INSERT INTO rounds (key, version, expires_at, free_from, record, owner) "
    "VALUES (?, 1, ?, ?, ?, ?) "
    "ON CONFLICT (key) DO UPDATE SET version = rounds.version + 1, "
    "expires_at = excluded.expires_at, free_from = excluded.free_from, record = excluded.record "
    "WHERE rounds.free_from <= ? OR rounds.expires_at <= ? "
    "RETURNING version"
)
#: The claim of a key that is held already, for an owner at its bound: only a free or expired
#: record is taken (the key's own, so nothing the owner holds grows but by the claim).
_RECLAIM_ROUND: Final = (
    "UPDATE rounds SET version = version + 1, expires_at = ?, free_from = ?, record = ? "
    "WHERE key = ? AND (free_from <= ? OR expires_at <= ?) RETURNING version"
)
#: How often a claim is made again when its key's holder vanished between two statements.
_SWAP_TRIES: Final = 8
#: SQLites older than 3.35 (no RETURNING) claim in a transaction instead.
_RETURNING: Final = sqlite3.sqlite_version_info >= (3, 35, 0)
#: What a schema-2 file (runtime 0.7.0) needs to become schema 3.
_UPGRADES: Final = {
    2: (*_OWNER_BYTES_SCHEMA, *_ROUNDS_SCHEMA, f"PRAGMA user_version = {SCHEMA_VERSION}"),
}


def _expiry(record: TaskRecord) -> float:
    return _NEVER if record.expires_at is None else record.expires_at


class SqliteTaskStore:
    """A `TaskStore` in one SQLite file; see the module's text. Open it with `open_sqlite_store`."""

    def __init__(
        self,
        path: Path,
        eager: sqlite3.Connection,
        patient: sqlite3.Connection,
        *,
        max_tasks: int,
        max_per_owner: int,
        max_bytes_per_owner: int = DEFAULT_BYTES_PER_OWNER,
        max_round_bytes_per_owner: int = DEFAULT_ROUND_BYTES_PER_OWNER,
    ) -> None:
        self.path = path
        self.max_tasks = max_tasks
        self.max_per_owner = max_per_owner
        self.max_bytes_per_owner = max_bytes_per_owner
        self.max_round_bytes_per_owner = max_round_bytes_per_owner
        #: The loop's connection: no busy timeout (SQLITE_BUSY at once instead of a wait).
        self._eager = eager
        #: The worker thread's: waits up to BUSY_TIMEOUT_MS for the write lock.
        self._patient = patient
        # One call at a time on the patient connection.
        self._patient_slot = anyio.CapacityLimiter(1)
        self._closed = False
        #: When an owner at its round bound may have its expired records forgotten again.
        self._purges = PurgeSchedule()

    async def _run(self, work: Callable[[sqlite3.Connection], _T]) -> _T:
        """``work`` on the loop's connection; if it would wait for a lock, in the thread."""
        if self._closed:
            raise TaskStoreUnavailable(f"the task store {self.path} is closed")
        try:
            try:
                return work(self._eager)
            except sqlite3.OperationalError as exc:
                if not _busy(exc):
                    raise
            # Nothing was changed (the lock was not had): the same work, allowed to wait.
            return await anyio.to_thread.run_sync(work, self._patient, limiter=self._patient_slot)
        except sqlite3.DatabaseError as exc:
            # A full disk ("database or disk is full"), a corrupt page ("database disk image
            # is malformed"), a file gone read-only: said with the file it happened to.
            raise TaskStoreUnavailable(f"the task store {self.path}: {exc}") from exc

    async def create(self, record: TaskRecord, *, once_key: str | None = None) -> TaskRecord:
        text = record.to_json()
        size = len(text.encode("utf-8", "surrogatepass"))

        def create(db: sqlite3.Connection) -> str | None:
            now = time.time()
            with _transaction(db):
                if once_key is not None:
                    # An expired holder is gone (never returned): the key is free again.
                    db.execute(
                        "DELETE FROM tasks WHERE once_key = ? AND expires_at <= ?", (once_key, now)
                    )
                    row = db.execute(
                        "SELECT record FROM tasks WHERE once_key = ?", (once_key,)
                    ).fetchone()
                    if row is not None:
                        held: str = row[0]
                        return held
                (stored,) = db.execute("SELECT stored FROM task_count").fetchone()
                if stored >= self.max_tasks:
                    (unexpired,) = db.execute(
                        "SELECT count(*) FROM tasks WHERE expires_at > ?", (now,)
                    ).fetchone()
                    if unexpired >= self.max_tasks:
                        raise TaskStoreFull.of_store(self.max_tasks)
                owned, weight = self._owned(db, record.owner)
                if owned >= self.max_per_owner or weight + size > self.max_bytes_per_owner:
                    # Its expired rows are as good as gone: once they are, the count is exact.
                    db.execute(
                        "DELETE FROM tasks WHERE expires_at <= ? AND owner = ?",
                        (now, record.owner),
                    )
                    owned, weight = self._owned(db, record.owner)
                    if owned >= self.max_per_owner:
                        raise TaskStoreFull.of_owner(self.max_per_owner)
                    if weight + size > self.max_bytes_per_owner:
                        raise TaskStoreFull.of_owner_bytes(self.max_bytes_per_owner)
                try:
                    db.execute(
                        "INSERT INTO tasks (task_id, version, status, lease_expires, expires_at, "
                        "owner, once_key, record) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                        (
                            record.task_id,
                            record.version,
                            record.status,
                            record.lease_expires,
                            _expiry(record),
                            record.owner,
                            once_key,
                            text,
                        ),
                    )
                except sqlite3.IntegrityError:
                    raise ValueError("task id already stored") from None
            return None

        held = await self._run(create)
        return record if held is None else TaskRecord.from_json(held)

    @staticmethod
    def _owned(db: sqlite3.Connection, owner: str) -> tuple[int, int]:
        """How many tasks `owner` holds, and their bytes (expired rows included)."""
        row = db.execute(
            "SELECT stored, bytes FROM owner_count WHERE owner = ?", (owner,)
        ).fetchone()
        return (0, 0) if row is None else (int(row[0]), int(row[1]))

    async def owner_bytes(self, owner: str) -> int:
        return (await self._run(lambda db: self._owned(db, owner)))[1]

    async def load(self, task_id: str) -> TaskRecord | None:
        def load(db: sqlite3.Connection) -> str | None:
            row = db.execute(
                "SELECT record FROM tasks WHERE task_id = ? AND expires_at > ?",
                (task_id, time.time()),
            ).fetchone()
            return None if row is None else str(row[0])

        text = await self._run(load)
        return None if text is None else TaskRecord.from_json(text)

    async def swap(self, record: TaskRecord) -> bool:
        values = (
            record.version,
            record.status,
            record.lease_expires,
            _expiry(record),
            record.to_json(),
            record.task_id,
            record.version - 1,
        )

        def swap(db: sqlite3.Connection) -> bool:
            # One statement: the version test and the write are one atomic step in the file.
            cursor = db.execute(
                "UPDATE tasks SET version = ?, status = ?, lease_expires = ?, expires_at = ?, "
                "record = ? WHERE task_id = ? AND version = ? AND expires_at > ?",
                (*values, time.time()),
            )
            return cursor.rowcount == 1

        return await self._run(swap)

    async def runnable(self, now: float, limit: int) -> list[str]:
        def runnable(db: sqlite3.Connection) -> list[str]:
            rows = db.execute(
                "SELECT task_id FROM tasks WHERE status = 'working' AND lease_expires <= ? "
                "AND expires_at > ? ORDER BY lease_expires LIMIT ?",
                (now, now, max(limit, 0)),
            ).fetchall()
            return [str(task_id) for (task_id,) in rows]

        return await self._run(runnable)

    async def purge(self, now: float) -> int:
        def purge(db: sqlite3.Connection) -> int:
            return db.execute("DELETE FROM tasks WHERE expires_at <= ?", (now,)).rowcount

        def purge_rounds(db: sqlite3.Connection) -> None:
            db.execute("DELETE FROM rounds WHERE expires_at <= ?", (now,))

        purged = await self._run(purge)
        # A scan of every round record (no index: see _ROUNDS_SCHEMA), so never on the loop.
        try:
            await anyio.to_thread.run_sync(purge_rounds, self._patient, limiter=self._patient_slot)
        except sqlite3.DatabaseError as exc:
            raise TaskStoreUnavailable(f"the task store {self.path}: {exc}") from exc
        return purged

    async def claim_round(self, claim: RoundRecord, now: float) -> RoundRecord:
        text = claim.to_json()
        claimed = (claim.key, claim.expires_at, claim.free_from(), text, claim.owner)
        bound = self.max_round_bytes_per_owner
        # The owner's bytes: one primary-key read. Past the bound, its expired records go
        # first (in the thread, at most once a second per owner: a scan of every record).
        full = await self._run(lambda db: self._round_bytes(db, claim.owner)) + len(text) > bound
        if full and await self._forget_expired_rounds(claim.owner, now):
            held = await self._run(lambda db: self._round_bytes(db, claim.owner))
            full = held + len(text) > bound

        def claim_round(db: sqlite3.Connection) -> tuple[str, int, str] | int:
            if _RETURNING:
                if full:
                    # Only the key's own record may be taken: an owner at its bound starts
                    # no new one, while every round it has already is still answered.
                    row = db.execute(
                        _RECLAIM_ROUND, (*claimed[1:4], claim.key, now, now)
                    ).fetchone()
                else:
                    row = db.execute(_CLAIM_ROUND, (*claimed, now, now)).fetchone()
                if row is not None:
                    return int(row[0])  # stored: the claim, at this version
                held = db.execute(
                    "SELECT record, version, owner FROM rounds WHERE key = ?", (claim.key,)
                ).fetchone()
                if held is None and full:
                    raise TaskStoreFull.of_owner_rounds(bound)
                # None: the holder expired and was purged in between; the caller claims again.
                return (str(held[0]), int(held[1]), str(held[2])) if held is not None else 0
            with _transaction(db):
                held = db.execute(
                    "SELECT version, free_from, expires_at, record, owner FROM rounds "
                    "WHERE key = ?",
                    (claim.key,),
                ).fetchone()
                if held is not None and held[1] > now and held[2] > now:
                    return str(held[3]), int(held[0]), str(held[4])
                if held is None:
                    if full:
                        raise TaskStoreFull.of_owner_rounds(bound)
                    db.execute(
                        "INSERT INTO rounds (key, version, expires_at, free_from, record, owner) "
                        "VALUES (?, 1, ?, ?, ?, ?)",
                        claimed,
                    )
                    return 1
                # An UPDATE, not INSERT OR REPLACE: a replace deletes without its trigger.
                db.execute(
                    "UPDATE rounds SET version = ?, expires_at = ?, free_from = ?, record = ? "
                    "WHERE key = ?",
                    (int(held[0]) + 1, *claimed[1:4], claim.key),
                )
                return int(held[0]) + 1

        for _ in range(_SWAP_TRIES):
            outcome = await self._run(claim_round)
            if isinstance(outcome, int):
                if outcome:
                    return RoundRecord(
                        key=claim.key,
                        expires_at=claim.expires_at,
                        owner=claim.owner,
                        holder=claim.holder,
                        lease_expires=claim.lease_expires,
                        committed=claim.committed,
                        outcome=claim.outcome,
                        version=outcome,
                    )
                continue
            return RoundRecord.from_json(*outcome)
        raise TaskStoreUnavailable(f"the task store {self.path}: a round's record kept changing")

    @staticmethod
    def _round_bytes(db: sqlite3.Connection, owner: str) -> int:
        row = db.execute("SELECT bytes FROM round_owner WHERE owner = ?", (owner,)).fetchone()
        return 0 if row is None else int(row[0])

    async def _forget_expired_rounds(self, owner: str, now: float) -> bool:
        """Forget `owner`'s expired round records, unless that was done less than a second
        ago (`PurgeSchedule`); whether it was done. No index holds the owner (it would cost
        every round's writes), so this scans every record: in the worker thread, never on
        the loop, and only for an owner at its bound."""
        if not self._purges.due(owner, now):
            return False

        def forget(db: sqlite3.Connection) -> None:
            db.execute("DELETE FROM rounds WHERE owner = ? AND expires_at <= ?", (owner, now))

        try:
            await anyio.to_thread.run_sync(forget, self._patient, limiter=self._patient_slot)
        except sqlite3.DatabaseError as exc:
            raise TaskStoreUnavailable(f"the task store {self.path}: {exc}") from exc
        return True

    async def round_bytes(self, owner: str) -> int:
        return await self._run(lambda db: self._round_bytes(db, owner))

    async def load_round(self, key: str) -> RoundRecord | None:
        def load_round(db: sqlite3.Connection) -> tuple[str, int, str] | None:
            row = db.execute(
                "SELECT record, version, owner FROM rounds WHERE key = ? AND expires_at > ?",
                (key, time.time()),
            ).fetchone()
            return None if row is None else (str(row[0]), int(row[1]), str(row[2]))

        found = await self._run(load_round)
        return None if found is None else RoundRecord.from_json(*found)

    async def swap_round(self, record: RoundRecord) -> bool:
        values = (
            record.version,
            record.expires_at,
            record.free_from(),
            record.to_json(),
            record.key,
            record.version - 1,
        )

        def swap_round(db: sqlite3.Connection) -> bool:
            cursor = db.execute(
                "UPDATE rounds SET version = ?, expires_at = ?, free_from = ?, record = ? "
                "WHERE key = ? AND version = ? AND expires_at > ?",
                (*values, time.time()),
            )
            return cursor.rowcount == 1

        return await self._run(swap_round)

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._eager.close()
        await anyio.to_thread.run_sync(self._patient.close, limiter=self._patient_slot)


def _busy(exc: sqlite3.OperationalError) -> bool:
    """Whether SQLite said SQLITE_BUSY (another connection holds the lock this call needed)."""
    code = getattr(exc, "sqlite_errorcode", None)  # Python 3.11+
    if code is not None:
        return int(code) & 0xFF == sqlite3.SQLITE_BUSY
    return "locked" in str(exc)


@contextlib.contextmanager
def _transaction(db: sqlite3.Connection) -> Iterator[None]:
    # IMMEDIATE: the write lock first, so the checks below and the insert see one state of the
    # file however many processes create at once (a deferred transaction would read, then fail
    # to upgrade when another process wrote in between).
    db.execute("BEGIN IMMEDIATE")
    try:
        yield None
    except BaseException:
        # SQLite rolls some failures back by itself (a full disk: SQLITE_FULL): a ROLLBACK
        # then would fail too, and its error would hide the one that says what happened.
        if db.in_transaction:
            db.execute("ROLLBACK")
        raise
    db.execute("COMMIT")


async def open_sqlite_store(
    path: Path,
    *,
    max_tasks: int,
    max_per_owner: int = 1_000,
    max_bytes_per_owner: int = DEFAULT_BYTES_PER_OWNER,
    max_round_bytes_per_owner: int = DEFAULT_ROUND_BYTES_PER_OWNER,
    make_parents: bool = False,
) -> SqliteTaskStore:
    """The store in ``path`` (absolute), its directory and file created private if new.

    Only the file's own directory is created (0700), and only if its parent exists; with
    ``make_parents`` (the default file, in the per-user state directory) the missing parents
    too, as the per-user key's directory is made. Raises ``TaskStoreUnavailable`` naming the
    problem (and the command that fixes it) when a parent is missing, the directory or the file
    is not private to this user, or the file is not a task store of ours. The file work runs in
    a thread: a first open creates the directory, the file and the schema.
    """
    if not path.is_absolute():
        raise TaskStoreUnavailable(f"the task store path {path} must be absolute")
    store = await anyio.to_thread.run_sync(_open, path, max_tasks, max_per_owner, make_parents)
    store.max_bytes_per_owner = max_bytes_per_owner
    store.max_round_bytes_per_owner = max_round_bytes_per_owner
    return store


def _open(path: Path, max_tasks: int, max_per_owner: int, make_parents: bool) -> SqliteTaskStore:
    _private_directory(path.parent, make_parents=make_parents)
    _private_file(path)
    try:
        patient = _connect(path, BUSY_TIMEOUT_MS)
        try:
            with _transaction(patient):
                found = patient.execute("PRAGMA user_version").fetchone()[0]
                if found not in (0, *_UPGRADES, SCHEMA_VERSION):
                    raise TaskStoreUnavailable(
                        f"the task store {path} has schema version {found}, not "
                        f"{SCHEMA_VERSION}: it was written by another version of the runtime; "
                        "point MRTR_TASK_STORE at another file"
                    )
                for statement in _SCHEMA if found == 0 else _UPGRADES.get(found, ()):
                    patient.execute(statement)
                columns = {row[1] for row in patient.execute("PRAGMA table_info(rounds)")}
                if "owner" not in columns:
                    for statement in _ROUND_OWNERS_SCHEMA:
                        patient.execute(statement)
            eager = _connect(path, 0)
        except BaseException:
            patient.close()
            raise
    except sqlite3.DatabaseError as exc:
        raise TaskStoreUnavailable(f"the task store {path} cannot be used: {exc}") from exc
    return SqliteTaskStore(path, eager, patient, max_tasks=max_tasks, max_per_owner=max_per_owner)


def _connect(path: Path, busy_timeout_ms: int) -> sqlite3.Connection:
    # isolation_level=None: autocommit; the store writes its own BEGIN/COMMIT where it needs one.
    # check_same_thread=False: opened in a thread, used on the loop (one call at a time each).
    # The set-up below may wait for another process like any write (it runs in a thread).
    db = sqlite3.connect(
        path, timeout=BUSY_TIMEOUT_MS / 1000, isolation_level=None, check_same_thread=False
    )
    db.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
    if _journal_mode(db).lower() != "wal":
        db.close()
        raise TaskStoreUnavailable(f"the task store {path} cannot use SQLite's WAL mode")
    db.execute("PRAGMA synchronous = NORMAL")
    # Checkpoints (the WAL copied into the file, then synced) every 40 MB of WAL, not SQLite's
    # 4 MB: every confirmation writes twice, mostly the same few pages, which a checkpoint
    # copies once however often they changed (measured: a claim and its outcome, 65 -> 45 us).
    # The WAL file is then kept at most 64 MiB between checkpoints.
    db.execute(f"PRAGMA wal_autocheckpoint = {WAL_CHECKPOINT_PAGES}")
    db.execute(f"PRAGMA journal_size_limit = {WAL_SIZE_LIMIT_BYTES}")
    db.execute(f"PRAGMA busy_timeout = {busy_timeout_ms}")
    return db


def _journal_mode(db: sqlite3.Connection) -> str:
    """Put the file in WAL mode (once set, it stays with the file) and say the mode it is in.

    Switching a new file to WAL needs it alone for a moment, and SQLite answers "database is
    locked" at once, without its busy wait, while another process opening the same new file
    holds it: two servers of one user starting together. That wait is made here (bounded like
    any other), in the thread that opens the store."""
    deadline = time.monotonic() + BUSY_TIMEOUT_MS / 1000
    pause = 0.001
    while True:
        try:
            mode: str = db.execute("PRAGMA journal_mode = WAL").fetchone()[0]
            return mode
        except sqlite3.OperationalError as exc:
            if not _busy(exc) or time.monotonic() >= deadline:
                raise
        time.sleep(pause)
        pause = min(pause * 2, 0.05)


def _effective_uid() -> int | None:
    geteuid = getattr(os, "geteuid", None)
    return geteuid() if geteuid is not None else None


def _not_ours(info: os.stat_result, path: Path) -> str | None:
    uid = _effective_uid()
    if uid is None or info.st_uid == uid:
        return None
    # Its owner can read every task in it, or rewrite them: root refuses another user's file too.
    return (
        f"is owned by uid {info.st_uid}, not by the user this server runs as (uid {uid}); "
        f"if it is trusted, run: chown {uid} {path}"
    )


def _private_directory(directory: Path, *, make_parents: bool, platform: str = os.name) -> None:
    """``directory`` exists (created 0700 if new), is ours, not a symlink, and no other user can
    write in it (who can would swap the store, or its -wal file, for one of their own). Its
    missing parents are created only with ``make_parents``; otherwise a missing parent refuses:
    a mistyped ``MRTR_TASK_STORE`` must not build a directory tree (readable by all) of its own.
    `platform` (an ``os.name``): on Windows the mode is not checked (``_permissions``)."""
    if not directory.exists() and not directory.is_symlink():
        if make_parents:  # as the per-user key's directory: parents as the umask says
            directory.parent.mkdir(parents=True, exist_ok=True)
        try:
            os.mkdir(directory, 0o700)
        except FileExistsError:
            pass  # another server made it first
        except FileNotFoundError:
            missing = directory.parent
            while not missing.parent.exists() and missing.parent != missing:
                missing = missing.parent
            raise TaskStoreUnavailable(
                f"the task store's directory {directory} cannot be created: {missing} does not "
                f"exist (only the store's own directory is created); create it (mkdir -p "
                f"{directory.parent}) or point MRTR_TASK_STORE at a file in an existing directory"
            ) from None
    if directory.is_symlink():
        raise TaskStoreUnavailable(
            f"the task store's directory {directory} is a symlink, which can be re-pointed at "
            f"someone else's; use a directory: rm {directory} && mkdir -m 700 {directory}"
        )
    info = os.stat(directory)
    problem = _not_ours(info, directory)
    if problem is None and not stat.S_ISDIR(info.st_mode):
        problem = "is not a directory"
    if problem is None and (mode := open_to_others(info.st_mode, 0o022, platform=platform)):
        problem = (
            f"can be written by other users (mode {mode}), who could swap the store in it; "
            f"run: chmod 700 {directory}"
        )
    if problem is not None:
        raise TaskStoreUnavailable(f"the task store's directory {directory} {problem}")


def _private_file(path: Path, *, platform: str = os.name) -> None:
    """``path`` is a 0600 regular file of ours (created so if new), never a symlink. `platform`
    (an ``os.name``): on Windows the mode is not checked (``_permissions``)."""
    flags = os.O_RDWR | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
    # O_NONBLOCK: a FIFO planted in the store's place must not hang the opening thread.
    flags |= getattr(os, "O_NONBLOCK", 0)
    try:
        fd = os.open(path, flags, 0o600)
    except OSError as exc:
        if path.is_symlink():
            raise TaskStoreUnavailable(
                f"the task store {path} is a symlink, which can be re-pointed at someone "
                "else's; replace it with the file it points to"
            ) from None
        raise TaskStoreUnavailable(
            f"the task store {path} cannot be opened ({exc.strerror or exc})"
        ) from None
    try:
        info = os.fstat(fd)
        problem = None
        if not stat.S_ISREG(info.st_mode):
            problem = "is not a regular file"
        elif (foreign := _not_ours(info, path)) is not None:
            problem = foreign
        elif mode := open_to_others(info.st_mode, 0o077, platform=platform):
            # The tasks hold arguments, answers and results: others may neither read nor write.
            problem = f"is readable or writable by other users (mode {mode}); run: chmod 600 {path}"
        if problem is not None:
            raise TaskStoreUnavailable(f"the task store {path} {problem}")
    finally:
        os.close(fd)
