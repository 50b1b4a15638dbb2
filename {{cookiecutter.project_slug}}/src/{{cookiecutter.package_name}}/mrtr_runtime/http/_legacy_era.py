"""2025-11-25 over Streamable HTTP, on the same endpoint as 2026-07-28: sessions, their
streams, and the legacy bridge's requests on them.

2026-07-28 basic/versioning "Backward Compatibility" allows a dual-era server: an `initialize`
without modern `_meta` opens a session (`_sessions`), named by `Mcp-Session-Id`; requests in it
get the legacy era, and the legacy bridge asks the client with real server-to-client requests on
the request's SSE stream, whose answers the client POSTs back. GET opens the session's own
stream, DELETE ends it, and each stream can be resumed with `Last-Event-ID`; with
`MRTR_HTTP_SSE_POLL_SECONDS` the server closes a stream's connection after that long, with
`retry`, and the client resumes it so (SSE polling). Section names below are the 2025-11-25
revision's basic/transports "Streamable HTTP".
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Callable, Mapping
from typing import Any, Protocol

from .._context import Cancellation
from .._jsonrpc import (
    INTERNAL_ERROR,
    INVALID_REQUEST,
    JSONObject,
    Notification,
    Request,
    Response,
    RpcError,
    encode,
    error_response,
)
from .._legacy import client_result
from .._router import Server
from ._responses import (
    JSON_CONTENT,
    KEEPALIVE_COMMENT,
    KEEPALIVE_SECONDS,
    RETRY_MILLISECONDS,
    RETRY_SOON,
    SSE_HEADERS,
    OpenExchange,
    Receive,
    Send,
    accepts,
    error_body,
    refuse,
    respond,
    stopping_error,
)
from ._rules import legacy_version_problem, refuse_session_get
from ._sessions import STANDALONE, EventLog, LegacySession, SessionTable, parse_event_id
from ._settings import ENV_MAX_SESSIONS, ENV_SESSIONS_PER_PRINCIPAL, HttpSettings

__all__ = ("Endpoint", "LegacyEra")

_logger = logging.getLogger("mrtr_runtime")


class Endpoint(Protocol):
    """What the 2025-11-25 era shares with the endpoint that serves both eras (`HttpApp`):
    the server, the settings, the places requests run in, the requests open, and the stop."""

    server: Server
    settings: HttpSettings
    #: Legacy calls waiting for their client's answer without holding a place.
    parked: int
    #: Requests being served (a stopping server answers each one still open).
    open_requests: dict[OpenExchange, tuple[Request, Cancellation]]

    @property
    def stopping(self) -> bool: ...

    async def take_place(self, send: Send) -> asyncio.Semaphore | None: ...

    def release_place(self, places: asyncio.Semaphore) -> None: ...

    async def retake_place(self, places: asyncio.Semaphore) -> None: ...

    async def refuse_stopping(self, send: Send) -> None: ...


class LegacyEra:
    """The 2025-11-25 era at `app`'s endpoint: its sessions, their requests and streams.

    `app` owns what both eras share (the places requests run in, the requests open, whether
    the server is stopping); this owns the session table and everything a session does.
    """

    def __init__(self, app: Endpoint, clock: Callable[[], float]) -> None:
        self.app = app
        settings = app.settings
        self.sessions = SessionTable(
            max_sessions=settings.max_sessions,
            idle_seconds=settings.session_idle_seconds,
            max_per_principal=settings.session_share(),
            clock=clock,
        )

    async def sweep(self) -> None:
        """End idle sessions even when no legacy request comes to notice them (each one also
        does): their listeners and logs go with them."""
        period = min(self.sessions.idle_seconds / 4, 60.0)
        while True:
            await asyncio.sleep(period)
            for ended in self.sessions.expire():
                self.end(ended)

    def end_all(self) -> int:
        """End every session (the server is stopping); how many there were."""
        sessions = list(self.sessions)
        for session in sessions:
            self.end(session)
        return len(sessions)

    def end_streams_soon(self) -> None:
        """The sessions' GET streams end (the server stops; nothing on them awaits an answer)."""
        for session in self.sessions:
            standalone = session.attached.get(STANDALONE)
            if standalone is not None:
                standalone.end_soon()

    def end(self, session: LegacySession) -> None:
        """End `session`: its running requests cancelled, its streams closed, its listener
        closed; its id answers 404 from now on ("Session Management" 3.)."""
        self.sessions.end(session)
        for running in list(session.running.values()):
            running.cancel()
        for answer in session.pending.values():
            answer.cancel()
        for stream in list(session.attached.values()):
            stream.end_soon()
        listener = session.state.listener
        if listener is not None:
            listener.close()

    def _live(self, session_id: str, principal: str | None) -> LegacySession | None:
        for ended in self.sessions.expire():
            self.end(ended)
        return self.sessions.find(session_id, principal)

    async def post(
        self,
        message: Request | Notification | Response,
        session_id: str | None,
        headers: Mapping[str, str],
        accept: str | None,
        principal: str | None,
        receive: Receive,
        send: Send,
    ) -> None:
        request_id = message.id if isinstance(message, Request) else None
        problem = legacy_version_problem(headers.get("mcp-protocol-version"))
        if problem is not None:
            await respond(send, 400, error_body(INVALID_REQUEST, problem, request_id))
            return
        if isinstance(message, Request) and message.method == "initialize":
            # "Session Management" 1.: the session starts with initialize; a header it carries
            # names nothing yet (a client starting over after a 404 may still send the old one).
            await self._open_session(message, principal, send)
            return
        session = None if session_id is None else self._live(session_id, principal)
        if session is None:
            # "Session Management" 3. and 4.: an ended (or unknown) session is 404, and the
            # client starts over with initialize. The id is never logged.
            await respond(
                send,
                404,
                error_body(
                    INVALID_REQUEST,
                    "Session not found: it ended or was never opened; send initialize again",
                    request_id,
                ),
            )
            return
        if isinstance(message, Response):
            # "Sending Messages" 4.: the client's answer to our request; it never waits for a
            # place (the request it answers holds one), so a full server cannot deadlock.
            waiting = session.pending.get(message.id) if isinstance(message.id, str) else None
            if waiting is not None and not waiting.done():
                waiting.set_result(message)
            await respond(send, 202, headers=[])
            return
        if isinstance(message, Notification):
            cancelled = self.app.server.handle_notification(message)
            running = session.running.get(cancelled) if cancelled is not None else None
            if running is not None:
                # basic/utilities/cancellation: the client's notifications/cancelled, the only
                # way to cancel here ("Sending Messages" 6.: disconnection is not cancellation).
                running.cancel()
            await respond(send, 202, headers=[])
            return
        if message.id in session.running:
            await respond(
                send, 400, error_body(INVALID_REQUEST, "Request id is already in use", message.id)
            )
            return
        places = await self.app.take_place(send)
        if places is None:
            return
        place = _Place(self.app, places)
        self.sessions.acquire(session)
        try:
            await self._request(session, message, accept, principal, receive, send, place)
        finally:
            self.sessions.release(session)
            place.give_back()

    async def _open_session(self, request: Request, principal: str | None, send: Send) -> None:
        session, ended, refused_by = self.sessions.open(principal)
        for old in ended:
            self.end(old)
        if session is None:
            # At a bound with every session that counts busy: none can be ended for this one.
            table = self.sessions
            if refused_by == "principal":
                why = (
                    f"you hold {table.held_by(principal)} sessions, your share of "
                    f"{table.max_per_principal} ({ENV_SESSIONS_PER_PRINCIPAL}; by default an "
                    "equal split among the principals with tokens), each with a request running "
                    "or waiting for its user; end one (DELETE) or retry later"
                )
            else:
                why = (
                    f"{len(table)} sessions open ({ENV_MAX_SESSIONS}={table.max_sessions}), "
                    "each with a request running; retry later"
                )
            await respond(
                send,
                503,
                error_body(INTERNAL_ERROR, f"Server busy: {why}", request.id),
                [JSON_CONTENT, RETRY_SOON],
            )
            return
        # The session's own stream is what its listener notifies (list changes, resource
        # updates: "Listening for Messages" 4., messages unrelated to any request).
        standalone = _LegacyExchange(self.app, session, session.logs[STANDALONE], sse=True)
        message, _ = await self.app.server.reply(
            request, session.state, standalone, None, principal
        )
        if "error" in message:
            self.sessions.end(session)
            await respond(send, 200, encode(message))
            return
        await respond(
            send,
            200,
            encode(message),
            [JSON_CONTENT, (b"mcp-session-id", session.id.encode("ascii"))],
        )

    async def _request(
        self,
        session: LegacySession,
        request: Request,
        accept: str | None,
        principal: str | None,
        receive: Receive,
        send: Send,
        place: _Place,
    ) -> None:
        """One request of a 2025-11-25 session, on an SSE stream of its own when the client
        takes one ("Sending Messages" 5.): the priming event first, then what the request
        sends (notifications, the legacy bridge's requests), then its response. The client
        closing the connection detaches the stream and the request keeps running; its
        messages wait in the stream's log for a GET with `Last-Event-ID`."""
        serving = asyncio.current_task()
        if serving is None:  # an ASGI server always runs the app in a task
            raise RuntimeError("HttpApp must run inside an asyncio task")
        log = session.open_stream()
        sse = accepts(accept, "text/event-stream")
        exchange = _LegacyExchange(self.app, session, log, sse=sse, send=send, place=place)
        cancellation = Cancellation()
        session.running[request.id] = _Running(cancellation, serving)
        watch: asyncio.Task[None] | None = None
        stream = _SseStream(send)
        if sse:
            session.attached[log.key] = stream
            holding = _hold_post(receive, session, log, stream, self.app.settings.sse_poll_seconds)
            watch = asyncio.get_running_loop().create_task(holding)
        try:
            await self._reply(session, request, exchange, cancellation, principal, serving)
        finally:
            if watch is not None and stream.polling and not watch.done():
                # A poll is writing its last bytes (`_poll`): they end the response, so they
                # are let through rather than cut off.
                await asyncio.wait({watch})
            elif watch is not None:
                watch.cancel()

    async def _reply(
        self,
        session: LegacySession,
        request: Request,
        exchange: _LegacyExchange,
        cancellation: Cancellation,
        principal: str | None,
        serving: asyncio.Task[Any],
    ) -> None:
        self.app.open_requests[exchange] = (request, cancellation)
        try:
            message, _ = await self.app.server.reply(
                request, session.state, exchange, cancellation, principal
            )
        except asyncio.CancelledError:
            # Cancelled by the client (notifications/cancelled), by DELETE, or by a stopping
            # server past its grace (uvicorn cancels the task).
            serving.uncancel()
            if self.app.stopping and not session.ended:
                await exchange.finish(stopping_error(request, cancellation), 503)
            else:
                # basic/utilities/cancellation: no response for a cancelled request.
                await exchange.end()
            return
        finally:
            del self.app.open_requests[exchange]
            session.running.pop(request.id, None)
        if cancellation.cancelled:
            await exchange.end()  # it ignored its cancellation: its answer is dropped
            return
        try:
            await exchange.finish(message, 200)
        except (TypeError, ValueError):
            _logger.exception("a result for %s could not be encoded", request.method)
            await exchange.finish(error_response(request.id, INTERNAL_ERROR, "Internal error"), 200)

    async def get(
        self, headers: Mapping[str, str], principal: str | None, receive: Receive, send: Send
    ) -> None:
        """2025-11-25 "Listening for Messages": the session's own stream; with `Last-Event-ID`,
        any of its streams resumed after that event ("Resumability and Redelivery" 2.)."""
        refusal = refuse_session_get(
            accepts_event_stream=accepts(headers.get("accept"), "text/event-stream"),
            version_problem=legacy_version_problem(headers.get("mcp-protocol-version")),
        )
        if refusal is not None:
            await refuse(send, refusal)
            return
        session = self._live(headers["mcp-session-id"], principal)
        if session is None:
            await respond(
                send,
                404,
                error_body(INVALID_REQUEST, "Session not found: it ended or was never opened"),
            )
            return
        if self.app.stopping:
            await self.app.refuse_stopping(send)
            return
        resumed = headers.get("last-event-id")
        replay: list[bytes] = []
        if resumed is None:
            log = session.logs[STANDALONE]
            if session.attached.get(STANDALONE) is not None:
                # One GET stream per session (as the TypeScript SDK answers): a second would
                # split its messages, which go on one stream only ("Multiple Connections" 2.).
                await respond(
                    send,
                    409,
                    error_body(
                        INVALID_REQUEST,
                        "Conflict: this session's GET stream is already open; close it first, "
                        "or resume it with Last-Event-ID",
                    ),
                )
                return
            replay.append(_priming(log))
        else:
            found = parse_event_id(resumed)
            log_of = session.logs.get(found[0]) if found is not None else None
            if found is None or log_of is None:
                await respond(
                    send,
                    400,
                    error_body(
                        INVALID_REQUEST,
                        "Bad Request: Last-Event-ID names no stream this session still holds",
                    ),
                )
                return
            log = log_of
            # "MUST NOT replay messages that would have been delivered on a different
            # stream": only this log's events after the one named.
            replay = log.after(found[1])
            previous = session.attached.pop(log.key, None)
            if previous is not None:
                # The client resumed, so the older connection is dead or abandoned.
                previous.end_soon(retry=True)
            if not replay:
                replay.append(_priming(log))
        stream = _SseStream(send)
        self.sessions.acquire(session)
        try:
            if log.ended:
                # Its request is over: the replay holds its end, and nothing more comes.
                await stream.start(b"".join(replay))
                await stream.close()
                session.forget_stream(log.key)
                return
            session.attached[log.key] = stream
            await stream.start(b"".join(replay))
            await _hold(receive, stream, self.app.settings.sse_poll_seconds, session, log)
        finally:
            if session.attached.get(log.key) is stream:
                del session.attached[log.key]
            self.sessions.release(session)

    async def delete(self, headers: Mapping[str, str], principal: str | None, send: Send) -> None:
        """2025-11-25 "Session Management" 5.: the client ends its session."""
        session = self._live(headers["mcp-session-id"], principal)
        if session is None:
            await respond(
                send,
                404,
                error_body(INVALID_REQUEST, "Session not found: it ended or was never opened"),
            )
            return
        self.end(session)
        await respond(send, 200, headers=[])


def _priming(log: EventLog) -> bytes:
    """2025-11-25 "Sending Messages" 6.: an event id and empty data, so that the client can
    resume from the very start of the stream."""
    return b"id: %s\ndata: \n\n" % log.next_id().encode("ascii")


class _SseStream:
    """One connection carrying a session's stream: a POST's response, or a GET's.

    A POST's starts when its request first sends something, the priming event first; a
    request that sends nothing before its response is answered as plain JSON
    (the client "MUST support both these cases"), so quick requests cost no stream.
    """

    __slots__ = ("_keepalive", "closed", "ending", "polling", "retry", "send", "started")

    def __init__(self, send: Send) -> None:
        self.send = send
        self.started = False
        #: Nothing more is sent on it (ended by the server, or the client went away).
        self.closed = False
        #: Set when the server wants it ended (`end_soon`) or it ended.
        self.ending = asyncio.Event()
        self.retry = False
        #: The server is closing it for SSE polling (`_poll`).
        self.polling = False
        self._keepalive: asyncio.Task[None] | None = None

    async def start(self, first: bytes, *, more: bool = True) -> None:
        # Claimed before the first await: a second writer never starts it twice.
        self.started = True
        await self.send({"type": "http.response.start", "status": 200, "headers": SSE_HEADERS})
        await self.send({"type": "http.response.body", "body": first, "more_body": more})
        if more:
            self._keepalive = asyncio.get_running_loop().create_task(self._keep_alive())

    async def _keep_alive(self) -> None:
        while not self.closed:
            await asyncio.sleep(KEEPALIVE_SECONDS)
            await self.write(KEEPALIVE_COMMENT)

    async def write(self, frame: bytes) -> None:
        if self.closed:
            return
        if not self.started:
            await self.start(frame)
            return
        await self.send({"type": "http.response.body", "body": frame, "more_body": True})

    async def close(self, last: bytes = b"") -> None:
        """The last bytes, and the response ends; with `retry` set, the client is told to
        come back ("Sending Messages" 6.: SHOULD send `retry` before closing early)."""
        if self.closed:
            return
        self.closed = True
        self.ending.set()
        if self._keepalive is not None:
            self._keepalive.cancel()
        if self.retry:
            last = b"retry: %d\n\n" % RETRY_MILLISECONDS + last
        if not self.started:
            await self.start(last, more=False)
            return
        await self.send({"type": "http.response.body", "body": last, "more_body": False})

    def end_soon(self, *, retry: bool = False) -> None:
        """Ask whoever holds the connection (`_hold`) to close it."""
        self.retry = retry
        self.ending.set()

    def gone(self) -> None:
        """The client closed the connection."""
        self.closed = True
        self.ending.set()
        if self._keepalive is not None:
            self._keepalive.cancel()


async def _disconnected(receive: Receive) -> None:
    while (await receive())["type"] != "http.disconnect":
        pass


async def _hold(
    receive: Receive,
    stream: _SseStream,
    poll: float | None = None,
    session: LegacySession | None = None,
    log: EventLog | None = None,
) -> None:
    """Keep `stream`'s connection until the client closes it or the server ends the stream;
    with `poll`, at most that many seconds (`_poll`)."""
    watching = asyncio.get_running_loop().create_task(_disconnected(receive))
    ending = asyncio.get_running_loop().create_task(stream.ending.wait())
    try:
        done, _ = await asyncio.wait(
            {watching, ending}, timeout=poll, return_when=asyncio.FIRST_COMPLETED
        )
    finally:
        watching.cancel()
        ending.cancel()
    if watching in done and not watching.cancelled():
        stream.gone()
    elif not done and session is not None and log is not None:
        await _poll(stream, session, log)
    else:
        await stream.close()


async def _poll(stream: _SseStream, session: LegacySession, log: EventLog) -> None:
    """2025-11-25 "Sending Messages" 6.: "After the server has sent an SSE event with an event
    ID to the client, the server MAY close the connection (without terminating the SSE stream)
    at any time ... it SHOULD send an SSE event with a standard retry field before closing".

    The stream is detached first, so that what its request sends from now on waits in the log
    for the client's GET with `Last-Event-ID` (a request that finishes while detached keeps its
    response there, `LegacySession.close_stream`). A stream that has sent nothing yet gets its
    priming event first: the client needs an event id to resume from.
    """
    if stream.closed:
        return  # its request's response took it meanwhile
    if session.attached.get(log.key) is stream:
        del session.attached[log.key]
    stream.polling = True
    if stream.started:
        stream.retry = True
        await stream.close()
        return
    # The priming event, then `retry`, and the response ends.
    stream.closed = True
    stream.ending.set()
    await stream.start(_priming(log) + b"retry: %d\n\n" % RETRY_MILLISECONDS, more=False)


async def _hold_post(
    receive: Receive,
    session: LegacySession,
    log: EventLog,
    stream: _SseStream,
    poll: float | None = None,
) -> None:
    """A legacy POST's stream: when its connection goes, the stream is detached and its
    request keeps running ("Sending Messages" 6.: disconnection SHOULD NOT be interpreted as
    the client cancelling its request); what it sends waits in the log. With `poll`, the
    server closes the connection itself after that many seconds (`_poll`)."""
    try:
        await _hold(receive, stream, poll, session, log)
    finally:
        if session.attached.get(log.key) is stream:
            del session.attached[log.key]


class _Running:
    """A session's request being served: how to cancel it."""

    __slots__ = ("cancellation", "task")

    def __init__(self, cancellation: Cancellation, task: asyncio.Task[Any]) -> None:
        self.cancellation = cancellation
        self.task = task

    def cancel(self) -> None:
        # The flag: a handler in a worker thread sees it although the task's cancellation
        # cannot reach it.
        self.cancellation.cancel_running(self.task)


class _Place:
    """A request's place among `max_in_flight` (`Endpoint.take_place`), which a 2025-11-25
    call lends back while its client answers. Given back once: a call cancelled while it
    waits to take its place again holds none, and gives none back."""

    __slots__ = ("app", "held", "places")

    def __init__(self, app: Endpoint, places: asyncio.Semaphore) -> None:
        self.app = app
        self.places = places
        self.held = True

    def give_back(self) -> None:
        if self.held:
            self.held = False
            self.app.release_place(self.places)

    async def take_again(self) -> None:
        await self.app.retake_place(self.places)
        self.held = True


class _LegacyExchange:
    """The `Peer` of one 2025-11-25 request (or, for the standalone stream, of the session's
    listener): its messages are events of its stream, logged for replay and written to the
    connection attached to the stream, if any."""

    __slots__ = ("app", "log", "place", "send", "session", "sse")

    def __init__(
        self,
        app: Endpoint,
        session: LegacySession,
        log: EventLog,
        *,
        sse: bool,
        send: Send | None = None,
        place: _Place | None = None,
    ) -> None:
        self.app = app
        self.session = session
        self.log = log
        self.sse = sse
        self.send = send
        #: The request's place among the `max_in_flight` (None: the standalone stream's).
        self.place = place

    async def _emit(self, data: bytes) -> None:
        stream = self.session.attached.get(self.log.key)
        if stream is not None and not stream.started:
            # The stream's first message: the priming event before it, its id the lower.
            priming = _priming(self.log)
            await stream.write(priming + self.log.record(data))
            return
        frame = self.log.record(data)
        if stream is not None:
            await stream.write(frame)

    async def notify(self, method: str, params: dict[str, Any]) -> None:
        if self.sse and not self.log.ended and not self.session.ended:
            await self._emit(encode({"jsonrpc": "2.0", "method": method, "params": params}))

    async def request(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        """2025-11-25 "Sending Messages" 6.: the server MAY send requests on the request's
        stream; the client POSTs the response (`LegacyEra.post`)."""
        if not self.sse:
            # Without a stream there is no way to the client: the bridge refuses the call.
            raise RpcError(INVALID_REQUEST, "no event stream (Accept: text/event-stream)")
        session = self.session
        request_id = session.client_request_id()
        answer: asyncio.Future[Response] = asyncio.get_running_loop().create_future()
        session.pending[request_id] = answer
        timeout = self.app.settings.client_request_timeout
        try:
            await self._emit(
                encode({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params})
            )
            try:
                async with self._lent_place(), asyncio.timeout(timeout):
                    response = await answer
            except TimeoutError:
                reason = f"no answer within {timeout:g} s"
                _logger.warning("the client gave %s to %s", reason, method)
                await self._withdraw(request_id, reason)
                raise RpcError(INTERNAL_ERROR, reason) from None
            except asyncio.CancelledError:
                # The request that asked was cancelled: the question is moot, so the client
                # is told to stop asking its user (basic/utilities/cancellation).
                with contextlib.suppress(Exception):
                    await self._withdraw(request_id, "the request that needed it was cancelled")
                raise
        finally:
            del session.pending[request_id]
        return client_result(response)

    @contextlib.asynccontextmanager
    async def _lent_place(self) -> AsyncIterator[None]:
        """While the client answers (a person, for an elicitation), the request's place goes
        to whoever waits for one: 64 users each looking at a confirmation must not keep every
        other request, of either era, waiting for as long as they look."""
        place, app = self.place, self.app
        if place is None or not place.held or app.parked >= app.settings.max_parked:
            yield
            return
        place.give_back()
        app.parked += 1
        try:
            yield
        except BaseException:
            # Cancelled, or no answer in time: what is left (unwinding, a refusal) needs no
            # place, and waiting for one would only delay the end.
            app.parked -= 1
            raise
        app.parked -= 1
        await place.take_again()

    async def _withdraw(self, request_id: str, reason: str) -> None:
        if not self.log.ended and not self.session.ended:
            params = {"requestId": request_id, "reason": reason}
            await self._emit(
                encode({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": params})
            )

    async def finish(self, message: JSONObject, status: int) -> None:
        """The request's response: the stream's last event (or the JSON body), kept for a
        resuming GET when no connection is attached to take it."""
        if self.log.ended:
            return
        data = encode(message)
        self.log.ended = True
        if not self.sse:
            # No stream, so nothing to resume: its log goes now (kept, one per request, it
            # would grow with every JSON-only request for the session's life).
            self.session.close_stream(self.log, delivered=True)
            if self.send is not None:
                await respond(self.send, status, data)
            return
        stream = self.session.attached.pop(self.log.key, None)
        if stream is not None and not stream.started and not stream.closed:
            # Nothing was sent before the response: plain JSON ("Sending Messages" 5.).
            stream.closed = True
            stream.ending.set()
            await respond(self.send or stream.send, status, data)
            self.session.close_stream(self.log, delivered=True)
            return
        frame = self.log.record(data)
        delivered = stream is not None and not stream.closed
        if stream is not None:
            await stream.close(frame)
        self.session.close_stream(self.log, delivered=delivered)

    async def end(self) -> None:
        """The request ends with no response (it was cancelled)."""
        if self.log.ended:
            return
        self.log.ended = True
        if not self.sse:
            self.session.close_stream(self.log, delivered=True)
            if self.send is not None:
                await respond(self.send, 202, headers=[])
            return
        stream = self.session.attached.pop(self.log.key, None)
        if stream is not None:
            await stream.close()
        self.session.close_stream(self.log, delivered=True)
