"""The HTTP wing's commands: ``http`` (serve over Streamable HTTP) and ``health`` (ask a
running one for ``server/discover``; the Docker image's HEALTHCHECK).

``_commands`` loads this module by name (`_wings`) when the project has the HTTP wing, and only
then offers the two commands; stdio serving never loads it.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import sys
from typing import Any

from .._config import Settings
from .._project import Project
from .._redact import redact_secrets
from .._wings import load_wing
from ._commands import (
    HTTP_DEFAULT_HOST,
    HTTP_DEFAULT_PORT,
    endpoint_of,
    is_open,
    server_or_none,
    settings_of,
)

__all__ = ("add_commands", "discover_problem", "discover_request", "health_check", "run")

HEALTH_DEFAULT_URL = f"http://{HTTP_DEFAULT_HOST}:{HTTP_DEFAULT_PORT}/mcp"
#: Below the image's HEALTHCHECK --timeout, so a hung server gets this command's one line.
HEALTH_TIMEOUT_SECONDS = 5.0
#: A discover answer is a few KiB; a health check reads no more than this.
HEALTH_MAX_ANSWER_BYTES = 1 << 20
HEALTH_VERSION = "2026-07-28"


def _bind_address(text: str) -> str:
    if not text.strip():
        raise argparse.ArgumentTypeError("an address to bind, e.g. 127.0.0.1 or 0.0.0.0")
    return text.strip()


def _port(text: str) -> int:
    try:
        port = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a port number: {text!r}") from None
    if not 0 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"not a port number: {port} (0 to 65535)")
    return port


def add_commands(commands: Any) -> None:
    """Add ``http`` and ``health`` to the command line's subcommands."""
    http = commands.add_parser(
        "http",
        help="serve over Streamable HTTP at /mcp (needs the 'http' extra)",
        description=(
            "Serve the tools over MCP's Streamable HTTP transport (2026-07-28) at /mcp until "
            "SIGINT or SIGTERM. Access: MRTR_HTTP_TOKEN (bearer token), MRTR_HTTP_ALLOWED_ORIGINS "
            "and MRTR_HTTP_ALLOWED_HOSTS (comma-separated)."
        ),
    )
    http.add_argument(
        "--host",
        type=_bind_address,
        default=HTTP_DEFAULT_HOST,
        help="address to bind (default: %(default)s; a container binds 0.0.0.0)",
    )
    http.add_argument(
        "--port",
        type=_port,
        default=HTTP_DEFAULT_PORT,
        help="0 picks a free port (default: %(default)s)",
    )
    health = commands.add_parser(
        "health",
        help="exit 0 only if the HTTP server at --url answers server/discover",
        description=(
            "Send server/discover (2026-07-28) to a running 'http' server and exit 0 only on a "
            "valid discover result; else one line on stderr and exit 1. MRTR_HTTP_TOKEN, when "
            "set, is sent as the bearer token."
        ),
    )
    health.add_argument(
        "--url", default=HEALTH_DEFAULT_URL, help="the server's MCP endpoint (default: %(default)s)"
    )


def serve_over_http(project: Project, host: str, port: int) -> int:
    _stdio_on_devnull()
    http = load_wing("http")
    server = server_or_none(project)
    if server is None:
        return 2
    try:
        settings = http.HttpSettings.from_settings(settings_of(server), host=host, port=port)
    except ValueError as error:
        sys.stderr.write(f"{project.name}: cannot start: {error}\n")
        return 2
    status: int = http.serve_http(server, settings, name=project.name)
    return status


def _stdio_on_devnull() -> None:
    """Give a closed fd 0 or 1 to /dev/null, before anything opens a file or a socket.

    Over HTTP neither is a wire, so a server started without them can serve; but left closed,
    the next file or socket takes the number, the server would read from it or write into it,
    and the event loop refuses to close an fd that low (uvloop aborts on SIGTERM).
    """
    for fd, flags in ((0, os.O_RDONLY), (1, os.O_WRONLY)):
        if not is_open(fd):
            # The lowest free number is this fd: every lower one is open by now.
            os.open(os.devnull, flags)


def discover_request(project: Project) -> tuple[bytes, dict[str, str]]:
    """The body and headers of a 2026-07-28 ``server/discover`` over Streamable HTTP."""
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "server/discover",
        # basic/index: every request carries its protocol version and capabilities in _meta.
        "params": {
            "_meta": {
                "io.modelcontextprotocol/protocolVersion": HEALTH_VERSION,
                "io.modelcontextprotocol/clientInfo": {
                    "name": f"{project.name} health",
                    "version": "1",
                },
                "io.modelcontextprotocol/clientCapabilities": {},
            }
        },
    }
    # basic/transports/streamable-http: the client accepts both reply kinds, and the request
    # metadata headers repeat the body's version and method.
    headers = {
        "Content-Type": "application/json",
        "Accept": "application/json, text/event-stream",
        "MCP-Protocol-Version": HEALTH_VERSION,
        "Mcp-Method": "server/discover",
    }
    token = Settings.from_environment(os.environ).http_token
    if token:
        headers["Authorization"] = f"Bearer {token}"
    return json.dumps(body, separators=(",", ":")).encode("utf-8"), headers


def discover_problem(status: int, content_type: str, body: bytes) -> str | None:
    """None when ``body`` is a valid answer to ``discover_request``, else what is wrong."""
    if status != 200:
        return f"HTTP status {status}"
    kind = content_type.split(";", 1)[0].strip().lower()
    text = body.decode("utf-8", errors="replace")
    if kind == "text/event-stream":
        # The answer is the last event's data (basic/transports/streamable-http, SSE).
        data = [line[5:].strip() for line in text.splitlines() if line.startswith("data:")]
        text = data[-1] if data else ""
    elif kind != "application/json":
        return f"unexpected content type {content_type!r}"
    try:
        message: Any = json.loads(text)
    except ValueError:
        return "the answer is not JSON"
    if not isinstance(message, dict) or message.get("id") != 1:
        return "the answer is not a JSON-RPC response to the request"
    if "error" in message:
        error = message["error"]
        code = error.get("code") if isinstance(error, dict) else None
        return f"JSON-RPC error {code}"
    result = message.get("result")
    if not isinstance(result, dict) or result.get("resultType") != "complete":
        return "the answer is not a complete result"
    versions = result.get("supportedVersions")
    if not isinstance(versions, list) or HEALTH_VERSION not in versions:
        return f"the server does not list {HEALTH_VERSION} in supportedVersions"
    if not isinstance(result.get("capabilities"), dict):
        return "the answer has no capabilities"
    return None


def health_check(project: Project, url: str) -> int:
    endpoint = endpoint_of(url)
    if endpoint is None:
        # The URL can carry a password (userinfo) or a presigned token in its query.
        sys.stderr.write(
            redact_secrets(f"{project.name}: unhealthy: not an http(s) URL: {url!r}") + "\n"
        )
        return 1
    scheme, host, port, path = endpoint
    body, headers = discover_request(project)
    kind = http.client.HTTPSConnection if scheme == "https" else http.client.HTTPConnection
    connection = kind(host, port, timeout=HEALTH_TIMEOUT_SECONDS)
    try:
        connection.request("POST", path, body, headers)
        response = connection.getresponse()
        answer = response.read(HEALTH_MAX_ANSWER_BYTES)
        problem = discover_problem(response.status, response.getheader("Content-Type", ""), answer)
    except (OSError, http.client.HTTPException, ValueError) as error:
        problem = f"no answer ({type(error).__name__}: {error})"
    finally:
        connection.close()
    if problem is not None:
        sys.stderr.write(redact_secrets(f"{project.name}: unhealthy: {url}: {problem}") + "\n")
        return 1
    return 0


def run(project: Project, args: argparse.Namespace) -> int:
    """Run the ``http`` or ``health`` command ``args`` names; the exit status."""
    if args.command == "http":
        return serve_over_http(project, args.host, args.port)
    return health_check(project, args.url)
