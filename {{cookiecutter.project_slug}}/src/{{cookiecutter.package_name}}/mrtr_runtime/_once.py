"""Single use: a confirming round is carried out at most once, whatever comes with its replays.

2026-07-28 basic/patterns/mrtr, "Security Considerations": servers for which a given
`requestState` must be consumed at most once MUST enforce that invariant server-side. Every
round that closes a verified, unexpired `requestState` goes through `RoundLedger.once`, before
any handler code runs:

- the round's record is keyed by the token's identity (`_tokens.round_key`: its exact text,
  which holds its nonce and its binding), never by the answers or anything the client adds;
- the first sending claims the record (one atomic step in the task store, shared by every
  process and replica that holds it) and runs the handler; what came of it is written back:
  the complete result, or the task it became;
- every later sending of the token is answered from the record, without running anything:
  the same result, or the same task (for a client that does not follow tasks, its outcome);
- a round that asked again is not consumed (the claim is released): its answers can still be
  corrected by sending the round again;
- a sending that finds the round still running waits for it (at most `WAIT_SECONDS`);
- a run whose process died before its point of no return is run again by the next sending
  (logged: "resumed"); one that died past it is not run again, and says so ("may have been
  carried out"), since nobody knows whether its action happened.

The claim is a lease (LEASE_SECONDS, renewed while the handler runs), and the handler's
`ctx.point_of_no_return()` is fenced by it: it proceeds only while the claim is held and once
the mark is durably written, so a run paused past its lease (a frozen VM, a laptop asleep) and
overtaken by a second sending stops instead of acting twice.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import time
from collections.abc import Awaitable, Callable, Iterator, Mapping
from typing import Any, Final

from ._context import RequestCancelled, write_mark
from ._jsonrpc import INTERNAL_ERROR, JSONObject, RpcError, json_size
from ._records import StoreOpener
from ._results import ToolResult
from ._task_store import RoundRecord, TaskStore, TaskStoreFull, TaskStoreUnavailable

__all__ = (
    "LEASE_SECONDS",
    "MAX_KEPT_RESULT_BYTES",
    "RENEW_SECONDS",
    "WAIT_SECONDS",
    "RoundHold",
    "RoundLedger",
)

#: A running round's claim, and how often it is renewed (the task engine's own figures).
LEASE_SECONDS: Final = 15.0
RENEW_SECONDS: Final = 5.0
#: How long a second sending waits for the first one's run before it is told to send again.
WAIT_SECONDS: Final = 60.0
#: How often a waiting sending looks at the record (a run elsewhere wakes nothing here).
POLL_SECONDS: Final = 0.2
#: The largest result kept for replays; a larger one is sent once and replays hear why not.
#: Every confirming round keeps its result for as long as its token verifies (up to an hour),
#: so this is what one round can make the store hold: a tool's result, not a task's payload.
MAX_KEPT_RESULT_BYTES: Final = 64 * 1024
#: A replay of a round whose run died past its point of no return: "maybe", never "no".
MAYBE_CARRIED_OUT_ROUND: Final = (
    "The server stopped while this confirmation was being carried out, after its action may "
    "have taken effect; it was not run again. Call the tool again to see the state it left."
)
_SWAP_TRIES: Final = 64

_logger = logging.getLogger("mrtr_runtime")

#: Answers a replay whose round became a task: (task id, whether the client follows tasks).
TaskReplay = Callable[[str, bool], Awaitable[JSONObject]]
#: Whose a round is, from who sent it (the task engine's owner: the principal and the server).
OwnerOf = Callable[[str | None], str]


class RoundHold:
    """One run's claim on a round record: its lease, renewed while it runs, and its
    point-of-no-return mark (the `Fence` a confirming round's Context is given)."""

    def __init__(self, ledger: RoundLedger, store: TaskStore, record: RoundRecord) -> None:
        self.ledger = ledger
        self.store = store
        self.record = record
        #: Until when this process may act on the claim: the lease as last written.
        self.valid_until = record.lease_expires
        self.lost = False
        #: Its point of no return was refused (the claim had lapsed): the handler stopped there.
        self.refused = False
        #: The task the round became, if it became one (set by the task engine).
        self.task_id: str | None = None
        #: The handler passed `ctx.start_task()` inline (set by dispatch): see `_outcome_of`.
        self.started = False
        self._loop = asyncio.get_running_loop()
        #: Serialises this claim's writes (renewal, mark, outcome); made by the first of them
        #: that could meet another (most rounds end before any renewal or mark).
        self._lock: asyncio.Lock | None = None

    @property
    def committed(self) -> bool:
        return self.record.committed

    def lock(self) -> asyncio.Lock:
        """What serialises this claim's writes, made on first use."""
        if self._lock is None:
            self._lock = asyncio.Lock()
        return self._lock

    async def renew(self) -> None:
        """Extend the lease (the ledger's renewer, every `renew_seconds` while it runs)."""
        try:
            await self._write(lambda record: {})
        except RequestCancelled:
            _logger.warning("a confirming round lost its claim to another run; it stops acting")
        except Exception:
            _logger.exception("renewing a confirming round's claim failed")

    async def _write(self, change: Callable[[RoundRecord], Mapping[str, Any]]) -> None:
        """Extend the lease (with `change`), fenced: raises RequestCancelled once the claim is
        another run's."""
        async with self.lock():
            if self.lost:
                self.refused = self.refused or change is _committed
                raise _lost()
            lease = self.ledger.clock() + self.ledger.lease_seconds
            record = self.record.evolve(lease_expires=lease, **change(self.record))
            if not await self.store.swap_round(record):
                self.lost = True
                # A mark that could not be written stops the handler at its point of no return.
                self.refused = self.refused or change is _committed
                raise _lost()
            self.record = record
            self.valid_until = lease

    async def _mark(self) -> None:
        """The point of no return, written; a store that fails refuses it (the action must not
        happen on a mark nobody can read)."""
        try:
            await self._write(_committed)
        except RequestCancelled:
            raise
        except Exception as error:
            self.lost = self.refused = True
            raise RequestCancelled(
                f"this run's point of no return could not be recorded ({error}); the action "
                "must not happen"
            ) from None

    def commit(self) -> Awaitable[None] | None:
        """The Fence: the point of no return, written under the claim before the action.

        Raises RequestCancelled at once when the claim has lapsed here (this process was
        paused, or its renewals failed, past its lease: another sending may be running the
        round now). From a worker thread it returns once the mark is written (raising if the
        claim was lost meanwhile); on the event loop it returns the write, for the handler's
        `await ctx.pass_point_of_no_return()` to wait on."""
        if self.lost or self.ledger.clock() >= self.valid_until:
            self.lost = self.refused = True
            raise _lost()
        self.lock()  # made before the write is scheduled: the outcome's write waits for it
        return write_mark(self._loop, self._mark, self.ledger.lease_seconds)


def _committed(record: RoundRecord) -> Mapping[str, Any]:
    return {"committed": True}


def _lost() -> RequestCancelled:
    return RequestCancelled(
        "this run's claim on its confirmation lapsed (the process was paused or cut off past "
        "its lease) and another run may hold it now; it stops before its point of no return"
    )


class RoundLedger:
    """Where every confirming round is claimed, recorded and answered again (see the module)."""

    def __init__(
        self,
        *,
        open_store: StoreOpener,
        answer_task: TaskReplay,
        owner_of: OwnerOf,
        worker_id: str,
        ttl_seconds: float,
        clock: Callable[[], float] = time.time,
        lease_seconds: float = LEASE_SECONDS,
        renew_seconds: float = RENEW_SECONDS,
        wait_seconds: float = WAIT_SECONDS,
        poll_seconds: float = POLL_SECONDS,
    ) -> None:
        self._open_store = open_store
        self._answer_task = answer_task
        self._owner_of = owner_of
        self.worker_id = worker_id
        #: A record lives as long as the token it keys verifies (then nothing can replay it).
        self.ttl_seconds = ttl_seconds
        self.clock = clock
        self.lease_seconds = lease_seconds
        self.renew_seconds = renew_seconds
        self.wait_seconds = wait_seconds
        self.poll_seconds = poll_seconds
        #: The claims this process holds now, and the one task that renews them all (a task
        #: or a timer per round would cost every round; most end long before a renewal).
        self._held: set[RoundHold] = set()
        #: Numbers this process's claims (a claim's holder: the worker's id and its number).
        self._claims = itertools.count(1)
        self._renewer: asyncio.Task[None] | None = None

    async def once(
        self,
        key: str,
        run: Callable[[RoundHold], Awaitable[JSONObject]],
        *,
        principal: str | None,
        follows_tasks: bool,
        on_replay: Callable[[], None] | None = None,
    ) -> JSONObject:
        """The answer to the round keyed `key`, sent by `principal`: `run`'s (it runs only
        under this process's claim), or what the record says came of an earlier sending
        (then `on_replay` is called: the audit trail's line for it). A new round of a
        principal whose records pass its bound is refused before anything runs."""
        try:
            store = await self._open_store()
        except RpcError as error:
            raise _unrecordable(error.message) from None
        owner = self._owner_of(principal)
        deadline: float | None = None
        conflicts = 0
        while conflicts < _SWAP_TRIES:
            now = self.clock()
            claim = RoundRecord(
                key=key,
                expires_at=now + self.ttl_seconds,
                owner=owner,
                holder=f"{self.worker_id}:{next(self._claims)}",
                lease_expires=now + self.lease_seconds,
            )
            try:
                record = await store.claim_round(claim, now)
            except TaskStoreFull as error:
                _logger.warning("confirming round %s: refused, not run: %s", key[:12], error)
                raise RpcError(
                    INTERNAL_ERROR,
                    f"This confirmation was not carried out: {error}. Nothing was run.",
                ) from None
            except TaskStoreUnavailable as error:
                answered = await self._answer_unwritable(store, key, error, follows_tasks)
                if on_replay is not None:
                    on_replay()
                return answered
            if record.holder == claim.holder and record.outcome is None:
                if record.version > 1:
                    _logger.info(
                        "confirming round %s: resumed; its earlier run stopped before its "
                        "point of no return",
                        key[:12],
                    )
                return await self._run(RoundHold(self, store, record), run)
            if record.outcome is not None:
                _logger.info(
                    "confirming round %s: sent again; answered from its record, not run again",
                    key[:12],
                )
                if on_replay is not None:
                    on_replay()
                return await self._answer(record.outcome, follows_tasks)
            if record.lease_expires <= now:
                # Its run died past its point of no return: the truth is "maybe", for good.
                if await store.swap_round(record.evolve(outcome=_maybe(), holder=None)):
                    _logger.warning(
                        "confirming round %s: its run stopped past its point of no return; "
                        "not run again",
                        key[:12],
                    )
                conflicts += 1
                continue
            # Running elsewhere: wait for its outcome, up to the deadline (not a number of
            # looks: a poll is no conflict).
            deadline = deadline if deadline is not None else now + self.wait_seconds
            if now >= deadline:
                raise RpcError(
                    INTERNAL_ERROR,
                    "This confirmation is still being carried out by an earlier sending of "
                    "it; send it again later to get its result",
                )
            await asyncio.sleep(min(self.poll_seconds, deadline - now))
        raise RpcError(INTERNAL_ERROR, "This confirmation's record changed too often; try again")

    async def _answer_unwritable(
        self, store: TaskStore, key: str, error: TaskStoreUnavailable, follows_tasks: bool
    ) -> JSONObject:
        """The claim could not be written: a round already carried out is still answered from
        its record if the store can be read; any other is refused, naming the failure."""
        try:
            record = await store.load_round(key)
        except TaskStoreUnavailable:
            record = None
        if record is not None and record.outcome is not None:
            return await self._answer(record.outcome, follows_tasks)
        raise _unrecordable(str(error)) from None

    async def _answer(self, outcome: Mapping[str, Any], follows_tasks: bool) -> JSONObject:
        task_id = outcome.get("task")
        if isinstance(task_id, str):
            return await self._answer_task(task_id, not follows_tasks)
        return dict(outcome["result"])

    async def _run(
        self, hold: RoundHold, run: Callable[[RoundHold], Awaitable[JSONObject]]
    ) -> JSONObject:
        self._held.add(hold)
        if self._renewer is None or self._renewer.done():
            self._renewer = asyncio.get_running_loop().create_task(self._renew_held())
        try:
            try:
                result = await run(hold)
            finally:
                self._held.discard(hold)
        except BaseException:
            # Cancelled, stopped or failed before an outcome: released if nothing can have
            # happened, else the record says "maybe".
            outcome = _maybe() if hold.committed else None
            await asyncio.shield(self._settle(hold, outcome))
            raise
        if hold.lost:
            if hold.refused:
                # Fenced: this run stopped at its point of no return (its claim lapsed while
                # the process was paused, or another sending holds it now), so it did not
                # act; what it returned is not the round's outcome.
                raise RpcError(
                    INTERNAL_ERROR,
                    "This confirmation was not carried out by this request: its claim lapsed "
                    "before the action (the server was paused or cut off). Send it again to "
                    "get its outcome.",
                )
            # Its claim lapsed while it ran, yet it ran to its end: whatever it did, it did,
            # and its own result says so; the record is another run's now.
            _logger.warning(
                "confirming round %s: this run lost its claim while it ran (the process was "
                "paused past its lease); its result is sent, the record is another run's",
                hold.record.key[:12],
            )
            return result
        await self._settle(hold, self._outcome_of(result, hold))
        return result

    def _outcome_of(self, result: JSONObject, hold: RoundHold) -> Mapping[str, Any] | None:
        if result.get("resultType") == "input_required" and not (hold.committed or hold.started):
            # Asked again before any action: not consumed, so its answers can be corrected.
            # Not so once the handler said all was answered (`ctx.start_task()`, inline where
            # there is no task engine): what it asks next is the work's own question, as a
            # task's would be, and the round is consumed as a task's confirmation is.
            return None
        if hold.task_id is not None:
            # The round became a task (followed, or run inline): a replay gets the task, or
            # for a client that does not follow tasks, the task's outcome.
            return {"task": hold.task_id}
        # A complete result; or a round that asked again after its point of no return, which
        # is consumed like any other (its action may have happened): a replay gets the very
        # same question back, and the answer goes on under the new round's token.
        size = json_size(result)
        if size > MAX_KEPT_RESULT_BYTES:
            return {
                "result": ToolResult.error(
                    f"This confirmation was carried out and its result sent; the result "
                    f"({size} bytes) is larger than a replay keeps ({MAX_KEPT_RESULT_BYTES}), "
                    "so it is not sent again. Call the tool again to see the state it left."
                ).to_wire()
            }
        return {"result": result}

    async def _renew_held(self) -> None:
        """Renew every claim held longer than `renew_seconds` since its last write; ends once
        none is held (the next claim starts it again)."""
        while self._held:
            await asyncio.sleep(self.renew_seconds)
            due = self.clock() + self.lease_seconds - self.renew_seconds
            for hold in list(self._held):
                if hold.valid_until <= due and not hold.lost:
                    await hold.renew()

    async def _settle(self, hold: RoundHold, outcome: Mapping[str, Any] | None) -> None:
        """Write what came of the run (None: release the claim), under the claim.

        A store that fails now (its disk filled during the run, say) has the run's claim and
        not its outcome: left so, the claim would lapse and a replay would run the round
        again. So smaller writes follow, each of which keeps a replay from running it: the
        outcome without the result ("carried out, result not kept"), then the bare mark that
        it may have acted (a replay then says "may have been carried out")."""
        changes: dict[str, Any] = {"holder": None, "outcome": outcome}
        if outcome is None:
            changes.update(lease_expires=0.0, committed=False)
        key = hold.record.key[:12]
        # No lock when nothing else ever wrote this claim (no renewal, no mark): the common
        # round, which then pays for none.
        async with hold._lock or contextlib.nullcontext():
            if hold.lost:
                _logger.warning(
                    "confirming round %s: another run holds its record; this run's outcome "
                    "is not recorded",
                    key,
                )
                return
            for attempt in _attempts(changes, outcome):
                try:
                    stored = await hold.store.swap_round(hold.record.evolve(**attempt))
                except Exception as error:
                    _logger.error("confirming round %s: recording it failed: %s", key, error)
                    continue
                if not stored:
                    _logger.warning(
                        "confirming round %s: another run holds its record; this run's "
                        "outcome is not recorded",
                        key,
                    )
                return
            _logger.error(
                "confirming round %s: nothing of its run could be recorded; once its claim "
                "lapses (%.0f s), a replay of it would run it again",
                key,
                self.lease_seconds,
            )


def _attempts(
    changes: dict[str, Any], outcome: Mapping[str, Any] | None
) -> Iterator[dict[str, Any]]:
    """What `_settle` writes, in order, until one write succeeds: the run's own changes, then
    (for an outcome) smaller records that still keep a replay from running the round again."""
    yield changes
    if outcome is not None:
        yield {"holder": None, "outcome": _unkept()}
        yield {"committed": True}


def _unkept() -> Mapping[str, Any]:
    return {
        "result": ToolResult.error(
            "This confirmation was carried out and its result sent once; the result could not "
            "be kept for a replay (the task store failed). Call the tool again to see the "
            "state it left."
        ).to_wire()
    }


def _maybe() -> Mapping[str, Any]:
    return {"result": ToolResult.error(MAYBE_CARRIED_OUT_ROUND).to_wire()}


def _unrecordable(reason: str) -> RpcError:
    # Fail closed: a confirmation that cannot be recorded is not carried out (it could not be
    # kept from running twice), and the client hears which store failed and how.
    return RpcError(
        INTERNAL_ERROR,
        f"This confirmation was not carried out: its record cannot be kept ({reason}). "
        "Nothing was run; send it again once the store works.",
    )
