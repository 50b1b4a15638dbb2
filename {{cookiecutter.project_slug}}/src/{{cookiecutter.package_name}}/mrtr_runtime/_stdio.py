"""The stdio transport: the only code that touches the process's stdin and stdout.

basic/transports/stdio: newline-delimited JSON-RPC; "The server MUST NOT write anything to
its stdout that is not a valid MCP message"; logs may go to stderr; servers "SHOULD exit
promptly when their standard input is closed".

It runs on asyncio and uses its pipe transports directly: the event loop keeps both pipes
registered, every chunk that arrives is split into lines at once, and a response is handed to
the write transport whole -- so messages can never interleave or be cut, and no lock, read
syscall or registration is paid per message. Handlers still use anyio freely.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import sys
import threading
from collections.abc import Callable
from itertools import count
from typing import Any, Final, Protocol

from ._jsonrpc import (
    INTERNAL_ERROR,
    INVALID_REQUEST,
    MAX_LINE_BYTES,
    InvalidMessage,
    JSONObject,
    Notification,
    Request,
    RequestId,
    Response,
    encode,
    error_response,
    parse_line,
)
from ._legacy import ClientRequestFailed
from ._router import Server, Session

__all__ = (
    "DRAIN_SECONDS",
    "MAX_BACKLOG",
    "MAX_CONCURRENT_REQUESTS",
    "WRITE_GRACE_SECONDS",
    "Connection",
    "configure_logging",
    "serve_stdio",
)

#: Requests served at once. Requests beyond it wait in a backlog of MAX_BACKLOG; when that is
#: full too, the transport stops reading stdin, so a flood waits in the pipe (back-pressure)
#: instead of in our memory. (A legacy client with more than both of these requests waiting
#: on its own answers would stall itself; no real host comes near.)
MAX_CONCURRENT_REQUESTS: Final = 64
MAX_BACKLOG: Final = 4 * MAX_CONCURRENT_REQUESTS
#: After stdin closes, in-flight requests get this long to finish before they are abandoned.
DRAIN_SECONDS: Final = 5.0
#: At shutdown, how long responses already written may take to reach the client.
WRITE_GRACE_SECONDS: Final = 2.0

_logger = logging.getLogger("mrtr_runtime")


class Write(Protocol):
    """Hands one whole encoded message to the wire; `more_coming` lets it batch with others."""

    def __call__(self, data: bytes, more_coming: bool = False) -> None: ...


class _LineSplitter:
    """Splits the input byte stream into lines, discarding any line over MAX_LINE_BYTES."""

    def __init__(self) -> None:
        self._buffer = bytearray()
        self._discarding = False

    def feed(self, chunk: bytes) -> list[bytes | None]:
        """The complete lines in `chunk` (None marks an oversized one)."""
        lines: list[bytes | None] = []
        start = 0
        while (end := chunk.find(b"\n", start)) >= 0:
            if self._discarding:
                self._discarding = False
            else:
                if self._buffer:
                    self._buffer += chunk[start:end]
                    line = bytes(self._buffer)
                    self._buffer.clear()
                else:
                    line = chunk[start:end]
                if len(line) > MAX_LINE_BYTES:
                    lines.append(None)
                elif line.strip():
                    lines.append(line.rstrip(b"\r"))
            start = end + 1
        if not self._discarding and start < len(chunk):
            self._buffer += chunk[start:]
            if len(self._buffer) > MAX_LINE_BYTES:
                self._buffer.clear()
                self._discarding = True
                lines.append(None)
        return lines


class Connection:
    """One client on one pair of pipes: in-flight requests, and server-to-client requests.

    `feed` is called with whatever bytes arrived; `write` is given whole encoded messages.
    Nothing here waits on a request, so responses and cancellations keep flowing while every
    slot is busy (a legacy request may be waiting for exactly the response next on the wire).
    """

    def __init__(
        self,
        server: Server,
        write: Write,
        *,
        backlog_changed: Callable[[], None] = lambda: None,
    ) -> None:
        self.server = server
        self.session = Session()
        self._write = write
        self._backlog_changed = backlog_changed
        self._splitter = _LineSplitter()
        self.in_flight: dict[RequestId, asyncio.Task[None]] = {}
        #: Requests read while every slot was busy, served in arrival order as slots free up.
        self.backlog: dict[RequestId, Request] = {}
        self.awaiting_client: dict[str, asyncio.Future[Response]] = {}
        self.idle = asyncio.Event()
        self.idle.set()
        self._ids = count(1)
        #: Called once, right after the first response is on its way.
        self.after_first_response: Callable[[], None] | None = None

    @property
    def backlog_full(self) -> bool:
        return len(self.backlog) >= MAX_BACKLOG

    # -- the Peer the router sees ---------------------------------------------------------

    async def notify(self, method: str, params: dict[str, Any]) -> None:
        self._write(encode({"jsonrpc": "2.0", "method": method, "params": params}))

    async def request(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        request_id = f"server-{next(self._ids)}"
        answer: asyncio.Future[Response] = asyncio.get_running_loop().create_future()
        self.awaiting_client[request_id] = answer
        try:
            self._write(
                encode({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params})
            )
            response = await answer
        finally:
            del self.awaiting_client[request_id]
        if response.error is not None or response.result is None:
            error = response.error or {}
            code = error.get("code")
            raise ClientRequestFailed(
                code if isinstance(code, int) else INVALID_REQUEST,
                str(error.get("message", "no result")),
            )
        return response.result

    # -- incoming ---------------------------------------------------------------------

    def feed(self, data: bytes) -> None:
        for line in self._splitter.feed(data):
            self.receive(line)
        if self.backlog_full:
            self._backlog_changed()

    def receive(self, line: bytes | None) -> None:
        if line is None:
            self._send(
                error_response(None, INVALID_REQUEST, f"Message over {MAX_LINE_BYTES} bytes")
            )
            return
        try:
            message = parse_line(line)
        except InvalidMessage as error:
            self._send(error_response(error.request_id, error.code, error.message))
            return
        if isinstance(message, Request):
            if message.id in self.in_flight or message.id in self.backlog:
                self._send(
                    error_response(message.id, INVALID_REQUEST, "Request id is already in use")
                )
            elif len(self.in_flight) < MAX_CONCURRENT_REQUESTS:
                self._start(message)
            else:
                self.backlog[message.id] = message
        elif isinstance(message, Notification):
            self._on_notification(message)
        else:
            self._on_response(message)

    def _start(self, request: Request) -> None:
        self.idle.clear()
        task = asyncio.get_running_loop().create_task(self._serve(request))
        self.in_flight[request.id] = task
        task.add_done_callback(lambda _: self._finished(request.id))

    async def _serve(self, request: Request) -> None:
        response = await self.server.handle_request(request, self.session, self)
        try:
            data = encode(response)
        except (TypeError, ValueError, RecursionError):
            _logger.exception("response to %s is not JSON", request.method)
            data = encode(error_response(request.id, INTERNAL_ERROR, "Internal error"))
        # Written in the same step the handler finished in: a cancellation that arrives later
        # finds nothing to stop, one that arrived earlier has already ended this task (stdio:
        # after a cancellation the server "MUST NOT send any further messages" for it).
        self._write(data, len(self.in_flight) > 1)
        if self.after_first_response is not None:
            asyncio.get_running_loop().call_soon(self.after_first_response)
            self.after_first_response = None

    def _finished(self, request_id: RequestId) -> None:
        del self.in_flight[request_id]
        if self.backlog:
            self._start(self.backlog.pop(next(iter(self.backlog))))
            self._backlog_changed()
        elif not self.in_flight:
            self.idle.set()

    def _on_notification(self, notification: Notification) -> None:
        request_id = self.server.handle_notification(notification)
        if request_id is None:
            return
        task = self.in_flight.get(request_id)
        if task is not None:
            task.cancel()
        elif self.backlog.pop(request_id, None) is not None:
            self._backlog_changed()

    def _on_response(self, response: Response) -> None:
        waiting = self.awaiting_client.get(response.id) if isinstance(response.id, str) else None
        if waiting is None or waiting.done():
            _logger.debug("ignored a response to no request of ours (id %r)", response.id)
            return
        waiting.set_result(response)

    def _send(self, message: JSONObject) -> None:
        self._write(encode(message))

    def cancel_all(self) -> None:
        self.backlog.clear()
        for task in list(self.in_flight.values()):
            task.cancel()


class _Reader(asyncio.Protocol):
    def __init__(self, connection: Connection, finished: asyncio.Event) -> None:
        self._connection = connection
        self._finished = finished

    def data_received(self, data: bytes) -> None:
        self._connection.feed(data)

    def eof_received(self) -> bool | None:
        self._finished.set()
        return None

    def connection_lost(self, exc: Exception | None) -> None:
        self._finished.set()


class _Writer(asyncio.Protocol):
    """Flow control for stdout: when the client stops reading, we stop reading too."""

    def __init__(self, stop: asyncio.Event) -> None:
        self._stop = stop
        self.paused = False
        self.closing = False
        self.flow_changed: Callable[[], None] = lambda: None

    def pause_writing(self) -> None:
        self.paused = True
        self.flow_changed()

    def resume_writing(self) -> None:
        self.paused = False
        self.flow_changed()

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.closing:
            # The client closed its end of stdout: nobody is left to answer.
            _logger.info("stdout closed by the client; stopping")
        self._stop.set()


def _claim_stdio() -> tuple[int, int]:
    """Private copies of the real stdin/stdout; fds 0 and 1 then point away from the wire.

    A stray print() -- ours, a library's, a child process's -- lands on stderr instead of
    corrupting the protocol, and no child can read our requests off stdin.
    """
    sys.stdout.flush()
    wire_in = os.dup(0)
    wire_out = os.dup(1)
    os.dup2(2, 1)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    return wire_in, wire_out


def configure_logging() -> None:
    """Logs to stderr (never stdout), at MRTR_LOG_LEVEL (default INFO)."""
    level = os.environ.get("MRTR_LOG_LEVEL", "INFO").upper()
    logging.basicConfig(
        stream=sys.stderr,
        level=level if level in logging.getLevelNamesMapping() else "INFO",
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )


async def _open_output(
    loop: asyncio.AbstractEventLoop, fd: int, stop: asyncio.Event
) -> tuple[Write, _Writer, asyncio.WriteTransport | None]:
    writer = _Writer(stop)
    try:
        pipe = os.fdopen(fd, "wb", buffering=0, closefd=False)
        transport, _ = await loop.connect_write_pipe(lambda: writer, pipe)
    except (ValueError, OSError, NotImplementedError):
        # A regular file (or a platform without pipe transports): plain blocking writes.
        def write_blocking(data: bytes, more_coming: bool = False) -> None:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]

        return write_blocking, writer, None

    pending: list[bytes] = []

    def flush() -> None:
        if not transport.is_closing():
            transport.write(b"".join(pending))
        pending.clear()

    def write(data: bytes, more_coming: bool = False) -> None:
        # While other requests are in flight, responses finished in the same turn of the loop
        # go out in one write (a pipelined burst costs one syscall, not one per response); a
        # lone response goes at once. Either way, order is kept.
        if pending or more_coming:
            if not pending:
                loop.call_soon(flush)
            pending.append(data)
        elif not transport.is_closing():
            transport.write(data)

    return write, writer, transport


async def _open_input(
    loop: asyncio.AbstractEventLoop, fd: int, connection: Connection, finished: asyncio.Event
) -> asyncio.ReadTransport | None:
    try:
        pipe = os.fdopen(fd, "rb", buffering=0, closefd=False)
        transport, _ = await loop.connect_read_pipe(lambda: _Reader(connection, finished), pipe)
    except (ValueError, OSError, NotImplementedError):
        # A regular file (or no pipe transports): read it in a worker thread.
        async def pump() -> None:
            while chunk := await loop.run_in_executor(None, os.read, fd, 256 * 1024):
                connection.feed(chunk)
            finished.set()

        loop.create_task(pump())
        return None
    return transport


async def _serve_pipes(server: Server, wire_in: int, wire_out: int) -> int:
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    stdin_done = asyncio.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        with contextlib.suppress(NotImplementedError, RuntimeError):  # Windows
            loop.add_signal_handler(signum, stop.set)
    write, writer, out_transport = await _open_output(loop, wire_out, stop)
    reading: list[asyncio.ReadTransport | None] = [None]

    def flow_changed() -> None:
        # Read while there is room for more requests and the client reads our responses.
        transport = reading[0]
        if transport is None:
            return
        wanted = not writer.paused and not connection.backlog_full
        if wanted != transport.is_reading():
            (transport.resume_reading if wanted else transport.pause_reading)()

    connection = Connection(server, write, backlog_changed=flow_changed)
    writer.flow_changed = flow_changed
    broken: list[BaseException] = []

    def warm_up() -> None:
        try:
            server.warm_up()
        except Exception as error:
            _logger.exception("the tools could not be loaded; stopping")
            broken.append(error)
            stop.set()

    connection.after_first_response = warm_up
    reading[0] = await _open_input(loop, wire_in, connection, stdin_done)

    stopped = loop.create_task(stop.wait())
    eof = loop.create_task(stdin_done.wait())
    await asyncio.wait({stopped, eof}, return_when=asyncio.FIRST_COMPLETED)
    if not stop.is_set():
        # stdin closed: let in-flight work finish, within a bound, then stop.
        drained = loop.create_task(connection.idle.wait())
        await asyncio.wait(
            {drained, stopped}, timeout=DRAIN_SECONDS, return_when=asyncio.FIRST_COMPLETED
        )
        drained.cancel()
    unfinished = len(connection.in_flight) + len(connection.backlog)
    if unfinished:
        _logger.warning("stopping; abandoning %d unfinished request(s)", unfinished)
    connection.cancel_all()
    stopped.cancel()
    eof.cancel()
    if connection.in_flight:
        await asyncio.wait(set(connection.in_flight.values()), timeout=WRITE_GRACE_SECONDS)
    if reading[0] is not None:
        reading[0].close()
    if out_transport is not None:
        writer.closing = True
        await _flush(out_transport)
    return 1 if broken else 0


async def _flush(transport: asyncio.WriteTransport) -> None:
    """Give what is already written WRITE_GRACE_SECONDS to reach the client, then close."""
    await asyncio.sleep(0)  # a coalesced write scheduled in the last turn goes out first
    loop = asyncio.get_running_loop()
    deadline = loop.time() + WRITE_GRACE_SECONDS
    while transport.get_write_buffer_size() and loop.time() < deadline:  # noqa: ASYNC110
        # asyncio offers no "buffer drained" event on a bare transport; poll, briefly.
        await asyncio.sleep(0.01)
    if transport.get_write_buffer_size():
        transport.abort()
    else:
        transport.close()


def serve_stdio(server: Server) -> int:
    """Serve `server` on stdin/stdout until stdin closes or a signal arrives.

    Returns the exit status: 0, or 1 when the tools could not be loaded.
    """
    configure_logging()
    if sys.stdin.isatty():
        _logger.info("waiting for JSON-RPC on stdin; an MCP host normally starts this server")
    wire_in, wire_out = _claim_stdio()
    status = asyncio.run(_serve_pipes(server, wire_in, wire_out))
    main = threading.main_thread()
    if any(t.is_alive() and not t.daemon and t is not main for t in threading.enumerate()):
        # A blocking tool abandoned at shutdown still holds a worker thread, and Python would
        # wait for it at exit: the shutdown bound we promise must not depend on a tool.
        logging.shutdown()
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(status)
    return status
