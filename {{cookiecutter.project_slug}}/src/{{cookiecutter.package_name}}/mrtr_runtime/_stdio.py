"""The stdio transport: the only code that touches the process's stdin and stdout.

basic/transports/stdio: newline-delimited JSON-RPC; "The server MUST NOT write anything to
its stdout that is not a valid MCP message"; logs may go to stderr; servers "SHOULD exit
promptly when their standard input is closed".
"""

from __future__ import annotations

import logging
import math
import os
import signal
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from itertools import count
from typing import Any, Final

import anyio
import anyio.abc
import anyio.to_thread

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

__all__ = ("DRAIN_SECONDS", "MAX_BACKLOG", "MAX_CONCURRENT_REQUESTS", "Connection", "serve_stdio")

#: Requests served at once. Requests beyond it wait in a backlog of MAX_BACKLOG; when that is
#: full too, the transport stops reading stdin, so a flood waits in the pipe (back-pressure)
#: instead of in our memory. (A legacy client with more than both of these requests waiting
#: on its own answers would stall itself; no real host comes near.)
MAX_CONCURRENT_REQUESTS: Final = 64
MAX_BACKLOG: Final = 4 * MAX_CONCURRENT_REQUESTS
#: After stdin closes, in-flight requests get this long to finish before they are abandoned.
DRAIN_SECONDS: Final = 5.0
#: At shutdown, how long a message already being written may take to reach the client.
WRITE_GRACE_SECONDS: Final = 2.0
_READ_CHUNK: Final = 256 * 1024

_logger = logging.getLogger("mrtr_runtime")


class _Output:
    """Writes whole lines to the wire, one message at a time, in order.

    A message once begun is always finished (the write is shielded from cancellation):
    cutting one off mid-line would glue the next message onto it and corrupt the stream.
    """

    def __init__(self, fd: int, on_closed: Callable[[], None]) -> None:
        self._fd = fd
        self._lock = anyio.Lock()
        self._nonblocking = _try_nonblocking(fd)
        self._on_closed = on_closed
        self.closed = False
        self._give_up_at = math.inf

    async def write(self, data: bytes) -> None:
        async with self._lock:
            if self.closed:
                return
            with anyio.CancelScope(shield=True):
                try:
                    await self._write_all(memoryview(data))
                except (BrokenPipeError, ConnectionResetError):
                    # The client closed its end: nobody is left to answer.
                    _logger.info("stdout closed by the client; stopping")
                    self.closed = True
                    self._on_closed()

    def shutting_down(self) -> None:
        """A message being written still gets WRITE_GRACE_SECONDS to reach a reading client;
        a client that stopped reading no longer holds the process after that."""
        self._give_up_at = anyio.current_time() + WRITE_GRACE_SECONDS

    async def _write_all(self, view: memoryview) -> None:
        while view and anyio.current_time() < self._give_up_at:
            if self._nonblocking:
                try:
                    written = os.write(self._fd, view)
                except BlockingIOError:
                    # The client is not reading: wait, holding the lock (back-pressure).
                    with anyio.move_on_after(0.1):
                        await anyio.wait_writable(self._fd)
                    continue
            else:
                written = await anyio.to_thread.run_sync(os.write, self._fd, view)
            view = view[written:]


def _try_nonblocking(fd: int) -> bool:
    if sys.platform == "win32":
        return False
    try:
        os.set_blocking(fd, False)
    except OSError:
        return False
    return True


class _LineReader:
    """Splits the input byte stream into lines, discarding any line over MAX_LINE_BYTES."""

    def __init__(self, fd: int) -> None:
        self._fd = fd
        self._buffer = bytearray()
        self._discarding = False
        self._nonblocking = _try_nonblocking(fd)

    async def read_lines(self) -> list[bytes | None] | None:
        """The next complete lines (None marks an oversized one), or None at end of input."""
        while True:
            chunk = await self._read()
            if not chunk:
                return None
            lines = self._feed(chunk)
            if lines:
                return lines

    async def _read(self) -> bytes:
        if not self._nonblocking:
            return await anyio.to_thread.run_sync(os.read, self._fd, _READ_CHUNK)
        while True:
            try:
                return os.read(self._fd, _READ_CHUNK)
            except BlockingIOError:
                await anyio.wait_readable(self._fd)

    def _feed(self, chunk: bytes) -> list[bytes | None]:
        lines: list[bytes | None] = []
        start = 0
        while True:
            end = chunk.find(b"\n", start)
            if end < 0:
                break
            if self._discarding:
                self._discarding = False
            else:
                self._buffer += chunk[start:end]
                line = bytes(self._buffer).rstrip(b"\r")
                self._buffer.clear()
                if len(line) > MAX_LINE_BYTES:
                    lines.append(None)
                elif line.strip():
                    lines.append(line)
            start = end + 1
        if not self._discarding:
            self._buffer += chunk[start:]
            if len(self._buffer) > MAX_LINE_BYTES:
                self._buffer.clear()
                self._discarding = True
                lines.append(None)
        return lines


@dataclass
class Connection:
    """One client on one pair of pipes: in-flight requests, and server-to-client requests."""

    server: Server
    output: _Output
    task_group: anyio.abc.TaskGroup
    session: Session = field(default_factory=Session)
    in_flight: dict[RequestId, anyio.CancelScope] = field(default_factory=dict)
    #: Requests read while every slot was busy, served in arrival order as slots free up.
    backlog: dict[RequestId, Request] = field(default_factory=dict)
    backlog_has_room: anyio.Event = field(default_factory=anyio.Event)
    #: Set whenever the last request finishes; shutdown waits on it.
    idle: anyio.Event = field(default_factory=anyio.Event)
    awaiting_client: dict[RequestId, tuple[anyio.Event, list[Response]]] = field(
        default_factory=dict
    )
    _ids: Callable[[], int] = field(default_factory=lambda: count(1).__next__)

    def __post_init__(self) -> None:
        self.idle.set()

    # -- the Peer the router sees ---------------------------------------------------------

    async def notify(self, method: str, params: dict[str, Any]) -> None:
        await self.output.write(encode({"jsonrpc": "2.0", "method": method, "params": params}))

    async def request(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        request_id = f"server-{self._ids()}"
        arrived = anyio.Event()
        holder: list[Response] = []
        self.awaiting_client[request_id] = (arrived, holder)
        try:
            await self.output.write(
                encode({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params})
            )
            await arrived.wait()
        finally:
            del self.awaiting_client[request_id]
        response = holder[0]
        if response.error is not None or response.result is None:
            error = response.error or {}
            code = error.get("code")
            raise ClientRequestFailed(
                code if isinstance(code, int) else INVALID_REQUEST,
                str(error.get("message", "no result")),
            )
        return response.result

    # -- incoming ---------------------------------------------------------------------

    async def receive(self, line: bytes | None) -> None:
        """Handle one line. Never waits for a request to finish, so that responses and
        cancellations keep flowing while every slot is busy (a legacy request may be
        waiting for exactly the response that is next on the wire)."""
        if line is None:
            await self._send(
                error_response(None, INVALID_REQUEST, f"Message over {MAX_LINE_BYTES} bytes")
            )
            return
        try:
            message = parse_line(line)
        except InvalidMessage as error:
            await self._send(error_response(error.request_id, error.code, error.message))
            return
        if isinstance(message, Request):
            if message.id in self.in_flight or message.id in self.backlog:
                await self._send(
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

    async def wait_for_backlog_room(self) -> None:
        """Back-pressure: stop reading while the backlog is full."""
        while len(self.backlog) >= MAX_BACKLOG:
            self.backlog_has_room = anyio.Event()
            await self.backlog_has_room.wait()

    def _start(self, request: Request) -> None:
        if self.idle.is_set():
            self.idle = anyio.Event()
        scope = anyio.CancelScope()
        self.in_flight[request.id] = scope
        self.task_group.start_soon(self._serve, request, scope)

    async def _serve(self, request: Request, scope: anyio.CancelScope) -> None:
        try:
            with scope:
                response = await self.server.handle_request(request, self.session, self)
                try:
                    data = encode(response)
                except (TypeError, ValueError, RecursionError):
                    _logger.exception("response to %s is not JSON", request.method)
                    data = encode(error_response(request.id, INTERNAL_ERROR, "Internal error"))
                # stdio: after a cancellation the server "MUST NOT send any further messages"
                # for that request -- a cancel that lands while we were finishing wins.
                if not scope.cancel_called:
                    await self.output.write(data)
        finally:
            del self.in_flight[request.id]
            if self.backlog:
                self._start(self.backlog.pop(next(iter(self.backlog))))
                self.backlog_has_room.set()
            elif not self.in_flight:
                self.idle.set()

    def _on_notification(self, notification: Notification) -> None:
        request_id = self.server.handle_notification(notification)
        if request_id is None:
            return
        if request_id in self.in_flight:
            self.in_flight[request_id].cancel()
        elif self.backlog.pop(request_id, None) is not None:
            self.backlog_has_room.set()

    def _on_response(self, response: Response) -> None:
        waiting = self.awaiting_client.get(response.id) if response.id is not None else None
        if waiting is None:
            _logger.debug("ignored a response to no request of ours (id %r)", response.id)
            return
        arrived, holder = waiting
        holder.append(response)
        arrived.set()

    async def _send(self, message: JSONObject) -> None:
        await self.output.write(encode(message))


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


async def _serve_pipes(server: Server, wire_in: int, wire_out: int) -> None:
    async with anyio.create_task_group() as task_group:
        output = _Output(wire_out, on_closed=task_group.cancel_scope.cancel)
        connection = Connection(server, output, task_group)
        task_group.start_soon(_exit_on_signal, task_group.cancel_scope, output)
        reader = _LineReader(wire_in)
        while (lines := await reader.read_lines()) is not None:
            for line in lines:
                await connection.receive(line)
            await connection.wait_for_backlog_room()
        # stdin closed: let in-flight work finish, within a bound, then stop.
        with anyio.move_on_after(DRAIN_SECONDS):
            await connection.idle.wait()
        unfinished = len(connection.in_flight) + len(connection.backlog)
        if unfinished:
            _logger.warning("stdin closed; abandoning %d unfinished request(s)", unfinished)
        output.shutting_down()
        task_group.cancel_scope.cancel()


async def _exit_on_signal(scope: anyio.CancelScope, output: _Output) -> None:
    try:
        with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
            async for _ in signals:
                output.shutting_down()
                scope.cancel()
                return
    except NotImplementedError:  # Windows: the default handlers end the process
        await anyio.sleep_forever()


def serve_stdio(server: Server) -> None:
    """Serve `server` on this process's stdin/stdout until stdin closes or a signal arrives."""
    configure_logging()
    if sys.stdin.isatty():
        _logger.info("waiting for JSON-RPC on stdin; an MCP host normally starts this server")
    wire_in, wire_out = _claim_stdio()
    anyio.run(_serve_pipes, server, wire_in, wire_out)
    main = threading.main_thread()
    if any(t.is_alive() and not t.daemon and t is not main for t in threading.enumerate()):
        # A blocking tool abandoned at shutdown still holds a worker thread, and Python would
        # wait for it at exit: the shutdown bound we promise must not depend on a tool.
        logging.shutdown()
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(0)
