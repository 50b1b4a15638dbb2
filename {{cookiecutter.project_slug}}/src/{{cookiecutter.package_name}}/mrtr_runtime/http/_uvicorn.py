"""Runs the Streamable HTTP app (`_app.HttpApp`) on uvicorn, the optional `http` extra, whose
adapted classes (`_uvicorn_classes`) it imports only when it serves.

uvicorn is the HTTP server; this module adds what serving MCP needs of it and it does not do by
itself: a socket listening before the address is announced, bounds on a request's head (uvicorn
has none: a client could hold a connection for ever by sending nothing), open listens ended
before the grace period, and exit status 0 after a clean stop on SIGTERM. And a stop that ends:
every request still open is answered, and the process exits within SHUTDOWN_GRACE_SECONDS plus
SHUTDOWN_MARGIN_SECONDS whatever a tool's thread does.
"""

from __future__ import annotations

import logging
import os
import socket
import sys
from typing import Any

from .._context import SHUTDOWN_GRACE_SECONDS
from .._router import Server
from ._app import HttpApp
from ._rules import access_warning, login_accounts
from ._settings import ENDPOINT, ENV_TOKEN, SHUTDOWN_MARGIN_SECONDS, HttpSettings

__all__ = ("SHUTDOWN_GRACE_SECONDS", "SHUTDOWN_MARGIN_SECONDS", "serve_http")

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


def _other_login_accounts() -> int:
    """The accounts others could log in to here, from the passwd database (none known where
    there is none)."""
    if sys.platform == "win32":  # no passwd database (and mypy --platform win32 knows it)
        return 0
    try:
        import pwd
    except ImportError:  # a POSIX Python built without it
        return 0
    accounts = ((entry.pw_uid, entry.pw_shell) for entry in pwd.getpwall())
    return login_accounts(accounts, os.getuid())


def _uvicorn_server_class() -> type[Any]:
    """The server class `serve_http` runs (`_uvicorn_classes.McpUvicorn`), imported now."""
    from ._uvicorn_classes import McpUvicorn

    return McpUvicorn


def serve_http(server: Server, settings: HttpSettings, *, name: str = "mcp") -> int:
    """Serve `server` over Streamable HTTP until SIGINT/SIGTERM. Returns the exit status: 0, 1
    when the tools could not be loaded, 2 when uvicorn is missing or the address is taken."""
    try:
        import uvicorn

        from ._uvicorn_classes import GuardedHttpToolsProtocol

        protocol = GuardedHttpToolsProtocol.configured(settings)
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
    # With OAuth every request needs a token from the authorization server: nobody to warn of.
    warning = (
        None
        if settings.oauth is not None
        else access_warning(settings.policy(), settings.host, _other_login_accounts, ENV_TOKEN)
    )
    if warning is not None:
        _logger.warning("%s", warning)
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
        # The bound on connections is the protocol's (`BoundedConnections`), not uvicorn's.
        limit_concurrency=None,
        timeout_graceful_shutdown=round(SHUTDOWN_GRACE_SECONDS),
    )
    uvicorn_server = _uvicorn_server_class()(config, server, app)
    sys.stderr.write(f"{name}: serving MCP at http://{shown_host}:{bound_port}{ENDPOINT}\n")
    sys.stderr.flush()
    with sock:
        uvicorn_server.run(sockets=[sock])
    return 0 if uvicorn_server.started else 1
