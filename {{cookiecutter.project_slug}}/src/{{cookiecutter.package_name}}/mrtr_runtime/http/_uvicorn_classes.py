"""uvicorn's own classes, adapted to serve MCP: `McpUvicorn` (the server: a clean stop ends
the process 0, open listens end first, what outlives the grace is answered) and
`GuardedHttpToolsProtocol` (the HTTP/1.1 protocol with the bounds uvicorn lacks, and the
connection bound of `BoundedConnections`). Imported only by `_uvicorn.serve_http` when it
serves: uvicorn and httptools are the optional `http` extra, and the ASGI app (`_app`) runs
without them, in tests and behind another server.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import socket
import sys
import threading
import time
from collections.abc import Awaitable, Iterator
from types import FrameType
from typing import Any, Final

import uvicorn
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from .._context import SHUTDOWN_GRACE_SECONDS
from .._router import Server
from ._app import ConnectionRefusal, HttpApp
from ._rules import HeadMeter
from ._settings import (
    BODY_TIMEOUT_SECONDS,
    HEAD_TIMEOUT_SECONDS,
    MAX_BODY_BYTES,
    MAX_CONNECTIONS,
    MAX_HEAD_BYTES,
    SHUTDOWN_MARGIN_SECONDS,
    HttpSettings,
)

__all__ = ("BoundedConnections", "GuardedHttpToolsProtocol", "McpUvicorn")

_FLUSH_POLL_SECONDS: Final = 0.01
_STOP_SIGNALS: Final = (signal.SIGINT, signal.SIGTERM)

_logger = logging.getLogger("mrtr_runtime")


class McpUvicorn(uvicorn.Server):
    """uvicorn's server, but a SIGTERM or SIGINT that stops it cleanly ends the process with
    status 0, as the stdio server does (uvicorn re-raises the signal once it has stopped,
    so the process would end "killed by SIGTERM" however cleanly it shut down); and open
    listens end before the grace period, not after it."""

    def __init__(self, config: uvicorn.Config, mcp_server: Server, app: HttpApp) -> None:
        super().__init__(config)
        self.mcp_server = mcp_server
        self.http_app = app
        self.signalled: float | None = None

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        if self.signalled is None:
            self.signalled = time.monotonic()
        super().handle_exit(sig, frame)

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        # basic/patterns/subscriptions "Graceful Closure": each listen tells its client and
        # answers its request, so it neither holds the grace period nor is cut off.
        self.mcp_server.end_subscriptions()
        # Requests still waiting for a place never started: answered now, so that their
        # clients can go elsewhere, rather than held for the grace and then cut off.
        self.http_app.stop_waiting()
        await self._take_in_backlog(sockets or [])
        if self.signalled is not None:
            # The grace counts from the signal: a loop kept busy reaches this point late.
            # (uvicorn types it int, but only ever passes it to asyncio.wait_for.)
            spent = time.monotonic() - self.signalled
            remaining = max(0.0, SHUTDOWN_GRACE_SECONDS - spent)
            self.config.timeout_graceful_shutdown = remaining  # type: ignore[assignment]
        await super().shutdown(sockets)
        # uvicorn has cancelled what outlived the grace, but a task awaiting a thread it
        # cannot leave (anyio shields a thread call) stays, unanswered: answer it here.
        abandoned = self.http_app.abandon_open()
        await _answer_and_flush(abandoned, self.server_state.connections)
        self._exit_if_stuck()

    async def _take_in_backlog(self, sockets: list[socket.socket]) -> None:
        """Serve the connections still waiting to be accepted (a loop kept busy, by threads
        starving it of the GIL, accepts late): closing the listener would reset each one,
        its request unread. Taken in now, each request is refused as stopping, in JSON."""
        loop = asyncio.get_running_loop()
        config = self.config
        pending: list[socket.socket] = []
        for sock in sockets:
            # asyncio's own accepting ends here, so no connection is half taken in by it
            # when the listener closes.
            loop.remove_reader(sock.fileno())
            with contextlib.suppress(OSError):  # BlockingIOError: the backlog is empty
                while True:
                    pending.append(sock.accept()[0])

        def protocol() -> asyncio.Protocol:
            # As uvicorn's own factory builds it (the class is typed as a plain Protocol).
            made: asyncio.Protocol = config.http_protocol_class(  # type: ignore[call-arg]
                config=config, server_state=self.server_state, app_state=self.lifespan.state
            )
            return made

        # All at once: the grace has not begun, and a busy loop makes each turn long.
        await asyncio.gather(
            *(loop.connect_accepted_socket(protocol, connection) for connection in pending)
        )
        # Two turns of the loop: the one that polls the new sockets, then the one that runs
        # their reads, so that each request already sent has begun (`shutdown` below).
        for _ in range(2):
            await asyncio.sleep(0)

    def _exit_if_stuck(self) -> None:
        main = threading.main_thread()
        threads = [
            thread
            for thread in threading.enumerate()
            if thread.is_alive()
            and not thread.daemon
            and thread is not main
            and not _idle_worker(thread)
        ]
        if not threads and not self.server_state.tasks:
            return
        # A tool's thread still blocked would keep the interpreter alive at exit (it joins
        # every non-daemon thread), and a task awaiting it would hold asyncio.run's last
        # step: neither may stretch the stop we promise. Daemon worker threads would not
        # cover the second, nor threads a tool starts itself; this covers every case, and
        # only once every answer has been written.
        _logger.warning(
            "stopped with %d tool thread(s) still running; they are abandoned", len(threads)
        )
        logging.shutdown()
        sys.stderr.flush()
        os._exit(0)

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        if threading.current_thread() is not threading.main_thread():
            yield
            return
        previous = {sig: signal.signal(sig, self.handle_exit) for sig in _STOP_SIGNALS}
        try:
            yield
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)


def _idle_worker(thread: threading.Thread) -> bool:
    """Whether `thread` is one of AnyIO's worker threads waiting for work (in its pool's idle
    queue): it runs nothing, and AnyIO stops it with the event loop. Tools and the task store
    leave such threads behind for ten seconds after each use; counting them would report tool
    threads "still running" that are not."""
    idle = getattr(thread, "idle_workers", None)
    return idle is not None and thread in idle


async def _answer_and_flush(answering: Awaitable[int], connections: set[Any]) -> None:
    """Write the answers of requests still open, then give the bytes up to
    SHUTDOWN_MARGIN_SECONDS to leave (a process that ends drops what its sockets still hold)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + SHUTDOWN_MARGIN_SECONDS
    try:
        async with asyncio.timeout(SHUTDOWN_MARGIN_SECONDS):
            await answering
    except TimeoutError:
        _logger.warning("some answers could not be written before the process ended")
    while loop.time() < deadline and any(_unsent(connection) for connection in connections):  # noqa: ASYNC110
        # asyncio has no "write buffer drained" event on a transport; poll, briefly.
        await asyncio.sleep(_FLUSH_POLL_SECONDS)


def _unsent(connection: Any) -> int:
    transport = getattr(connection, "transport", None)
    size: int = 0 if transport is None else transport.get_write_buffer_size()
    return size


class BoundedConnections:
    """At most `max_connections` connections served at once, counted as they open: the first
    ones are served, and each one opened past the bound answers its request with a JSON-RPC 503
    (`refusal`) and closes. (uvicorn's own `limit_concurrency` compares the count of connections
    AND tasks when a request's head completes, so a burst whose connections all open before the
    first head is parsed is refused entirely, the first ones included.) Mixed in before
    uvicorn's protocol class, whose `connections` and `app` it uses."""

    max_connections: int = MAX_CONNECTIONS
    refusal: ConnectionRefusal = ConnectionRefusal(MAX_CONNECTIONS)
    connections: set[Any]
    app: Any

    def connection_made(self, transport: asyncio.Transport) -> None:
        super().connection_made(transport)  # type: ignore[misc]
        if len(self.connections) > self.max_connections:
            # uvicorn reads the app from the protocol when each request's head completes.
            self.app = self.refusal


def _declared_body_length(headers: list[tuple[bytes, bytes]]) -> int | None:
    """A request body's length as its head gives it (RFC 9112 section 6.3): none without
    Content-Length or Transfer-Encoding, the Content-Length, or None when only the parser can
    tell (chunked; anything the parser will refuse)."""
    lengths = [value for name, value in headers if name == b"content-length"]
    if any(name == b"transfer-encoding" for name, _ in headers) or len(lengths) > 1:
        return None
    if not lengths:
        return 0
    value = lengths[0].strip()
    return int(value) if value.isdigit() else None


class GuardedHttpToolsProtocol(HttpToolsProtocol):
    """uvicorn's HTTP/1.1 protocol (httptools), with the bounds it lacks: a request's head
    (request line and headers) must arrive within `head_timeout` seconds, and within
    `max_head_bytes`. Without them a client holds a connection for ever by sending nothing
    (and enough such clients use up every connection), or makes the parser churn through
    an endless header.

    The head is measured before the parser sees a byte of it (`HeadMeter`), so the bound
    holds however the reads split it: a whole head in one read is refused as surely as one
    sent a byte at a time, and one that follows another request in the same read (HTTP/1.1
    pipelining) as surely as the first: the parser is fed a message at a time. Only after
    a chunked body, whose end only the parser finds, is the head that shares its read
    measured from the next read on.

    A request answered before its body has all arrived (413, 403, 401 ...) leaves uvicorn
    reading on and discarding the rest for as long as the client sends: the connection is
    closed once the discarded part passes the body bounds (`max_body_bytes`, the body
    timeout). Until then it stays open, so a client that sends its whole body before it
    reads (most do) still gets the answer."""

    #: The bounds (`configured` sets them from the settings).
    head_timeout: float = HEAD_TIMEOUT_SECONDS
    max_head_bytes: int = MAX_HEAD_BYTES
    max_body_bytes: int = MAX_BODY_BYTES
    _head_timer: asyncio.TimerHandle | None = None
    _meter: HeadMeter | None = None
    # Between messages, the next byte starts a head; once a message has begun, its head is
    # open until the parser has read all of it.
    _between_messages = True
    _head_open = False
    _discard_timer: asyncio.TimerHandle | None = None
    _discarded = 0
    # The bytes of the current message's body still to come, where its head says.
    _body_left: int | None = None
    # A refusal held back until the requests before it are answered.
    _refusal: bytes | None = None
    # Set when the server stops while this connection's request is arriving.
    _close_after_answer = False

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._arm_head_timer()

    def data_received(self, data: bytes) -> None:
        # The parser is fed a message at a time where the reads hold more than one (HTTP/1.1
        # pipelining): each head then starts a read of its own, and is measured whole.
        while data and self._refusal is None and not self.transport.is_closing():
            data = self._receive(data)

    def _receive(self, data: bytes) -> bytes:
        """Feed the parser `data` up to the end of the current message where that is known;
        the rest, which starts the next message."""
        if self._meter is None and (self._between_messages or self._head_open):
            self._meter = HeadMeter(self.max_head_bytes, begun=self._head_open)
            if self._head_timer is None:
                self._arm_head_timer()
        meter = self._meter
        if meter is not None:
            head = meter.feed(data)
            if meter.over:
                self._refuse(b"431 Request Header Fields Too Large")
                return b""
            if not meter.ended:
                super().data_received(data)
                return b""
            self._meter = None
            super().data_received(data[:head])
            data = data[head:]
            if self.transport.is_closing():
                return b""
        elif self._discard_timer is not None:
            self._discarded += len(data)
            if self._discarded > self.max_body_bytes:
                self._stop_discarding()
                self.transport.close()
                return b""
        if self._between_messages:
            return data  # the next message, measured from its first byte
        left = self._body_left
        if not left:
            # A chunked body's end is the parser's to find: what follows it in the same
            # read is measured from the next read on.
            if data:
                super().data_received(data)
            return b""
        body = data[:left]
        self._body_left = left - len(body)
        super().data_received(body)
        return data[len(body) :]

    def on_message_begin(self) -> None:
        self._between_messages = False
        self._head_open = True
        self._body_left = None
        super().on_message_begin()

    def on_headers_complete(self) -> None:
        self._head_open = False
        self._disarm_head_timer()
        self._body_left = _declared_body_length(self.headers)
        super().on_headers_complete()
        if self._close_after_answer and self.cycle is not None:
            self.cycle.keep_alive = False

    def on_message_complete(self) -> None:
        # The next request's head starts; until its first byte uvicorn's keep-alive
        # timeout applies, then ours.
        self._between_messages = True
        self._stop_discarding()
        super().on_message_complete()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        refusal = self._refusal
        if refusal is not None:
            if not self._answering():
                self._refusal = None
                self._refuse(refusal)
            return
        # The latest request answered while its body still arrives: uvicorn discards it.
        cycle = self.cycle
        answered_early = cycle is not None and cycle.response_complete and cycle.more_body
        if answered_early and self._discard_timer is None and not self.transport.is_closing():
            self._discarded = 0
            self._discard_timer = self.loop.call_later(
                BODY_TIMEOUT_SECONDS, self._discarding_too_long
            )

    def shutdown(self) -> None:
        # uvicorn closes a connection with no request cycle at once; one whose request's
        # head is still being read would then lose it unanswered. It is answered (the app
        # refuses it, stopping) and closed after.
        if self.cycle is None and not self._between_messages:
            self._close_after_answer = True
            return
        super().shutdown()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm_head_timer()
        self._stop_discarding()
        super().connection_lost(exc)

    def _arm_head_timer(self) -> None:
        self._head_timer = self.loop.call_later(self.head_timeout, self._head_too_slow)

    def _disarm_head_timer(self) -> None:
        if self._head_timer is not None:
            self._head_timer.cancel()
            self._head_timer = None

    def _head_too_slow(self) -> None:
        self._head_timer = None
        if (self._between_messages or self._head_open) and not self.transport.is_closing():
            self._refuse(b"408 Request Timeout")

    def _answering(self) -> bool:
        cycle = self.cycle
        return bool(self.pipeline) or (cycle is not None and not cycle.response_complete)

    def _stop_discarding(self) -> None:
        if self._discard_timer is not None:
            self._discard_timer.cancel()
            self._discard_timer = None

    def _discarding_too_long(self) -> None:
        self._discard_timer = None
        self.transport.close()

    def _refuse(self, status: bytes) -> None:
        if self._answering():
            # RFC 9112 section 9.3.2: answers go out in the order of the requests, so this
            # one waits for those of the requests before it; nothing more is read.
            self._refusal = status
            self.transport.pause_reading()
            return
        self.transport.write(
            b"HTTP/1.1 " + status + b"\r\ncontent-length: 0\r\nconnection: close\r\n\r\n"
        )
        self.transport.close()

    @classmethod
    def configured(cls, settings: HttpSettings) -> type[GuardedHttpToolsProtocol]:
        """This protocol with `settings`' bounds, and at most `settings.max_connections`
        connections served at once (`BoundedConnections`): what uvicorn is given."""
        attributes = {
            "head_timeout": settings.head_timeout_seconds,
            "max_head_bytes": settings.max_head_bytes,
            "max_body_bytes": settings.max_body_bytes,
            "max_connections": settings.max_connections,
            "refusal": ConnectionRefusal(settings.max_connections),
        }
        return type("ConfiguredHttpToolsProtocol", (BoundedConnections, cls), attributes)
