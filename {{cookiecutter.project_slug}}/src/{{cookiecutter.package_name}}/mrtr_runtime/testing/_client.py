"""The client side: a session with a spawned stdio server, or with a Streamable HTTP endpoint.

This is what the generated project's end-to-end tests drive the real server with, and a
small, dependable client for scripts. Its callbacks, ``call_tool`` / ``get_prompt`` /
``read_resource`` and the MRTR retry loop are shared with `MemoryClient` (`_rounds`);
the framing, encoder and validator are the server's own (`_jsonrpc`).

- ``ClientSession.spawn(...)``: newline-delimited JSON-RPC over a child's stdin/stdout
  (2026-07-28 basic/transports/stdio). One task reads stdout and routes each line; one task
  drains stderr so the child never blocks on a full pipe. Anything on stdout that is not a
  valid JSON-RPC message is recorded in ``protocol_violations`` (the server "MUST NOT write
  anything to its stdout that is not a valid MCP message"), as is a 2026-07-28 result
  without ``resultType`` and a request from a 2026-07-28 server.
- ``ClientSession.connect(url, ...)``: 2026-07-28 Streamable HTTP, in a project generated with
  the HTTP wing: `_http_session.HttpClientSession`, the same session over POSTs (see there).

Both retry a request once with another version when the server answers -32022 and lists one
this client speaks (basic/versioning "Protocol Version Negotiation").

Uses anyio only, so it runs on any anyio backend.
"""

from __future__ import annotations

import logging
import math
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager, suppress
from dataclasses import dataclass, field
from os import PathLike
from typing import Any, Literal, TypeVar, cast

import anyio
from anyio.abc import ByteReceiveStream, ByteSendStream, Process, TaskGroup
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

from .._errors import MrtrError
from .._jsonrpc import (
    INTERNAL_ERROR,
    METHOD_NOT_FOUND,
    UNSUPPORTED_PROTOCOL_VERSION,
    InvalidMessage,
    LineSplitter,
    Request,
    RequestId,
    Response,
    RpcError,
    encode,
    error_response,
    message_problem,
    parse_json,
    parse_message,
    success_response,
)
from .._wings import load_wing
from .._wire import (
    LEGACY_VERSIONS,
    META_CLIENT_CAPABILITIES,
    META_CLIENT_INFO,
    META_PROTOCOL_VERSION,
    MODERN_VERSIONS,
)
from ._rounds import (
    Callback,
    Callbacks,
    InvalidServerResponse,
    RoundsClient,
    declared_capabilities,
    retry_version,
)

__all__ = ("ClientSession", "NotificationHandler", "SessionClosed")

logger = logging.getLogger(__name__)

DEFAULT_CLIENT_INFO: Mapping[str, str] = {"name": "mrtr-runtime-client", "version": "1.0"}


_MAX_LINE_BYTES = 16 * 1024 * 1024  # a longer stdout line is a violation; its bytes are dropped
_STDERR_KEEP_BYTES = 1024 * 1024  # stderr_text() keeps the newest MiB
_KILL_GRACE_SECONDS = 1.0  # after terminate() and again after kill()
VIOLATION_EXCERPT = 200

Era = Literal["modern", "legacy"]
_S = TypeVar("_S", ByteSendStream, ByteReceiveStream)
NotificationHandler = Callable[[dict[str, Any]], Awaitable[None]]


class SessionClosed(MrtrError):
    """The server's stdout ended (it exited or closed it) or its stdin is closed; over HTTP,
    the connection failed or broke, or the server's response was not one this client reads."""


@dataclass
class _Pending:
    done: anyio.Event = field(default_factory=anyio.Event)
    message: dict[str, Any] | None = None
    failure: Exception | None = None

    def resolve(self, message: dict[str, Any] | None, failure: Exception | None) -> None:
        if not self.done.is_set():
            self.message, self.failure = message, failure
            self.done.set()


class ClientSession(RoundsClient):
    """A JSON-RPC session with one spawned stdio server. Create it with ``spawn``."""

    def __init__(
        self,
        process: Process | None,
        *,
        era: Era,
        capabilities: Mapping[str, Any],
        client_info: Mapping[str, Any],
        callbacks: Callbacks,
        notification_handler: NotificationHandler | None,
        close_timeout: float,
        protocol_versions: Sequence[str] | None = None,
    ) -> None:
        self._process = process
        self.era: Era = era
        self.capabilities: dict[str, Any] = dict(capabilities)
        self.client_info: dict[str, Any] = dict(client_info)
        default = MODERN_VERSIONS if era == "modern" else LEGACY_VERSIONS
        #: The versions this client speaks in its era, newest first; the first is sent first.
        self.protocol_versions: tuple[str, ...] = tuple(protocol_versions or default)
        if not all(isinstance(v, str) and v for v in self.protocol_versions):
            raise ValueError("protocol_versions must be non-empty strings")
        #: The version requests carry: the first of protocol_versions, until a -32022 says
        #: the server speaks another one of them (then that one, for the rest of the session).
        self.protocol_version = self.protocol_versions[0]
        self.initialize_result: dict[str, Any] | None = None
        self.notifications: list[dict[str, Any]] = []
        self.protocol_violations: list[str] = []
        # Error responses with "id": null (e.g. the server's answer to an unparseable line).
        self.unmatched_responses: list[dict[str, Any]] = []
        self.callbacks = callbacks
        self._callback_failures: list[Exception] = []
        self._notification_handler = notification_handler
        self._close_timeout = close_timeout
        self._next_id = 1
        self._pending: dict[int, _Pending] = {}
        self._abandoned: set[int] = set()  # ids we timed out on or cancelled
        self._write_lock = anyio.Lock()
        self._stdin_closed = False
        self._stdout_done = anyio.Event()
        self._stderr_done = anyio.Event()
        self._notifications_done = anyio.Event()
        self._stderr = bytearray()
        self._lines_read = 0
        self._task_group: TaskGroup | None = None
        self._notify_send: MemoryObjectSendStream[dict[str, Any]]
        self._notify_receive: MemoryObjectReceiveStream[dict[str, Any]]
        self._notify_send, self._notify_receive = anyio.create_memory_object_stream[dict[str, Any]](
            math.inf
        )

    # -- lifecycle ---------------------------------------------------------------------------

    @classmethod
    @asynccontextmanager
    async def spawn(
        cls,
        command: Sequence[str],
        *,
        env: Mapping[str, str] | None = None,
        cwd: str | PathLike[str] | None = None,
        era: Era = "modern",
        capabilities: Mapping[str, Any] | None = None,
        elicitation: Callback | None = None,
        sampling: Callback | None = None,
        roots: Callback | None = None,
        notification_handler: NotificationHandler | None = None,
        client_info: Mapping[str, Any] = DEFAULT_CLIENT_INFO,
        close_timeout: float = 5.0,
        tasks: bool = False,
        protocol_versions: Sequence[str] | None = None,
    ) -> AsyncIterator[ClientSession]:
        """Start ``command``; on exit close its stdin and wait for it (bounded, then kill).

        ``env=None`` inherits this process's environment. The callbacks (each
        ``async (params) -> full result``) answer MRTR rounds in the modern era and the
        server's real requests in the legacy era; ``capabilities=None`` declares exactly the
        callbacks given. A legacy session sends ``initialize`` (2025-11-25) and
        ``notifications/initialized`` before the body runs. ``tasks=True`` declares the tasks
        extension too: a call answered with a task is followed to its end.
        ``protocol_versions``: the versions to offer, newest first (default: the era's).
        """
        if era not in ("modern", "legacy"):
            raise ValueError(f"era must be 'modern' or 'legacy', not {era!r}")
        callbacks = Callbacks(elicitation, sampling, roots)
        process = await anyio.open_process(list(command), env=env, cwd=cwd)
        session = cls(
            process,
            era=era,
            capabilities=declared_capabilities(callbacks, capabilities, tasks),
            client_info=client_info,
            callbacks=callbacks,
            notification_handler=notification_handler,
            close_timeout=close_timeout,
            protocol_versions=protocol_versions,
        )
        try:
            async with body_exception_as_itself(), anyio.create_task_group() as task_group:
                session._task_group = task_group
                task_group.start_soon(session._read_stdout, _stream(process.stdout))
                task_group.start_soon(session._drain_stderr, _stream(process.stderr))
                task_group.start_soon(session._deliver_notifications)
                try:
                    if era == "legacy":
                        await session._initialize()
                    yield session
                finally:
                    await session.close()
                    # Let the readers take the last bytes and the callback see the last
                    # notifications; a grandchild holding the pipes open must not keep us here.
                    with anyio.move_on_after(_KILL_GRACE_SECONDS, shield=True):
                        await session._stdout_done.wait()
                        session._notify_send.close()
                        await session._stderr_done.wait()
                        await session._notifications_done.wait()
                    task_group.cancel_scope.cancel()
        finally:
            session._notify_send.close()
            session._notify_receive.close()
            with anyio.CancelScope(shield=True):
                await process.aclose()

    @classmethod
    def connect(
        cls,
        url: str,
        *,
        token: str | None = None,
        headers: Mapping[str, str] | None = None,
        capabilities: Mapping[str, Any] | None = None,
        elicitation: Callback | None = None,
        sampling: Callback | None = None,
        roots: Callback | None = None,
        notification_handler: NotificationHandler | None = None,
        client_info: Mapping[str, Any] = DEFAULT_CLIENT_INFO,
        tasks: bool = False,
        protocol_versions: Sequence[str] | None = None,
        limits: Any = None,
    ) -> AbstractAsyncContextManager[ClientSession]:
        """A 2026-07-28 session with the Streamable HTTP endpoint at ``url``
        (``http://127.0.0.1:8000/mcp``); the same callbacks and calls as ``spawn``.

        Nothing is sent until the first request (2026-07-28 has no handshake). ``token`` is
        sent as ``Authorization: Bearer <token>``; ``headers`` are added to every POST (an
        ``Origin``, a proxy's). ``limits`` (a ``testing._http.Limits``) bound what is read of
        each response. Cancelling a request (a timeout, a cancelled task) closes its
        connection, which is how an HTTP client cancels. The 2025-11-25 era over HTTP is not
        spoken here: use ``spawn(era="legacy")`` for it. Part of the HTTP wing
        (`_http_session`): a project generated without it is told which option adds it.
        """
        wing = load_wing("http", ".testing._http_session")
        opened: AbstractAsyncContextManager[ClientSession] = wing.connect(
            url,
            token=token,
            headers=headers,
            capabilities=capabilities,
            elicitation=elicitation,
            sampling=sampling,
            roots=roots,
            notification_handler=notification_handler,
            client_info=client_info,
            tasks=tasks,
            protocol_versions=protocol_versions,
            limits=limits,
        )
        return opened

    async def close(self, bound: float | None = None) -> int | None:
        """Close stdin and wait for the server to exit; terminate, then kill, past the bound.

        2026-07-28 basic/transports/stdio: servers SHOULD exit promptly on stdin EOF. Returns
        within ``bound`` seconds (default: spawn's ``close_timeout``) plus two 1 s grace periods.
        Over HTTP there is nothing to close (each request closes its own connection): None.
        """
        if self._process is None:
            return None
        if bound is None:
            bound = self._close_timeout
        process = self._process
        with anyio.CancelScope(shield=True):
            if not self._stdin_closed:
                self._stdin_closed = True
                with suppress(anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
                    await _stream(process.stdin).aclose()
            with anyio.move_on_after(bound):
                await process.wait()
            for stop in (process.terminate, process.kill):
                if process.returncode is not None:
                    break
                logger.debug("server did not exit after stdin closed; sending %s", stop.__name__)
                with suppress(ProcessLookupError):
                    stop()
                with anyio.move_on_after(_KILL_GRACE_SECONDS):
                    await process.wait()
        return process.returncode

    @property
    def returncode(self) -> int | None:
        return self._process.returncode if self._process is not None else None

    def stderr_text(self) -> str:
        """What the server wrote to stderr so far (the newest MiB), decoded leniently."""
        return self._stderr.decode("utf-8", errors="replace")

    # -- sending -----------------------------------------------------------------------------

    async def request(
        self,
        method: str,
        params: Mapping[str, Any] | None = None,
        *,
        timeout: float | None = None,  # noqa: ASYNC109 - the contract's per-request bound
        with_meta: bool = True,
    ) -> dict[str, Any]:
        """Send a request and return its ``result``; raise RpcError for an error response.

        Modern era: ``params._meta`` gets protocolVersion, clientCapabilities and clientInfo;
        keys the caller put in ``_meta`` (a progressToken, an override) win. ``with_meta=False``
        sends the params exactly as given (for testing a server's -32602 on missing _meta).
        On timeout or cancellation the server is sent ``notifications/cancelled`` (over HTTP:
        the request's connection is closed).

        An UnsupportedProtocolVersionError (-32022) listing another version this client speaks
        is answered by sending the request once more with it, and the session keeps it
        (basic/versioning "Protocol Version Negotiation"); with none in common, RpcError -32022
        names both lists. A version the caller put in ``_meta`` is sent as it is, never retried.
        ``timeout`` bounds each of the (at most two) sendings.
        """
        tried = self.protocol_version  # what this request carries (another may change it)
        try:
            return await self._request_once(method, params, timeout, with_meta)
        except RpcError as error:
            if error.code != UNSUPPORTED_PROTOCOL_VERSION or not self._chose_version(
                method, params, with_meta
            ):
                raise
            chosen = retry_version(error, self.protocol_versions, tried)
            self.protocol_version = chosen
            logger.debug("retrying %s with protocol version %s", method, chosen)
        if self.era == "legacy":
            # 2025-11-25 basic/lifecycle: the version is initialize's protocolVersion.
            params = {**(params or {}), "protocolVersion": chosen}
        try:
            return await self._request_once(method, params, timeout, with_meta)
        except RpcError as again:
            if again.code != UNSUPPORTED_PROTOCOL_VERSION:
                raise
            # Once only: a second refusal is the error (naming both lists), never a loop.
            retry_version(again, self.protocol_versions, chosen, retried=True)
            raise  # pragma: no cover - retry_version(retried=True) always raises

    def _chose_version(
        self, method: str, params: Mapping[str, Any] | None, with_meta: bool
    ) -> bool:
        # Whether the version this request carried was this client's choice (so another may
        # be tried): the modern era's `_meta` it added, or the legacy era's initialize.
        if self.era == "legacy":
            return method == "initialize"
        caller_meta = (params or {}).get("_meta")
        return with_meta and not (
            isinstance(caller_meta, Mapping) and META_PROTOCOL_VERSION in caller_meta
        )

    async def _request_once(
        self,
        method: str,
        params: Mapping[str, Any] | None,
        timeout: float | None,  # noqa: ASYNC109 - request()'s bound, passed on
        with_meta: bool,
    ) -> dict[str, Any]:
        request_id = self._next_id
        self._next_id += 1
        body = dict(params) if params is not None else {}
        if self.era == "modern" and with_meta:
            body["_meta"] = self._request_meta(body.get("_meta"))
        message: dict[str, Any] = {
            "jsonrpc": "2.0",
            "id": request_id,
            "method": method,
            "params": body,
        }
        return await self._exchange(message, timeout)

    async def _exchange(
        self,
        message: dict[str, Any],
        timeout: float | None,  # noqa: ASYNC109 - request()'s bound, passed on
    ) -> dict[str, Any]:
        """Send one request over this session's transport; its result. stdio: a line out, then
        the response its id is routed to (`_on_response`)."""
        method = cast(str, message["method"])
        request_id = cast(int, message["id"])
        pending = _Pending()
        self._pending[request_id] = pending
        try:
            if self._stdout_done.is_set():
                raise SessionClosed(self._closed_message(method))
            with anyio.fail_after(timeout):
                await self._write(message)
                await pending.done.wait()
        except (TimeoutError, anyio.get_cancelled_exc_class()):
            if not pending.done.is_set():
                self._abandoned.add(request_id)
                await self._send_cancelled(request_id)
            raise
        finally:
            self._pending.pop(request_id, None)
        if pending.failure is not None:
            raise pending.failure
        return result_of(cast("dict[str, Any]", pending.message))

    async def notify(self, method: str, params: Mapping[str, Any] | None = None) -> None:
        message: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
        if params is not None:
            message["params"] = dict(params)
        await self._write(message)

    async def send_raw(self, line: bytes) -> None:
        """Write ``line`` to the server's stdin exactly as given (add the newline yourself)."""
        await self._write_bytes(line)

    def _request_meta(self, caller_meta: object) -> dict[str, Any]:
        meta: dict[str, Any] = {
            META_PROTOCOL_VERSION: self.protocol_version,
            META_CLIENT_CAPABILITIES: self.capabilities,
            META_CLIENT_INFO: self.client_info,
        }
        if isinstance(caller_meta, Mapping):
            meta.update(cast("Mapping[str, Any]", caller_meta))
        return meta

    async def _initialize(self) -> None:
        # 2025-11-25 basic/lifecycle: initialize, then notifications/initialized.
        result = await self.request(
            "initialize",
            {
                "protocolVersion": self.protocol_version,
                "capabilities": self.capabilities,
                "clientInfo": self.client_info,
            },
        )
        self.initialize_result = result
        version = result.get("protocolVersion")
        if isinstance(version, str):
            self.protocol_version = version
        await self.notify("notifications/initialized")

    async def _send_cancelled(self, request_id: int) -> None:
        # 2026-07-28 basic/transports/stdio: a client that gives up on a request MUST send
        # notifications/cancelled. Best effort and bounded: the pipe may be full or gone.
        with anyio.move_on_after(_KILL_GRACE_SECONDS, shield=True), suppress(SessionClosed):
            await self.notify(
                "notifications/cancelled",
                {"requestId": request_id, "reason": "client gave up waiting"},
            )

    async def _write(self, message: Mapping[str, Any]) -> None:
        await self._write_bytes(encode(dict(message)))

    async def _write_bytes(self, data: bytes) -> None:
        if self._stdin_closed or self._process is None:
            raise SessionClosed("the server's stdin is already closed")
        async with self._write_lock:
            try:
                await _stream(self._process.stdin).send(data)
            except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError) as exc:
                raise SessionClosed(self._closed_message("write")) from exc

    def _closed_message(self, what: str) -> str:
        tail = self.stderr_text()[-2000:]
        return (
            f"{what}: the server closed the connection (returncode {self.returncode}); "
            f"stderr tail: {tail!r}"
        )

    # -- receiving ---------------------------------------------------------------------------

    async def _read_stdout(self, stream: ByteReceiveStream) -> None:
        # raw: every line exactly as the server wrote it (a blank line or a CR is a violation).
        splitter = LineSplitter(_MAX_LINE_BYTES, raw=True)
        try:
            async for chunk in stream:
                for line in splitter.feed(chunk):
                    self._on_line(line)
        except (anyio.ClosedResourceError, anyio.BrokenResourceError):
            pass
        finally:
            for line in splitter.finish():
                self._lines_read += 1
                self._violation(line or b"", "unterminated line at end of output")
            self._stdout_done.set()
            for request_id, pending in self._pending.items():
                pending.resolve(None, SessionClosed(self._closed_message(f"request {request_id}")))

    async def _drain_stderr(self, stream: ByteReceiveStream) -> None:
        try:
            async for chunk in stream:
                self._stderr += chunk
                if len(self._stderr) > _STDERR_KEEP_BYTES:
                    del self._stderr[: len(self._stderr) - _STDERR_KEEP_BYTES]
        except (anyio.ClosedResourceError, anyio.BrokenResourceError):
            pass
        finally:
            self._stderr_done.set()

    def _on_line(self, line: bytes | None) -> None:
        self._lines_read += 1
        if line is None:
            self._violation(b"", f"line over {_MAX_LINE_BYTES} bytes")
            return
        try:
            raw = parse_json(line)
        except InvalidMessage:
            self._violation(line, "not JSON")
            return
        problem = message_problem(raw)
        if problem is not None:
            self._violation(line, problem)
            # Unblock a request whose answer was malformed instead of leaving it waiting.
            if isinstance(raw, dict):
                pending = self._pending.get(_as_int_id(raw.get("id")))
                if pending is not None:
                    pending.resolve(None, InvalidServerResponse(f"invalid response: {problem}"))
            return
        message = cast("dict[str, Any]", raw)
        kind = parse_message(message)
        if isinstance(kind, Response):
            self._on_response(line, message)
        elif isinstance(kind, Request):
            self._on_server_request(line, kind)
        else:
            self._on_notification(message)

    def _on_notification(self, message: dict[str, Any]) -> None:
        self.notifications.append(message)
        with suppress(anyio.BrokenResourceError, anyio.ClosedResourceError):
            self._notify_send.send_nowait(message)

    def _on_response(self, line: bytes, message: dict[str, Any]) -> None:
        request_id = message.get("id")
        if request_id is None:
            self.unmatched_responses.append(message)
            return
        if (
            self.era == "modern"
            and isinstance(message.get("result"), dict)
            and "resultType" not in cast("dict[str, Any]", message["result"])
        ):
            # 2026-07-28 basic/index: "The result MUST include a resultType field".
            self._violation(line, "result without resultType")
        numeric_id = _as_int_id(request_id)
        pending = self._pending.get(numeric_id)
        if pending is not None:
            pending.resolve(message, None)
        elif numeric_id not in self._abandoned:
            self._violation(line, "response to an id this client never sent")

    def _on_server_request(self, line: bytes, message: Request) -> None:
        if self.era == "modern":
            # 2026-07-28 basic/transports/stdio: "The server MUST NOT write JSON-RPC requests
            # to stdout". It is still answered (-32601), so the server is not left waiting.
            self._violation(line, "server-initiated request on a 2026-07-28 session")
        if self._task_group is not None:
            self._task_group.start_soon(self._answer_server_request, message)

    async def _answer_server_request(self, message: Request) -> None:
        # Legacy 2025-11-25: the server may ask us with real requests (the callbacks answer).
        request_id: RequestId = message.id
        reply: dict[str, Any]
        if self.era == "modern":
            reply = error_response(
                request_id, METHOD_NOT_FOUND, "2026-07-28 servers must not send requests"
            )
        else:
            try:
                result = await self.callbacks.answer(message.method, message.params)
                encode(result)  # a reply we cannot serialise becomes an error reply
            except RpcError as exc:
                reply = error_response(request_id, exc.code, exc.message, exc.data)
            except Exception as exc:
                # A callback's failure is the server's answer, never the session's crash;
                # call_tool & co. raise it (see RoundsClient).
                logger.debug("client callback for %s failed", message.method, exc_info=True)
                self._record_callback_failure(exc)
                reply = error_response(
                    request_id, INTERNAL_ERROR, f"client handler failed: {type(exc).__name__}"
                )
            else:
                reply = success_response(request_id, result)
        with suppress(SessionClosed, TypeError, ValueError):
            await self._write(reply)

    async def _deliver_notifications(self) -> None:
        # In arrival order, off the reader task, so a slow callback never stalls responses.
        try:
            async with self._notify_receive:
                async for message in self._notify_receive:
                    if self._notification_handler is None:
                        continue
                    try:
                        await self._notification_handler(message)
                    except Exception:
                        logger.warning("notification handler failed", exc_info=True)
        finally:
            self._notifications_done.set()

    def _violation(self, line: bytes, reason: str) -> None:
        excerpt = line[:VIOLATION_EXCERPT]
        suffix = "..." if len(line) > VIOLATION_EXCERPT else ""
        self.protocol_violations.append(
            f"stdout line {self._lines_read}: {reason}: {excerpt!r}{suffix}"
        )
        # The line may hold a token or answers: the log gets the reason only.
        logger.warning("protocol violation on server stdout line %d: %s", self._lines_read, reason)


def _stream(stream: _S | None) -> _S:
    if stream is None:  # pragma: no cover - open_process pipes all three by default
        raise SessionClosed("the server process has no pipe")
    return stream


@asynccontextmanager
async def body_exception_as_itself() -> AsyncIterator[None]:
    """Around a session's task group: its own tasks never raise, so a group holds just the
    body's exception, re-raised as itself so callers can catch what they expect."""
    try:
        yield
    except BaseExceptionGroup as group:
        if len(group.exceptions) == 1:
            raise group.exceptions[0] from None
        raise


def result_of(response: Mapping[str, Any]) -> dict[str, Any]:
    if "error" in response:
        error = cast("dict[str, Any]", response["error"])
        raise RpcError(cast(int, error["code"]), cast(str, error["message"]), error.get("data"))
    return cast("dict[str, Any]", response["result"])


def _as_int_id(value: object) -> int:
    # This client only sends integer ids; anything else can never match.
    return value if isinstance(value, int) and not isinstance(value, bool) else -1
