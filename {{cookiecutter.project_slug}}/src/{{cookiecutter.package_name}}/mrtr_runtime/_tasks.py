"""The task engine (tasks extension, `io.modelcontextprotocol/tasks`): tasks made, run, answered.

A tool declared with `task=` becomes a task where its handler calls `ctx.start_task()` in a
round of a request that declared the extension (`_dispatch` hands the round over as a
`TaskOpening`). The engine stores the task (durably, before the request is answered with it),
and a worker runs the handler again from the top, as the task, with the recorded arguments and
answers. Everything a task needs lives in its `TaskRecord`; every change is a compare-and-swap
on the store (`_task_store`), so any process holding the store can answer for a task, and one
whose worker died can take it over:

- a worker holds a **lease** on the task it runs (LEASE_SECONDS, renewed every
  RENEW_SECONDS); a lapsed lease means its process died, and the sweeper (or a `tasks/get` of
  that task) claims it and re-runs the idempotent handler: at most MAX_ATTEMPTS starts, then
  the task ends `failed` with a reason a user understands;
- `tasks/cancel` marks the record and stops a local worker at once; a worker elsewhere sees
  the mark at its next renewal;
- at most MAX_RUNNING workers per process; a task past that waits `working`, unclaimed, and
  the next free slot (here or on another replica) takes it.

A confirming round (one that closed a verified requestState) makes its task with a once-key:
the round's single-flight key. A replay of that round finds the same task, never a second run,
whether the client follows tasks or not (tasks "Security Considerations"; mrtr: a requestState
that must be used once must be enforced server-side).
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
import secrets
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Mapping
from contextlib import asynccontextmanager
from typing import Any, Final

from ._audit import AuditTrail, decision_of
from ._capabilities import ClientCapabilities
from ._context import Cancellation, Context, RequestCancelled, write_mark
from ._dispatch import (
    Ask,
    BadAnswer,
    Call,
    Finish,
    MissingCapability,
    TaskOpening,
    check_answer,
    missing_capability_error,
    round_step,
)
from ._errors import MrtrError
from ._jsonrpc import INTERNAL_ERROR, INVALID_PARAMS, JSONObject, RpcError, clip, json_size
from ._records import Records, StoreOpener
from ._redact import redact_secrets
from ._registry import Registry
from ._results import InputRequired, ToolResult
from ._task_store import (
    TaskRecord,
    TaskStore,
    TaskStoreFull,
    TaskStoreUnavailable,
    new_task_id,
)
from ._telemetry import Telemetry
from ._wire import MODERN_VERSIONS

__all__ = (
    "DEFAULT_TASK_TTL_SECONDS",
    "INLINE_WAIT_SECONDS",
    "LEASE_SECONDS",
    "MAX_ATTEMPTS",
    "MAX_RESULT_BYTES",
    "MAX_RUNNING",
    "MAYBE_DONE",
    "POLL_INTERVAL_MS",
    "RENEW_SECONDS",
    "CallOf",
    "TaskEngine",
    "task_wire",
)

#: Workers one process runs at once; a task started past this waits `working` for a slot.
MAX_RUNNING: Final = 32
#: Of those, how many one principal's tasks may take (a principal named by the transport: a
#: server with no principals, one user's own, lets that user take them all); the rest wait
#: `working` and start as that principal's others end, so one user cannot fill the workers.
MAX_RUNNING_PER_OWNER: Final = MAX_RUNNING // 4
#: The JSON a task keeps as its result: a bigger one ends the task `failed`, saying so.
MAX_RESULT_BYTES: Final = 1024 * 1024
#: How long a task is kept after it is created, unless its tool says (`task_ttl_seconds`).
DEFAULT_TASK_TTL_SECONDS: Final = 24 * 3600
#: tasks "Task Polling": the interval a client is asked to poll at (`pollIntervalMs`).
POLL_INTERVAL_MS: Final = 1000
#: A worker's claim on its task, and how often it renews it (and reads `cancel_requested`).
LEASE_SECONDS: Final = 15.0
RENEW_SECONDS: Final = 5.0
#: How often the sweeper looks for tasks nobody runs (a lease lapsed, or no slot was free).
SWEEP_SECONDS: Final = 2.0
#: Starts of one stretch of a task's work (a process died under each one before the last).
MAX_ATTEMPTS: Final = 3
#: Status messages written to the store at most this often (the rest wait for the next).
STATUS_INTERVAL_SECONDS: Final = 0.25
#: Handler runs of one task with no question in between (an InputRequired with no requests
#: asks only to run again with its new state): a handler that never settles is stopped.
MAX_RUNS_WITHOUT_INPUT: Final = 64
#: Task ids one `subscriptions/listen` may follow.
MAX_FOLLOWED_TASKS: Final = 256
#: How long a replayed confirmation of a client that does not follow tasks waits for the task
#: its first sending started (it then hears where the work stands, and may call again).
INLINE_WAIT_SECONDS: Final = 60.0
#: The end of a task whose action may have been carried out by a run that did not finish (the
#: server stopped past the handler's point of no return), when the handler is not idempotent
#: and so is not run again: a tool-level outcome, saying the truth ("maybe").
MAYBE_DONE: Final = (
    "The server stopped after this task's action may have been carried out; it was not run "
    "again. Call the tool again (or check the target) to see its state."
)
_SWAP_TRIES: Final = 64

_logger = logging.getLogger("mrtr_runtime")

#: `_methods.call_of`, given by the router (the engine sits beside `_methods`, not above it).
CallOf = Callable[[Registry, str, Mapping[str, Any]], Call]


def _iso(when: float) -> str:
    # tasks "Tasks": ISO 8601 timestamps; always UTC, with Z. (time, not datetime: nothing
    # more to import at start-up.)
    seconds = int(when)
    milliseconds = int((when - seconds) * 1000)
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(seconds)) + f".{milliseconds:03d}Z"


def task_wire(record: TaskRecord, *, detailed: bool) -> JSONObject:
    """The record as the wire shows it: a Task (CreateTaskResult), or with `detailed` the
    DetailedTask of `tasks/get` and `notifications/tasks` (result, error or inputRequests by
    status). Never the requestState, nor anything the record keeps for resuming."""
    wire: JSONObject = {"taskId": record.task_id, "status": record.status}
    if record.status_message is not None:
        wire["statusMessage"] = record.status_message
    wire["createdAt"] = _iso(record.created_at)
    wire["lastUpdatedAt"] = _iso(record.updated_at)
    wire["ttlMs"] = record.ttl_ms
    wire["pollIntervalMs"] = record.poll_interval_ms
    if detailed:
        if record.status == "completed" and record.result is not None:
            # basic/index: every result carries resultType, an inlined one too (the tasks
            # extension's requester libraries check it).
            wire["result"] = {"resultType": "complete", **record.result}
        elif record.status == "failed" and record.error is not None:
            wire["error"] = dict(record.error)
        elif record.status == "input_required":
            requests = record.input_requests
            wire["inputRequests"] = {key: dict(value) for key, value in requests.items()}
    return wire


def _error_of(error: RpcError) -> dict[str, Any]:
    wire: dict[str, Any] = {"code": error.code, "message": redact_secrets(error.message)}
    if error.data is not None:
        wire["data"] = error.data
    return wire


def _a_round(record: TaskRecord) -> bool:
    """Whether `record` holds an inline run's new round (its handler asked again after the
    confirmation): the round is kept for a replay to get back verbatim, and it is no task."""
    result = record.result
    return result is not None and result.get("resultType") == "input_required"


def _not_found() -> RpcError:
    # tasks "Protocol Errors": an invalid or nonexistent taskId is -32602. Someone else's task
    # is not found either: saying it exists would tell a guesser it guessed right.
    return RpcError(INVALID_PARAMS, "Task not found")


class _LeaseLost(MrtrError):
    """The task's lease is held by another worker now: this one must stop writing."""


def _fenced(why: str) -> RequestCancelled:
    return RequestCancelled(
        f"this task's point of no return was not recorded ({why}); the action must not "
        "happen here, and the task's record decides what comes of it"
    )


class _Run:
    """One local run of a task: its cancellation, its lease renewal, its status messages."""

    def __init__(self, engine: TaskEngine, record: TaskRecord) -> None:
        self.engine = engine
        self.task_id = record.task_id
        self.target = record.target
        self.owner = record.owner
        #: TaskLink: which start of the task this run is (`Context.resumed`).
        self.attempt = record.attempts
        self.cancellation = Cancellation()
        self.task: asyncio.Task[None] | None = None
        self.renewal: asyncio.Task[None] | None = None
        self.lost = False
        self._pending_message: str | None = None
        self._last_status = 0.0
        self._loop = asyncio.get_running_loop()
        #: Until when this worker may act: its lease as last written (a paused process finds
        #: it lapsed when it wakes, before its point of no return).
        self.valid_until = record.lease_expires

    def commit(self) -> Awaitable[None] | None:
        """TaskLink (a Fence): the handler passed its point of no return; make `committed`
        durable before its action proceeds, under this worker's lease, so that a server taking
        the task over after this process died knows the action may have happened, and a
        worker that lost the task (paused past its lease while another took it over) stops
        instead of acting too. Raises RequestCancelled at once when the lease has lapsed here;
        from a worker thread (a `def` tool, or work handed to a thread) it returns once the
        mark is written, raising if it could not be; on the event loop it returns the write,
        for `await ctx.pass_point_of_no_return()`."""
        if self.lost or self.engine.clock() >= self.valid_until:
            self.lost = True
            raise _fenced("its lease lapsed")
        return write_mark(self._loop, self._write_commit, self.engine.lease_seconds)

    async def _write_commit(self) -> None:
        def change(record: TaskRecord) -> TaskRecord | None:
            return None if record.committed else record.evolve(committed=True)

        try:
            await self.engine._as_holder(self, change)
        except _LeaseLost:
            raise _fenced("another worker took the task over") from None
        except RpcError as error:
            raise _fenced(f"the task store failed: {error.message}") from None
        except Exception as error:
            _logger.exception("task %s: recording its point of no return failed", self.task_id)
            raise _fenced(f"the task store failed: {type(error).__name__}") from None

    def cancel(self) -> None:
        """tasks/cancel: the handler's flag, then its task (unless past its point of no return)."""
        task = self.task
        stopped = self.cancellation.cancel_unless_committed()
        if stopped and task is not None and task is not asyncio.current_task():
            task.cancel()

    async def status(self, message: str) -> None:
        # TaskLink: statusMessage, at most one store write per STATUS_INTERVAL_SECONDS.
        self._pending_message = message
        if self.engine.clock() - self._last_status >= STATUS_INTERVAL_SECONDS:
            await self.flush()

    async def flush(self) -> None:
        message = self._pending_message
        if message is None:
            return
        self._pending_message = None
        self._last_status = self.engine.clock()

        def change(record: TaskRecord) -> TaskRecord | None:
            if record.status_message == message:
                return None
            return record.evolve(status_message=message, updated_at=self.engine.clock())

        await self.engine._as_holder(self, change)

    async def renew(self) -> None:
        """Keep the lease while the run lasts; read a cancellation made on another replica."""
        engine = self.engine
        while True:
            await asyncio.sleep(engine.renew_seconds)
            committed = self.cancellation.committed

            def change(record: TaskRecord, committed: bool = committed) -> TaskRecord | None:
                return record.evolve(
                    lease_expires=engine.clock() + engine.lease_seconds,
                    committed=record.committed or committed,
                )

            try:
                record = await engine._as_holder(self, change)
                if record is not None:
                    self.valid_until = record.lease_expires
                await self.flush()
            except _LeaseLost:
                _logger.warning("task %s: another worker took it over; this stops", self.task_id)
                if self.task is not None:
                    self.task.cancel()
                return
            except Exception:
                _logger.exception("task %s: renewing its lease failed", self.task_id)
                continue
            if record is not None and record.cancel_requested:
                self.cancel()


class TaskEngine:
    """Tasks of one server: made from openings, answered for, run by local workers.

    Its store is `records` (the server's, shared with single use), or one made of
    `open_store` and `store_exists`: opened on the first task operation (and by the sweeper
    once `store_exists` says there is a store to resume from), never at start-up.
    """

    def __init__(
        self,
        *,
        server_name: str,
        registry: Registry,
        call_of: Callable[[], CallOf],
        open_store: StoreOpener | None = None,
        store_exists: Callable[[], bool] | None = None,
        records: Records | None = None,
        max_running: int = MAX_RUNNING,
        max_running_per_owner: int = MAX_RUNNING_PER_OWNER,
        poll_interval_ms: int = POLL_INTERVAL_MS,
        lease_seconds: float = LEASE_SECONDS,
        renew_seconds: float = RENEW_SECONDS,
        sweep_seconds: float = SWEEP_SECONDS,
        token_ttl_seconds: float = 0.0,
        inline_wait_seconds: float = INLINE_WAIT_SECONDS,
        clock: Callable[[], float] = time.time,
        audit: AuditTrail | None = None,
        telemetry: Telemetry | None = None,
    ) -> None:
        self.server_name = server_name
        #: OpenTelemetry: each task's work is a span of its own, linked to its creator.
        self.telemetry = telemetry
        #: The consent audit trail: every task's end is a line there (`_mutate`).
        self.audit = audit
        self.registry = registry
        self._call_of = call_of
        #: The store, shared with the server's single use.
        self.records = records or Records(server_name, open_store, store_exists)
        self.max_running = max_running
        self.max_running_per_owner = max_running_per_owner
        #: Workers running here by owner (`_spawn` counts, `_work` gives back).
        self._running_by_owner: collections.Counter[str] = collections.Counter()
        self.poll_interval_ms = poll_interval_ms
        self.lease_seconds = lease_seconds
        self.renew_seconds = renew_seconds
        self.sweep_seconds = sweep_seconds
        #: How long a requestState token verifies: a task made with a once-key is kept at
        #: least that long, or a replay of its confirmation after the task was forgotten
        #: would find no task and run again.
        self.token_ttl_seconds = token_ttl_seconds
        #: How long a replayed inline confirmation waits for its running task.
        self.inline_wait_seconds = inline_wait_seconds
        self.clock = clock
        #: This process's name on the leases it holds.
        self.worker_id = self.records.worker_id
        #: Local runs by task id: the workers (counted against max_running) and inline runs.
        self._runs: dict[str, _Run] = {}
        self._workers = 0
        self._pumping = False
        self._pump_again = False
        self._stopping = False
        #: Tasks `stop` left `working` before their point of no return (`release`).
        self._left: list[str] = []
        #: Woken on every change this process makes to a task (followers of that task).
        self._changes: dict[str, set[asyncio.Event]] = {}

    # -- the store ----------------------------------------------------------------------

    async def check_store(self) -> None:
        """Readiness: whether the store takes a write now (`Records.check`)."""
        await self.records.check()

    async def store(self) -> TaskStore:
        """The store, opened on first use."""
        return await self.records.store()

    def owner(self, principal: str | None) -> str:
        """Who a task belongs to: the principal (None on stdio) and this server's name."""
        return self.records.owner(principal)

    async def _owned(self, task_id: object, principal: str | None) -> TaskRecord:
        if not isinstance(task_id, str) or not task_id:
            raise RpcError(INVALID_PARAMS, "params.taskId must be a non-empty string")
        record = await (await self.store()).load(task_id)
        if record is None or not secrets.compare_digest(record.owner, self.owner(principal)):
            raise _not_found()
        if _a_round(record):
            raise _not_found()  # a kept round, never a task any client was told of
        return record

    async def _mutate(
        self, task_id: str, change: Callable[[TaskRecord], TaskRecord | None]
    ) -> TaskRecord | None:
        """Apply `change` to the stored record until a compare-and-swap takes it; the stored
        record (None when the task is gone). `change` returns None for "nothing to do"."""
        store = await self.store()
        for _ in range(_SWAP_TRIES):
            record = await store.load(task_id)
            if record is None:
                return None
            changed = change(record)
            if changed is None:
                return record
            if await store.swap(changed):
                if changed.updated_at != record.updated_at:
                    self._announce(task_id)
                if self.audit is not None and changed.terminal and not record.terminal:
                    # Every write of a task goes through here: its end is recorded once.
                    self.audit.task_ended(
                        task=task_id,
                        tool=changed.target,
                        status=changed.status,
                        message=changed.status_message,
                    )
                return changed
        raise RpcError(INTERNAL_ERROR, "The task changed too often to be updated; try again")

    async def _as_holder(
        self, run: _Run, change: Callable[[TaskRecord], TaskRecord | None]
    ) -> TaskRecord | None:
        """`_mutate` for the worker holding the lease; raises _LeaseLost once it does not."""

        def guarded(record: TaskRecord) -> TaskRecord | None:
            if record.lease_owner != self.worker_id or record.terminal:
                raise _LeaseLost
            return change(record)

        if run.lost:
            raise _LeaseLost
        try:
            return await self._mutate(run.task_id, guarded)
        except _LeaseLost:
            run.lost = True
            raise

    def _announce(self, task_id: str) -> None:
        for event in self._changes.get(task_id, ()):
            event.set()

    # -- the opening: a round becomes a task ------------------------------------------------

    async def __call__(self, opening: TaskOpening) -> JSONObject:
        """TaskStarter: store the task of `opening` (or find the one its once-key made) and
        answer the request: the CreateTaskResult, or for a client without the extension the
        result itself."""
        call, scope = opening.call, opening.scope
        store = await self.store()
        now = self.clock()
        ttl = call.task_ttl_seconds or DEFAULT_TASK_TTL_SECONDS
        if opening.once_key is not None:
            ttl = max(ttl, self.token_ttl_seconds)
        # A stopping server still records the task, for a server to come to run.
        owner = self.owner(scope.principal)
        claim = opening.inline or (
            self._workers < self.max_running and not self._over_share(owner) and not self._stopping
        )
        record = TaskRecord(
            task_id=new_task_id(),
            owner=owner,
            method=call.method,
            target=call.target,
            arguments=dict(call.arguments),
            answers=dict(opening.answers),
            state=opening.state,
            status="working",
            created_at=now,
            updated_at=now,
            expires_at=now + ttl,
            ttl_ms=int(ttl * 1000),
            poll_interval_ms=self.poll_interval_ms,
            status_message=opening.message,
            client_capabilities=dict(scope.capabilities.raw),
            lease_owner=self.worker_id if claim else None,
            lease_expires=now + self.lease_seconds if claim else 0.0,
            attempts=1 if claim else 0,
        )
        if claim and not opening.inline:
            self._workers += 1  # the slot is held from before the create: nobody else takes it
        try:
            stored = await store.create(record, once_key=opening.once_key)
        except TaskStoreFull as error:
            if claim and not opening.inline:
                self._workers -= 1
            raise RpcError(INTERNAL_ERROR, str(error)) from None
        except BaseException:
            if claim and not opening.inline:
                self._workers -= 1
            raise
        if opening.claim is not None:
            opening.claim.task_id = stored.task_id  # what the round's record keeps
        if stored.task_id != record.task_id:
            if claim and not opening.inline:
                self._workers -= 1
            _logger.info(
                "task %s: the confirmation that made it came again; nothing runs twice",
                stored.task_id,
            )
            return await self._replayed(stored, opening.inline)
        if opening.inline:
            return await self._run_inline(stored, opening)
        if claim:
            self._spawn(stored)
        else:
            self._pump_soon()
        return task_wire(stored, detailed=False) | {"resultType": "task"}

    async def replayed(self, task_id: str, inline: bool) -> JSONObject:
        """The answer to a confirmation sent again whose first sending became task `task_id`
        (`_once`'s record says so): the task (its CreateTaskResult), or for a client that does
        not follow tasks (`inline`) its outcome. Never a second run."""
        stored = await (await self.store()).load(task_id)
        if stored is None:
            raise RpcError(INTERNAL_ERROR, "The task this confirmation started is gone")
        return await self._replayed(stored, inline)

    async def _replayed(self, stored: TaskRecord, inline: bool) -> JSONObject:
        if _a_round(stored):
            # The first sending ran inline and its handler asked again: the replay gets
            # that very round back (the same bytes), whoever sends it.
            return dict(stored.result or {})
        if inline:
            return await self._outcome_of(stored)
        return task_wire(await self._revive(stored), detailed=False) | {"resultType": "task"}

    async def _run_inline(self, record: TaskRecord, opening: TaskOpening) -> JSONObject:
        """A confirming round of a client that does not follow tasks: the handler runs in the
        request, as always, and its outcome is recorded so that a replay finds it."""
        run = _Run(self, record)
        cancellation = opening.scope.cancellation or Cancellation()
        # The request's own: its point of no return is the record's `committed` (renewed).
        run.cancellation = cancellation
        self._runs[record.task_id] = run
        renewal = run.renewal = asyncio.create_task(run.renew())
        settled = False
        try:
            try:
                result = await opening.rerun()
            except RpcError as error:
                await self._settle(run, status="failed", error=_error_of(error))
                settled = True
                raise
            size = json_size(result)
            if cancellation.cancelled and not cancellation.committed:
                await self._settle_cancelled(run)
            elif size > MAX_RESULT_BYTES:
                await self._settle(run, **self._too_large(size))
            else:
                await self._settle(run, status="completed", result=result)
            settled = True
            return result
        finally:
            renewal.cancel()
            del self._runs[record.task_id]
            if not settled and not self._stopping and not cancellation.committed:
                # The request was cancelled (its task stopped) before the handler's point of
                # no return: nothing happened, and a replay must not find a run in progress.
                await self._quietly(self._settle_cancelled(run))

    async def _outcome_of(self, record: TaskRecord) -> JSONObject:
        """The result a replayed inline round gets: the task's, once it has one. A task that
        waits for input (only a client following tasks can give it) is said at once; one
        still running is waited for at most `inline_wait_seconds`."""
        task_id = record.task_id
        deadline = self.clock() + self.inline_wait_seconds
        while not record.terminal:
            if record.status == "input_required":
                return ToolResult.error(
                    f"This confirmation started task {task_id}, which waits for input that "
                    "only a client following tasks (the io.modelcontextprotocol/tasks "
                    "extension) can give; it was not run again."
                ).to_wire()
            left = deadline - self.clock()
            if left <= 0:
                return ToolResult.error(
                    f"This confirmation's work is still running as task {task_id}; call "
                    "again to see its result."
                ).to_wire()
            await self._wait_change(task_id, min(left, self.poll_interval_ms / 1000))
            found = await (await self.store()).load(task_id)
            if found is None:
                raise RpcError(INTERNAL_ERROR, "The task this confirmation started is gone")
            record = await self._revive(found)
        if record.status == "completed" and record.result is not None:
            return dict(record.result)
        if record.status == "failed" and record.error is not None:
            error = record.error
            raise RpcError(int(error["code"]), str(error["message"]), error.get("data"))
        return ToolResult.error(f"Tool {record.target!r} was cancelled.").to_wire()

    async def _wait_change(self, task_id: str, seconds: float) -> None:
        event = asyncio.Event()
        waiting = self._changes.setdefault(task_id, set())
        waiting.add(event)
        try:
            await asyncio.wait_for(event.wait(), seconds)
        except TimeoutError:
            pass  # a change made by another process: found by looking again
        finally:
            waiting.discard(event)
            if not waiting:
                self._changes.pop(task_id, None)

    # -- tasks/get, tasks/update, tasks/cancel ------------------------------------------------

    async def get(self, task_id: object, principal: str | None) -> JSONObject:
        """tasks/get: the DetailedTask. A task whose worker died is taken over here, so a
        restarted server resumes the task its host polls."""
        record = await self._owned(task_id, principal)
        try:
            record = await self._revive(record)
        except TaskStoreUnavailable as error:
            # A store that reads but cannot be written (a full disk, a read-only replica):
            # the task is still shown as stored; taking it over waits for a later tasks/get.
            _logger.error("task %s: shown as stored; taking it over failed: %s", task_id, error)
        return task_wire(record, detailed=True)

    async def update(
        self, task_id: object, responses: Mapping[str, Any], principal: str | None
    ) -> None:
        """tasks/update: answers to outstanding inputRequests, checked like MRTR answers.

        tasks "Task Update Requests": keys not outstanding (never issued, answered already)
        are ignored; a partial set keeps the task `input_required` with the rest.
        """
        record = await self._owned(task_id, principal)
        for key, answer in responses.items():
            asked = record.asked.get(key)
            if asked is None or key not in record.input_requests:
                continue
            try:
                check_answer(asked[1], answer)
            except BadAnswer as error:
                raise RpcError(
                    INVALID_PARAMS, f"Invalid inputResponses[{clip(key)!r}]: {error}"
                ) from None

        def change(record: TaskRecord) -> TaskRecord | None:
            if record.status != "input_required":
                return None
            answers = dict(record.answers)
            pending = dict(record.input_requests)
            asked = dict(record.asked)
            for key, answer in responses.items():
                if key not in pending or key not in asked:
                    continue
                answers[asked[key][0]] = answer
                del pending[key], asked[key]
            if len(pending) == len(record.input_requests):
                return None
            now = self.clock()
            if pending:
                return record.evolve(
                    answers=answers, input_requests=pending, asked=asked, updated_at=now
                )
            return record.evolve(
                answers=answers,
                input_requests={},
                asked={},
                status="working",
                status_message=None,
                updated_at=now,
                lease_owner=None,
                lease_expires=0.0,
                attempts=0,
            )

        updated = await self._mutate(record.task_id, change)
        applied = updated is not None and updated.input_requests != record.input_requests
        if self.audit is not None and applied:
            answered = {
                key: decision_of(record.asked[key][1], answer)
                for key, answer in responses.items()
                if key in record.asked and key in record.input_requests
            }
            if answered:
                self.audit.decided(
                    era=MODERN_VERSIONS[0],
                    principal=principal,
                    tool=record.target,
                    round=None,
                    task=record.task_id,
                    decisions=answered,
                )
        if updated is not None and updated.status == "working":
            self._pump_soon()

    async def cancel(self, task_id: object, principal: str | None) -> None:
        """tasks/cancel: cooperative. A task nobody runs ends `cancelled` here; a running one
        is stopped by its worker (this process's at once, another's at its next renewal)."""
        record = await self._owned(task_id, principal)
        local = self._runs.get(record.task_id)

        def change(record: TaskRecord) -> TaskRecord | None:
            if record.terminal:
                return None
            now = self.clock()
            idle = record.status == "input_required" or (
                local is None and (record.lease_owner is None or record.lease_expires <= now)
            )
            if idle and record.committed:
                if record.status == "input_required":
                    return self._maybe_done(record, now, cancel_requested=True)
                # A worker died past the point of no return: the takeover decides (rule of
                # `_claim`), never `cancelled`.
                return None if record.cancel_requested else record.evolve(cancel_requested=True)
            if idle:
                return record.evolve(
                    status="cancelled",
                    status_message="Cancelled at the client's request.",
                    cancel_requested=True,
                    input_requests={},
                    asked={},
                    lease_owner=None,
                    lease_expires=0.0,
                    updated_at=now,
                )
            if record.cancel_requested:
                return None
            return record.evolve(cancel_requested=True)

        stored = await self._mutate(record.task_id, change)
        if local is not None:
            local.cancel()
        elif stored is not None and stored.status == "working":
            self._pump_soon()

    async def visible(self, task_ids: Iterable[object], principal: str | None) -> list[str]:
        """Of `task_ids`, those that exist and belong to `principal` (a listen's agreed ids)."""
        agreed: list[str] = []
        for task_id in dict.fromkeys(task_ids):
            try:
                record = await self._owned(task_id, principal)
            except RpcError:
                continue
            agreed.append(record.task_id)
        return agreed

    @asynccontextmanager
    async def follow(
        self, task_ids: list[str], send: Callable[[JSONObject], Awaitable[None]]
    ) -> AsyncIterator[None]:
        """While the block runs, `send` every change of status (or status message) of the
        tasks `task_ids` as a DetailedTask: at once for this process's changes, and within a
        poll interval for another replica's."""
        follower = asyncio.create_task(self._follow(task_ids, send))
        try:
            yield
        finally:
            follower.cancel()
            await asyncio.gather(follower, return_exceptions=True)

    async def _follow(
        self, task_ids: list[str], send: Callable[[JSONObject], Awaitable[None]]
    ) -> None:
        event = asyncio.Event()
        followed = list(task_ids)
        pending = list(task_ids)
        for task_id in followed:
            self._changes.setdefault(task_id, set()).add(event)
        seen: dict[str, tuple[str, float, str | None]] = {}
        store = await self.store()
        try:
            while pending:
                # Cleared before looking: a change made while we look wakes the next look.
                event.clear()
                for task_id in list(pending):
                    record = await store.load(task_id)
                    if record is None:
                        pending.remove(task_id)
                        continue
                    mark = (record.status, record.updated_at, record.status_message)
                    if seen.get(task_id) != mark:
                        # The first notice is the state at subscription: a change made between
                        # the acknowledgment and the first look is not lost.
                        seen[task_id] = mark
                        await send(task_wire(record, detailed=True))
                    if record.terminal:
                        pending.remove(task_id)
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(event.wait(), self.poll_interval_ms / 1000)
        finally:
            for task_id in followed:
                waiting = self._changes.get(task_id)
                if waiting is not None:
                    waiting.discard(event)
                    if not waiting:
                        del self._changes[task_id]

    # -- workers ----------------------------------------------------------------------------

    async def _revive(self, record: TaskRecord) -> TaskRecord:
        """`record`, taken over first if it is `working` and nobody holds its lease."""
        if (
            record.status != "working"
            or record.task_id in self._runs
            or record.lease_expires > self.clock()
            or self._workers >= self.max_running
            or self._stopping
        ):
            return record
        return await self._claim(record.task_id) or record

    async def _claim(self, task_id: str) -> TaskRecord | None:
        """Take the task for a local worker if nobody runs it; the stored record, or None."""
        if task_id in self._runs or self._workers >= self.max_running:
            return None
        self._workers += 1
        spawned = False
        produced: list[TaskRecord] = []
        try:
            stored = await self._mutate(task_id, lambda record: self._claimed(record, produced))
            if produced and stored is produced[-1]:
                _logger.warning(
                    "task %s: its run stopped past its point of no return and tool %r is not "
                    "idempotent; not run again (the task says its action may have happened)",
                    task_id,
                    stored.target,
                )
            if (
                stored is not None
                and stored.status == "working"
                and stored.lease_owner == self.worker_id
                and task_id not in self._runs
            ):
                if stored.attempts > 1:
                    _logger.info(
                        "task %s: resumed (start %d of at most %d)",
                        task_id,
                        stored.attempts,
                        MAX_ATTEMPTS,
                    )
                self._spawn(stored)
                spawned = True
            return stored
        finally:
            if not spawned:
                self._workers -= 1

    def _claimed(self, record: TaskRecord, produced: list[TaskRecord]) -> TaskRecord | None:
        """What a claim makes of `record`: None when it is not this engine's to take (not
        working, or its lease still held); else the record ended (a run that died past its
        point of no return, of a tool that is not idempotent: "may have happened", noted in
        `produced`; a cancel asked for; too many starts), or taken by this worker."""
        now = self.clock()
        if record.status != "working" or record.lease_expires > now:
            return None
        if self._over_share(record.owner):
            return None  # its owner's other tasks hold its share: it starts after one ends
        if record.committed and not self._idempotent(record):
            # The run that died had passed its point of no return: its action may
            # have happened, and running a handler that is not idempotent again
            # would do it twice. Nor is it `cancelled` (tasks "Cancellation": a
            # cancelled task may end in another terminal status): it says "maybe".
            produced.append(self._maybe_done(record, now))
            return produced[-1]
        if record.cancel_requested and not record.committed:
            return record.evolve(
                status="cancelled",
                status_message="Cancelled at the client's request.",
                lease_owner=None,
                lease_expires=0.0,
                updated_at=now,
            )
        if record.attempts >= MAX_ATTEMPTS:
            stops = record.attempts
            message = (
                f"the server stopped {stops} times while running this task; "
                "it was not started again"
            )
            return record.evolve(
                status="failed",
                status_message=message,
                error={"code": INTERNAL_ERROR, "message": message},
                lease_owner=None,
                lease_expires=0.0,
                updated_at=now,
            )
        resumed: dict[str, Any] = {}
        if record.attempts:
            # Its status says so until the handler's own next message: a host showing
            # "step 1" again after a restart would look like a second deploy.
            start = record.attempts + 1
            resumed = {
                "status_message": f"Resumed after the server stopped (start {start} "
                f"of at most {MAX_ATTEMPTS}); running it again from the top.",
                "updated_at": now,
            }
        return record.evolve(
            lease_owner=self.worker_id,
            lease_expires=now + self.lease_seconds,
            attempts=record.attempts + 1,
            **resumed,
        )

    def _idempotent(self, record: TaskRecord) -> bool:
        """Whether the task's tool may run again past its point of no return (its
        `idempotentHint`, ToolAnnotations(idempotent=True))."""
        return record.method == "tools/call" and self._idempotent_tool(record.target)

    def _idempotent_tool(self, name: str) -> bool:
        tool = self.registry.tools.get(name)
        hints = tool.summary.get("annotations", {}) if tool is not None else {}
        return hints.get("idempotentHint") is True

    def _maybe_done(self, record: TaskRecord, now: float, **changes: Any) -> TaskRecord:
        """`record` ended `completed` with an isError result saying its action may have been
        carried out (never `cancelled`, never a protocol error: the tool's state is the answer)."""
        return record.evolve(
            status="completed",
            result=ToolResult.error(MAYBE_DONE).to_wire(),
            error=None,
            status_message=None,
            input_requests={},
            asked={},
            lease_owner=None,
            lease_expires=0.0,
            updated_at=now,
            **changes,
        )

    def _over_share(self, owner: str) -> bool:
        """Whether `owner` (a principal's, not nobody's) runs its share of the workers here."""
        if owner == self.owner(None):
            return False
        return self._running_by_owner[owner] >= self.max_running_per_owner

    def _spawn(self, record: TaskRecord) -> None:
        """Start a worker for `record`, whose lease this process holds (its slot counted)."""
        self._running_by_owner[record.owner] += 1
        run = _Run(self, record)
        self._runs[record.task_id] = run
        telemetry = self.telemetry
        # Started in the request that created the task (its span is current), or by the loop
        # that resumes tasks (then it links to nothing).
        work = (
            self._work(run, record)
            if telemetry is None or not telemetry.active()
            else self._traced(run, record, telemetry, telemetry.current())
        )
        run.task = asyncio.get_running_loop().create_task(work)
        run.renewal = asyncio.get_running_loop().create_task(run.renew())

    async def _traced(
        self, run: _Run, record: TaskRecord, telemetry: Telemetry, creator: Any
    ) -> None:
        with telemetry.task_work(run.task_id, record.target, creator):
            await self._work(run, record)

    async def _work(self, run: _Run, record: TaskRecord) -> None:
        try:
            await self._execute(run, record)
        except _LeaseLost:
            pass
        except asyncio.CancelledError:
            # Stopped by tasks/cancel (recorded), by the server stopping (the record is left
            # `working` for a later server to resume), or by losing the lease (not ours).
            if not self._stopping and not run.lost:
                await self._quietly(self._settle_cancelled(run))
        except Exception as error:
            _logger.exception("task %s: its worker failed", run.task_id)
            # Ended here, saying so: left `working`, its lease would lapse and another worker
            # run the handler again "after the server stopped", which it never did.
            if not run.lost:
                message = (
                    f"the task's worker failed ({type(error).__name__}) recording what the tool "
                    "did; it was not run again. See the server log."
                )
                await self._quietly(
                    self._settle(
                        run, status="failed", error={"code": INTERNAL_ERROR, "message": message}
                    )
                )
        finally:
            if run.renewal is not None:
                run.renewal.cancel()
            self._runs.pop(run.task_id, None)
            self._workers -= 1
            self._running_by_owner[run.owner] -= 1
            if self._running_by_owner[run.owner] <= 0:
                del self._running_by_owner[run.owner]
            if not self._stopping:
                self._pump_soon()

    async def _settle_cancelled(self, run: _Run) -> None:
        await self._settle(
            run, status="cancelled", status_message="Cancelled at the client's request."
        )

    async def _execute(self, run: _Run, record: TaskRecord) -> None:
        """Run the handler as the task until it finishes or asks; record what it did."""
        try:
            call = self._call_of()(
                self.registry,
                record.method,
                {"name": record.target, "arguments": dict(record.arguments)},
            )
        except RpcError as error:
            await self._settle(run, status="failed", error=_error_of(error))
            return
        capabilities = ClientCapabilities(record.client_capabilities)
        answers = dict(record.answers)
        state = record.state
        for _ in range(MAX_RUNS_WITHOUT_INPUT):
            context = Context(
                answers=answers,
                request_state=None,
                client_capabilities=capabilities,
                protocol_version=MODERN_VERSIONS[0],
                era="modern",
                cancellation=run.cancellation,
                state=state,
                task=run,
            )
            try:
                outcome = await call.run(context)
            except RpcError as error:
                await self._settle(run, status="failed", error=_error_of(error))
                return
            except Exception as error:
                _logger.exception("task %s: tool %r raised", run.task_id, record.target)
                failure = RpcError(
                    INTERNAL_ERROR,
                    f"Tool {record.target!r} failed with {type(error).__name__}; "
                    "see the server log.",
                )
                await self._settle(run, status="failed", error=_error_of(failure))
                return
            await run.flush()
            if run.cancellation.cancelled and not run.cancellation.committed:
                if not self._stopping:  # a stopping server leaves the task to resume
                    await self._settle_cancelled(run)
                return
            match round_step(outcome, capabilities, answers):
                case Finish(value):
                    result = call.finish(value)
                    size = json_size(result)
                    if size > MAX_RESULT_BYTES:
                        await self._settle(run, **self._too_large(size))
                    else:
                        await self._settle(run, status="completed", result=result)
                    return
                case MissingCapability(missing):
                    refusal = _error_of(missing_capability_error(missing))
                    await self._settle(run, status="failed", error=refusal)
                    return
                case Ask(asking, kept) if asking.requests:
                    await self._ask(run, asking, kept)
                    return
                case Ask(asking, _):
                    state = asking.state
        message = f"the tool ran {MAX_RUNS_WITHOUT_INPUT} times without finishing or asking"
        await self._settle(run, status="failed", error={"code": INTERNAL_ERROR, "message": message})

    async def _ask(self, run: _Run, outcome: InputRequired, kept: Mapping[str, Any]) -> None:
        """The handler asked: the task waits `input_required`, under keys never used before,
        keeping the answers that still stand (`round_step`'s `kept`)."""

        def change(record: TaskRecord) -> TaskRecord | None:
            issued = record.keys_issued
            requests: dict[str, Any] = {}
            asked: dict[str, tuple[str, str]] = {}
            for key, request in outcome.requests.items():
                issued += 1
                # tasks "Task Update Requests": each key MUST be unique over the task's life.
                wire_key = f"{key}.{issued}"
                requests[wire_key] = request.to_wire()
                asked[wire_key] = (key, request.method)
            # A host shows the status first: an answer asked for again says why there too.
            why = "; ".join(
                f"the answer to {key!r} was not valid ({reason})"
                for key, reason in sorted(outcome.rejected.items())
            )
            return record.evolve(
                status="input_required",
                status_message=f"Asked again: {why}." if why else record.status_message,
                input_requests=requests,
                asked=asked,
                keys_issued=issued,
                answers=dict(kept),
                state=outcome.state,
                committed=record.committed or run.cancellation.committed,
                lease_owner=None,
                lease_expires=0.0,
                attempts=0,
                updated_at=self.clock(),
            )

        asked = await self._as_holder(run, change)
        if self.audit is not None and asked is not None and asked.status == "input_required":
            # A task's own questions: answered later by tasks/update (`update` writes that).
            self.audit.asked(
                era=MODERN_VERSIONS[0],
                principal=None,
                tool=run.target,
                round=None,
                task=run.task_id,
                questions={
                    wire_key: (str(request.get("method")), request.get("params") or {})
                    for wire_key, request in asked.input_requests.items()
                },
            )

    async def _within_budget(self, run: _Run, result: Mapping[str, Any]) -> Mapping[str, Any]:
        """`result`, or if keeping it would take its owner past the store's byte bound
        (MRTR_TASK_MAX_BYTES_PER_OWNER), an isError result saying so: the bound holds for what
        tasks grow into, not only for what they start as. The tool did run: the text says it."""
        store = await self.store()
        size = json_size(result)
        held = await store.owner_bytes(run.owner)
        if held + size <= store.max_bytes_per_owner:
            return result
        return ToolResult.error(
            f"The task was carried out, but its result ({size} bytes) would take your tasks past "
            f"{store.max_bytes_per_owner} bytes in the task store (MRTR_TASK_MAX_BYTES_PER_OWNER), "
            "so it was not kept; call the tool again to see the state it left."
        ).to_wire()

    def _too_large(self, size: int) -> dict[str, Any]:
        message = (
            f"the result is {size} bytes of JSON; a task keeps at most {MAX_RESULT_BYTES} "
            "(return less, or a resource link to the rest)"
        )
        return {
            "status": "failed",
            "error": {"code": INTERNAL_ERROR, "message": message},
            "status_message": message,
        }

    async def _settle(
        self,
        run: _Run,
        *,
        status: str,
        result: Mapping[str, Any] | None = None,
        error: Mapping[str, Any] | None = None,
        status_message: str | None = None,
    ) -> None:
        """The task's end, written by the worker holding it (nobody else's end counts)."""
        if result is not None:
            result = await self._within_budget(run, result)

        def change(record: TaskRecord) -> TaskRecord | None:
            now = self.clock()
            if status == "cancelled" and (record.committed or run.cancellation.committed):
                # Past the point of no return (in this run or one before it) a task never
                # ends `cancelled`: its action may have happened.
                return self._maybe_done(record, now, committed=True)
            # The final statusMessage fits the end, never the last progress text: failed
            # SHOULD carry one (tasks "Task Execution Errors"): its reason.
            text = status_message
            if text is None and error is not None:
                text = str(error["message"])
            return record.evolve(
                status=status,
                result=result,
                error=error,
                status_message=text,
                input_requests={},
                asked={},
                committed=record.committed or run.cancellation.committed,
                lease_owner=None,
                lease_expires=0.0,
                updated_at=now,
            )

        await self._as_holder(run, change)

    async def _quietly(self, work: Awaitable[None]) -> None:
        try:
            await work
        except _LeaseLost:
            pass
        except Exception:
            _logger.exception("recording a task's end failed")

    # -- the sweeper ------------------------------------------------------------------------

    def _pump_soon(self) -> None:
        asyncio.get_running_loop().create_task(self.pump())

    async def pump(self) -> int:
        """Claim tasks nobody runs, up to the free slots; how many this started."""
        if self._pumping:
            self._pump_again = True
            return 0
        self._pumping = True
        started = 0
        try:
            while not self._stopping:
                self._pump_again = False
                free = self.max_running - self._workers
                store = self.records.current
                if free <= 0 or store is None:
                    break
                # Past this owner's share, a task is skipped: look far enough that another
                # owner's waiting task is among those found.
                window = free + len(self._runs) + 4 * self.max_running
                ready = await store.runnable(self.clock(), window)
                for task_id in ready:
                    if task_id in self._runs:
                        continue
                    if self._workers >= self.max_running:
                        break
                    stored = await self._claim(task_id)
                    if stored is not None and task_id in self._runs:
                        started += 1
                if not self._pump_again:
                    break
        except Exception:
            _logger.exception("looking for tasks to run failed")
        finally:
            self._pumping = False
        return started

    async def run(self) -> None:
        """The background loop a transport runs for the server's life: resume the tasks
        nobody runs, forget the expired. It opens the store only if one exists already."""
        await asyncio.sleep(min(self.sweep_seconds, 0.5))  # after the first answer is out
        await self.records.opened()
        while True:
            await self.pump()
            await self.records.purge_if_due(self.clock())
            await asyncio.sleep(self.sweep_seconds)

    def stop(self) -> set[asyncio.Task[None]]:
        """The server is stopping: local workers stop, and their records stay as they are
        (`working`, the lease left to lapse), so each task resumes when a server holding the
        store takes it over (after a restart, or on another replica). A worker past its
        handler's point of no return is left to finish: its task is returned, for the
        transport to give the shutdown grace (then `abandon`)."""
        self._stopping = True
        finishing: set[asyncio.Task[None]] = set()
        for run in list(self._runs.values()):
            task = run.task
            if task is None:
                continue  # an inline run: its request is the transport's to stop
            if not run.cancellation.cancel_unless_committed():
                finishing.add(task)
                continue
            _logger.warning(
                "task %s stopped with the server before its point of no return; it stays "
                "'working' and resumes when a server with the same task store takes it over",
                run.task_id,
            )
            self._left.append(run.task_id)
            task.cancel()
        return finishing

    async def release(self) -> None:
        """After `stop`: give up the leases of the tasks it left `working` before their point
        of no return, so that a restarted server or another replica takes them over at once
        instead of when the lease lapses. A store that cannot be reached leaves them to lapse."""
        left, self._left = self._left, []
        for task_id in left:

            def change(record: TaskRecord) -> TaskRecord | None:
                if (
                    record.status != "working"
                    or record.lease_owner != self.worker_id
                    or record.committed
                ):
                    return None
                return record.evolve(lease_owner=None, lease_expires=0.0)

            try:
                await self._mutate(task_id, change)
            except Exception:
                _logger.exception("task %s: giving up its lease failed", task_id)

    def abandon(self) -> None:
        """Stop the workers `stop` left to finish (the grace is over); they resume later."""
        for run in list(self._runs.values()):
            # Only those `stop` left to finish: the others were stopped (and said so) there,
            # and may still be unwinding.
            if run.task is not None and not run.task.done() and run.cancellation.committed:
                again = (
                    "its handler runs again"
                    if self._idempotent_tool(run.target)
                    else "it ends saying so, without running again"
                )
                _logger.warning(
                    "task %s did not finish within the shutdown grace, past its point of no "
                    "return: its action may have been carried out; it stays 'working', and "
                    "when a server with the same task store takes it over %s",
                    run.task_id,
                    again,
                )
                run.task.cancel()

    @property
    def running(self) -> int:
        """Workers running now (at most `max_running`)."""
        return self._workers
