"""The stdio transport: the only code that touches the process's stdin and stdout.

basic/transports/stdio: newline-delimited JSON-RPC; "The server MUST NOT write anything to
its stdout that is not a valid MCP message"; logs may go to stderr; servers "SHOULD exit
promptly when their standard input is closed".

It runs on asyncio and uses its pipe transports directly: the event loop keeps both pipes
registered, every chunk that arrives is split into lines at once, and a response is handed to
the write transport whole -- so messages can never interleave or be cut, and no lock, read
syscall or registration is paid per message. Handlers still use anyio freely. An stdin the
loop cannot poll (a regular file, /dev/null) is read by a daemon thread instead, and so is every
stdin on Windows: the proactor loop reads a pipe with overlapped I/O, which the pipe a host
hands down as stdin was not opened for (`reads_in_thread`). Which reader, which writer and
which signals are functions of the platform, passed in, so each branch is tested on any system.

stdin is read all the time: responses to our own requests, cancellations and EOF are acted on
however busy the server is. Only new requests wait, in a bounded backlog; past it they are
refused with a "server busy" error. The one thing that stops reading is a client that leaves
MAX_UNREAD_OUTPUT_BYTES of our output unread.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import os
import select
import signal
import stat
import sys
import threading
from collections.abc import Callable, Iterable
from itertools import count
from types import FrameType, TracebackType
from typing import Any, Final, Literal, Protocol

from ._config import CLIENT_REQUEST_TIMEOUT_SECONDS, Settings
from ._context import MAYBE_CARRIED_OUT, SHUTDOWN_GRACE_SECONDS, Cancellation
from ._jsonrpc import (
    INTERNAL_ERROR,
    INVALID_REQUEST,
    MAX_LINE_BYTES,
    InvalidMessage,
    JSONObject,
    LineSplitter,
    Notification,
    Request,
    RequestId,
    Response,
    RpcError,
    encode,
    error_response,
    parse_line,
)
from ._legacy import client_result
from ._redact import redact_secrets
from ._review_pages import ReviewPages
from ._router import Server, Session

__all__ = (
    "BUSY_WAIT_SECONDS",
    "CLIENT_REQUEST_TIMEOUT_SECONDS",
    "DRAIN_SECONDS",
    "MAX_BACKLOG",
    "MAX_CONCURRENT_REQUESTS",
    "MAX_UNREAD_OUTPUT_BYTES",
    "SHUTDOWN_GRACE_SECONDS",
    "WRITE_GRACE_SECONDS",
    "Connection",
    "StdioKind",
    "binary_mode",
    "configure_logging",
    "install_stop_signals",
    "reads_in_thread",
    "serve_stdio",
    "stdio_kind",
    "stop_signals",
    "writes_blocking",
)

#: Requests served at once. Requests beyond it wait, in arrival order, in a backlog of
#: MAX_BACKLOG; a request that finds both full is answered at once with a "server busy" error
#: (JSON-RPC -32603, `data` giving the numbers) -- never dropped, never left unanswered.
MAX_CONCURRENT_REQUESTS: Final = 64
MAX_BACKLOG: Final = 4 * MAX_CONCURRENT_REQUESTS
#: A pipelined burst arrives faster than any tool finishes: requests read beyond the backlog
#: are held (input paused, at most one read's worth) for up to this long while slots free up,
#: and only those still without a place are refused as busy. It bounds how long stdin goes
#: unread while the server is saturated; a burst of quick calls never sees a busy error.
BUSY_WAIT_SECONDS: Final = 0.25
#: Output the client has not read yet, past which we stop reading its input until it catches
#: up (asyncio's write buffer high-water mark; reading resumes below half of it). Without it a
#: client that floods requests and never reads stdout would grow our memory without bound; a
#: merely slow reader (the pipe's own 64 KiB full) must not stop us reading cancellations.
MAX_UNREAD_OUTPUT_BYTES: Final = 32 * 1024 * 1024
#: After stdin closes, in-flight requests get this long to finish before they are abandoned;
#: after SIGTERM/SIGINT, only those past their point of no return do (the same bound as HTTP).
DRAIN_SECONDS: Final = SHUTDOWN_GRACE_SECONDS
#: At shutdown, how long responses already written may take to reach the client.
WRITE_GRACE_SECONDS: Final = 2.0
#: How much one read of stdin takes at most (asyncio's own pipe read size).
_READ_SIZE: Final = 256 * 1024

_logger = logging.getLogger("mrtr_runtime")


class Write(Protocol):
    """Hands one whole encoded message to the wire; `more_coming` lets it batch with others."""

    def __call__(self, data: bytes, more_coming: bool = False) -> None: ...


class _Call(Cancellation):
    """One request being served: its task, and the cancellation flag its handler reads."""

    __slots__ = ("method", "task")

    def __init__(self, method: str) -> None:
        super().__init__()
        self.method = method
        self.task: asyncio.Task[None] | None = None


_STOPPING: Final = (
    "Server stopping (its input was closed or it was told to stop) before this request finished"
)


def _stopping_error(request_id: RequestId, *, committed: bool) -> JSONObject:
    # Truthful either way: a request cancelled before its point of no return did nothing; one
    # past it may have (a deploy executing), and saying "not completed" would invite a retry
    # on false premises.
    outcome = MAYBE_CARRIED_OUT if committed else "it was not completed"
    return error_response(request_id, INTERNAL_ERROR, f"{_STOPPING}; {outcome}")


def _busy_error(request_id: RequestId, running: int, queued: int) -> JSONObject:
    # -32603 rather than a code of its own: -32000..-32099 are reserved by the MCP spec, and a
    # client that retries on "Internal error" does the right thing here too.
    return error_response(
        request_id,
        INTERNAL_ERROR,
        f"Server busy: {running} requests running and {queued} queued; retry later",
        {"running": running, "queued": queued},
    )


class Connection:
    """One client on one pair of pipes: in-flight requests, and server-to-client requests.

    `feed` is called with whatever bytes arrived; `write` is given whole encoded messages.
    Nothing here waits on a request, so responses and cancellations keep flowing while every
    slot is busy (a legacy request may be waiting for exactly the response next on the wire).
    `flow_changed` is called when `wants_input` changes.
    """

    def __init__(
        self,
        server: Server,
        write: Write,
        *,
        flow_changed: Callable[[], None] = lambda: None,
        client_request_timeout: float = CLIENT_REQUEST_TIMEOUT_SECONDS,
    ) -> None:
        self.server = server
        self.session = Session()
        self._write = write
        self._flow_changed = flow_changed
        self._client_request_timeout = client_request_timeout
        self._splitter = LineSplitter()
        self.in_flight: dict[RequestId, _Call] = {}
        #: Requests read while every slot was busy, served in arrival order as slots free up.
        self.backlog: dict[RequestId, Request] = {}
        #: Requests read while the backlog was full too: they get BUSY_WAIT_SECONDS to find a
        #: place, with input paused meanwhile, then the busy error.
        self.held: dict[RequestId, Request] = {}
        self._busy_timer: asyncio.TimerHandle | None = None
        self.awaiting_client: dict[str, asyncio.Future[Response]] = {}
        self.idle = asyncio.Event()
        self.idle.set()
        self._ids = count(1)
        #: Called once, right after the first response is on its way.
        self.after_first_response: Callable[[], None] | None = None
        #: Set at shutdown: a request that arrives after it is answered at once, never started.
        self.stopping = False

    @property
    def wants_input(self) -> bool:
        """False while requests are held waiting for a place (reading more would only add)."""
        return not self.held

    @property
    def unfinished(self) -> int:
        return len(self.in_flight) + len(self.backlog) + len(self.held)

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
            try:
                async with asyncio.timeout(self._client_request_timeout):
                    response = await answer
            except TimeoutError:
                reason = f"no answer within {self._client_request_timeout:g} s"
                _logger.warning("the client gave %s to %s (%s)", reason, method, request_id)
                self._cancel_client_request(request_id, reason)
                raise RpcError(INTERNAL_ERROR, reason) from None
            except asyncio.CancelledError:
                # The call that asked was cancelled (by the client, or at shutdown): the
                # question is moot, so tell the client to stop asking the user.
                self._cancel_client_request(request_id, "the request that needed it was cancelled")
                raise
        finally:
            del self.awaiting_client[request_id]
        return client_result(response)

    def _cancel_client_request(self, request_id: str, reason: str) -> None:
        # basic/utilities/cancellation: either side may cancel a request it sent; a response
        # that still arrives is ignored (`_on_response`).
        self._send(
            {
                "jsonrpc": "2.0",
                "method": "notifications/cancelled",
                "params": {"requestId": request_id, "reason": reason},
            }
        )

    # -- incoming ---------------------------------------------------------------------

    def feed(self, data: bytes) -> None:
        for line in self._splitter.feed(data):
            self.receive(line)

    def feed_eof(self) -> None:
        """stdin ended: serve a last line that had no newline after it."""
        for line in self._splitter.finish():
            self.receive(line)

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
            request_id = message.id
            if (
                request_id in self.in_flight
                or request_id in self.backlog
                or request_id in self.held
            ):
                self._send(
                    error_response(request_id, INVALID_REQUEST, "Request id is already in use")
                )
            elif self.stopping:
                self._send(_stopping_error(request_id, committed=False))
            elif len(self.in_flight) < MAX_CONCURRENT_REQUESTS:
                self._start(message)
            elif len(self.backlog) < MAX_BACKLOG:
                self.backlog[request_id] = message
            else:
                self._hold(message)
        elif isinstance(message, Notification):
            self._on_notification(message)
        else:
            self._on_response(message)

    def _start(self, request: Request) -> None:
        self.idle.clear()
        call = _Call(request.method)
        call.task = asyncio.get_running_loop().create_task(self._serve(request, call))
        self.in_flight[request.id] = call
        call.task.add_done_callback(lambda _: self._finished(request.id))

    async def _serve(self, request: Request, call: _Call) -> None:
        # `reply`, not `handle_request`: one coroutine less per request on the hot path.
        response, _ = await self.server.reply(request, self.session, self, call)
        if call.cancelled:
            # basic/utilities/cancellation: after a cancellation the server "MUST NOT send any
            # further messages" for that request. A handler in a worker thread can finish after
            # the cancel arrived; its answer is dropped here.
            return
        try:
            data = encode(response)
        except (TypeError, ValueError, RecursionError):
            _logger.exception("response to %s is not JSON", request.method)
            data = encode(error_response(request.id, INTERNAL_ERROR, "Internal error"))
        self._write(data, len(self.in_flight) > 1)
        if self.after_first_response is not None:
            asyncio.get_running_loop().call_soon(self.after_first_response)
            self.after_first_response = None

    def _finished(self, request_id: RequestId) -> None:
        del self.in_flight[request_id]
        if self.backlog:
            request_id = next(iter(self.backlog))
            self._start(self.backlog.pop(request_id))
            if self.held:
                self._admit()
        elif not self.in_flight:
            self.idle.set()

    def _hold(self, request: Request) -> None:
        self.held[request.id] = request
        if self._busy_timer is None:
            self._busy_timer = asyncio.get_running_loop().call_later(
                BUSY_WAIT_SECONDS, self._refuse_held
            )
            self._flow_changed()

    def _admit(self) -> None:
        """Move held requests into the backlog while it has room, oldest first."""
        while self.held and len(self.backlog) < MAX_BACKLOG:
            request_id = next(iter(self.held))
            self.backlog[request_id] = self.held.pop(request_id)
        if not self.held and self._busy_timer is not None:
            self._busy_timer.cancel()
            self._busy_timer = None
            self._flow_changed()

    def _cancel_busy_timer(self) -> None:
        if self._busy_timer is not None:
            self._busy_timer.cancel()
            self._busy_timer = None

    def _refuse_held(self) -> None:
        self._busy_timer = None
        running, queued = len(self.in_flight), len(self.backlog)
        if self.held:
            _logger.warning(
                "server busy: refused %d request(s) (%d running, %d queued)",
                len(self.held),
                running,
                queued,
            )
        for request_id in self.held:
            self._send(_busy_error(request_id, running, queued))
        self.held.clear()
        self._flow_changed()

    def _on_notification(self, notification: Notification) -> None:
        request_id = self.server.handle_notification(notification)
        if request_id is None:
            return
        call = self.in_flight.get(request_id)
        if call is not None:
            # The flag: a handler in a worker thread sees it even though the task's
            # cancellation cannot reach it, and `_serve` then writes nothing.
            call.cancel_running(call.task)
        elif self.backlog.pop(request_id, None) is not None:
            if self.held:
                self._admit()
        elif self.held.pop(request_id, None) is not None and not self.held:
            self._admit()

    def _on_response(self, response: Response) -> None:
        waiting = self.awaiting_client.get(response.id) if isinstance(response.id, str) else None
        if waiting is None or waiting.done():
            _logger.debug("ignored a response to no request of ours (id %r)", response.id)
            return
        waiting.set_result(response)

    def _send(self, message: JSONObject) -> None:
        self._write(encode(message))

    def stop_uncommitted(self) -> set[asyncio.Task[None]]:
        """Stop every request not past its point of no return, answering each; the tasks of
        those past it, which are left to finish (and send their own result)."""
        self.stopping = True
        for request_id in [*self.backlog, *self.held]:
            self._send(_stopping_error(request_id, committed=False))
        self.backlog.clear()
        self.held.clear()
        self._cancel_busy_timer()
        finishing: set[asyncio.Task[None]] = set()
        for request_id, call in list(self.in_flight.items()):
            if call.cancelled:
                continue  # cancelled by the client: nothing more is sent for it
            if call.cancel_unless_committed():
                self._send(_stopping_error(request_id, committed=False))
                if call.task is not None:
                    call.task.cancel()
            elif call.task is not None:
                finishing.add(call.task)
        return finishing

    def abandon_all(self) -> None:
        """Answer every request still open with an error saying the server is stopping.

        Each request is cancelled here unless its handler passed its point of no return; the
        answer says which: not completed, or may have been carried out.
        """
        self.stopping = True
        for request_id in [*self.backlog, *self.held]:
            self._send(_stopping_error(request_id, committed=False))
        for request_id, call in self.in_flight.items():
            if call.cancelled:
                continue  # cancelled by the client: nothing more is sent for it
            committed = not call.cancel_unless_committed()
            self._send(_stopping_error(request_id, committed=committed))
        self.cancel_all()

    def cancel_all(self) -> None:
        self.backlog.clear()
        self.held.clear()
        self._cancel_busy_timer()
        for call in list(self.in_flight.values()):
            call.cancel()
            if call.task is not None:
                call.task.cancel()


class _Input(Protocol):
    """What flow control needs of a reader: asyncio's ReadTransport, or `_ThreadReader`."""

    def pause_reading(self) -> None: ...
    def resume_reading(self) -> None: ...
    def close(self) -> None: ...


class _Reader(asyncio.Protocol):
    def __init__(self, connection: Connection, finished: asyncio.Event) -> None:
        self._connection = connection
        self._finished = finished

    def data_received(self, data: bytes) -> None:
        self._connection.feed(data)

    def eof_received(self) -> bool | None:
        self._connection.feed_eof()
        self._finished.set()
        return None

    def connection_lost(self, exc: Exception | None) -> None:
        self._finished.set()


class _ThreadReader:
    """Reads an stdin the event loop cannot poll (a regular file, /dev/null, most devices).

    A daemon thread, not the loop's executor: asyncio.run joins the executor's threads at
    exit, and a read blocked on a device would then hold the process past its shutdown bound.
    Each chunk is handed to the loop and the next read waits until it has been fed, so at
    most a couple of chunks are ever in memory and pausing works as with a pipe.
    """

    def __init__(
        self,
        loop: asyncio.AbstractEventLoop,
        fd: int,
        connection: Connection,
        finished: asyncio.Event,
    ) -> None:
        self._loop = loop
        self._fd = fd
        self._connection = connection
        self._finished = finished
        self._go = threading.Event()
        self._go.set()
        self._reading = True
        self._closed = False
        threading.Thread(target=self._run, name="mrtr-stdin", daemon=True).start()

    def _run(self) -> None:
        _set_blocking(self._fd)
        while True:
            self._go.wait()
            self._go.clear()
            try:
                chunk = os.read(self._fd, _READ_SIZE)
            except OSError as error:
                _logger.info("stdin could not be read (%s); treating it as closed", error)
                chunk = b""
            try:
                self._loop.call_soon_threadsafe(self._deliver, chunk)
            except RuntimeError:  # the loop is closed: the server has stopped
                return
            if not chunk:
                return

    def _deliver(self, chunk: bytes) -> None:
        if self._closed:
            return
        if chunk:
            self._connection.feed(chunk)
            if self._reading:
                self._go.set()
        else:
            self._connection.feed_eof()
            self._finished.set()

    def pause_reading(self) -> None:
        self._reading = False

    def resume_reading(self) -> None:
        self._reading = True
        self._go.set()

    def close(self) -> None:
        self._closed = True
        self._reading = False


class _Writer(asyncio.Protocol):
    """Flow control for stdout: set when the client leaves MAX_UNREAD_OUTPUT_BYTES unread."""

    def __init__(self, stop: asyncio.Event) -> None:
        self._stop = stop
        self.paused = False
        self.closing = False
        self.flow_changed: Callable[[], None] = lambda: None

    def pause_writing(self) -> None:
        _logger.warning(
            "the client has left %d MiB of output unread; reading no more input until it reads",
            MAX_UNREAD_OUTPUT_BYTES // (1024 * 1024),
        )
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


def _claim_stdio(*, platform: str = sys.platform) -> tuple[int, int]:
    """Private copies of the real stdin/stdout; fds 0 and 1 then point away from the wire.

    A stray print() -- ours, a library's, a child process's -- lands on stderr instead of
    corrupting the protocol, and no child can read our requests off stdin.
    """
    sys.stdout.flush()
    wire_in = os.dup(0)
    wire_out = os.dup(1)
    binary_mode((wire_in, wire_out), platform=platform)
    os.dup2(2, 1)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    return wire_in, wire_out


#: The C runtime's _O_BINARY (fcntl.h of the Windows SDK); `os.O_BINARY` exists only on Windows.
_O_BINARY: Final = 0x8000


def binary_mode(
    fds: Iterable[int],
    *,
    platform: str = sys.platform,
    setmode: Callable[[int, int], object] | None = None,
) -> None:
    """Put the wire's descriptors in binary mode on Windows; nothing elsewhere.

    basic/transports/stdio: messages are delimited by newlines. A descriptor in the Windows C
    runtime's text mode would write each b"\n" as b"\r\n" and read b"\x1a" as end of file;
    Python starts with fds 0-2 binary, but the wire must not depend on who started it how.
    `setmode` is msvcrt.setmode unless given (tests pass their own).
    """
    if platform != "win32":
        return
    if setmode is None:
        import msvcrt  # Windows only, hence here

        setmode = msvcrt.setmode  # type: ignore[attr-defined,unused-ignore]
    for fd in fds:
        setmode(fd, getattr(os, "O_BINARY", _O_BINARY))


class _RedactingFormatter(logging.Formatter):
    """Formats as usual, then redacts the whole text: message, arguments, exception and its
    traceback, stack_info. A library's exception of any class can quote a response body or
    the signed request, so nothing about the record decides what is safe."""

    def format(self, record: logging.LogRecord) -> str:
        return redact_secrets(super().format(record))


def _log_uncaught(
    exc_type: type[BaseException], exc: BaseException, tb: TracebackType | None
) -> None:
    _logger.critical("Uncaught exception", exc_info=(exc_type, exc, tb))


def _log_uncaught_in_thread(args: threading.ExceptHookArgs) -> None:
    if args.exc_type is SystemExit:  # what the default hook ignores too
        return
    name = args.thread.name if args.thread is not None else "?"
    exc = args.exc_value if args.exc_value is not None else args.exc_type()
    _logger.critical(
        "Uncaught exception in thread %s", name, exc_info=(args.exc_type, exc, args.exc_traceback)
    )


def _log_unraisable(unraisable: sys.UnraisableHookArgs) -> None:
    exc = unraisable.exc_value if unraisable.exc_value is not None else unraisable.exc_type()
    where = unraisable.err_msg or "Exception ignored in"
    _logger.error(
        "%s: %r",
        where,
        unraisable.object,
        exc_info=(unraisable.exc_type, exc, unraisable.exc_traceback),
    )


def configure_logging(settings: Settings | None = None) -> None:
    """Logs to stderr (never stdout), at `settings.log_level` (MRTR_LOG_LEVEL, default INFO;
    the environment's when no settings are given), secrets redacted.

    Exceptions nobody caught (in the main thread, in other threads, in finalizers) are written
    by hooks of the interpreter's that bypass logging; they are routed through it here, so
    their tracebacks are redacted like every other line.
    """
    if settings is None:
        settings = Settings.from_environment(os.environ)
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(_RedactingFormatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    logging.basicConfig(handlers=[handler], level=settings.log_level)
    sys.excepthook = _log_uncaught
    threading.excepthook = _log_uncaught_in_thread
    sys.unraisablehook = _log_unraisable


#: What a standard stream is: a pipe, a socket, a terminal, a regular file, another device
#: (/dev/null, NUL), or nothing usable (closed, or fstat fails).
StdioKind = Literal["pipe", "socket", "tty", "file", "device", "closed"]
#: The kinds asyncio's pipe transports can wait on with a selector (epoll, kqueue).
_POLLABLE: Final = frozenset({"pipe", "socket", "tty"})


def stdio_kind(fd: int) -> StdioKind:
    """What `fd` is, from fstat (on Windows Python maps a pipe to S_IFIFO, a console S_IFCHR)."""
    try:
        mode = os.fstat(fd).st_mode
    except OSError:
        return "closed"
    if stat.S_ISFIFO(mode):
        return "pipe"
    if stat.S_ISSOCK(mode):
        return "socket"
    if stat.S_ISREG(mode):
        return "file"
    if stat.S_ISCHR(mode) and os.isatty(fd):
        return "tty"
    return "device"


def reads_in_thread(platform: str, kind: StdioKind) -> bool:
    """Whether stdin is read by a thread (`_ThreadReader`) rather than by the event loop.

    Windows: always. Its proactor loop reads a pipe with overlapped ReadFile on an I/O
    completion port, which needs a handle opened for overlapped I/O; the anonymous pipe a host
    hands down as stdin is not one, and a console is no pipe at all. Elsewhere: a pipe, a
    socket or a terminal is watched by the loop; a regular file or a device (/dev/null)
    cannot be (epoll refuses them, and asyncio only finds out inside the loop, where nothing
    can fall back any more), so a thread reads those too.
    """
    return platform == "win32" or kind not in _POLLABLE


def writes_blocking(platform: str, kind: StdioKind, *, shared_with_input: bool) -> bool:
    """Whether stdout gets plain blocking writes rather than asyncio's write pipe.

    Windows: always, for the reason `reads_in_thread` gives (a write blocks only while the
    host's pipe buffer is full, and the thread reader stops reading meanwhile: memory stays
    bounded). A regular file or a device: a write never waits on a reader. One socket for both
    directions: asyncio's write pipe would watch it for reads and take the first request for
    the client hanging up.
    """
    return platform == "win32" or shared_with_input or kind not in _POLLABLE


def _set_blocking(fd: int) -> None:
    # os.set_blocking: Unix, and Windows pipes only from Python 3.12; on 3.11 Windows it is
    # missing, and a Windows descriptor is blocking unless made otherwise anyway.
    set_blocking = getattr(os, "set_blocking", None)
    if set_blocking is not None:
        with contextlib.suppress(OSError):
            set_blocking(fd, True)


def _blocking_writer(fd: int) -> Write:
    _set_blocking(fd)

    def write_blocking(data: bytes, more_coming: bool = False) -> None:
        view = memoryview(data)
        try:
            while view:
                try:
                    view = view[os.write(fd, view) :]
                except BlockingIOError:
                    # A socket shared with stdin is non-blocking (the reader set it so):
                    # wait until it takes more instead of dropping the rest of the message.
                    select.select([], [fd], [], 1.0)
        except OSError as error:
            _logger.debug("stdout write failed: %s", error)

    return write_blocking


def _same_socket(first: int, second: int) -> bool:
    """Whether two descriptors are one socket (inetd, socat EXEC: stdin and stdout alike)."""
    try:
        one, other = os.fstat(first), os.fstat(second)
    except OSError:
        return False
    return stat.S_ISSOCK(one.st_mode) and (one.st_dev, one.st_ino) == (other.st_dev, other.st_ino)


async def _open_output(
    loop: asyncio.AbstractEventLoop,
    fd: int,
    stop: asyncio.Event,
    *,
    shared_with_input: bool,
    platform: str = sys.platform,
) -> tuple[Write, _Writer, asyncio.WriteTransport | None]:
    writer = _Writer(stop)
    if writes_blocking(platform, stdio_kind(fd), shared_with_input=shared_with_input):
        return _blocking_writer(fd), writer, None
    try:
        pipe = os.fdopen(fd, "wb", buffering=0, closefd=False)
        transport, _ = await loop.connect_write_pipe(lambda: writer, pipe)
    except (ValueError, OSError, NotImplementedError):
        return _blocking_writer(fd), writer, None
    transport.set_write_buffer_limits(
        high=MAX_UNREAD_OUTPUT_BYTES, low=MAX_UNREAD_OUTPUT_BYTES // 2
    )

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
    loop: asyncio.AbstractEventLoop,
    fd: int,
    connection: Connection,
    finished: asyncio.Event,
    *,
    platform: str = sys.platform,
) -> _Input:
    if not reads_in_thread(platform, stdio_kind(fd)):
        try:
            pipe = os.fdopen(fd, "rb", buffering=0, closefd=False)
            transport, _ = await loop.connect_read_pipe(lambda: _Reader(connection, finished), pipe)
        except (ValueError, OSError, NotImplementedError) as error:
            _logger.debug("stdin is not usable as a pipe (%s); reading it in a thread", error)
        else:
            return transport
    return _ThreadReader(loop, fd, connection, finished)


#: What stops the server: SIGTERM (what a POSIX host sends), SIGINT (Ctrl-C), and on Windows
#: SIGBREAK (Ctrl-Break; a Windows host ends a child with TerminateProcess, which no handler sees,
#: or by closing its stdin, which is end of input).
def stop_signals(platform: str = sys.platform) -> tuple[int, ...]:
    """The signals that stop the server on `platform`, those this Python defines."""
    names = ("SIGTERM", "SIGINT", "SIGBREAK") if platform == "win32" else ("SIGTERM", "SIGINT")
    return tuple(int(getattr(signal, name)) for name in names if hasattr(signal, name))


_SignalHandler = Callable[[int, FrameType | None], object]


def install_stop_signals(
    loop: asyncio.AbstractEventLoop,
    stop: Callable[[], None],
    *,
    platform: str = sys.platform,
    set_handler: Callable[[int, _SignalHandler], object] = signal.signal,
) -> Callable[[], None]:
    """Call `stop` on the loop when a stop signal arrives; returns what undoes it.

    The loop's add_signal_handler where it has one (the selector loops on POSIX). Where it has
    not (the proactor loop on Windows raises NotImplementedError; a loop outside the main
    thread RuntimeError) the process-wide signal.signal, whose handler only hands `stop` to the
    loop; where neither can be had (not the main thread), none: the server still stops at end
    of input. Never an error: a host must not lose its server over how signals work here.
    """
    undo: list[Callable[[], object]] = []
    for signum in stop_signals(platform):
        try:
            loop.add_signal_handler(signum, stop)
        except (NotImplementedError, RuntimeError, ValueError):
            pass
        else:
            undo.append(functools.partial(loop.remove_signal_handler, signum))
            continue

        def handler(_signum: int, _frame: FrameType | None) -> None:
            with contextlib.suppress(RuntimeError):  # the loop has closed: nothing left to stop
                loop.call_soon_threadsafe(stop)

        try:
            previous = set_handler(signum, handler)
        except (ValueError, OSError, RuntimeError) as error:
            _logger.debug("signal %d cannot stop the server here (%s)", signum, error)
            continue
        undo.append(functools.partial(_restore_handler, set_handler, signum, previous))

    def uninstall() -> None:
        for step in reversed(undo):
            with contextlib.suppress(ValueError, OSError, RuntimeError):
                step()

    return uninstall


def _restore_handler(
    set_handler: Callable[[int, _SignalHandler], object], signum: int, previous: object
) -> None:
    # signal.signal returns None for a handler not installed from Python: SIG_DFL stands in.
    restored: Any = signal.SIG_DFL if previous is None else previous
    set_handler(signum, restored)


async def _serve_pipes(
    server: Server,
    wire_in: int,
    wire_out: int,
    *,
    client_timeout: float = CLIENT_REQUEST_TIMEOUT_SECONDS,
    platform: str = sys.platform,
) -> int:
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    stdin_done = asyncio.Event()
    uninstall_signals = install_stop_signals(loop, stop.set, platform=platform)
    # A stdio server runs on the user's machine, beside the host: its review pages can be
    # served on loopback, where the host's browser reaches them (`Context.review_page`).
    if server.review_pages is None:
        server.review_pages = ReviewPages()
    try:
        return await _serve_until_stopped(
            server, wire_in, wire_out, stop, stdin_done, client_timeout, platform
        )
    finally:
        uninstall_signals()
        server.review_pages.close()


async def _wind_down(
    server: Server, connection: Connection, stop: asyncio.Event, stopped: asyncio.Task[Any]
) -> None:
    """The stop, once stdin closed (`stop` not set: a drain) or a signal came (`stop` set):
    tasks and listens first, then the requests, each within its bound; what is still open at
    the end is answered as stopped, never left without a response."""
    # Running tasks stop and keep their records (`working`): the next server holding the
    # store resumes them. Those past their point of no return share the requests' grace.
    tasks_finishing = server.stop_tasks()
    await server.release_tasks(WRITE_GRACE_SECONDS)
    # basic/patterns/subscriptions "Graceful Closure": each open listen stream is ended first;
    # it tells its client and answers its request, so it neither holds the drain below nor
    # is abandoned with an error.
    if server.end_subscriptions() and stop.is_set():
        listens = {
            call.task
            for call in connection.in_flight.values()
            if call.method == "subscriptions/listen" and call.task is not None
        }
        if listens:
            await asyncio.wait(listens, timeout=WRITE_GRACE_SECONDS)
    if not stop.is_set():
        # stdin closed: let in-flight work finish, within a bound, then stop.
        drained = asyncio.get_running_loop().create_task(connection.idle.wait())
        await asyncio.wait(
            {drained, stopped}, timeout=DRAIN_SECONDS, return_when=asyncio.FIRST_COMPLETED
        )
        drained.cancel()
        if tasks_finishing and not stop.is_set():
            await asyncio.wait(tasks_finishing, timeout=SHUTDOWN_GRACE_SECONDS)
    else:
        # Told to stop: what has not reached its point of no return stops now; what has may
        # have changed the world already, and gets the grace to finish and say what it did.
        finishing = connection.stop_uncommitted()
        if finishing or tasks_finishing:
            await asyncio.wait(finishing | tasks_finishing, timeout=SHUTDOWN_GRACE_SECONDS)
    unfinished = connection.unfinished
    if unfinished:
        _logger.warning("stopping; abandoning %d unfinished request(s)", unfinished)
        # Nothing unanswered: each request still open is told it was stopped, and its own
        # response (should its handler finish later) is never written.
        connection.abandon_all()
    connection.cancel_all()


async def _serve_until_stopped(
    server: Server,
    wire_in: int,
    wire_out: int,
    stop: asyncio.Event,
    stdin_done: asyncio.Event,
    client_timeout: float,
    platform: str,
) -> int:
    loop = asyncio.get_running_loop()
    write, writer, out_transport = await _open_output(
        loop,
        wire_out,
        stop,
        shared_with_input=_same_socket(wire_in, wire_out),
        platform=platform,
    )
    reading: list[_Input | None] = [None]
    # Whether we asked the reader to read: kept here because asyncio's pipe transports only gained
    # `is_reading()` in later 3.11 releases (3.11.2, Debian 12's python3, raises
    # NotImplementedError), and a reader starts out reading.
    input_on = [True]

    def flow_changed() -> None:
        # Read unless requests are already held for a place, or the client has stopped
        # reading our output; responses and cancellations are read through anything else.
        reader = reading[0]
        if reader is None:
            return
        wanted = not writer.paused and connection.wants_input
        if wanted != input_on[0]:
            input_on[0] = wanted
            (reader.resume_reading if wanted else reader.pause_reading)()

    connection = Connection(
        server, write, flow_changed=flow_changed, client_request_timeout=client_timeout
    )
    writer.flow_changed = flow_changed
    broken: list[BaseException] = []
    background: list[asyncio.Task[None]] = []

    def warm_up() -> None:
        try:
            server.warm_up()
        except Exception as error:
            _logger.exception("the tools could not be loaded; stopping")
            broken.append(error)
            stop.set()
            return
        # The store's loop starts after the first answer, so start-up never waits on the
        # store: it resumes the tasks a stopped server left, and forgets expired records.
        background.append(loop.create_task(server.background()))

    connection.after_first_response = warm_up
    input_reader = reading[0] = await _open_input(
        loop, wire_in, connection, stdin_done, platform=platform
    )
    flow_changed()

    stopped = loop.create_task(stop.wait())
    eof = loop.create_task(stdin_done.wait())
    await asyncio.wait({stopped, eof}, return_when=asyncio.FIRST_COMPLETED)
    await _wind_down(server, connection, stop, stopped)
    for task in background:
        task.cancel()
    server.abandon_tasks()
    stopped.cancel()
    eof.cancel()
    if connection.in_flight:
        tasks = {call.task for call in connection.in_flight.values() if call.task is not None}
        await asyncio.wait(tasks, timeout=WRITE_GRACE_SECONDS)
    input_reader.close()
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
    settings = server.settings or Settings.from_environment(os.environ)
    configure_logging(settings)
    # Like MRTR_LOG_LEVEL, a timeout that makes no sense does not stop the server; it is
    # named in a warning on stderr and the default applies.
    if problem := settings.problems.get("MRTR_CLIENT_REQUEST_TIMEOUT_SECONDS"):
        _logger.warning("%s", problem)
    timeout = settings.client_request_timeout
    if sys.stdin.isatty():
        _logger.info("waiting for JSON-RPC on stdin; an MCP host normally starts this server")
    wire_in, wire_out = _claim_stdio()
    status = asyncio.run(_serve_pipes(server, wire_in, wire_out, client_timeout=timeout))
    main = threading.main_thread()
    if any(t.is_alive() and not t.daemon and t is not main for t in threading.enumerate()):
        # A blocking tool abandoned at shutdown still holds a worker thread, and Python would
        # wait for it at exit: the shutdown bound we promise must not depend on a tool.
        logging.shutdown()
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(status)
    return status
