"""A streaming HTTP proxy for the peer tests: it stands between a real MCP client and one or more
`<slug> http` processes, forwards every POST, GET and DELETE of Streamable HTTP as it comes (an
SSE stream is relayed event by event, so a 2025-11-25 server can ask a question on a POST's
stream and get the answer on another POST), and writes down what crossed it.

The transcript is the client's side of the wire, as a reviewer wants to see it: each HTTP request
with the JSON-RPC method (or the id it answers), the `Mcp-Session-Id` and `MCP-Protocol-Version`
it carried, the status, the session id the response set, and the JSON-RPC messages the response
held (an SSE stream's requests and notifications too). `Proxy.transcript()` prints it.

Routing, for replicas: `route="affinity"` keeps a session on the replica whose initialize answer
named it (2025-11-25 basic/transports "Session Management": the id is in the `MCP-Session-Id`
header of the response holding the InitializeResult); a request with no session id goes to the
next replica in turn. `misroute(session)` sends that session's later requests to another replica,
as a proxy without affinity would.
"""

from __future__ import annotations

import http.client
import itertools
import json
import threading
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Self
from urllib.parse import urlsplit

#: RFC 9110 section 7.6.1: connection-specific fields are not forwarded by an intermediary.
HOP_BY_HOP = frozenset(
    {
        "connection",
        "keep-alive",
        "transfer-encoding",
        "content-length",
        "host",
        "upgrade",
    }
)
#: A GET stream may stay quiet for as long as a test runs; a POST's stream as long as a deploy.
UPSTREAM_TIMEOUT_SECONDS = 300
SESSION = "mcp-session-id"
VERSION = "mcp-protocol-version"


def _messages(body: bytes) -> list[dict[str, Any]]:
    if not body.strip():
        return []
    try:
        parsed = json.loads(body)
    except ValueError:
        return []
    found = parsed if isinstance(parsed, list) else [parsed]
    return [message for message in found if isinstance(message, dict)]


def describe(message: dict[str, Any]) -> str:
    """One JSON-RPC message in a few words: `tools/call deploy_to_aws (id 3)`, `result of 0`."""
    if "method" in message:
        name = (
            message.get("params", {}).get("name")
            if isinstance(message.get("params"), dict)
            else None
        )
        text = message["method"] + (f" {name}" if isinstance(name, str) else "")
        return text + (f" (id {message['id']})" if "id" in message else "")
    if "error" in message:
        return f"error {message['error'].get('code')} to {message.get('id')}"
    result = message.get("result", {})
    tail = ""
    if isinstance(result, dict) and "action" in result:
        tail = f" ({result['action']})"  # an elicitation's answer: accept / decline / cancel
    return f"result of {message.get('id')}{tail}"


@dataclass
class Exchange:
    """One HTTP request through the proxy and what came back."""

    verb: str
    upstream: int
    sent: list[dict[str, Any]]
    session: str | None
    version: str | None
    where: str = ""  # the upstream's name, for the transcript
    status: int = 0
    content_type: str = ""
    new_session: str | None = None
    received: list[dict[str, Any]] = field(default_factory=list)

    def methods(self) -> list[str]:
        return [message["method"] for message in self.sent if "method" in message]

    def received_methods(self) -> list[str]:
        return [message["method"] for message in self.received if "method" in message]

    def __str__(self) -> str:
        what = ", ".join(describe(message) for message in self.sent) or "(no body)"
        heads = []
        if self.session:
            heads.append(f"Mcp-Session-Id {self.session[:8]}...")
        if self.version:
            heads.append(f"MCP-Protocol-Version {self.version}")
        line = f"{self.verb} {what}" + (f" [{'; '.join(heads)}]" if heads else "")
        line += f" -> {self.where or self.upstream}: HTTP {self.status}"
        if self.new_session:
            line += f", Mcp-Session-Id {self.new_session[:8]}... set"
        if self.content_type.startswith("text/event-stream"):
            line += ", SSE"
        if self.received:
            line += ": " + ", ".join(describe(message) for message in self.received)
        return line


class _SseRecorder:
    """Splits a relayed SSE byte stream into events and keeps their JSON-RPC messages."""

    def __init__(self, exchange: Exchange) -> None:
        self.exchange = exchange
        self.buffer = b""

    def feed(self, chunk: bytes) -> None:
        self.buffer += chunk.replace(b"\r\n", b"\n")
        while b"\n\n" in self.buffer:
            event, self.buffer = self.buffer.split(b"\n\n", 1)
            data = [line[5:].lstrip() for line in event.split(b"\n") if line.startswith(b"data:")]
            if data:
                self.exchange.received += _messages(b"\n".join(data))


class Proxy(ThreadingHTTPServer):
    """Forwards to `upstreams` (endpoint URLs); `route`: "affinity" or "round-robin";
    `headers` are set on every forwarded request (as a gateway that holds the bearer token)."""

    daemon_threads = True
    block_on_close = False

    def __init__(
        self,
        upstreams: Sequence[str],
        *,
        route: str = "affinity",
        headers: Mapping[str, str] | None = None,
        names: Sequence[str] | None = None,
    ) -> None:
        super().__init__(("127.0.0.1", 0), _Relay)
        self.upstreams = list(upstreams)
        self.headers = dict(headers or {})  # added to every forwarded request (a gateway's token)
        self.names = list(names or (f"replica {n}" for n in range(len(self.upstreams))))
        self.route = route
        self.turns = itertools.count()
        self.lock = threading.Lock()
        self.exchanges: list[Exchange] = []
        # Requests forwarded whose response is not yet recorded. The upstream may act on a
        # request (an elicitation's answer) and the client see the outcome on another stream,
        # and exit, before this request's own response has come back: `since` waits for them.
        self.in_flight = 0
        self.settled = threading.Condition(self.lock)
        self.pinned: dict[str, int] = {}
        self.misrouted: set[str] = set()
        self.thread = threading.Thread(target=self.serve_forever, daemon=True)

    def __enter__(self) -> Self:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.shutdown()
        self.server_close()

    @property
    def url(self) -> str:
        host, port = self.server_address[:2]
        return f"http://{host!s}:{port}/mcp"

    def pick(self, session: str | None) -> int:
        with self.lock:
            if session is not None and self.route == "affinity" and session in self.pinned:
                home = self.pinned[session]
                if session in self.misrouted:
                    return (home + 1) % len(self.upstreams)
                return home
            return next(self.turns) % len(self.upstreams)

    def misroute(self, session: str) -> None:
        """From now on, send `session` to a replica other than its own."""
        with self.lock:
            self.misrouted.add(session)

    def forwarding(self) -> None:
        with self.lock:
            self.in_flight += 1

    def record(self, exchange: Exchange) -> None:
        """Keep `exchange` (its response's status and headers known): it is no longer in flight."""
        with self.lock:
            self.exchanges.append(exchange)
            if exchange.new_session and exchange.new_session not in self.pinned:
                self.pinned[exchange.new_session] = exchange.upstream
            self.in_flight -= 1
            self.settled.notify_all()

    def since(self, start: int) -> list[Exchange]:
        with self.settled:
            self.settled.wait_for(lambda: self.in_flight == 0, timeout=UPSTREAM_TIMEOUT_SECONDS)
            return self.exchanges[start:]

    def sessions(self) -> list[str]:
        """Each session id a response set, in order."""
        with self.lock:
            return [e.new_session for e in self.exchanges if e.new_session]

    def transcript(self, start: int = 0) -> Iterator[str]:
        for number, exchange in enumerate(self.since(start), start=1):
            yield f"  {number:2}. {exchange}"


class _Relay(BaseHTTPRequestHandler):
    server: Proxy

    def do_POST(self) -> None:
        self._relay("POST")

    def do_GET(self) -> None:
        self._relay("GET")

    def do_DELETE(self) -> None:
        self._relay("DELETE")

    def _relay(self, verb: str) -> None:
        length = int(self.headers.get("Content-Length", "0") or 0)
        body = self.rfile.read(length) if length else b""
        session = self.headers.get(SESSION)
        upstream = self.server.pick(session)
        exchange = Exchange(verb, upstream, _messages(body), session, self.headers.get(VERSION))
        exchange.where = self.server.names[upstream]
        target = urlsplit(self.server.upstreams[upstream])
        headers = {k: v for k, v in self.headers.items() if k.lower() not in HOP_BY_HOP}
        headers["Host"] = target.netloc
        headers.update(self.server.headers)
        connection = http.client.HTTPConnection(
            target.hostname or "", target.port, timeout=UPSTREAM_TIMEOUT_SECONDS
        )
        self.server.forwarding()
        recorded = False
        try:
            try:
                connection.request(verb, target.path, body if verb == "POST" else None, headers)
                response = connection.getresponse()
            except OSError as error:  # a dead replica: what a load balancer answers then
                exchange.status = 502
                self.server.record(exchange)
                recorded = True
                self.send_error(502, str(error))
                return
            exchange.status = response.status
            exchange.content_type = response.getheader("Content-Type", "")
            exchange.new_session = response.getheader(SESSION) if session is None else None
            self.send_response(response.status)
            for name, value in response.getheaders():
                if name.lower() not in HOP_BY_HOP:
                    self.send_header(name, value)
            if exchange.content_type.startswith("text/event-stream"):
                # Close-delimited (this handler speaks HTTP/1.0): relayed as it arrives.
                self.end_headers()
                self.server.record(exchange)  # a stream may hold the session's first request
                recorded = True
                recorder = _SseRecorder(exchange)
                while chunk := response.read1(65536):
                    recorder.feed(chunk)
                    self.wfile.write(chunk)
                    self.wfile.flush()
            else:
                payload = response.read()
                exchange.received = _messages(payload)
                self.server.record(exchange)  # before the client, which may leave meanwhile
                recorded = True
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)
        except OSError:
            pass  # the client went away: the upstream connection closes with it
        finally:
            connection.close()
            if not recorded:  # the upstream failed mid-response: what came back is kept
                self.server.record(exchange)

    def log_message(self, format: str, *args: Any) -> None:
        """The proxy's own log is `Proxy.exchanges`."""


LEGACY = "2025-11-25"


def assert_legacy_session(exchanges: Sequence[Exchange]) -> str:
    """A 2025-11-25 conversation over Streamable HTTP, as the wire shows it; its session id.

    2025-11-25 basic/lifecycle: `initialize` first; basic/transports "Session Management": the
    server's answer sets `MCP-Session-Id` and the client MUST send it on every later request;
    "Protocol Version Header": and `MCP-Protocol-Version` with the negotiated version.
    """
    assert exchanges, "nothing crossed the proxy"
    first, *later = exchanges
    assert first.methods() == ["initialize"], str(first)
    assert first.session is None, str(first)
    assert first.status == 200, str(first)
    initialized = [m for m in first.received if "result" in m]
    assert initialized and initialized[0]["result"]["protocolVersion"] == LEGACY, str(first)
    session = first.new_session
    assert session, f"the initialize answer set no Mcp-Session-Id: {first}"
    assert later, "nothing was sent after initialize"
    for exchange in later:
        assert exchange.session == session, str(exchange)
        assert exchange.version == LEGACY, str(exchange)
    return session


def questions(exchanges: Sequence[Exchange]) -> list[dict[str, Any]]:
    """The `elicitation/create` requests the server sent (on any response stream)."""
    return [
        message
        for exchange in exchanges
        for message in exchange.received
        if message.get("method") == "elicitation/create"
    ]


def answers(exchanges: Sequence[Exchange]) -> list[dict[str, Any]]:
    """The JSON-RPC responses the client POSTed back (its answers to the server's requests)."""
    return [
        message
        for exchange in exchanges
        if exchange.verb == "POST"
        for message in exchange.sent
        if "method" not in message and "id" in message
    ]
