"""Serve a stdio MCP server over Streamable HTTP, for peers that speak only HTTP.

The conformance suite's server harness has only `--url` (stdio is upstream issue
modelcontextprotocol/conformance#258). This bridge gives it one, for both protocol eras the
server speaks. Stdlib only; test-only; binds 127.0.0.1. It frames and routes messages and keeps
ids apart; it holds no MCP logic beyond that, except the rule checks listed at the end.

    python tests/conformance/stdio_bridge.py [--port N] -- python -m my_server

Where a POSTed message goes:
- 2026-07-28 traffic (stateless: no `Mcp-Session-Id`) goes to one shared child, started with
  the bridge. So does anything that is neither in a session nor opens one (a request without
  `_meta`, say), so the server, not the bridge, answers it.
- An `initialize` request without the 2026-07-28 `_meta` opens a 2025-11-25 session: a fresh
  child of its own (a legacy stdio process serves one client), named by the `Mcp-Session-Id`
  header of the response. Requests carrying that header go to that child; an unknown or ended
  session id gets 404 (basic/transports, session management). DELETE with the header ends the
  session by closing the child's stdin.

What comes back:
- A request's id is swapped for a private one on the way in and restored on the way out, so
  callers that reuse ids (every conformance probe starts at 1) never collide on one pipe.
- 200 with `application/json` when the child answers before it sends anything else for the
  request. Otherwise 200 with `text/event-stream`: the notifications and (2025-11-25 only)
  server-to-client requests that belong to the request, one SSE event each, then the response.
  What belongs to a request: a `notifications/progress` whose progressToken the request carried;
  a notification whose `_meta["io.modelcontextprotocol/subscriptionId"]` is the (private) id of
  a `subscriptions/listen` request (rewritten to the caller's id); anything else the child sends
  while requests are in flight goes to the latest of them that is not a subscription.
- A client closing a stream before its response is a cancellation: the child gets
  `notifications/cancelled` for it (how a `subscriptions/listen` stream ends).
- POSTed notification -> 202. `notifications/cancelled` has its `requestId` mapped to the
  private id of the matching in-flight request. POSTed response (2025-11-25 sessions, to a
  request the child sent) -> forwarded with the child's own id (one client per child), 202.
- Batches, invalid JSON, responses outside a session -> 400 with a JSON-RPC error.
- GET -> 405 (no standalone SSE stream), except `GET /adapter/status` for tests:
  `{"alive": bool, "violations": [...], "sessions": {"opened": n, "open": n}}`.

The first line on stdout is the endpoint URL, once it is listening. SIGTERM/SIGINT close every
child's stdin (a stdio server SHOULD exit on EOF), wait for them, and exit with status 0 only
when each child exited 0 by itself and none broke these rules:
- both eras, basic/transports/stdio: "The server MUST NOT write anything to its stdout that is
  not a valid MCP message"; basic/utilities/progress: progress notifications "MUST only
  reference tokens that were provided in an active request";
- 2026-07-28, basic/transports/stdio: the server "MUST NOT write JSON-RPC requests to stdout";
  server/utilities/logging: no `notifications/message` for a request without
  `_meta["io.modelcontextprotocol/logLevel"]`, none below the level it asked for;
- 2025-11-25, basic/lifecycle: no server-to-client request for a capability (sampling,
  elicitation, roots) the client did not declare in `initialize`; server/utilities/logging:
  once `logging/setLevel` chose a level, no `notifications/message` below it.
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import json
import queue
import select
import signal
import socket
import subprocess
import sys
import threading
import uuid
from collections.abc import Mapping, Sequence
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Literal

RESPONSE_TIMEOUT_SECONDS = 120.0
CHILD_EXIT_GRACE_SECONDS = 10.0
MAX_BODY_BYTES = 4 * 1024 * 1024
MAX_SESSIONS = 64
DISCONNECT_POLL_SECONDS = 0.2
STATUS_PATH = "/adapter/status"
SESSION_HEADER = "Mcp-Session-Id"
JSON_HEADERS = {"Content-Type": "application/json", "Cache-Control": "no-store"}
PROTOCOL_VERSION_KEY = "io.modelcontextprotocol/protocolVersion"
LOG_LEVEL_KEY = "io.modelcontextprotocol/logLevel"
SUBSCRIPTION_KEY = "io.modelcontextprotocol/subscriptionId"
LISTEN_METHOD = "subscriptions/listen"
#: server/utilities/logging: the RFC 5424 severities, least severe first.
LOG_LEVELS = ("debug", "info", "notice", "warning", "error", "critical", "alert", "emergency")
#: basic/lifecycle (2025-11-25): the client capability each server-to-client request needs.
REQUEST_CAPABILITY = {
    "sampling/createMessage": "sampling",
    "elicitation/create": "elicitation",
    "roots/list": "roots",
}

Era = Literal["modern", "legacy"]
Event = tuple[Literal["message", "response"], dict[str, Any]]


def _log(message: str) -> None:
    sys.stderr.write(f"[adapter] {message}\n")
    sys.stderr.flush()


def _meta_of(message: Mapping[str, Any]) -> Mapping[str, Any]:
    params = message.get("params")
    meta = params.get("_meta") if isinstance(params, dict) else None
    return meta if isinstance(meta, dict) else {}


def _severity(level: object) -> int | None:
    return LOG_LEVELS.index(level) if level in LOG_LEVELS else None


class Exchange:
    """One request in flight at a child: what the child sends for it, in order."""

    def __init__(self, message: Mapping[str, Any], private_id: int) -> None:
        meta = _meta_of(message)
        self.original_id: object = message["id"]
        self.private_id = private_id
        self.method = str(message["method"])
        self.progress_token: object = meta.get("progressToken")
        self.log_level: object = meta.get(LOG_LEVEL_KEY)
        self.events: queue.Queue[Event] = queue.Queue()


class StdioChild:
    """One stdio server process: its stdin writer, its stdout reader, its rule checks."""

    def __init__(self, command: Sequence[str], *, era: Era, label: str) -> None:
        self.era: Era = era
        self.label = label
        self._process = subprocess.Popen(
            list(command), stdin=subprocess.PIPE, stdout=subprocess.PIPE, bufsize=0
        )
        self._write_lock = threading.Lock()
        self._table_lock = threading.Lock()
        self._ids = itertools.count(1)
        self._exchanges: dict[int, Exchange] = {}
        self._server_requests: set[object] = set()  # ids of requests the child sent (legacy)
        self._declared: Mapping[str, Any] = {}  # the client's capabilities (legacy initialize)
        self._session_level: int | None = None  # logging/setLevel (legacy)
        self.violations: list[str] = []
        self.exit_status: int | None = None
        self._reader = threading.Thread(
            target=self._read_stdout, name=f"{label}-stdout", daemon=True
        )
        self._reader.start()

    # -- outbound -------------------------------------------------------------------------
    def _write(self, message: Mapping[str, Any]) -> bool:
        line = json.dumps(message, separators=(",", ":"), ensure_ascii=False) + "\n"
        stdin = self._process.stdin
        if stdin is None:
            return False
        with self._write_lock:
            try:
                stdin.write(line.encode("utf-8"))
                stdin.flush()
            except (BrokenPipeError, ValueError, OSError):
                return False
        return True

    def start(self, message: Mapping[str, Any]) -> Exchange | None:
        """Send a request under a private id; its events arrive on the returned exchange."""
        params = message.get("params")
        if self.era == "legacy" and isinstance(params, dict):
            if message["method"] == "initialize":
                capabilities = params.get("capabilities")
                self._declared = capabilities if isinstance(capabilities, dict) else {}
            elif message["method"] == "logging/setLevel":
                # An unknown level is the server's to refuse (-32602); the last valid one holds.
                level = _severity(params.get("level"))
                if level is not None:
                    self._session_level = level
        with self._table_lock:
            exchange = Exchange(message, next(self._ids))
            self._exchanges[exchange.private_id] = exchange
        if not self._write({**message, "id": exchange.private_id}):
            self.finish(exchange)
            return None
        return exchange

    def finish(self, exchange: Exchange) -> None:
        with self._table_lock:
            self._exchanges.pop(exchange.private_id, None)

    def abandon(self, exchange: Exchange) -> None:
        """The caller went away before the response: tell the child, as a cancellation."""
        self.finish(exchange)
        self._write(
            {
                "jsonrpc": "2.0",
                "method": "notifications/cancelled",
                "params": {"requestId": exchange.private_id, "reason": "HTTP stream closed"},
            }
        )

    def notify(self, message: dict[str, Any]) -> bool:
        if message.get("method") == "notifications/cancelled":
            message = self._map_cancelled(message)
        return self._write(message)

    def answer(self, message: dict[str, Any]) -> bool:
        """A client's response to a request this child sent (the ids are the child's own)."""
        with self._table_lock:
            if message.get("id") not in self._server_requests:
                return False
            self._server_requests.discard(message.get("id"))
        return self._write(message)

    def _map_cancelled(self, message: dict[str, Any]) -> dict[str, Any]:
        params = message.get("params")
        if not isinstance(params, dict) or "requestId" not in params:
            return message
        with self._table_lock:
            matches = [
                pid for pid, e in self._exchanges.items() if e.original_id == params["requestId"]
            ]
        if not matches:
            return message  # unknown id: the server SHOULD ignore it, let it
        return {**message, "params": {**params, "requestId": max(matches)}}

    # -- inbound --------------------------------------------------------------------------
    def _read_stdout(self) -> None:
        stdout = self._process.stdout
        for raw in stdout if stdout is not None else ():
            self._on_line(raw)
        with self._table_lock:
            waiting = list(self._exchanges.values())
        for exchange in waiting:  # the child is gone: nobody will answer these
            exchange.events.put(("response", self._gone(exchange)))

    @staticmethod
    def _gone(exchange: Exchange) -> dict[str, Any]:
        error = {"code": -32603, "message": "The stdio server exited before it answered"}
        return {"jsonrpc": "2.0", "id": exchange.original_id, "error": error}

    def _on_line(self, raw: bytes) -> None:
        text = raw.decode("utf-8", errors="replace").strip()
        if not text:
            return
        try:
            message = json.loads(text)
        except ValueError:
            message = None
        if not isinstance(message, dict) or message.get("jsonrpc") != "2.0":
            # basic/transports/stdio: the server MUST NOT write anything to stdout that is not a
            # valid MCP message.
            self._violation(f"non-JSON-RPC line on stdout: {text[:200]!r}")
        elif "method" in message and "id" in message:
            self._on_server_request(message, text)
        elif "method" in message:
            self._on_notification(message, text)
        else:
            self._on_response(message, text)

    def _on_response(self, message: dict[str, Any], text: str) -> None:
        with self._table_lock:
            exchange = self._exchanges.pop(message.get("id"), None)  # type: ignore[arg-type]
        if exchange is None:
            _log(f"{self.label}: response for an unknown or abandoned id dropped: {text[:200]}")
            return
        exchange.events.put(("response", {**message, "id": exchange.original_id}))

    def _on_server_request(self, message: dict[str, Any], text: str) -> None:
        method = str(message["method"])
        if self.era == "modern":
            # 2026-07-28 basic/transports/stdio: MUST NOT write JSON-RPC requests to stdout.
            self._violation(f"server-to-client request on stdout: {text[:200]}")
            self._refuse(message, "A 2026-07-28 server sends no requests")
            return
        needed = REQUEST_CAPABILITY.get(method)
        if needed is not None and needed not in self._declared:
            # basic/lifecycle: both parties respect the capabilities negotiated at initialize.
            self._violation(f"{method} to a client that did not declare {needed!r}: {text[:200]}")
        target = self._latest_exchange()
        if target is None:
            self._refuse(message, "No client request is open to carry this request")
            return
        with self._table_lock:
            self._server_requests.add(message["id"])
        target.events.put(("message", message))

    def _refuse(self, message: Mapping[str, Any], reason: str) -> None:
        error = {"code": -32603, "message": f"HTTP adapter: {reason}"}
        self._write({"jsonrpc": "2.0", "id": message["id"], "error": error})

    def _on_notification(self, message: dict[str, Any], text: str) -> None:
        method = message["method"]
        meta = _meta_of(message)
        if method == "notifications/progress":
            self._on_progress(message, text)
        elif SUBSCRIPTION_KEY in meta:
            with self._table_lock:
                listener = self._exchanges.get(meta[SUBSCRIPTION_KEY])
            if listener is None or listener.method != LISTEN_METHOD:
                _log(f"{self.label}: notification of no open subscription dropped: {text[:200]}")
                return
            params = {
                **message["params"],
                "_meta": {**meta, SUBSCRIPTION_KEY: listener.original_id},
            }
            listener.events.put(("message", {**message, "params": params}))
        else:
            target = self._latest_exchange()
            if method == "notifications/message":
                self._check_log(message, target, text)
            if target is None:
                _log(f"{self.label}: notification outside any request dropped: {text[:200]}")
                return
            target.events.put(("message", message))

    def _on_progress(self, message: dict[str, Any], text: str) -> None:
        params = message.get("params")
        token = params.get("progressToken") if isinstance(params, dict) else None
        with self._table_lock:
            owners = [
                e
                for e in self._exchanges.values()
                if e.progress_token is not None and e.progress_token == token
            ]
        if not owners:
            # basic/utilities/progress: MUST only reference tokens of an active request.
            self._violation(f"progress for a token no active request carries: {text[:200]}")
            return
        owners[-1].events.put(("message", message))

    def _check_log(self, message: dict[str, Any], target: Exchange | None, text: str) -> None:
        params = message.get("params")
        level = _severity(params.get("level") if isinstance(params, dict) else None)
        if self.era == "modern":
            # server/utilities/logging (2026-07-28): only for a request that asked, at its level.
            asked = _severity(target.log_level) if target is not None else None
            if asked is None:
                self._violation(
                    f"notifications/message for a request with no logLevel: {text[:200]}"
                )
            elif level is None or level < asked:
                self._violation(f"notifications/message below the requested level: {text[:200]}")
        elif self._session_level is not None and (level is None or level < self._session_level):
            # server/utilities/logging (2025-11-25): logging/setLevel sets the minimum level.
            self._violation(f"notifications/message below the session's level: {text[:200]}")

    def _latest_exchange(self) -> Exchange | None:
        with self._table_lock:
            open_requests = [e for e in self._exchanges.values() if e.method != LISTEN_METHOD]
        return open_requests[-1] if open_requests else None

    def _violation(self, what: str) -> None:
        self.violations.append(f"{self.label}: {what}")
        _log(f"VIOLATION {self.label}: {what}")

    # -- lifecycle ------------------------------------------------------------------------
    def alive(self) -> bool:
        return self._process.poll() is None

    def close(self) -> int:
        """Close stdin, wait for a clean exit; kill after the grace period (returns -9 then)."""
        if self.exit_status is not None:
            return self.exit_status
        if self._process.stdin is not None:
            with self._write_lock, contextlib.suppress(OSError):
                self._process.stdin.close()
        try:
            self.exit_status = self._process.wait(CHILD_EXIT_GRACE_SECONDS)
        except subprocess.TimeoutExpired:
            _log(f"{self.label}: child ignored EOF on stdin; killing it")
            self._process.kill()
            self._process.wait()
            self.exit_status = -9
        self._reader.join(CHILD_EXIT_GRACE_SECONDS)
        if self.exit_status != 0:
            self._violation(f"exit status {self.exit_status} after EOF on stdin")
        return self.exit_status


class Children:
    """The shared 2026-07-28 child and the 2025-11-25 sessions, each with its own child."""

    def __init__(self, command: Sequence[str]) -> None:
        self._command = list(command)
        self.modern = StdioChild(command, era="modern", label="stateless")
        self._lock = threading.Lock()
        self._sessions: dict[str, StdioChild] = {}
        self._ended: list[StdioChild] = []

    def open_session(self) -> tuple[str, StdioChild] | None:
        with self._lock:
            if len(self._sessions) >= MAX_SESSIONS:
                return None
            session_id = uuid.uuid4().hex
            child = StdioChild(self._command, era="legacy", label=f"session {session_id[:8]}")
            self._sessions[session_id] = child
        return session_id, child

    def session(self, session_id: str) -> StdioChild | None:
        with self._lock:
            return self._sessions.get(session_id)

    def end_session(self, session_id: str) -> bool:
        with self._lock:
            child = self._sessions.pop(session_id, None)
            if child is not None:
                self._ended.append(child)
        if child is None:
            return False
        child.close()
        return True

    def all(self) -> list[StdioChild]:
        with self._lock:
            return [self.modern, *self._ended, *self._sessions.values()]

    def status(self) -> dict[str, Any]:
        with self._lock:
            opened = len(self._ended) + len(self._sessions)
            open_now = len(self._sessions)
        violations = [v for child in self.all() for v in child.violations]
        return {
            "alive": self.modern.alive(),
            "violations": violations,
            "sessions": {"opened": opened, "open": open_now},
        }

    def close_all(self) -> bool:
        """Close every child; True when each exited 0 and none broke a rule."""
        with self._lock:
            open_sessions = list(self._sessions)
        for session_id in open_sessions:
            self.end_session(session_id)
        self.modern.close()
        children = self.all()
        return all(c.exit_status == 0 for c in children) and not any(c.violations for c in children)


def _error_body(code: int, message: str, request_id: object = None) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "error": {"code": code, "message": message}}


def _opens_session(message: Mapping[str, Any]) -> bool:
    """A 2025-11-25 `initialize` (a 2026-07-28 one carries `_meta` and goes to the server)."""
    return message.get("method") == "initialize" and PROTOCOL_VERSION_KEY not in _meta_of(message)


def make_handler(children: Children, path: str) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        server_version = "mrtr-http-stdio-adapter"

        def log_message(self, format: str, *args: Any) -> None:
            pass  # one line per probe is noise; failures are logged where they happen

        def _send(
            self,
            status: HTTPStatus,
            body: dict[str, Any] | None = None,
            headers: Mapping[str, str] | None = None,
        ) -> None:
            payload = b"" if body is None else json.dumps(body).encode("utf-8")
            self.send_response(status)
            if body is not None:
                for name, value in JSON_HEADERS.items():
                    self.send_header(name, value)
            for name, value in (headers or {}).items():
                self.send_header(name, value)
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        def _not_allowed(self) -> None:
            self.send_response(HTTPStatus.METHOD_NOT_ALLOWED)
            self.send_header("Allow", "POST, DELETE")
            self.send_header("Content-Length", "0")
            self.end_headers()

        do_PUT = do_PATCH = _not_allowed

        def do_GET(self) -> None:
            # Not MCP: lets a test ask, between peer runs, whether the server broke a rule yet.
            if self.path == STATUS_PATH:
                self._send(HTTPStatus.OK, children.status())
                return
            self._not_allowed()  # no standalone SSE stream to offer on the MCP endpoint

        def do_DELETE(self) -> None:
            session_id = self.headers.get(SESSION_HEADER)
            if self.path.split("?", 1)[0] != path or not session_id:
                self._not_allowed()  # 2026-07-28 is stateless: nothing to end
                return
            ended = children.end_session(session_id)
            self._send(HTTPStatus.OK if ended else HTTPStatus.NOT_FOUND)

        def do_POST(self) -> None:
            if self.path.split("?", 1)[0] != path:
                self._send(HTTPStatus.NOT_FOUND, _error_body(-32600, f"POST to {path}"))
                return
            message = self._read_message()
            if message is None:
                return
            session_id = self.headers.get(SESSION_HEADER)
            new_session: str | None = None
            if session_id:
                child = children.session(session_id)
                if child is None:
                    # basic/transports: a request with an ended or unknown session id -> 404.
                    self._send(HTTPStatus.NOT_FOUND, _error_body(-32001, "Session not found"))
                    return
            elif _opens_session(message):
                opened = children.open_session()
                if opened is None:
                    self._send(HTTPStatus.SERVICE_UNAVAILABLE, _error_body(-32603, "Too many"))
                    return
                new_session, child = opened
            else:
                child = children.modern
            if not child.alive():
                self._send(HTTPStatus.BAD_GATEWAY, _error_body(-32603, "stdio server exited"))
                return
            if "method" not in message:
                accepted = child.era == "legacy" and child.answer(message)
                self._send(HTTPStatus.ACCEPTED if accepted else HTTPStatus.BAD_REQUEST)
                return
            if "id" not in message:
                ok = child.notify(message)
                self._send(HTTPStatus.ACCEPTED if ok else HTTPStatus.BAD_GATEWAY)
                return
            self._relay(child, message, new_session)

        def _read_message(self) -> dict[str, Any] | None:
            length = int(self.headers.get("Content-Length") or 0)
            if length <= 0 or length > MAX_BODY_BYTES:
                self._send(HTTPStatus.BAD_REQUEST, _error_body(-32600, "Bad Content-Length"))
                return None
            try:
                message = json.loads(self.rfile.read(length))
            except ValueError:
                self._send(HTTPStatus.BAD_REQUEST, _error_body(-32700, "Parse error"))
                return None
            is_message = isinstance(message, dict) and (
                isinstance(message.get("method"), str) or "result" in message or "error" in message
            )
            if not is_message:
                self._send(
                    HTTPStatus.BAD_REQUEST,
                    _error_body(-32600, "The adapter relays single JSON-RPC messages"),
                )
                return None
            return message  # type: ignore[no-any-return]

        def _relay(
            self, child: StdioChild, message: dict[str, Any], new_session: str | None
        ) -> None:
            exchange = child.start(message)
            if exchange is None:
                self._send(
                    HTTPStatus.BAD_GATEWAY,
                    _error_body(-32603, "Cannot write to the stdio server", message["id"]),
                )
                return
            headers = {SESSION_HEADER: new_session} if new_session else {}
            streaming = False
            try:
                while True:
                    event = self._next_event(exchange)
                    if event is None:  # the caller went away or the child went quiet
                        child.abandon(exchange)
                        return
                    kind, body = event
                    if kind == "response" and not streaming:
                        if new_session and "error" in body:
                            children.end_session(new_session)
                            headers = {}
                        self._send(HTTPStatus.OK, body, headers)
                        return
                    if not streaming:
                        self._start_stream(headers)
                        streaming = True
                    self._write_event(body)
                    if kind == "response":
                        return
            except OSError:
                child.abandon(exchange)  # the caller closed the stream mid-way
            finally:
                child.finish(exchange)

        def _next_event(self, exchange: Exchange) -> Event | None:
            waited = 0.0
            while waited < RESPONSE_TIMEOUT_SECONDS:
                try:
                    return exchange.events.get(timeout=DISCONNECT_POLL_SECONDS)
                except queue.Empty:
                    waited += DISCONNECT_POLL_SECONDS
                if self._caller_gone():
                    return None
            _log(f"no response to {exchange.method!r} in {RESPONSE_TIMEOUT_SECONDS}s")
            return None

        def _caller_gone(self) -> bool:
            connection: socket.socket = self.connection
            try:
                readable, _, _ = select.select([connection], [], [], 0)
                return bool(readable) and connection.recv(1, socket.MSG_PEEK) == b""
            except OSError:
                return True

        def _start_stream(self, headers: Mapping[str, str]) -> None:
            self.send_response(HTTPStatus.OK)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Cache-Control", "no-store")
            self.send_header("Connection", "close")  # the stream ends with the response
            for name, value in headers.items():
                self.send_header(name, value)
            self.end_headers()
            self.close_connection = True

        def _write_event(self, body: Mapping[str, Any]) -> None:
            data = json.dumps(body, separators=(",", ":"), ensure_ascii=False)
            self.wfile.write(f"event: message\ndata: {data}\n\n".encode())
            self.wfile.flush()

    return Handler


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--port", type=int, default=0, help="0 picks a free port")
    parser.add_argument("--path", default="/mcp")
    parser.add_argument("command", nargs="+", help="the stdio server command (after --)")
    args = parser.parse_args(argv)

    children = Children(args.command)
    httpd = ThreadingHTTPServer(("127.0.0.1", args.port), make_handler(children, args.path))
    httpd.daemon_threads = True
    stop = threading.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: stop.set())
    serving = threading.Thread(target=httpd.serve_forever, name="http", daemon=True)
    serving.start()
    sys.stdout.write(f"http://127.0.0.1:{httpd.server_address[1]}{args.path}\n")
    sys.stdout.flush()

    while not stop.wait(0.2):
        if not children.modern.alive():
            _log("the stateless stdio server exited on its own")
            break
    httpd.shutdown()
    httpd.server_close()
    clean = children.close_all()
    status = children.status()
    if status["violations"]:
        _log(f"{len(status['violations'])} rule violation(s) or bad exit(s) by the server")
    return 0 if clean and stop.is_set() else 1


if __name__ == "__main__":
    raise SystemExit(main())
