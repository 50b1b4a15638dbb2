"""Runs the Streamable HTTP app (`_http.HttpApp`) on uvicorn, the optional `http` extra: the
only module that imports it.

uvicorn is the HTTP server; this module adds what serving MCP needs of it and it does not do by
itself: a socket listening before the address is announced, bounds on a request's head (uvicorn
has none: a client could hold a connection for ever by sending nothing), open listens ended
before the grace period, and exit status 0 after a clean stop on SIGTERM. And a stop that ends:
every request still open is answered, and the process exits within SHUTDOWN_GRACE_SECONDS plus
SHUTDOWN_MARGIN_SECONDS whatever a tool's thread does.
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
from collections.abc import Awaitable, Iterator
from typing import Any, Final

from ._context import SHUTDOWN_GRACE_SECONDS
from ._http import ENDPOINT, ENV_TOKEN, ConnectionRefusal, HttpApp, HttpSettings
from ._router import Server

__all__ = ("SHUTDOWN_GRACE_SECONDS", "SHUTDOWN_MARGIN_SECONDS", "serve_http")

#: Past the grace (how long a stopping server gives requests in flight: uvicorn's graceful
#: shutdown), the last answers get at most this long to reach their clients before the process
#: ends. Together the bound on a stop, from the signal to the exit.
SHUTDOWN_MARGIN_SECONDS: Final = 2.0
_FLUSH_POLL_SECONDS: Final = 0.01
_STOP_SIGNALS: Final = (signal.SIGINT, signal.SIGTERM)

_logger = logging.getLogger("mrtr_runtime")


def _listening_socket(host: str, port: int) -> socket.socket:
    """Bound and listening before uvicorn starts, so the address printed is already reachable
    (and `--port 0` has its real port): connections wait in the backlog until uvicorn accepts."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    if os.name != "nt":
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    sock.listen(2048)
    sock.set_inheritable(True)
    return sock


def _uvicorn_server_class() -> type[Any]:
    import uvicorn

    class Uvicorn(uvicorn.Server):
        """uvicorn's server, but a SIGTERM or SIGINT that stops it cleanly ends the process with
        status 0, as the stdio server does (uvicorn re-raises the signal once it has stopped,
        so the process would end "killed by SIGTERM" however cleanly it shut down); and open
        listens end before the grace period, not after it."""

        def __init__(self, config: uvicorn.Config, mcp_server: Server, app: HttpApp) -> None:
            super().__init__(config)
            self.mcp_server = mcp_server
            self.http_app = app

        async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
            # basic/patterns/subscriptions "Graceful Closure": each listen tells its client and
            # answers its request, so it neither holds the grace period nor is cut off.
            self.mcp_server.end_subscriptions()
            # Requests still waiting for a place never started: answered now, so that their
            # clients can go elsewhere, rather than held for the grace and then cut off.
            self.http_app.stop_waiting()
            await super().shutdown(sockets)
            # uvicorn has cancelled what outlived the grace, but a task awaiting a thread it
            # cannot leave (anyio shields a thread call) stays, unanswered: answer it here.
            abandoned = self.http_app.abandon_open()
            await _answer_and_flush(abandoned, self.server_state.connections)
            self._exit_if_stuck()

        def _exit_if_stuck(self) -> None:
            main = threading.main_thread()
            threads = [
                thread
                for thread in threading.enumerate()
                if thread.is_alive() and not thread.daemon and thread is not main
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

    return Uvicorn


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


def _bounded_protocol_class(base: type[Any], max_connections: int) -> type[Any]:
    refusal = ConnectionRefusal(max_connections)

    class BoundedProtocol(base):  # type: ignore[misc]
        """At most `max_connections` connections served at once, counted as they open: the
        first ones are served, and each one opened past the bound answers its request with a
        JSON-RPC 503 and closes. (uvicorn's own `limit_concurrency` compares the count of
        connections AND tasks when a request's head completes, so a burst whose connections all
        open before the first head is parsed is refused entirely, the first ones included.)"""

        def connection_made(self, transport: asyncio.Transport) -> None:
            super().connection_made(transport)
            if len(self.connections) > max_connections:
                # uvicorn reads the app from the protocol when each request's head completes.
                self.app = refusal

    return BoundedProtocol


def _guarded_protocol_class(head_timeout: float, max_head_bytes: int) -> type[Any]:
    from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

    class GuardedHttpToolsProtocol(HttpToolsProtocol):
        """uvicorn's HTTP/1.1 protocol (httptools), with the two bounds it lacks: a request's
        head (request line and headers) must arrive within `head_timeout` seconds, and within
        `max_head_bytes`. Without them a client holds a connection for ever by sending nothing
        (and enough such clients use up every connection), or makes the parser churn through
        an endless header."""

        _head_timer: asyncio.TimerHandle | None = None
        _head_bytes = 0
        _reading_head = True

        def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
            super().connection_made(transport)
            self._arm_head_timer()

        def data_received(self, data: bytes) -> None:
            if self._reading_head and self._head_timer is None:
                self._arm_head_timer()
            super().data_received(data)
            if self._reading_head and not self.transport.is_closing():
                self._head_bytes += len(data)
                if self._head_bytes > max_head_bytes:
                    self._refuse(b"431 Request Header Fields Too Large")

        def on_headers_complete(self) -> None:
            self._reading_head = False
            self._disarm_head_timer()
            super().on_headers_complete()

        def on_response_complete(self) -> None:
            # The next request's head starts; until its first byte uvicorn's keep-alive
            # timeout applies, then ours.
            self._reading_head = True
            self._head_bytes = 0
            super().on_response_complete()

        def connection_lost(self, exc: Exception | None) -> None:
            self._disarm_head_timer()
            super().connection_lost(exc)

        def _arm_head_timer(self) -> None:
            self._head_timer = self.loop.call_later(head_timeout, self._head_too_slow)

        def _disarm_head_timer(self) -> None:
            if self._head_timer is not None:
                self._head_timer.cancel()
                self._head_timer = None

        def _head_too_slow(self) -> None:
            self._head_timer = None
            if self._reading_head and not self.transport.is_closing():
                self._refuse(b"408 Request Timeout")

        def _refuse(self, status: bytes) -> None:
            self.transport.write(
                b"HTTP/1.1 " + status + b"\r\ncontent-length: 0\r\nconnection: close\r\n\r\n"
            )
            self.transport.close()

    return GuardedHttpToolsProtocol


def serve_http(server: Server, settings: HttpSettings, *, name: str = "mcp") -> int:
    """Serve `server` over Streamable HTTP until SIGINT/SIGTERM. Returns the exit status: 0, 1
    when the tools could not be loaded, 2 when uvicorn is missing or the address is taken."""
    try:
        import uvicorn

        protocol = _bounded_protocol_class(
            _guarded_protocol_class(settings.head_timeout_seconds, settings.max_head_bytes),
            settings.max_connections,
        )
    except ImportError as missing:  # uvicorn, or the httptools parser the protocol builds on
        sys.stderr.write(
            f"{name}: HTTP mode needs the optional 'http' dependencies ({missing.name} is "
            f"missing): pip install '{name}[http]'\n"
        )
        return 2
    # stdout is no wire here, but a stray print() from a tool still belongs with the logs.
    sys.stdout = sys.stderr
    try:
        sock = _listening_socket(settings.host, settings.port)
    except OSError as error:
        sys.stderr.write(f"{name}: cannot listen on {settings.host}:{settings.port}: {error}\n")
        return 2
    bound_host, bound_port = sock.getsockname()[:2]
    if not settings.policy().loopback_only_hosts and settings.bearer_token is None:
        _logger.warning(
            "listening on %s with no %s: anyone who can reach this address can call the tools",
            settings.host,
            ENV_TOKEN,
        )
    shown_host = f"[{bound_host}]" if ":" in bound_host else bound_host
    app = HttpApp(server, settings)
    config = uvicorn.Config(
        app,
        lifespan="on",
        log_config=None,
        access_log=False,
        server_header=False,
        http=protocol,
        ws="none",  # no WebSocket upgrades: MCP has none, and the app would not take them
        # No X-Forwarded-* rewriting: nothing here reads the client's address, and a middleware
        # on every request costs time.
        proxy_headers=False,
        # The bound on connections is the protocol's (`_bounded_protocol_class`), not uvicorn's.
        limit_concurrency=None,
        timeout_graceful_shutdown=round(SHUTDOWN_GRACE_SECONDS),
    )
    uvicorn_server = _uvicorn_server_class()(config, server, app)
    sys.stderr.write(f"{name}: serving MCP at http://{shown_host}:{bound_port}{ENDPOINT}\n")
    sys.stderr.flush()
    with sock:
        uvicorn_server.run(sockets=[sock])
    return 0 if uvicorn_server.started else 1
