"""What a task store keeps, and the few atomic operations every store offers.

A task (the tasks extension, `io.modelcontextprotocol/tasks`) outlives the request that made it,
and may outlive the process: a host that restarts the server polls the same task id, and a
replica other than the one that created it may finish it. So everything a task needs to be
resumed lives in its `TaskRecord`, and a store offers only operations that are atomic on their
own: create once, load, compare-and-swap on the record's version, list the tasks that are
ready to run. The task engine builds every transition (claim, lease renewal, answers, cancel,
result) from those, so a memory, SQLite or Redis store behave alike and one contract suite
tests them all.

Nothing here does I/O; `MemoryTaskStore` is the store of one process (tests, and a server told
to keep tasks in memory). The SQLite store is the default; Redis serves replicas.
"""

from __future__ import annotations

import json
import math
import secrets
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields, replace
from typing import Any, Final, Literal, Protocol, TypeVar

from ._errors import MrtrError

__all__ = (
    "ACTIVE_STATUSES",
    "DEFAULT_ROUND_BYTES_PER_OWNER",
    "ROUND_PURGE_SECONDS",
    "TERMINAL_STATUSES",
    "MemoryTaskStore",
    "PurgeSchedule",
    "RoundRecord",
    "TaskRecord",
    "TaskStatus",
    "TaskStore",
    "TaskStoreFull",
    "TaskStoreUnavailable",
    "new_task_id",
)

TaskStatus = Literal["working", "input_required", "completed", "failed", "cancelled"]
TERMINAL_STATUSES: Final[frozenset[str]] = frozenset({"completed", "failed", "cancelled"})
ACTIVE_STATUSES: Final[frozenset[str]] = frozenset({"working", "input_required"})


def new_task_id() -> str:
    """A task id: 192 random bits, URL-safe. Task "Security Considerations": ids MAY act as
    bearer tokens, so they MUST be unguessable; the store still checks the owner on every use."""
    return secrets.token_urlsafe(24)


class TaskStoreFull(MrtrError):
    """The store holds its bound of unexpired tasks, in all or for one owner; the text says
    which bound, and the variable that sets it."""

    @classmethod
    def of_store(cls, bound: int) -> TaskStoreFull:
        return cls(
            f"the task store holds {bound} tasks, its bound of unexpired tasks "
            "(MRTR_TASK_MAX_STORED), so no new task can start until one of them expires"
        )

    @classmethod
    def of_owner_bytes(cls, bound: int) -> TaskStoreFull:
        return cls(
            f"your unexpired tasks in the task store would pass {bound} bytes, the bound for "
            "each user (MRTR_TASK_MAX_BYTES_PER_OWNER), so no new task of yours can start until "
            "some of them expire"
        )

    @classmethod
    def of_owner(cls, bound: int) -> TaskStoreFull:
        # Owner: the principal and the server (the record's `owner`), so one client filling
        # its share cannot lock the others out of the whole store.
        return cls(
            f"you have {bound} tasks in the task store, the bound of unexpired tasks for each "
            "user (MRTR_TASK_MAX_PER_OWNER), so no new task of yours can start until one of "
            "them expires"
        )

    @classmethod
    def of_owner_rounds(cls, bound: int) -> TaskStoreFull:
        # A round record lives as long as its token verifies (MRTR_STATE_TTL_SECONDS), and a
        # client can close rounds as fast as it can send them: without this, one principal's
        # confirmations could fill the store every other principal's tasks live in.
        return cls(
            f"your confirmations' records in the task store would pass {bound} bytes, the bound "
            "for each user (MRTR_TASK_MAX_ROUND_BYTES_PER_OWNER), so no new confirmation of yours "
            "can be carried out until some of them expire (MRTR_STATE_TTL_SECONDS after their "
            "question was asked)"
        )


class TaskStoreUnavailable(MrtrError):
    """The configured store cannot be opened or used (a bad ``MRTR_TASK_STORE``, a file that is
    not private, a missing ``redis`` extra, an unreachable server); the text says what to do."""


@dataclass(frozen=True, slots=True)
class TaskRecord:
    """One task, whole: enough for any process holding the store to answer for it or resume it.

    Times are seconds since the epoch (float). `version` grows by one with every stored change;
    `TaskStore.swap` refuses a record whose predecessor is not the stored one.
    """

    task_id: str
    #: Who may see and steer the task: a digest of the principal and the server's name, never
    #: the principal itself.
    owner: str
    #: The method the task augments (only `tools/call` today) and the tool's name.
    method: str
    target: str
    arguments: Mapping[str, Any]
    #: The handler's answers by its own keys, and the state it signed into the last round.
    answers: Mapping[str, Any]
    state: Any
    status: TaskStatus
    created_at: float
    updated_at: float
    #: When the store may forget the task (created_at + ttl); None: kept until purged by hand.
    expires_at: float | None
    ttl_ms: int | None
    poll_interval_ms: int
    status_message: str | None = None
    #: The client capabilities of the request that made the task: what its questions may use.
    client_capabilities: Mapping[str, Any] = field(default_factory=dict)
    #: The outstanding requests by their wire key (unique over the task's life), and which
    #: handler key and method each wire key asks for.
    input_requests: Mapping[str, Any] = field(default_factory=dict)
    asked: Mapping[str, tuple[str, str]] = field(default_factory=dict)
    #: How many wire keys were ever issued: the next one is numbered from here.
    keys_issued: int = 0
    result: Mapping[str, Any] | None = None
    error: Mapping[str, Any] | None = None
    cancel_requested: bool = False
    #: Whether the handler ever passed its point of no return (`ctx.point_of_no_return()`).
    committed: bool = False
    #: The worker running it, and until when its claim holds; a lapsed lease may be taken over.
    lease_owner: str | None = None
    lease_expires: float = 0.0
    #: How many times a worker started the handler (a takeover or a resume adds one).
    attempts: int = 0
    version: int = 0

    @property
    def terminal(self) -> bool:
        return self.status in TERMINAL_STATUSES

    def evolve(self, **changes: Any) -> TaskRecord:
        """This record with `changes` and the next version: what `swap` stores."""
        return replace(self, version=self.version + 1, **changes)

    def to_json(self) -> str:
        # A shallow dict, not dataclasses.asdict: asdict deep-copies every nested value first,
        # which made this ten times slower, and every store write encodes the whole record.
        data = {name: getattr(self, name) for name in _FIELD_NAMES}
        data["asked"] = {key: list(pair) for key, pair in self.asked.items()}
        # ASCII: a lone surrogate (a client may send "\ud800" in any string) is an escape, not a
        # character SQLite's UTF-8 or Redis's cannot hold (it failed the store's write).
        return json.dumps(
            data, separators=(",", ":"), ensure_ascii=True, allow_nan=False, default=_plain
        )

    @classmethod
    def from_json(cls, text: str | bytes) -> TaskRecord:
        def build(data: dict[str, Any]) -> TaskRecord:
            data["asked"] = {key: (pair[0], pair[1]) for key, pair in data["asked"].items()}
            return cls(**data)

        return _read_record("a task", text, build)


#: The per-owner bound on live round records' bytes of a store opened without one (Settings
#: gives the configured one, MRTR_TASK_MAX_ROUND_BYTES_PER_OWNER).
DEFAULT_ROUND_BYTES_PER_OWNER: Final = 16 * 1024 * 1024
#: An owner at its round bound has its expired records forgotten at most this often.
ROUND_PURGE_SECONDS: Final = 1.0
#: Owners whose last purge is remembered at most (then all are forgotten: a purge more).
MAX_PURGE_MARKS: Final = 4096


class PurgeSchedule:
    """When an owner at its round bound may have its expired records forgotten again: at most
    once every ROUND_PURGE_SECONDS (a store without an index on the owner scans for them),
    remembering at most MAX_PURGE_MARKS owners (past that, all are forgotten: one purge more
    each). The one rule every store's claim goes through."""

    def __init__(self) -> None:
        self._last: dict[str, float] = {}

    def due(self, owner: str, now: float) -> bool:
        """Whether `owner`'s purge may run now; if so, it counts as run."""
        last = self._last.get(owner)
        if last is not None and now - last < ROUND_PURGE_SECONDS:
            return False
        if len(self._last) >= MAX_PURGE_MARKS:
            self._last.clear()
        self._last[owner] = now
        return True


_FIELD_NAMES: Final = tuple(item.name for item in fields(TaskRecord))


@dataclass(frozen=True, slots=True)
class RoundRecord:
    """What became of one confirming round: the record that makes a `requestState` single use.

    `key` is the token's identity (`_once.round_key`), never the answers sent with it; `owner`
    is whose it is (the task engine's owner: the principal and the server), whose byte bound
    for round records (`TaskStore.max_round_bytes_per_owner`) counts it. While
    the round runs, `holder` names the run and `lease_expires` says until when its claim
    holds (renewed while it runs); `committed` says the handler passed its point of no
    return. Once it ends, `outcome` says what became of it: ``{"result": ...}`` (the complete
    result the client got) or ``{"task": id}`` (the task it became). A released claim (the
    round asked again, or stopped before its point of no return) has no holder and a lapsed
    lease: the next claim takes it. `owner` and `version` are the store's, kept beside the
    JSON, not in it.
    """

    key: str
    expires_at: float
    holder: str | None = None
    lease_expires: float = 0.0
    committed: bool = False
    outcome: Mapping[str, Any] | None = None
    owner: str = ""
    version: int = 1

    def free(self, now: float) -> bool:
        """Whether a claim may take this record: nothing came of its round, and nothing is
        running it (no lease) or what ran it died before its point of no return."""
        return self.free_from() <= now

    def free_from(self) -> float:
        """From when a claim may take this record (`free`): its lease's end while nothing
        came of it and it is not past its point of no return; never (inf) otherwise. Stores
        keep it beside the record, so that a claim is one comparison."""
        if self.outcome is not None or self.committed:
            return math.inf
        return self.lease_expires

    def evolve(self, **changes: Any) -> RoundRecord:
        """This record with `changes` and the next version: what `swap_round` stores."""
        # Built directly, not by dataclasses.replace (a few microseconds per call, and every
        # confirming round makes two of these).
        fields = self._fields()
        fields.update(changes)
        return RoundRecord(**fields, owner=self.owner, version=self.version + 1)

    def to_json(self) -> str:
        """The record as the stores keep it. Its owner and version are kept beside it (a
        column, a hash field), never in it: runtimes 0.8.0 to 0.11.0 read these records with
        exactly these fields, and one of them may share the store during an update."""
        return _ROUND_ENCODER.encode(self._fields())

    def _fields(self) -> dict[str, Any]:
        """The record's fields but its owner and version (the store's own), by name."""
        return {
            "key": self.key,
            "expires_at": self.expires_at,
            "holder": self.holder,
            "lease_expires": self.lease_expires,
            "committed": self.committed,
            "outcome": self.outcome,
        }

    @classmethod
    def from_json(cls, text: str | bytes, version: int, owner: str = "") -> RoundRecord:
        return _read_record(
            "a confirmed round's",
            text,
            lambda data: cls(**data, owner=owner, version=version),
        )


#: How much of a decoding error's text a message carries (names and positions, never values).
_MAX_REASON_CHARS: Final = 120


_Record = TypeVar("_Record")


def _read_record(
    kind: str, text: str | bytes, build: Callable[[dict[str, Any]], _Record]
) -> _Record:
    """A stored record, decoded by `build` from its JSON object: every store reads every record
    through here. One that cannot be read (a damaged store, or one another version wrote) is
    `TaskStoreUnavailable` saying so, never a bare error: a confirmation whose record cannot be
    read is refused (it may have been carried out), and whoever asked hears why."""
    try:
        data = json.loads(text)
        if not isinstance(data, dict):
            raise TypeError("not a JSON object")
        return build(data)
    except (ValueError, TypeError, KeyError, IndexError, AttributeError) as error:
        reason = f"{type(error).__name__}: {error}"[:_MAX_REASON_CHARS]
        raise TaskStoreUnavailable(
            f"the task store holds {kind} record it cannot read ({reason}); it was left as it "
            "is: repair or replace the store (MRTR_TASK_STORE) to go on"
        ) from None


def _plain(value: object) -> object:
    """What `json.dumps` cannot write itself: a read-only mapping (a `Mapping` that is no dict)."""
    if isinstance(value, Mapping):
        return dict(value)
    raise TypeError(f"a task record holds JSON values only, not {type(value).__name__}")


#: Made once: json.dumps with options builds a new encoder on every call.
_ROUND_ENCODER: Final = json.JSONEncoder(
    separators=(",", ":"), ensure_ascii=True, allow_nan=False, default=_plain
)


class TaskStore(Protocol):
    """The atomic operations a task store offers; every one may be called from any replica.

    Implementations: `MemoryTaskStore` (this process), SQLite (the default, one file shared by
    the processes of one machine), Redis (replicas). All raise `TaskStoreFull` at `create` past
    their bound on unexpired tasks, in all (``max_tasks``) or of one `owner` (``max_per_owner``
    tasks, ``max_bytes_per_owner`` bytes of records as stored: a new task that would pass it is
    refused; one that grows past it by its result, bounded on its own, is not stopped), and
    never return a record whose `expires_at` has passed.
    """

    async def create(self, record: TaskRecord, *, once_key: str | None = None) -> TaskRecord:
        """Store a new task and return it; with `once_key`, at most once per key: a second
        create with the same key stores nothing and returns the task the first one made.
        Returns only once a `load` of the id from any process would find it (durable)."""
        ...

    async def load(self, task_id: str) -> TaskRecord | None:
        """The task, or None when it is unknown or expired."""
        ...

    async def swap(self, record: TaskRecord) -> bool:
        """Store `record` if the stored one has version `record.version - 1`; whether it did."""
        ...

    async def runnable(self, now: float, limit: int) -> list[str]:
        """Ids of at most `limit` tasks a worker may claim: status `working`, not terminal,
        with no lease or a lease that lapsed before `now`."""
        ...

    async def purge(self, now: float) -> int:
        """Forget the tasks (and once-keys, and round records) that expired before `now`;
        how many tasks."""
        ...

    #: The bound on one owner's bytes (its records as stored), and what an owner holds now.
    max_bytes_per_owner: int

    async def owner_bytes(self, owner: str) -> int:
        """The bytes of `owner`'s stored tasks (expired ones not yet purged may count)."""
        ...

    #: The bound on the bytes of one owner's live round records (`RoundRecord.owner`).
    max_round_bytes_per_owner: int

    async def claim_round(self, claim: RoundRecord, now: float) -> RoundRecord:
        """In one atomic step: store `claim` (version 1, or the next of a free record it
        replaces, `RoundRecord.free`) and return it as stored, or return the live record that
        holds the key. The caller's claim is its own when the holder returned is its own.
        Raises `TaskStoreFull` when no live record holds the key and storing the claim would
        pass its owner's `max_round_bytes_per_owner`: a round already recorded is always
        answered, a new one is refused. The bound counts a round as it is claimed: its kept
        result (at most `_once.MAX_KEPT_RESULT_BYTES`), written by `swap_round` after, is not
        refused (a round carried out must keep its outcome), so an owner may pass the bound
        by that much per round in flight."""
        ...

    async def load_round(self, key: str) -> RoundRecord | None:
        """The round record of `key`, or None when there is none (or it expired)."""
        ...

    async def round_bytes(self, owner: str) -> int:
        """The bytes of `owner`'s stored round records (expired ones not yet purged may
        count)."""
        ...

    async def swap_round(self, record: RoundRecord) -> bool:
        """Store `record` if the stored one has version `record.version - 1`; whether it did."""
        ...

    async def close(self) -> None: ...


@dataclass
class _MemoryEntry:
    record: TaskRecord
    once_key: str | None
    #: The owner it was counted under (a swap cannot move it to another's count).
    owner: str
    #: Its bytes as stored (the owner's byte bound counts them).
    size: int = 0


def _round_size(record: RoundRecord) -> int:
    """What a round record weighs against its owner's bound: its JSON, as the stores keep it."""
    return len(record.to_json())  # ASCII: the encoder escapes everything else


def _size(record: TaskRecord) -> int:
    """What a record weighs against its owner's byte bound: its JSON, as the stores keep it."""
    return len(record.to_json().encode("utf-8", "surrogatepass"))


class MemoryTaskStore:
    """A `TaskStore` in this process's memory: tasks end with the process. For tests, and for a
    server told to keep no state on disk (`MRTR_TASK_STORE=memory:`)."""

    def __init__(
        self,
        *,
        max_tasks: int = 10_000,
        max_per_owner: int = 1_000,
        max_bytes_per_owner: int = 64 * 1024 * 1024,
        max_round_bytes_per_owner: int = DEFAULT_ROUND_BYTES_PER_OWNER,
    ) -> None:
        self.max_tasks = max_tasks
        self.max_per_owner = max_per_owner
        self.max_bytes_per_owner = max_bytes_per_owner
        self.max_round_bytes_per_owner = max_round_bytes_per_owner
        self._tasks: dict[str, _MemoryEntry] = {}
        self._once: dict[str, str] = {}
        #: Round records by key, each with its bytes as stored; their bytes by owner.
        self._rounds: dict[str, tuple[RoundRecord, int]] = {}
        self._round_bytes: dict[str, int] = {}
        #: Each owner's round keys, and when an owner at its bound may be purged again.
        self._owner_rounds: dict[str, set[str]] = {}
        self._purges = PurgeSchedule()
        #: Stored tasks (expired ones included until purged) by owner, and their bytes.
        self._owned: dict[str, int] = {}
        self._bytes: dict[str, int] = {}

    def _live(self, task_id: str, now: float | None = None) -> TaskRecord | None:
        entry = self._tasks.get(task_id)
        if entry is None:
            return None
        expires = entry.record.expires_at
        if expires is not None and now is not None and expires <= now:
            return None
        return entry.record

    async def create(self, record: TaskRecord, *, once_key: str | None = None) -> TaskRecord:
        now = time.time()
        if once_key is not None:
            existing_id = self._once.get(once_key)
            if existing_id is not None:
                existing = self._live(existing_id, now)
                if existing is not None:
                    return existing
        owner = record.owner
        size = _size(record)
        if (
            len(self._tasks) >= self.max_tasks
            or self._owned.get(owner, 0) >= self.max_per_owner
            or self._bytes.get(owner, 0) + size > self.max_bytes_per_owner
        ):
            # The bounds are on unexpired tasks: forget the expired ones before refusing.
            await self.purge(now)
        if len(self._tasks) >= self.max_tasks:
            raise TaskStoreFull.of_store(self.max_tasks)
        if self._owned.get(owner, 0) >= self.max_per_owner:
            raise TaskStoreFull.of_owner(self.max_per_owner)
        if self._bytes.get(owner, 0) + size > self.max_bytes_per_owner:
            raise TaskStoreFull.of_owner_bytes(self.max_bytes_per_owner)
        if record.task_id in self._tasks:
            raise ValueError("task id already stored")
        self._tasks[record.task_id] = _MemoryEntry(record, once_key, owner, size)
        self._owned[owner] = self._owned.get(owner, 0) + 1
        self._bytes[owner] = self._bytes.get(owner, 0) + size
        if once_key is not None:
            self._once[once_key] = record.task_id
        return record

    async def load(self, task_id: str) -> TaskRecord | None:
        return self._live(task_id, time.time())

    async def swap(self, record: TaskRecord) -> bool:
        entry = self._tasks.get(record.task_id)
        if entry is None or entry.record.version != record.version - 1:
            return False
        if self._live(record.task_id, time.time()) is None:
            return False  # expired: as gone as in the stores that forget it by themselves
        size = _size(record)
        self._bytes[entry.owner] += size - entry.size
        entry.record, entry.size = record, size
        return True

    async def runnable(self, now: float, limit: int) -> list[str]:
        ready: list[str] = []
        if limit <= 0:
            return ready
        for task_id, entry in self._tasks.items():
            record = entry.record
            if record.status != "working" or record.lease_expires > now:
                continue
            if record.expires_at is not None and record.expires_at <= now:
                continue
            ready.append(task_id)
            if len(ready) >= limit:
                break
        return ready

    async def purge(self, now: float) -> int:
        gone = [
            task_id
            for task_id, entry in self._tasks.items()
            if entry.record.expires_at is not None and entry.record.expires_at <= now
        ]
        for task_id in gone:
            entry = self._tasks.pop(task_id)
            left = self._owned.pop(entry.owner) - 1
            held = self._bytes.pop(entry.owner) - entry.size
            if left:
                self._owned[entry.owner] = left
                self._bytes[entry.owner] = held
            # Only if the key still names this task: an expired holder's key may name a newer one.
            if entry.once_key is not None and self._once.get(entry.once_key) == task_id:
                del self._once[entry.once_key]
        for key in [key for key, (held, _) in self._rounds.items() if held.expires_at <= now]:
            self._drop_round(key)
        return len(gone)

    async def owner_bytes(self, owner: str) -> int:
        return self._bytes.get(owner, 0)

    async def claim_round(self, claim: RoundRecord, now: float) -> RoundRecord:
        entry = self._rounds.get(claim.key)
        held = None if entry is None else entry[0]
        if held is not None and held.expires_at > now and not held.free(now):
            return held
        if held is None or held.expires_at <= now:
            # A new record (or one in an expired one's place): the owner's bound counts it.
            size = _round_size(claim)
            if self._round_bytes.get(claim.owner, 0) + size > self.max_round_bytes_per_owner:
                self._forget_expired_rounds(claim.owner, now)
                if self._round_bytes.get(claim.owner, 0) + size > self.max_round_bytes_per_owner:
                    raise TaskStoreFull.of_owner_rounds(self.max_round_bytes_per_owner)
        stored = replace(claim, version=1 if held is None else held.version + 1)
        self._put_round(stored)
        return stored

    async def load_round(self, key: str) -> RoundRecord | None:
        entry = self._rounds.get(key)
        return None if entry is None or entry[0].expires_at <= time.time() else entry[0]

    async def swap_round(self, record: RoundRecord) -> bool:
        entry = self._rounds.get(record.key)
        if entry is None:
            return False
        held = entry[0]
        if held.version != record.version - 1 or held.expires_at <= time.time():
            return False
        self._put_round(record)
        return True

    def _forget_expired_rounds(self, owner: str, now: float) -> None:
        """Forget `owner`'s expired round records (only its own), at most once a second."""
        if not self._purges.due(owner, now):
            return
        for key in list(self._owner_rounds.get(owner, ())):
            if self._rounds[key][0].expires_at <= now:
                self._drop_round(key)

    def _put_round(self, record: RoundRecord) -> None:
        self._drop_round(record.key)
        size = _round_size(record)
        self._rounds[record.key] = (record, size)
        self._round_bytes[record.owner] = self._round_bytes.get(record.owner, 0) + size
        self._owner_rounds.setdefault(record.owner, set()).add(record.key)

    def _drop_round(self, key: str) -> None:
        entry = self._rounds.pop(key, None)
        if entry is not None:
            owner = entry[0].owner
            left = self._round_bytes.get(owner, 0) - entry[1]
            keys = self._owner_rounds.get(owner)
            if keys is not None:
                keys.discard(key)
            if left > 0:
                self._round_bytes[owner] = left
            else:
                self._round_bytes.pop(owner, None)
                self._owner_rounds.pop(owner, None)

    async def round_bytes(self, owner: str) -> int:
        return self._round_bytes.get(owner, 0)

    async def close(self) -> None:
        return None

    def __len__(self) -> int:
        return len(self._tasks)
