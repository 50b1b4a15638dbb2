"""The client half of Streamable HTTP 2026-07-28 (basic/transports/streamable-http): one POST on
its own connection, its response read within bounds, and the request metadata headers a client
must send. What `ClientSession.connect` sends its requests through.

- `post(endpoint, fields, body, limits)`: an HTTP/1.1 exchange over a fresh TCP connection
  (anyio), yielding the status, the headers and the body's bytes (Content-Length, chunked or up
  to the close). Leaving the block closes the connection: over HTTP that is how a client cancels
  a request ("Cancellation").
- `SseParser`: the events of a `text/event-stream` body, fed bytes (sans-IO).
- `metadata_headers(...)`: `MCP-Protocol-Version`, `Mcp-Method`, `Mcp-Name` and the
  `Mcp-Param-{Name}` headers of a tool's `x-mcp-header` properties, values encoded as "Value
  Encoding" says.

A hostile server cannot make it read without bound: the head, each header, a chunk-size line,
a JSON body and each SSE event have a size limit (`Limits`), past which the exchange fails with
`HttpProtocolError` and the connection is closed. Standard library and anyio only.
"""

from __future__ import annotations

import base64
import re
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any, Final
from urllib.parse import urlsplit

import anyio
from anyio.streams.buffered import BufferedByteReceiveStream

from .._errors import MrtrError

__all__ = (
    "HEADER_MISMATCH",
    "NAMED_BY",
    "Endpoint",
    "HttpConnectionError",
    "HttpProtocolError",
    "HttpResponse",
    "Limits",
    "SseParser",
    "encode_header_value",
    "metadata_headers",
    "parse_endpoint",
    "post",
    "read_body",
)

#: "Server Validation": the JSON-RPC error of a request whose headers disagree with its body.
HEADER_MISMATCH: Final = -32020
#: "Standard Request Headers": `Mcp-Name` mirrors `params.name` / `params.uri`; the tasks
#: extension ("Streamable HTTP: Routing Headers") adds `params.taskId` for its methods.
NAMED_BY: Final = {
    "tools/call": "name",
    "prompts/get": "name",
    "resources/read": "uri",
    "tasks/get": "taskId",
    "tasks/update": "taskId",
    "tasks/cancel": "taskId",
}
#: RFC 9110 section 5.5: what a header value may hold as it is (visible ASCII, space, tab).
_PLAIN: Final = re.compile(r"[\x21-\x7e](?:[\x20-\x7e]*[\x21-\x7e])?")
_SENTINEL: Final = re.compile(r"=\?base64\?.*\?=", re.DOTALL)
#: RFC 9110 section 5.6.2: a token, what an `x-mcp-header` name must be.
_TOKEN: Final = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")
_MAX_STATUS_LINES: Final = 8  # 1xx interim responses skipped before a final one, at most
_MAX_CHUNK_LINE: Final = 1024  # a chunk-size line (with extensions) is short
_MAX_TRAILER_BYTES: Final = 64 * 1024
_EOL: Final = re.compile(rb"\r\n|\r|\n")
_HEX: Final = re.compile(rb"[0-9a-fA-F]{1,16}")
_READ_PIECE: Final = 64 * 1024
_EXCERPT: Final = 200


class HttpProtocolError(MrtrError):
    """The server's bytes were not an HTTP response this client reads, or passed a bound."""


class HttpConnectionError(HttpProtocolError):
    """The connection could not be made, or broke or closed before the response ended."""


@dataclass(frozen=True, slots=True)
class Limits:
    """How much of a server's response is read before the exchange fails.

    The head as uvicorn bounds a request's (64 KiB), a JSON body and an SSE event as the stdio
    client bounds a line (16 MiB), and the notifications one response may stream before its
    result (a tool sends at most 1000 log messages per request; progress the rest).
    """

    max_head_bytes: int = 64 * 1024
    max_headers: int = 100
    max_body_bytes: int = 16 * 1024 * 1024
    max_event_bytes: int = 16 * 1024 * 1024
    max_notifications: int = 10_000


@dataclass(frozen=True, slots=True)
class Endpoint:
    """Where the MCP endpoint is: host and port to connect to, the path, the Host header."""

    host: str
    port: int
    path: str
    authority: str


def parse_endpoint(url: str) -> Endpoint:
    """An ``http://host[:port]/path`` URL; ValueError for anything else (https is not spoken
    here: a test client talks to a server it started, or through a proxy it trusts)."""
    parts = urlsplit(url)
    if parts.scheme != "http":
        raise ValueError(f"the MCP endpoint must be an http:// URL, not {url!r}")
    if parts.hostname is None:
        raise ValueError(f"the MCP endpoint URL names no host: {url!r}")
    if parts.username is not None or parts.password is not None:
        raise ValueError("put credentials in token=, not in the URL")
    try:
        port = parts.port or 80
    except ValueError:
        raise ValueError(f"the MCP endpoint URL has an invalid port: {url!r}") from None
    path = parts.path or "/"
    if parts.query:
        path = f"{path}?{parts.query}"
    return Endpoint(parts.hostname, port, path, parts.netloc.rpartition("@")[2])


def encode_header_value(value: str) -> str:
    """basic/transports/streamable-http "Value Encoding": the value as it is when it is plain
    visible ASCII without leading or trailing whitespace and does not look like the sentinel;
    else ``=?base64?<Base64 of its UTF-8>?=``."""
    if _PLAIN.fullmatch(value) and not _SENTINEL.fullmatch(value):
        return value
    return f"=?base64?{base64.b64encode(value.encode('utf-8')).decode('ascii')}?="


def _mirrored(
    schema: Mapping[str, Any], arguments: object, found: dict[str, str], depth: int = 0
) -> None:
    properties = schema.get("properties")
    if not isinstance(properties, Mapping) or depth > _MAX_SCHEMA_DEPTH:
        return
    for key, child in properties.items():
        if not isinstance(child, Mapping):
            continue
        has_value = isinstance(arguments, Mapping) and key in arguments
        value = arguments[key] if isinstance(arguments, Mapping) and has_value else None
        name = child.get("x-mcp-header")
        kind = child.get("type")
        if isinstance(name, str) and _TOKEN.fullmatch(name) and kind in _KINDS:
            text = _header_text(kind, value) if has_value else None
            header = f"Mcp-Param-{name}"
            if text is not None and header.lower() not in {h.lower() for h in found}:
                found[header] = encode_header_value(text)
        _mirrored(child, value, found, depth + 1)


_KINDS: Final = ("string", "integer", "boolean")
#: A server's schema is walked this deep for x-mcp-header properties, no deeper (a hostile one
#: could nest without end).
_MAX_SCHEMA_DEPTH: Final = 64


def _header_text(kind: str, value: object) -> str | None:
    # "Value Encoding" type conversion; null (or a value of another type) sends no header.
    if kind == "boolean" and isinstance(value, bool):
        return "true" if value else "false"
    if kind == "integer" and isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    if kind == "integer" and isinstance(value, float) and value.is_integer():
        return str(int(value))
    if kind == "string" and isinstance(value, str):
        return value
    return None


def metadata_headers(
    method: str,
    params: Mapping[str, Any],
    protocol_version: str,
    input_schema: Mapping[str, Any] | None = None,
) -> dict[str, str]:
    """The request metadata headers of one request ("Request Metadata"): the protocol version
    the body's `_meta` names, the method, the name or URI the request is about, and for a
    ``tools/call`` the ``Mcp-Param-{Name}`` of each argument the tool's `input_schema` marks
    with ``x-mcp-header`` ("Custom Headers from Tool Parameters"; absent or null: no header)."""
    fields = {"MCP-Protocol-Version": protocol_version, "Mcp-Method": method}
    field = NAMED_BY.get(method)
    named = params.get(field) if field is not None else None
    if isinstance(named, str):
        fields["Mcp-Name"] = encode_header_value(named)
    if method == "tools/call" and input_schema is not None:
        found: dict[str, str] = {}
        _mirrored(input_schema, params.get("arguments"), found)
        fields.update(found)
    return fields


# -- one exchange ---------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class HttpResponse:
    """A response's status and headers (names lower-cased, repeats joined with ", ")."""

    status: int
    headers: Mapping[str, str]
    body: AsyncIterator[bytes]

    @property
    def media_type(self) -> str:
        return self.headers.get("content-type", "").split(";", 1)[0].strip().lower()


def _field_line(name: str, value: str) -> bytes:
    if "\r" in value or "\n" in value or "\r" in name or "\n" in name or ":" in name:
        raise ValueError(f"header {name!r} holds a line break or its name a colon")
    return f"{name}: {value}\r\n".encode("latin-1")


@asynccontextmanager
async def post(
    endpoint: Endpoint, fields: Mapping[str, str], body: bytes, limits: Limits
) -> AsyncIterator[HttpResponse]:
    """POST `body` to `endpoint` on a new connection; the connection closes when the block ends
    (whatever is left of the body unread: closing is cancelling)."""
    head = [f"POST {endpoint.path} HTTP/1.1\r\n".encode("ascii")]
    if "host" not in {name.lower() for name in fields}:  # a test may send its own Host
        head.append(_field_line("Host", endpoint.authority))
    for name, value in fields.items():
        head.append(_field_line(name, value))
    head.append(_field_line("Content-Length", str(len(body))))
    # One request per connection: the end of the exchange is the end of the connection.
    head.append(b"Connection: close\r\n\r\n")
    try:
        stream = await anyio.connect_tcp(endpoint.host, endpoint.port)
    except OSError as error:
        raise HttpConnectionError(
            f"cannot connect to {endpoint.authority}: {error.strerror or error}"
        ) from None
    try:
        await stream.send(b"".join(head) + body)
        buffered = BufferedByteReceiveStream(stream)
        status, headers = await _read_head(buffered, limits)
        yield HttpResponse(status, headers, _body(buffered, status, headers))
    except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError) as error:
        raise HttpConnectionError(
            f"the connection to {endpoint.authority} broke: {error}"
        ) from None
    finally:
        with anyio.CancelScope(shield=True):
            await stream.aclose()


async def _line(stream: BufferedByteReceiveStream, budget: int, what: str) -> bytes:
    line: bytes | None
    try:
        line = await stream.receive_until(b"\r\n", max(budget, 0))
    except anyio.DelimiterNotFound:
        line = None
    except (anyio.IncompleteRead, anyio.EndOfStream):
        raise HttpConnectionError(f"the server closed the connection inside the {what}") from None
    # receive_until finds a delimiter anywhere in what one read brought, past max_bytes too.
    if line is None or len(line) > budget:
        raise HttpProtocolError(f"{what} is longer than this client reads")
    return line


async def _read_head(
    stream: BufferedByteReceiveStream, limits: Limits
) -> tuple[int, dict[str, str]]:
    budget = limits.max_head_bytes
    what = f"response head (at most {limits.max_head_bytes} bytes)"
    for _ in range(_MAX_STATUS_LINES):
        line = await _line(stream, budget, what)
        budget -= len(line) + 2
        parts = line.split(b" ", 2)
        if len(parts) < 2 or not parts[0].startswith(b"HTTP/1.") or not parts[1].isdigit():
            raise HttpProtocolError(f"not an HTTP/1.x status line: {line[:_EXCERPT]!r}")
        status = int(parts[1])
        headers: dict[str, str] = {}
        count = 0
        while True:
            line = await _line(stream, budget, what)
            budget -= len(line) + 2
            if not line:
                break
            count += 1
            if count > limits.max_headers:
                raise HttpProtocolError(f"more than {limits.max_headers} response headers")
            name, colon, value = line.partition(b":")
            if not colon or not name or name != name.strip():
                raise HttpProtocolError(f"not a header line: {line[:_EXCERPT]!r}")
            key = name.decode("latin-1").lower()
            text = value.strip(b" \t").decode("latin-1")
            headers[key] = f"{headers[key]}, {text}" if key in headers else text
        if not 100 <= status < 200:
            return status, headers
    raise HttpProtocolError(f"more than {_MAX_STATUS_LINES} interim responses")


async def _body(
    stream: BufferedByteReceiveStream, status: int, headers: Mapping[str, str]
) -> AsyncIterator[bytes]:
    if status in (204, 304):
        return
    coding = headers.get("transfer-encoding", "").split(",")[-1].strip().lower()
    if coding == "chunked":
        async for piece in _chunked(stream):
            yield piece
        return
    declared = headers.get("content-length")
    if declared is not None:
        if not declared.isdigit():
            raise HttpProtocolError(f"invalid Content-Length {declared[:_EXCERPT]!r}")
        left = int(declared)
        while left:
            piece = await _receive(stream, min(left, _READ_PIECE))
            left -= len(piece)
            yield piece
        return
    while True:  # RFC 9112 section 6.3: no length, no chunks -- the body ends with the connection
        try:
            yield await stream.receive(_READ_PIECE)
        except (anyio.EndOfStream, anyio.IncompleteRead):
            return


async def _receive(stream: BufferedByteReceiveStream, size: int) -> bytes:
    try:
        return await stream.receive(size)
    except (anyio.EndOfStream, anyio.IncompleteRead):
        raise HttpConnectionError("the server closed the connection inside the body") from None


async def _chunked(stream: BufferedByteReceiveStream) -> AsyncIterator[bytes]:
    # RFC 9112 section 7.1. A chunk's size is read in pieces, never allocated at once.
    while True:
        line = await _line(stream, _MAX_CHUNK_LINE, "chunk-size line")
        size_text = line.split(b";", 1)[0].strip(b" \t")
        if not _HEX.fullmatch(size_text):
            raise HttpProtocolError(f"invalid chunk size {line[:_EXCERPT]!r}")
        left = int(size_text, 16)
        if left == 0:
            # Trailer fields, bounded like a head, then the blank line.
            budget = _MAX_TRAILER_BYTES
            while trailer := await _line(stream, budget, "trailer section"):
                budget -= len(trailer) + 2
            return
        while left:
            piece = await _receive(stream, min(left, _READ_PIECE))
            left -= len(piece)
            yield piece
        if await _line(stream, 2, "chunk end") != b"":
            raise HttpProtocolError("a chunk is longer than its size says")


async def read_body(response: HttpResponse, limit: int) -> bytes:
    """The whole body, or HttpProtocolError once it passes `limit` bytes."""
    declared = response.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > limit:
        raise HttpProtocolError(f"a response body of {declared} bytes (this client reads {limit})")
    parts: list[bytes] = []
    size = 0
    async for piece in response.body:
        size += len(piece)
        if size > limit:
            raise HttpProtocolError(f"a response body over {limit} bytes")
        parts.append(piece)
    return b"".join(parts)


# -- server-sent events ---------------------------------------------------------------------------


class SseParser:
    """The `message` events of a `text/event-stream` (WHATWG HTML "Server-sent events",
    "Event stream interpretation"): `feed(bytes)` returns the data of each event it completed.

    Lines end with CRLF, LF or CR; `data:` lines join with LF; comments (`:`) and the `id` and
    `retry` fields are ignored (2026-07-28 streams are not resumable); an event of another type
    than `message` is dropped. An event (or a line) past `max_event_bytes` raises
    HttpProtocolError.
    """

    def __init__(self, max_event_bytes: int) -> None:
        self._limit = max_event_bytes
        self._pending = b""
        self._data: list[bytes] = []
        self._data_bytes = 0
        self._event = b""
        self._first = True
        self._skip_lf = False

    def feed(self, chunk: bytes) -> list[bytes]:
        if self._skip_lf and chunk[:1] == b"\n":
            chunk = chunk[1:]  # the second half of a CRLF split between two chunks
        self._skip_lf = False
        buffer = self._pending + chunk
        events: list[bytes] = []
        start = 0
        while (end := _EOL.search(buffer, start)) is not None:
            self._line(buffer[start : end.start()], events)
            start = end.end()
            self._skip_lf = end.group() == b"\r" and start == len(buffer)
        self._pending = buffer[start:]
        if len(self._pending) + self._data_bytes > self._limit:
            raise HttpProtocolError(f"a server-sent event over {self._limit} bytes")
        return events

    def _line(self, line: bytes, events: list[bytes]) -> None:
        if self._first:
            self._first = False
            line = line.removeprefix(b"\xef\xbb\xbf")
        if not line:
            if self._data and self._event in (b"", b"message"):
                events.append(b"\n".join(self._data))
            self._data, self._data_bytes, self._event = [], 0, b""
            return
        if line.startswith(b":"):
            return
        name, colon, value = line.partition(b":")
        if colon and value.startswith(b" "):
            value = value[1:]
        if name == b"data":
            self._data.append(value)
            self._data_bytes += len(value) + 1
            if self._data_bytes > self._limit:
                raise HttpProtocolError(f"a server-sent event over {self._limit} bytes")
        elif name == b"event":
            self._event = value
