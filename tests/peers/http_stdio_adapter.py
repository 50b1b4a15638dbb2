"""Serve a stdio MCP server over plain HTTP POST, for peers that speak only HTTP.

The conformance suite's server harness has only `--url` (stdio is upstream issue
modelcontextprotocol/conformance#258). This bridge gives it one: each POSTed JSON-RPC message
becomes one line on the child's stdin, and the child's matching stdout line comes back as the
`application/json` body. Stdlib only; test-only; binds 127.0.0.1.

    python3 http_stdio_adapter.py [--port N] -- python -m my_server

Rules:
- POST request -> 200 with the response. The id is swapped for a private one on the way in and
  restored on the way out, so callers that reuse ids (every conformance probe starts at 1) never
  collide on the one pipe.
- POST notification -> forwarded, 202 with no body. `notifications/cancelled` has its
  `requestId` mapped to the private id of the matching in-flight request.
- POST of anything else (batches, responses, invalid JSON) -> 400 with a JSON-RPC error.
- GET, DELETE, PUT, PATCH -> 405: no SSE stream, no sessions (the stdio server is stateless).
  Except `GET /adapter/status`, for tests: `{"alive": bool, "violations": [...]}` (see below).
- Requests the child sends to its client get a JSON-RPC error back: there is no client behind
  this bridge to ask. Child notifications are logged to stderr and dropped.

The first line on stdout is the endpoint URL, once it is listening. SIGTERM/SIGINT close the
child's stdin (a stdio server SHOULD exit on EOF), wait for it, and exit with status 0 only when
the child exited 0 by itself and broke none of these 2026-07-28 stdio rules (the peers behind
this bridge send only 2026-07-28 traffic, so the legacy era's server requests never apply):
- basic/transports/stdio: "The server MUST NOT write anything to its stdout that is not a valid
  MCP message" and "MUST NOT write JSON-RPC requests to stdout";
- server/utilities/logging: no `notifications/message` for a request without
  `_meta["io.modelcontextprotocol/logLevel"]` (counted when no request carried one).
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import json
import signal
import subprocess
import sys
import threading
from collections.abc import Sequence
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

RESPONSE_TIMEOUT_SECONDS = 120.0
CHILD_EXIT_GRACE_SECONDS = 10.0
MAX_BODY_BYTES = 4 * 1024 * 1024
STATUS_PATH = "/adapter/status"
JSON_HEADERS = {"Content-Type": "application/json", "Cache-Control": "no-store"}


def _log(message: str) -> None:
    sys.stderr.write(f"[adapter] {message}\n")
    sys.stderr.flush()


class _Pending:
    """One request waiting for the child's response line."""

    def __init__(self, original_id: object) -> None:
        self.original_id = original_id
        self.done = threading.Event()
        self.response: dict[str, Any] | None = None


class StdioChild:
    """The one child process, its stdin writer and its stdout reader thread."""

    def __init__(self, command: Sequence[str]) -> None:
        self._process = subprocess.Popen(
            list(command), stdin=subprocess.PIPE, stdout=subprocess.PIPE, bufsize=0
        )
        self._write_lock = threading.Lock()
        self._table_lock = threading.Lock()
        self._ids = itertools.count(1)
        self._pending: dict[int, _Pending] = {}
        self.violations: list[str] = []
        self._log_level_seen = False
        self._reader = threading.Thread(target=self._read_stdout, name="child-stdout", daemon=True)
        self._reader.start()

    # -- outbound -------------------------------------------------------------------------
    def _write(self, message: dict[str, Any]) -> bool:
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

    def request(self, message: dict[str, Any]) -> dict[str, Any] | None:
        """Send a request under a private id; block until its response (None on failure)."""
        params = message.get("params")
        meta = params.get("_meta") if isinstance(params, dict) else None
        if isinstance(meta, dict) and "io.modelcontextprotocol/logLevel" in meta:
            self._log_level_seen = True
        pending = _Pending(message["id"])
        with self._table_lock:
            private_id = next(self._ids)
            self._pending[private_id] = pending
        try:
            if not self._write({**message, "id": private_id}):
                return None
            if not pending.done.wait(RESPONSE_TIMEOUT_SECONDS):
                _log(f"no response to {message.get('method')!r} in {RESPONSE_TIMEOUT_SECONDS}s")
                return None
            if pending.response is None:
                return None
            return {**pending.response, "id": pending.original_id}
        finally:
            with self._table_lock:
                self._pending.pop(private_id, None)

    def notify(self, message: dict[str, Any]) -> bool:
        if message.get("method") == "notifications/cancelled":
            message = self._map_cancelled(message)
        return self._write(message)

    def _map_cancelled(self, message: dict[str, Any]) -> dict[str, Any]:
        params = message.get("params")
        if not isinstance(params, dict) or "requestId" not in params:
            return message
        with self._table_lock:
            matches = [
                pid for pid, p in self._pending.items() if p.original_id == params["requestId"]
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
            waiting = list(self._pending.values())
        for pending in waiting:  # the child is gone: nobody will answer these
            pending.done.set()

    def _on_line(self, raw: bytes) -> None:
        text = raw.decode("utf-8", errors="replace").strip()
        if not text:
            return
        try:
            message = json.loads(text)
        except ValueError:
            message = None
        if not isinstance(message, dict) or message.get("jsonrpc") != "2.0":
            # 2026-07-28 basic/transports/stdio: the server MUST NOT write anything to stdout
            # that is not a valid MCP message.
            self._violation(f"non-JSON-RPC line on stdout: {text[:200]!r}")
            return
        if "method" in message and "id" in message:
            self._violation(f"server-to-client request on stdout: {text[:200]}")
            self._write(
                {
                    "jsonrpc": "2.0",
                    "id": message["id"],
                    "error": {"code": -32601, "message": "No client behind the HTTP adapter"},
                }
            )
            return
        if "method" in message:
            if message["method"] == "notifications/message" and not self._log_level_seen:
                self._violation(f"notifications/message without a requested logLevel: {text[:200]}")
            else:
                _log(f"child notification dropped: {text[:200]}")
            return
        with self._table_lock:
            pending = self._pending.get(message.get("id"))  # type: ignore[arg-type]
        if pending is None:
            _log(f"response for an unknown or abandoned id dropped: {text[:200]}")
            return
        pending.response = message
        pending.done.set()

    def _violation(self, what: str) -> None:
        self.violations.append(what)
        _log(f"VIOLATION: {what}")

    # -- lifecycle ------------------------------------------------------------------------
    def alive(self) -> bool:
        return self._process.poll() is None

    def close(self) -> int:
        """Close stdin, wait for a clean exit; kill after the grace period (returns -9 then)."""
        if self._process.stdin is not None:
            with self._write_lock, contextlib.suppress(OSError):
                self._process.stdin.close()
        try:
            return self._process.wait(CHILD_EXIT_GRACE_SECONDS)
        except subprocess.TimeoutExpired:
            _log("child ignored EOF on stdin; killing it")
            self._process.kill()
            self._process.wait()
            return -9


def _error_body(code: int, message: str, request_id: object = None) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "error": {"code": code, "message": message}}


def make_handler(child: StdioChild, path: str) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        server_version = "mrtr-http-stdio-adapter"

        def log_message(self, format: str, *args: Any) -> None:
            pass  # one line per probe is noise; failures are logged where they happen

        def _send(self, status: HTTPStatus, body: dict[str, Any] | None = None) -> None:
            payload = b"" if body is None else json.dumps(body).encode("utf-8")
            self.send_response(status)
            if body is not None:
                for name, value in JSON_HEADERS.items():
                    self.send_header(name, value)
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        def _not_allowed(self) -> None:
            self.send_response(HTTPStatus.METHOD_NOT_ALLOWED)
            self.send_header("Allow", "POST")
            self.send_header("Content-Length", "0")
            self.end_headers()

        do_DELETE = do_PUT = do_PATCH = _not_allowed

        def do_GET(self) -> None:
            # Not MCP: lets a test ask, between peer runs, whether the server broke a rule yet.
            if self.path == STATUS_PATH:
                self._send(HTTPStatus.OK, {"alive": child.alive(), "violations": child.violations})
                return
            self._not_allowed()  # no SSE stream to offer on the MCP endpoint

        def do_POST(self) -> None:
            if self.path.split("?", 1)[0] != path:
                self._send(HTTPStatus.NOT_FOUND, _error_body(-32600, f"POST to {path}"))
                return
            length = int(self.headers.get("Content-Length") or 0)
            if length <= 0 or length > MAX_BODY_BYTES:
                self._send(HTTPStatus.BAD_REQUEST, _error_body(-32600, "Bad Content-Length"))
                return
            try:
                message = json.loads(self.rfile.read(length))
            except ValueError:
                self._send(HTTPStatus.BAD_REQUEST, _error_body(-32700, "Parse error"))
                return
            if not isinstance(message, dict) or not isinstance(message.get("method"), str):
                self._send(
                    HTTPStatus.BAD_REQUEST,
                    _error_body(-32600, "The adapter relays single requests and notifications"),
                )
                return
            if not child.alive():
                self._send(HTTPStatus.BAD_GATEWAY, _error_body(-32603, "stdio server exited"))
                return
            if "id" not in message:
                ok = child.notify(message)
                self._send(HTTPStatus.ACCEPTED if ok else HTTPStatus.BAD_GATEWAY)
                return
            response = child.request(message)
            if response is None:
                self._send(
                    HTTPStatus.BAD_GATEWAY,
                    _error_body(-32603, "No response from the stdio server", message["id"]),
                )
                return
            self._send(HTTPStatus.OK, response)

    return Handler


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--port", type=int, default=0, help="0 picks a free port")
    parser.add_argument("--path", default="/mcp")
    parser.add_argument("command", nargs="+", help="the stdio server command (after --)")
    args = parser.parse_args(argv)

    child = StdioChild(args.command)
    httpd = ThreadingHTTPServer(("127.0.0.1", args.port), make_handler(child, args.path))
    httpd.daemon_threads = True
    stop = threading.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: stop.set())
    serving = threading.Thread(target=httpd.serve_forever, name="http", daemon=True)
    serving.start()
    sys.stdout.write(f"http://127.0.0.1:{httpd.server_address[1]}{args.path}\n")
    sys.stdout.flush()

    while not stop.wait(0.2):
        if not child.alive():
            _log("the stdio server exited on its own")
            break
    httpd.shutdown()
    httpd.server_close()
    returncode = child.close()
    if returncode != 0:
        _log(f"stdio server exit status {returncode}")
    if child.violations:
        _log(f"{len(child.violations)} stdio rule violation(s) by the server")
    return 0 if returncode == 0 and not child.violations and stop.is_set() else 1


if __name__ == "__main__":
    raise SystemExit(main())
