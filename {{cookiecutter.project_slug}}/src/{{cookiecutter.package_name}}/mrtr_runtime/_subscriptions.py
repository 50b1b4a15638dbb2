"""Who listens for which changes, and the notices each listener is sent.

Two eras, one mechanism. 2026-07-28 (basic/patterns/subscriptions): a `subscriptions/listen`
request opens a stream that lives until the client cancels it; it names what it wants (the
filter), and every notice on it carries its subscription id. 2025-11-25: an initialized session
gets `notifications/*/list_changed` (server/tools, server/prompts, server/resources "List Changed
Notification") and `notifications/resources/updated` for the URIs it `resources/subscribe`d.

The registry announces a change from whatever thread made it (a plain `def` tool runs in a
worker thread); each listener takes it on its own event loop and sends from there, in one task
at a time, so notices never interleave and a cancelled stream sends nothing more.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import weakref
from collections.abc import Iterable, Mapping
from typing import Any, Final

from ._context import Cancellation, Notifier
from ._registry import RegistryChange

__all__ = (
    "LIST_KINDS",
    "MAX_LISTENS",
    "MAX_LISTENS_PER_PRINCIPAL",
    "MAX_RESOURCE_SUBSCRIPTIONS",
    "Listener",
    "Subscriptions",
)

#: Open `subscriptions/listen` streams per server. Each holds a request slot of the transport
#: and a little state; a client that keeps opening them is refused past this many.
MAX_LISTENS: Final = 16
#: Of those, how many one principal may hold (a principal the transport names; a server with
#: none, one user's own, lets that user hold them all): one user cannot close the door on all.
MAX_LISTENS_PER_PRINCIPAL: Final = MAX_LISTENS // 4
#: Resource URIs one listener follows (a listen's `resourceSubscriptions`, or a legacy
#: session's `resources/subscribe` calls): a client must not grow the server without bound.
MAX_RESOURCE_SUBSCRIPTIONS: Final = 256

#: The list kinds, as the registry names them, and the notification each one sends.
LIST_KINDS: Final[Mapping[str, str]] = {
    "tools": "notifications/tools/list_changed",
    "prompts": "notifications/prompts/list_changed",
    "resources": "notifications/resources/list_changed",
}
_RESOURCE_UPDATED: Final = "notifications/resources/updated"

_logger = logging.getLogger("mrtr_runtime")


class Listener:
    """One recipient of change notices: a listen stream, or a legacy session.

    `offer` runs on the listener's loop. Pending notices are a set (a list that changed twice
    before the first notice went out is one notice), so what waits is bounded by what the
    listener follows: three lists and its resource URIs.
    """

    def __init__(
        self,
        notify: Notifier,
        *,
        lists: Iterable[str],
        uris: Iterable[str] = (),
        meta: Mapping[str, Any] | None = None,
        cancellation: Cancellation | None = None,
        started: bool = True,
    ) -> None:
        self._notify = notify
        self._loop = asyncio.get_running_loop()
        self.lists = frozenset(lists)
        self.uris = set(uris)
        self._meta = dict(meta) if meta is not None else None
        self._cancellation = cancellation
        self._pending: dict[tuple[str, str | None], None] = {}
        self._sending: asyncio.Task[None] | None = None
        self.closed = False
        #: Who opened it (`Subscriptions.open_listen`), for the per-principal bound.
        self.principal: str | None = None
        #: A listen stream holds its notices until its acknowledgment is out (`start`).
        self._started = started
        #: Set when the server ends the stream on its own (shutdown): the listen then answers.
        self.ended = asyncio.Event()

    @property
    def open(self) -> bool:
        # basic/utilities/cancellation: nothing more is sent on a stream once it is cancelled.
        return not self.closed and not (
            self._cancellation is not None and self._cancellation.cancelled
        )

    def announce(self, change: RegistryChange, uri: str | None) -> None:
        """Take `change` from any thread: it is handled on this listener's loop."""
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is self._loop:
            self.offer(change, uri)
            return
        try:
            self._loop.call_soon_threadsafe(self.offer, change, uri)
        except RuntimeError:  # the loop has stopped: nobody is listening any more
            self.closed = True

    def offer(self, change: RegistryChange, uri: str | None) -> None:
        if not self.open:
            return
        if change == "resource":
            if uri not in self.uris:
                return
        elif change not in self.lists:
            return
        self._pending[(change, uri if change == "resource" else None)] = None
        self._send_soon()

    def start(self) -> None:
        """basic/patterns/subscriptions: nothing is sent on a stream before its acknowledgment."""
        self._started = True
        self._send_soon()

    def _send_soon(self) -> None:
        if self._started and self._pending and self._sending is None:
            self._sending = self._loop.create_task(self._send_pending())

    async def _send_pending(self) -> None:
        try:
            while self._pending and self.open:
                change, uri = next(iter(self._pending))
                del self._pending[(change, uri)]
                params: dict[str, Any] = {}
                if self._meta is not None:
                    params["_meta"] = dict(self._meta)
                if uri is not None:
                    params["uri"] = uri
                method = _RESOURCE_UPDATED if change == "resource" else LIST_KINDS[change]
                await self._notify(method, params)
        except Exception:
            # A peer that cannot send (its pipe is gone) must not take the server down with it.
            _logger.exception("a change notice could not be sent")
        finally:
            self._sending = None

    def close(self) -> None:
        self.closed = True
        self._pending.clear()
        if self._sending is not None:
            self._sending.cancel()
            self._sending = None


class Subscriptions:
    """Every listener of one server: open listen streams and initialized legacy sessions."""

    def __init__(self) -> None:
        self.listens: set[Listener] = set()
        #: Legacy sessions' listeners; each lives as long as its session (which holds it).
        self._sessions: weakref.WeakSet[Listener] = weakref.WeakSet()
        #: `announce` may run in any thread while the loop opens and closes listeners.
        self._lock = threading.Lock()

    def open_listen(self, listener: Listener, principal: str | None = None) -> None:
        with self._lock:
            if len(self.listens) >= MAX_LISTENS:
                raise OverflowError(f"at most {MAX_LISTENS} subscriptions/listen streams are open")
            held = sum(1 for other in self.listens if other.principal == principal)
            if principal is not None and held >= MAX_LISTENS_PER_PRINCIPAL:
                raise OverflowError(
                    f"you have {held} subscriptions/listen streams open, the most one principal may"
                )
            listener.principal = principal
            self.listens.add(listener)

    def close_listen(self, listener: Listener) -> None:
        listener.close()
        with self._lock:
            self.listens.discard(listener)

    def add_session(self, listener: Listener) -> None:
        with self._lock:
            self._sessions.add(listener)

    def announce(self, change: RegistryChange, uri: str | None = None) -> None:
        """Tell every listener that wants it; callable from any thread."""
        with self._lock:
            listeners = [*self.listens, *self._sessions]
        for listener in listeners:
            listener.announce(change, uri)

    def end_listens(self) -> int:
        """End every listen stream (the server is stopping); how many there were."""
        listens = list(self.listens)
        for listener in listens:
            listener.ended.set()
        return len(listens)
