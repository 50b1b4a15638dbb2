"""The sessions of the 2025-11-25 Streamable HTTP transport, sans-IO: ids, bounds, event logs.

2025-11-25 basic/transports "Session Management": a legacy client opens a session with
`initialize` and names it in `Mcp-Session-Id` on every later request. Each session holds its
router `Session` (the era, the client's capabilities, the log level, the listener of list
changes), the principal that opened it, and its SSE streams with their event logs
("Resumability and Redelivery"). Nothing here touches a socket or a clock of its own: `_app`
feeds it, and tests drive it with an injected clock.

2026-07-28 requests never come here: they carry their own `_meta` and stand alone.
"""

from __future__ import annotations

import secrets
import time
from collections import OrderedDict, deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Final, Literal, NamedTuple

from .._jsonrpc import RequestId
from .._router import Session
from ._settings import DEFAULT_MAX_SESSIONS, DEFAULT_SESSION_IDLE_SECONDS

__all__ = (
    "DEFAULT_MAX_SESSIONS",
    "DEFAULT_SESSION_IDLE_SECONDS",
    "MAX_DETACHED_STREAMS",
    "MAX_LOG_BYTES",
    "MAX_LOG_BYTES_PER_PRINCIPAL",
    "MAX_LOG_EVENTS",
    "STANDALONE",
    "EventLog",
    "LegacySession",
    "LogBudget",
    "Opened",
    "SessionTable",
    "parse_event_id",
)

#: The replay log of one stream: the events a resuming GET can still get. Past either bound
#: the oldest go; the stream's last message (a request's response) is always kept.
MAX_LOG_EVENTS: Final = 64
MAX_LOG_BYTES: Final = 256 * 1024
#: Every log of one principal's sessions together (events a client has not resumed yet, and
#: the replay tails of live streams): past it, its oldest undelivered streams are forgotten,
#: then its logs' oldest events (each keeps its newest). Without it, one principal's
#: sessions times their streams held gigabytes.
MAX_LOG_BYTES_PER_PRINCIPAL: Final = 32 * 1024 * 1024
#: Streams of a session whose request ended while no connection was attached: kept for a
#: resuming GET (their response waits there); past this many the oldest is forgotten.
MAX_DETACHED_STREAMS: Final = 8
#: The key of a session's standalone stream (the GET one); request streams count from 1.
STANDALONE: Final = "0"
#: 256 bits from the system's CSPRNG, URL-safe base64: visible ASCII only ("Session
#: Management" 1.: 0x21 to 0x7E; "SHOULD be globally unique and cryptographically secure").
_ID_BYTES: Final = 32


def parse_event_id(event_id: str) -> tuple[str, int] | None:
    """The stream key and sequence number a `Last-Event-ID` names; None if it is none of ours.

    "Resumability and Redelivery" 1.: event ids SHOULD identify their stream; ours are
    `<stream>.<sequence>`, both decimal.
    """
    key, dot, seq = event_id.strip(" \t").partition(".")
    if not dot or not (key.isascii() and key.isdigit() and seq.isascii() and seq.isdigit()):
        return None
    if len(key) > 12 or len(seq) > 18:
        return None
    return str(int(key)), int(seq)


class LogBudget:
    """What one principal's stream logs hold, across its sessions, against its bound."""

    __slots__ = ("limit", "sessions", "used")

    def __init__(self, limit: int = MAX_LOG_BYTES_PER_PRINCIPAL) -> None:
        self.limit = limit
        self.used = 0
        #: Its sessions, oldest first (the table adds and removes them).
        self.sessions: list[LegacySession] = []

    def settle(self) -> None:
        """Back within the bound: the oldest undelivered streams go first (their requests
        are over; only a resuming GET would read them), then the oldest events of every log,
        each keeping its newest."""
        for session in self.sessions:
            while self.used > self.limit and session.detached:
                session.forget_stream(session.detached[0])
        for session in self.sessions:
            for log in list(session.logs.values()):
                if self.used <= self.limit:
                    return
                log.trim(keep=1)


class EventLog:
    """One SSE stream's events in order, each with its id, the newest kept for replay."""

    __slots__ = ("_events", "_next", "_size", "budget", "ended", "key")

    def __init__(self, key: str, budget: LogBudget | None = None) -> None:
        self.key = key
        self._events: deque[tuple[int, bytes]] = deque()
        self._size = 0
        self._next = 1
        #: The principal's budget this log counts against (None: only its own bounds).
        self.budget = budget
        #: Its last message is logged (a response, or the stream ended without one).
        self.ended = False

    def next_id(self) -> str:
        """A fresh event id on this stream (for a priming event, which is not kept)."""
        seq = self._next
        self._next += 1
        return f"{self.key}.{seq}"

    def record(self, data: bytes) -> bytes:
        """The SSE event for one JSON-RPC message `data`, kept for replay, with its id."""
        seq = self._next
        self._next += 1
        frame = b"id: %s.%d\nevent: message\ndata: %s\n\n" % (
            self.key.encode("ascii"),
            seq,
            data.rstrip(b"\n"),
        )
        self._events.append((seq, frame))
        self._grow(len(frame))
        # Bounded, the newest always kept: a reader that fell this far behind lost the rest.
        while len(self._events) > 1 and (
            len(self._events) > MAX_LOG_EVENTS or self._size > MAX_LOG_BYTES
        ):
            self._grow(-len(self._events.popleft()[1]))
        budget = self.budget
        if budget is not None and budget.used > budget.limit:
            budget.settle()
        return frame

    def trim(self, *, keep: int) -> None:
        """Forget all but the newest `keep` events (0: all of them)."""
        while len(self._events) > keep:
            self._grow(-len(self._events.popleft()[1]))

    def _grow(self, size: int) -> None:
        self._size += size
        if self.budget is not None:
            self.budget.used += size

    def after(self, seq: int) -> list[bytes]:
        """The kept events after sequence number `seq`, in order ("MAY replay messages that
        would have been sent after the last event ID, on the stream that was disconnected")."""
        return [frame for number, frame in self._events if number > seq]

    def last_seq(self) -> int:
        return self._next - 1


@dataclass(eq=False)
class LegacySession:
    """One 2025-11-25 session. `_app` keeps its live parts (connections, running requests'
    handles, pending server-to-client requests) in the `Any`-typed maps."""

    id: str
    principal: str | None
    state: Session
    last_used: float
    #: Requests running and connections open: while any, the session is not idle.
    busy: int = 0
    ended: bool = False
    logs: dict[str, EventLog] = field(default_factory=dict)
    #: Keys of request streams that ended with no connection attached, oldest first.
    detached: deque[str] = field(default_factory=deque)
    #: Request id -> the app's handle of the running request (to cancel it).
    running: dict[RequestId, Any] = field(default_factory=dict)
    #: Server-to-client request id -> the app's future for its answer.
    pending: dict[str, Any] = field(default_factory=dict)
    #: Stream key -> the app's connection attached to it now.
    attached: dict[str, Any] = field(default_factory=dict)
    #: The principal's budget every log of this session counts against.
    budget: LogBudget | None = None
    _streams: int = 0
    _asked: int = 0

    def __post_init__(self) -> None:
        self.logs[STANDALONE] = EventLog(STANDALONE, self.budget)

    def open_stream(self) -> EventLog:
        """A request's stream: its own key, its own log."""
        self._streams += 1
        log = EventLog(str(self._streams), self.budget)
        self.logs[log.key] = log
        return log

    def close_stream(self, log: EventLog, *, delivered: bool) -> None:
        """`log`'s request is over: forgotten if its end reached a connection, else kept (its
        response waits for a resuming GET) among the newest MAX_DETACHED_STREAMS."""
        if delivered:
            self._drop_log(log.key)
            return
        self.detached.append(log.key)
        while len(self.detached) > MAX_DETACHED_STREAMS:
            self._drop_log(self.detached.popleft())

    def forget_stream(self, key: str) -> None:
        """A detached stream is done with (its end reached a resuming GET, or the budget
        needs its room): nothing more to replay."""
        if key != STANDALONE and self._drop_log(key) and key in self.detached:
            self.detached.remove(key)

    def forget_logs(self) -> None:
        """The session ended: its logs no longer count against its principal's budget."""
        for log in self.logs.values():
            log.trim(keep=0)

    def _drop_log(self, key: str) -> bool:
        log = self.logs.pop(key, None)
        if log is None:
            return False
        log.trim(keep=0)
        return True

    def client_request_id(self) -> str:
        """An id for a server-to-client request, unique in the session."""
        self._asked += 1
        return f"mrtr-{self._asked}"


class Opened(NamedTuple):
    """What `SessionTable.open` did: the new session (None: refused), the sessions it ended
    to make room, and when refused, which bound refused it."""

    session: LegacySession | None
    ended: list[LegacySession]
    refused_by: Literal["table", "principal"] | None = None


class SessionTable:
    """Every open session, bounded by count and by idleness, with an injected clock.

    Sessions not busy are kept in last-use order, so both bounds cost O(1): the idle bound
    ends them from the front, the count bound takes the front one when it must make room.
    Room is made from the opener's own idle sessions first: one principal opening sessions
    by the thousand ends its own, and another's only while it holds no idle one itself (so
    it must keep a connection open on every session it holds to push others out, and
    connections are bounded). And no principal holds more than its share
    (`max_per_principal`), busy or not: one that parks a call in every session it opens (a
    call waiting for its user holds its session without a connection) fills its share, never
    the table, and the others still get theirs.
    """

    def __init__(
        self,
        *,
        max_sessions: int = DEFAULT_MAX_SESSIONS,
        idle_seconds: float = DEFAULT_SESSION_IDLE_SECONDS,
        max_per_principal: int | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if max_sessions < 1 or idle_seconds <= 0:
            raise ValueError("max_sessions must be at least 1 and idle_seconds positive")
        if max_per_principal is not None and max_per_principal < 1:
            raise ValueError("max_per_principal must be at least 1")
        self.max_sessions = max_sessions
        self.idle_seconds = idle_seconds
        #: How many sessions one principal may hold (None: the whole table).
        self.max_per_principal = min(max_per_principal or max_sessions, max_sessions)
        self.clock = clock
        self._sessions: dict[str, LegacySession] = {}
        #: Sessions open, busy or idle, by the principal that opened them.
        self._held: dict[str | None, int] = {}
        #: Each principal's stream-log budget, shared by its sessions.
        self._budgets: dict[str | None, LogBudget] = {}
        self.log_bytes_per_principal = MAX_LOG_BYTES_PER_PRINCIPAL
        #: Sessions with nothing running and no connection open, least recently used first.
        self._idle: OrderedDict[str, LegacySession] = OrderedDict()
        #: The same, by the principal that opened them.
        self._idle_of: dict[str | None, OrderedDict[str, LegacySession]] = {}

    def __len__(self) -> int:
        return len(self._sessions)

    def __iter__(self) -> Any:
        return iter(list(self._sessions.values()))

    def open(self, principal: str | None) -> Opened:
        """A new session for `principal`, and the sessions ended to make room (idle ones past
        the idle bound; at a bound the longest-idle one: the opener's own first, and at its
        share only its own). No session when the room could only come from busy sessions:
        the caller refuses with 503, saying which bound (`refused_by`)."""
        ended = self.expire()
        own = self._idle_of.get(principal)
        shared = self.max_per_principal < self.max_sessions
        if shared and self._held.get(principal, 0) >= self.max_per_principal:
            if not own:
                return Opened(None, ended, "principal")
            oldest = next(iter(own.values()))
            self.end(oldest)
            ended.append(oldest)
        elif len(self._sessions) >= self.max_sessions:
            if own:
                oldest = next(iter(own.values()))
            elif self._idle:
                oldest = next(iter(self._idle.values()))
            else:
                return Opened(None, ended, "table")
            self.end(oldest)
            ended.append(oldest)
        session_id = secrets.token_urlsafe(_ID_BYTES)
        while session_id in self._sessions:  # pragma: no cover -- 2**-256
            session_id = secrets.token_urlsafe(_ID_BYTES)
        budget = self._budgets.get(principal)
        if budget is None:
            budget = self._budgets[principal] = LogBudget(self.log_bytes_per_principal)
        session = LegacySession(session_id, principal, Session(), self.clock(), budget=budget)
        budget.sessions.append(session)
        self._sessions[session_id] = session
        self._held[principal] = self._held.get(principal, 0) + 1
        self._set_idle(session)
        return Opened(session, ended)

    def held_by(self, principal: str | None) -> int:
        """How many sessions `principal` holds now."""
        return self._held.get(principal, 0)

    def find(self, session_id: str, principal: str | None) -> LegacySession | None:
        """The live session `session_id` names, if `principal` opened it; None otherwise.

        Another principal's session is as unknown as one never opened (404): a session id that
        leaked does not let a different token in (2025-11-25 security_best_practices "Session
        Hijacking": bind the session to the user). Call `expire` first: an idle one is ended
        there, where the caller learns of it.
        """
        session = self._sessions.get(session_id)
        if session is None or session.principal != principal:
            return None
        session.last_used = self.clock()
        if session.busy == 0:
            self._idle.move_to_end(session_id)
            self._idle_of[principal].move_to_end(session_id)
        return session

    def acquire(self, session: LegacySession) -> None:
        """A request starts or a connection opens in `session`: not idle until `release`."""
        session.busy += 1
        if session.busy == 1:
            self._unset_idle(session)

    def release(self, session: LegacySession) -> None:
        session.busy -= 1
        session.last_used = self.clock()
        if session.busy == 0 and not session.ended:
            self._set_idle(session)

    def expire(self) -> list[LegacySession]:
        """End the sessions unused for the idle bound; those ended."""
        ended: list[LegacySession] = []
        deadline = self.clock() - self.idle_seconds
        while self._idle:
            session = next(iter(self._idle.values()))
            if session.last_used > deadline:
                break
            self.end(session)
            ended.append(session)
        return ended

    def end(self, session: LegacySession) -> None:
        """Forget `session` (DELETE, the idle bound, a stopping server)."""
        self._unset_idle(session)
        self._drop(session)

    def _set_idle(self, session: LegacySession) -> None:
        self._idle[session.id] = session
        self._idle_of.setdefault(session.principal, OrderedDict())[session.id] = session

    def _unset_idle(self, session: LegacySession) -> None:
        self._idle.pop(session.id, None)
        own = self._idle_of.get(session.principal)
        if own is not None:
            own.pop(session.id, None)
            if not own:
                del self._idle_of[session.principal]

    def _drop(self, session: LegacySession) -> None:
        if self._sessions.pop(session.id, None) is not None:
            session.forget_logs()
            budget = self._budgets[session.principal]
            budget.sessions.remove(session)
            left = self._held[session.principal] - 1
            if left:
                self._held[session.principal] = left
            else:
                del self._held[session.principal], self._budgets[session.principal]
        session.ended = True
