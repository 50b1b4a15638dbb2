"""The task store for replicas: Redis, through redis-py's asyncio client (the ``redis`` extra).

Every replica of a server talks to the same Redis, and every operation that must be atomic
across them is one Lua script, which Redis runs alone (no other command runs in between):

- **create** checks the once-key's holder, the bounds on unexpired tasks (the store's and the
  owner's) and the id, then writes the task, its once-key and its index entries, all in one
  script: fifty replicas creating with
  one once-key end with one task, and every one of them gets it back.
- **swap** compares the stored version and writes only if it is the predecessor's: of any number
  of replicas claiming one task with the same version, exactly one wins.
- **runnable** reads a sorted set scored by lease expiry (only `working` tasks are in it), so
  finding the tasks whose replica died is a range query, never a scan.
- **claim_round** and **swap_round** keep the round records of single use (`_once`): a claim
  stores itself only where no live record holds the key (or the one there is free: released,
  or its run died before its point of no return), so of any number of replicas claiming one
  round, one runs it and every other gets that record back.

Keys: ``mrtr:{<server name>}:task:<id>`` (a hash: record JSON ``r``, version ``v``, expiry
``e``, once-key ``o``, owner ``w``), ``...:once:<key>`` (the task id), ``...:index`` (every task,
scored by expiry: the bound counts it), ``...:owner:<owner>`` (that owner's tasks, scored by
expiry: the per-owner bound counts it; its own Redis TTL is its last task's expiry, so an owner
who stops leaves nothing behind) and ``...:runnable`` (scored by lease expiry). The braces are a
Redis Cluster hash tag: every key of a server lands in one slot, so the scripts, which name keys
they compute, also run on a cluster. Task and once keys carry the task's expiry as a Redis TTL
(``PEXPIREAT``), so Redis forgets an expired task by itself; `purge` only drops index entries
(and deletes early what a caller's ``now`` says has expired). Reads still check ``expires_at``:
Redis expires keys at millisecond precision, on its own clock.

The Redis must keep what it is given: ``maxmemory-policy noeviction`` (Redis's default), since an
evicting policy would drop live tasks (and every key here has a TTL, so ``volatile-*`` too), and
persistence (AOF or RDB) if tasks are to outlive a restart of Redis itself.

Why redis-py directly, not Docket (``pydocket``, the task engine FastMCP builds on): Docket is a
job queue (scheduling, retries, a worker protocol), and it would bring about fifteen packages
(typer, rich, cloudpickle, opentelemetry, prometheus-client, py-key-value-aio, ...) on top of
redis-py, which it uses itself. What this store needs is a few atomic operations on records the
task engine owns; Docket's queue would hold a second copy of each task, whose state and leases
it manages its own way. Six short scripts on redis-py (no dependency of its own on Python 3.11.3+)
give exactly the atomicity the engine needs, testable against a real redis-server.
"""

from __future__ import annotations

import math
import time
from typing import Any, Final

import redis.asyncio
import redis.exceptions

from .._task_store import (
    DEFAULT_ROUND_BYTES_PER_OWNER,
    RoundRecord,
    TaskRecord,
    TaskStoreFull,
    TaskStoreUnavailable,
)

__all__ = ("RedisTaskStore", "open_redis_store")

#: Connections one process opens to Redis at most (as many as requests it runs at once).
MAX_CONNECTIONS: Final = 64
#: How many expired tasks one purge script forgets: a long script blocks every other client.
PURGE_BATCH: Final = 500
_CONNECT_TIMEOUT_SECONDS: Final = 5.0
_COMMAND_TIMEOUT_SECONDS: Final = 10.0

# The owner's set lives as long as its last task: its TTL is its highest expiry score ('inf': a
# task that never expires). Run after each ZADD to it; ``owner_key`` names it.
_OWNER_EXPIRY: Final = """
local last = redis.call('ZRANGE', owner_key, -1, -1, 'WITHSCORES')
if last[2] == 'inf' then
  redis.call('PERSIST', owner_key)
elseif last[2] then
  redis.call('PEXPIREAT', owner_key, math.ceil(tonumber(last[2]) * 1000))
end
"""

# KEYS: task, index, runnable, owner[, once]. ARGV: id, record, version, status, lease, expiry
# score, expiry ms ('' = never), now, bound, once-key ('' = none), prefix, owner, owner's bound,
# owner's byte bound. Returns {1} created, {0, record} the once-key's live holder, {-1} full,
# {-2} id taken, {-3} the owner's bound reached, {-4} the owner's byte bound reached (its live
# tasks' records, summed from its set: at most its count bound of HSTRLEN, in the script).
_CREATE: Final = (
    """
local now = tonumber(ARGV[8])
local owner_key = KEYS[4]
if KEYS[5] then
  local holder = redis.call('GET', KEYS[5])
  if holder then
    local key = ARGV[11] .. 'task:' .. holder
    local held = redis.call('HMGET', key, 'e', 'r')
    if held[1] and (held[1] == '+inf' or tonumber(held[1]) > now) then
      return {0, held[2]}
    end
  end
end
if redis.call('ZCOUNT', KEYS[2], '(' .. ARGV[8], '+inf') >= tonumber(ARGV[9]) then
  return {-1}
end
-- The owner's expired entries go first (Redis forgot their tasks already): what is left counts.
redis.call('ZREMRANGEBYSCORE', KEYS[4], '-inf', ARGV[8])
if redis.call('ZCARD', KEYS[4]) >= tonumber(ARGV[13]) then
  return {-3}
end
local weight = string.len(ARGV[2])
for _, held in ipairs(redis.call('ZRANGE', KEYS[4], 0, -1)) do
  weight = weight + redis.call('HSTRLEN', ARGV[11] .. 'task:' .. held, 'r')
end
if weight > tonumber(ARGV[14]) then
  return {-4}
end
if redis.call('EXISTS', KEYS[1]) == 1 then
  return {-2}
end
redis.call('HSET', KEYS[1], 'r', ARGV[2], 'v', ARGV[3], 'e', ARGV[6], 'o', ARGV[10], 'w', ARGV[12])
if ARGV[7] ~= '' then
  redis.call('PEXPIREAT', KEYS[1], ARGV[7])
end
if KEYS[5] then
  if ARGV[7] ~= '' then
    redis.call('SET', KEYS[5], ARGV[1], 'PXAT', ARGV[7])
  else
    redis.call('SET', KEYS[5], ARGV[1])
  end
end
redis.call('ZADD', KEYS[2], ARGV[6], ARGV[1])
redis.call('ZADD', owner_key, ARGV[6], ARGV[1])
"""
    + _OWNER_EXPIRY
    + """
if ARGV[4] == 'working' then
  redis.call('ZADD', KEYS[3], ARGV[5], ARGV[1])
end
return {1}
"""
)

# KEYS: task, index, runnable. ARGV: predecessor version, record, version, status, lease,
# expiry score, expiry ms ('' = never), now, id, prefix. Returns 1 when it stored the record.
# The owner's set (named by the stored owner, under the prefix) takes the new expiry too.
_SWAP: Final = (
    """
local stored = redis.call('HMGET', KEYS[1], 'v', 'e', 'o', 'w')
if not stored[1] or stored[1] ~= ARGV[1] then
  return 0
end
if stored[2] ~= '+inf' and tonumber(stored[2]) <= tonumber(ARGV[8]) then
  return 0
end
redis.call('HSET', KEYS[1], 'r', ARGV[2], 'v', ARGV[3], 'e', ARGV[6])
local once = ''
if stored[3] and stored[3] ~= '' then
  once = ARGV[10] .. 'once:' .. stored[3]
end
if ARGV[7] ~= '' then
  redis.call('PEXPIREAT', KEYS[1], ARGV[7])
  if once ~= '' then redis.call('PEXPIREAT', once, ARGV[7]) end
else
  redis.call('PERSIST', KEYS[1])
  if once ~= '' then redis.call('PERSIST', once) end
end
redis.call('ZADD', KEYS[2], ARGV[6], ARGV[9])
-- The expiry may have changed: the owner's count must forget the task when Redis does.
if stored[4] then
  local owner_key = ARGV[10] .. 'owner:' .. stored[4]
  redis.call('ZADD', owner_key, ARGV[6], ARGV[9])
"""
    + _OWNER_EXPIRY
    + """
end
if ARGV[4] == 'working' then
  redis.call('ZADD', KEYS[3], ARGV[5], ARGV[9])
else
  redis.call('ZREM', KEYS[3], ARGV[9])
end
return 1
"""
)

# KEYS: runnable. ARGV: now, limit, prefix. Ids of working tasks whose lease lapsed by `now`;
# entries whose task Redis already expired are dropped on the way.
_RUNNABLE: Final = """
local now = tonumber(ARGV[1])
local limit = tonumber(ARGV[2])
local found = {}
local offset = 0
while #found < limit do
  local ids = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[1], 'LIMIT', offset, 128)
  if #ids == 0 then
    break
  end
  for _, id in ipairs(ids) do
    local expiry = redis.call('HGET', ARGV[3] .. 'task:' .. id, 'e')
    if not expiry then
      redis.call('ZREM', KEYS[1], id)
    else
      offset = offset + 1
      if expiry == '+inf' or tonumber(expiry) > now then
        found[#found + 1] = id
        if #found >= limit then
          break
        end
      end
    end
  end
end
return found
"""

# KEYS: index, runnable. ARGV: now, prefix, batch. Forgets up to `batch` tasks expired by `now`.
_PURGE: Final = """
local ids = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[1], 'LIMIT', 0, tonumber(ARGV[3]))
for _, id in ipairs(ids) do
  local key = ARGV[2] .. 'task:' .. id
  local held = redis.call('HMGET', key, 'o', 'w')
  local once = held[1]
  if held[2] then
    redis.call('ZREM', ARGV[2] .. 'owner:' .. held[2], id)
  end
  redis.call('DEL', key)
  if once and once ~= '' then
    local once_key = ARGV[2] .. 'once:' .. once
    if redis.call('GET', once_key) == id then
      redis.call('DEL', once_key)
    end
  end
  redis.call('ZREM', KEYS[1], id)
  redis.call('ZREM', KEYS[2], id)
end
return #ids
"""


# KEYS: owner. ARGV: now, prefix. The bytes of the owner's live tasks' records.
_OWNER_BYTES: Final = """
local weight = 0
for _, held in ipairs(redis.call('ZRANGEBYSCORE', KEYS[1], '(' .. ARGV[1], '+inf')) do
  weight = weight + redis.call('HSTRLEN', ARGV[2] .. 'task:' .. held, 'r')
end
return weight
"""

# Round records (`RoundRecord`): ``...:round:<key>``, a hash of the record's JSON ``r``, its
# version ``v``, its owner ``w`` (beside the JSON, which 0.8.0 to 0.11.0 read too) and ``f``,
# from when a claim may take it (its lease's end while nothing came of
# it and it is not past its point of no return; '+inf' otherwise). Redis forgets it at its
# expiry (PEXPIREAT). Its owner's ``...:rounds:<owner>`` (its round keys, scored by expiry) and
# ``...:round-bytes:<owner>`` (each key's bytes, and their sum in field '#': no round key has
# a '#') keep the owner's bound; a claim of a new key first forgets that owner's expired ones
# (at most PURGE_BATCH per claim: Redis forgot their records already). Both keys expire with
# the owner's last round, so an owner who stops leaves nothing behind.
_ROUND_OWNER_EXPIRY: Final = """
local last = redis.call('ZRANGE', KEYS[2], -1, -1, 'WITHSCORES')
if last[2] then
  local at = math.ceil(tonumber(last[2]) * 1000)
  redis.call('PEXPIREAT', KEYS[2], at)
  redis.call('PEXPIREAT', KEYS[3], at)
end
"""

# KEYS: round, owner's rounds, owner's round bytes. ARGV: record, now, free-from, expiry ms,
# the round's key, its bytes, the owner's byte bound, expiry score, the purge batch, the owner.
# Returns {stored record, version, owner}, or {} when a new record would pass the owner's bound.
_CLAIM_ROUND: Final = (
    """
local held = redis.call('HMGET', KEYS[1], 'r', 'v', 'f', 'w')
local version = 1
if held[1] then
  if held[3] == '+inf' or tonumber(held[3]) > tonumber(ARGV[2]) then
    return {held[1], held[2], held[4] or ''}
  end
  version = tonumber(held[2]) + 1
else
  local gone = redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', ARGV[2], 'LIMIT', 0, ARGV[9])
  if #gone > 0 then
    local freed = 0
    for _, size in ipairs(redis.call('HMGET', KEYS[3], unpack(gone))) do
      freed = freed + (tonumber(size) or 0)
    end
    redis.call('ZREM', KEYS[2], unpack(gone))
    redis.call('HDEL', KEYS[3], unpack(gone))
    redis.call('HINCRBY', KEYS[3], '#', -freed)
  end
  local total = tonumber(redis.call('HGET', KEYS[3], '#')) or 0
  if total + tonumber(ARGV[6]) > tonumber(ARGV[7]) then
    return {}
  end
end
local before = tonumber(redis.call('HGET', KEYS[3], ARGV[5])) or 0
redis.call('HSET', KEYS[3], ARGV[5], ARGV[6])
redis.call('HINCRBY', KEYS[3], '#', tonumber(ARGV[6]) - before)
redis.call('ZADD', KEYS[2], ARGV[8], ARGV[5])
redis.call('HSET', KEYS[1], 'r', ARGV[1], 'v', version, 'f', ARGV[3], 'w', ARGV[10])
redis.call('PEXPIREAT', KEYS[1], ARGV[4])
"""
    + _ROUND_OWNER_EXPIRY
    + """
return {ARGV[1], tostring(version), ARGV[10]}
"""
)

# KEYS: round, owner's rounds, owner's round bytes. ARGV: predecessor version, record,
# version, free-from, expiry ms, the round's key, its bytes. 1 if stored.
_SWAP_ROUND: Final = """
if redis.call('HGET', KEYS[1], 'v') ~= ARGV[1] then
  return 0
end
redis.call('HSET', KEYS[1], 'r', ARGV[2], 'v', ARGV[3], 'f', ARGV[4])
redis.call('PEXPIREAT', KEYS[1], ARGV[5])
local before = redis.call('HGET', KEYS[3], ARGV[6])
if before then
  redis.call('HSET', KEYS[3], ARGV[6], ARGV[7])
  redis.call('HINCRBY', KEYS[3], '#', tonumber(ARGV[7]) - tonumber(before))
end
return 1
"""


def _text(value: str | bytes) -> str:
    """A reply's string (the client may return bytes)."""
    return value.decode("utf-8", "surrogateescape") if isinstance(value, bytes) else value


def _number(value: float) -> str:
    # repr: the shortest text that reads back as the same double, in Lua as in Python.
    return "+inf" if math.isinf(value) else repr(float(value))


def _expiry(record: TaskRecord) -> tuple[str, str]:
    """(index score, PEXPIREAT milliseconds or '' for never)."""
    if record.expires_at is None:
        return "+inf", ""
    return _number(record.expires_at), str(math.ceil(record.expires_at * 1000))


class RedisTaskStore:
    """A `TaskStore` on Redis; see the module's text. Open it with `open_redis_store`."""

    def __init__(
        self,
        client: redis.asyncio.Redis,
        *,
        namespace: str,
        max_tasks: int,
        max_per_owner: int = 1_000,
        max_bytes_per_owner: int = 64 * 1024 * 1024,
        max_round_bytes_per_owner: int = DEFAULT_ROUND_BYTES_PER_OWNER,
        label: str,
    ) -> None:
        if not namespace or any(character in namespace for character in "{}"):
            raise ValueError(f"namespace {namespace!r} cannot be a Redis hash tag")
        self.max_tasks = max_tasks
        self.max_per_owner = max_per_owner
        self.max_bytes_per_owner = max_bytes_per_owner
        self.max_round_bytes_per_owner = max_round_bytes_per_owner
        self.label = label
        self._client = client
        self._prefix = f"mrtr:{{{namespace}}}:"
        self._index = self._prefix + "index"
        self._runnable_set = self._prefix + "runnable"
        self._create = client.register_script(_CREATE)
        self._swap = client.register_script(_SWAP)
        self._runnable = client.register_script(_RUNNABLE)
        self._purge = client.register_script(_PURGE)
        self._claim_round = client.register_script(_CLAIM_ROUND)
        self._owner_bytes = client.register_script(_OWNER_BYTES)
        self._swap_round = client.register_script(_SWAP_ROUND)

    def _task_key(self, task_id: str) -> str:
        return f"{self._prefix}task:{task_id}"

    def _unavailable(self, exc: Exception) -> TaskStoreUnavailable:
        return TaskStoreUnavailable(f"the task store at {self.label} cannot be reached: {exc}")

    async def create(self, record: TaskRecord, *, once_key: str | None = None) -> TaskRecord:
        score, milliseconds = _expiry(record)
        keys = [
            self._task_key(record.task_id),
            self._index,
            self._runnable_set,
            f"{self._prefix}owner:{record.owner}",
        ]
        if once_key is not None:
            keys.append(f"{self._prefix}once:{once_key}")
        arguments: list[str | int] = [
            record.task_id,
            record.to_json(),
            record.version,
            record.status,
            _number(record.lease_expires),
            score,
            milliseconds,
            _number(time.time()),
            self.max_tasks,
            once_key or "",
            self._prefix,
            record.owner,
            self.max_per_owner,
            self.max_bytes_per_owner,
        ]
        try:
            reply: list[Any] = await self._create(keys=keys, args=arguments)
        except redis.exceptions.RedisError as exc:
            raise self._unavailable(exc) from exc
        outcome = int(reply[0])
        if outcome == 0:
            return TaskRecord.from_json(reply[1])
        if outcome == -1:
            raise TaskStoreFull.of_store(self.max_tasks)
        if outcome == -3:
            raise TaskStoreFull.of_owner(self.max_per_owner)
        if outcome == -4:
            raise TaskStoreFull.of_owner_bytes(self.max_bytes_per_owner)
        if outcome == -2:
            raise ValueError("task id already stored")
        return record

    async def load(self, task_id: str) -> TaskRecord | None:
        try:
            text: bytes | str | None = await self._client.hget(self._task_key(task_id), "r")
        except redis.exceptions.RedisError as exc:
            raise self._unavailable(exc) from exc
        if text is None:
            return None
        record = TaskRecord.from_json(text)
        if record.expires_at is not None and record.expires_at <= time.time():
            return None
        return record

    async def swap(self, record: TaskRecord) -> bool:
        score, milliseconds = _expiry(record)
        arguments: list[str | int] = [
            record.version - 1,
            record.to_json(),
            record.version,
            record.status,
            _number(record.lease_expires),
            score,
            milliseconds,
            _number(time.time()),
            record.task_id,
            self._prefix,
        ]
        keys = [self._task_key(record.task_id), self._index, self._runnable_set]
        try:
            stored = await self._swap(keys=keys, args=arguments)
        except redis.exceptions.RedisError as exc:
            raise self._unavailable(exc) from exc
        return int(stored) == 1

    async def runnable(self, now: float, limit: int) -> list[str]:
        if limit <= 0:
            return []
        try:
            ids: list[bytes] = await self._runnable(
                keys=[self._runnable_set], args=[_number(now), limit, self._prefix]
            )
        except redis.exceptions.RedisError as exc:
            raise self._unavailable(exc) from exc
        return [task_id.decode() for task_id in ids]

    async def purge(self, now: float) -> int:
        total = 0
        while True:
            try:
                count = int(
                    await self._purge(
                        keys=[self._index, self._runnable_set],
                        args=[_number(now), self._prefix, PURGE_BATCH],
                    )
                )
            except redis.exceptions.RedisError as exc:
                raise self._unavailable(exc) from exc
            total += count
            if count < PURGE_BATCH:
                return total

    async def owner_bytes(self, owner: str) -> int:
        try:
            weight = await self._owner_bytes(
                keys=[f"{self._prefix}owner:{owner}"], args=[_number(time.time()), self._prefix]
            )
        except redis.exceptions.RedisError as exc:
            raise self._unavailable(exc) from exc
        return int(weight)

    def _round_keys(self, record: RoundRecord) -> list[str]:
        return [
            f"{self._prefix}round:{record.key}",
            f"{self._prefix}rounds:{record.owner}",
            f"{self._prefix}round-bytes:{record.owner}",
        ]

    async def claim_round(self, claim: RoundRecord, now: float) -> RoundRecord:
        text = claim.to_json()
        arguments: list[str | int] = [
            text,
            _number(now),
            _number(claim.free_from()),
            str(math.ceil(claim.expires_at * 1000)),
            claim.key,
            len(text),
            self.max_round_bytes_per_owner,
            _number(claim.expires_at),
            PURGE_BATCH,
            claim.owner,
        ]
        try:
            reply: list[Any] = await self._claim_round(keys=self._round_keys(claim), args=arguments)
        except redis.exceptions.RedisError as exc:
            raise self._unavailable(exc) from exc
        if not reply:
            raise TaskStoreFull.of_owner_rounds(self.max_round_bytes_per_owner)
        return RoundRecord.from_json(reply[0], int(reply[1]), _text(reply[2]))

    async def load_round(self, key: str) -> RoundRecord | None:
        try:
            held: list[Any] = await self._client.hmget(f"{self._prefix}round:{key}", "r", "v", "w")
        except redis.exceptions.RedisError as exc:
            raise self._unavailable(exc) from exc
        if held[0] is None:
            return None
        record = RoundRecord.from_json(held[0], int(held[1]), _text(held[2] or b""))
        return None if record.expires_at <= time.time() else record

    async def swap_round(self, record: RoundRecord) -> bool:
        text = record.to_json()
        arguments: list[str | int] = [
            record.version - 1,
            text,
            record.version,
            _number(record.free_from()),
            str(math.ceil(record.expires_at * 1000)),
            record.key,
            len(text),
        ]
        try:
            stored = await self._swap_round(keys=self._round_keys(record), args=arguments)
        except redis.exceptions.RedisError as exc:
            raise self._unavailable(exc) from exc
        return int(stored) == 1

    async def round_bytes(self, owner: str) -> int:
        try:
            total = await self._client.hget(f"{self._prefix}round-bytes:{owner}", "#")
        except redis.exceptions.RedisError as exc:
            raise self._unavailable(exc) from exc
        return int(total or 0)

    async def close(self) -> None:
        await self._client.aclose()


async def open_redis_store(
    url: str,
    *,
    namespace: str,
    max_tasks: int,
    max_per_owner: int = 1_000,
    max_bytes_per_owner: int = 64 * 1024 * 1024,
    max_round_bytes_per_owner: int = DEFAULT_ROUND_BYTES_PER_OWNER,
    label: str | None = None,
) -> RedisTaskStore:
    """A store on the Redis at ``url`` (``redis://`` or ``rediss://``), its keys under
    ``namespace`` (the server's name); checked with a PING, so a wrong address fails here.

    ``label`` is how messages name the server (the URL without its password)."""
    shown = label if label is not None else url
    try:
        # Blocking: past MAX_CONNECTIONS a command waits for a free connection (a burst of task
        # operations queues) instead of failing, and Redis sees a bounded number of clients.
        pool = redis.asyncio.BlockingConnectionPool.from_url(
            url,
            max_connections=MAX_CONNECTIONS,
            timeout=_COMMAND_TIMEOUT_SECONDS,
            socket_connect_timeout=_CONNECT_TIMEOUT_SECONDS,
            socket_timeout=_COMMAND_TIMEOUT_SECONDS,
        )
    except ValueError as exc:
        raise TaskStoreUnavailable(f"the task store URL {shown} is not valid: {exc}") from None
    client = redis.asyncio.Redis.from_pool(pool)  # the client owns the pool: aclose() closes it
    store = RedisTaskStore(
        client,
        namespace=namespace,
        max_tasks=max_tasks,
        max_per_owner=max_per_owner,
        max_bytes_per_owner=max_bytes_per_owner,
        max_round_bytes_per_owner=max_round_bytes_per_owner,
        label=shown,
    )
    try:
        await client.ping()
    except redis.exceptions.RedisError as exc:
        await client.aclose()
        raise store._unavailable(exc) from exc
    return store
