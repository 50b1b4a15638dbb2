"""JSON-RPC 2.0 framing for MCP over stdio: one message per line, nothing else.

Pure functions only: bytes in, message objects out, and back. The transport feeds lines here
and writes what comes back; nothing in this module touches a stream.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any, Final

from . import _redact
from ._errors import MrtrError

__all__ = (
    "INTERNAL_ERROR",
    "INVALID_PARAMS",
    "INVALID_REQUEST",
    "MAX_LINE_BYTES",
    "MAX_QUOTED_CHARS",
    "METHOD_NOT_FOUND",
    "MISSING_REQUIRED_CLIENT_CAPABILITY",
    "PARSE_ERROR",
    "UNSUPPORTED_PROTOCOL_VERSION",
    "InvalidMessage",
    "JSONObject",
    "LineSplitter",
    "MalformedRequest",
    "Message",
    "Notification",
    "Request",
    "RequestId",
    "Response",
    "RpcError",
    "canonical_json",
    "clip",
    "encode",
    "error_response",
    "json_size",
    "message_problem",
    "parse_json",
    "parse_line",
    "parse_message",
    "success_response",
)

JSONObject = dict[str, Any]
RequestId = str | int

# JSON-RPC 2.0 standard codes.
PARSE_ERROR: Final = -32700
INVALID_REQUEST: Final = -32600
METHOD_NOT_FOUND: Final = -32601
INVALID_PARAMS: Final = -32602
INTERNAL_ERROR: Final = -32603
# 2026-07-28 basic/index "Error Codes": the only MCP-defined codes a stdio server may emit.
MISSING_REQUIRED_CLIENT_CAPABILITY: Final = -32021
UNSUPPORTED_PROTOCOL_VERSION: Final = -32022

#: The longest line we accept. Large enough for a sizeable tool argument or a deep MRTR
#: history; small enough that one hostile line cannot balloon memory. Longer lines are
#: discarded by the transport as they stream in and answered with -32600.
MAX_LINE_BYTES: Final = 4 * 1024 * 1024


#: How much of a client-chosen string (a tool name, a URI, a method, an input key) an error
#: message quotes: enough to recognise it, never a way to make the server echo a megabyte.
MAX_QUOTED_CHARS: Final = 64


def clip(text: str) -> str:
    """`text` as an error message may quote it: cut to MAX_QUOTED_CHARS characters."""
    if len(text) <= MAX_QUOTED_CHARS:
        return text
    return f"{text[:MAX_QUOTED_CHARS]}...({len(text)} characters)"


class RpcError(MrtrError):
    """A JSON-RPC error, either way: a request the server answers with an error response, a
    server's error response as a client sees it, or a client's refusal of a server request."""

    def __init__(self, code: int, message: str, data: object | None = None) -> None:
        super().__init__(code, message)
        self.code = code
        self.message = message
        self.data = data

    def __str__(self) -> str:
        return f"[{self.code}] {self.message}"


class MalformedRequest(RpcError):
    """An error in the request's own envelope (a missing or invalid `_meta` field), as opposed to
    what it asked for. basic/index: on HTTP such a request gets 400 Bad Request."""


@dataclass(frozen=True, slots=True)
class Request:
    id: RequestId
    method: str
    params: JSONObject


@dataclass(frozen=True, slots=True)
class Notification:
    method: str
    params: JSONObject


@dataclass(frozen=True, slots=True)
class Response:
    """A response from the client: only ever an answer to a legacy-era server request."""

    id: RequestId | None
    result: JSONObject | None
    error: JSONObject | None


Message = Request | Notification | Response


class InvalidMessage(RpcError):
    """A line that is not a usable message; `request_id` is set when the sender can be told."""

    def __init__(self, code: int, message: str, request_id: RequestId | None = None) -> None:
        super().__init__(code, message)
        self.request_id = request_id


def _valid_id(value: object) -> bool:
    # MCP (basic/index): "the ID MUST NOT be null"; bool is an int subclass in Python, not in JSON.
    return isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool))


def _reject_constant(name: str) -> Any:
    # NaN and Infinity are not JSON (RFC 8259 section 6); Python's parser accepts them by default.
    raise ValueError(f"{name} is not JSON")


def _finite_float(text: str) -> float:
    # `1e400` parses to inf, which could only be written back out as the non-JSON `Infinity`.
    value = float(text)
    if not math.isfinite(value):
        raise ValueError("number out of range")
    return value


class _DuplicateName(MrtrError, ValueError):
    """An object of the message names a member twice."""


def _unique_members(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    # RFC 8259 section 4: "The names within an object SHOULD be unique", and parsers disagree on
    # which of two wins (Python keeps the last, many gateways the first), so a message with a
    # name twice could mean one tool call to a proxy and another to us: refused, never resolved.
    # Measured against a plain decode followed by a count of ':' against the members decoded
    # (strict decoding only when they differ): this hook costs no more instructions on a typical
    # tools/call line and fewer when a string holds a ':', so the obviously strict form is kept.
    members = dict(pairs)
    if len(members) != len(pairs):
        raise _DuplicateName
    return members


# One decoder for every message: json.loads with options builds a new one per call.
_DECODER: Final = json.JSONDecoder(
    parse_constant=_reject_constant, parse_float=_finite_float, object_pairs_hook=_unique_members
)


def parse_json(line: bytes) -> object:
    """Decode one line as strict JSON (UTF-8; no NaN/Infinity, no number out of float range,
    no object with a name twice), or raise `InvalidMessage`: -32700, or -32600 for a
    duplicate name (with the request's id when that much is unambiguous)."""
    try:
        text = line.decode("utf-8")
        return _DECODER.decode(text)
    except _DuplicateName:
        pass
    except (UnicodeDecodeError, ValueError, RecursionError):
        raise InvalidMessage(PARSE_ERROR, "Parse error: not valid UTF-8 JSON") from None
    raise _duplicate_name_error(text)


def _duplicate_name_error(text: str) -> InvalidMessage:
    """The refusal of `text`, a message with a name twice: decoded again (only such messages
    pay for it) to find the name and whether the id can be told."""
    repeated: list[str] = []
    outermost: list[list[tuple[str, Any]]] = [[]]

    def pairs_hook(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        if not repeated:
            seen: set[str] = set()
            for name, _ in pairs:
                if name in seen:
                    repeated.append(name)
                    break
                seen.add(name)
        outermost[0] = pairs  # the outermost object is the last one finished
        return dict(pairs)

    strict = json.JSONDecoder(
        parse_constant=_reject_constant, parse_float=_finite_float, object_pairs_hook=pairs_hook
    )
    try:
        value = strict.decode(text)
    except (ValueError, RecursionError):
        # A name twice, and broken further on: not JSON at all.
        return InvalidMessage(PARSE_ERROR, "Parse error: not valid UTF-8 JSON")
    ids = [member for name, member in outermost[0] if name == "id"]
    # JSON-RPC 2.0 section 5.1: -32600 "The JSON sent is not a valid Request object". The id is
    # echoed only when the outermost object names it once: otherwise which one is the question.
    known_id = ids[0] if isinstance(value, dict) and len(ids) == 1 and _valid_id(ids[0]) else None
    name = repeated[0] if repeated else ""
    return InvalidMessage(
        INVALID_REQUEST,
        f"Invalid request: duplicate name {clip(name)!r} in a JSON object",
        known_id,
    )


def parse_line(line: bytes) -> Message:
    """Parse one newline-free line into a message, or raise `InvalidMessage`."""
    return parse_message(parse_json(line))


def parse_message(raw: object) -> Message:
    """Classify one decoded JSON value as a message, or raise `InvalidMessage`.

    Lenient about responses (a server reads them only as answers to its own legacy requests);
    `message_problem` is the strict check a client applies to what a server writes.
    """
    if isinstance(raw, list):
        # JSON-RPC batches were removed from MCP in 2025-06-18 and never came back.
        raise InvalidMessage(INVALID_REQUEST, "Invalid request: batches are not supported")
    if not isinstance(raw, dict):
        raise InvalidMessage(INVALID_REQUEST, "Invalid request: a message must be a JSON object")
    raw_id = raw.get("id")
    known_id = raw_id if _valid_id(raw_id) else None
    if raw.get("jsonrpc") != "2.0":
        raise InvalidMessage(INVALID_REQUEST, 'Invalid request: "jsonrpc" must be "2.0"', known_id)
    if "method" in raw:
        method = raw["method"]
        if not isinstance(method, str):
            raise InvalidMessage(
                INVALID_REQUEST, 'Invalid request: "method" must be a string', known_id
            )
        params = raw.get("params", {})
        if "id" in raw and known_id is None:
            raise InvalidMessage(
                INVALID_REQUEST, 'Invalid request: "id" must be a string or an integer'
            )
        if params is None:
            params = {}
        if not isinstance(params, dict):
            raise InvalidMessage(
                INVALID_PARAMS, 'Invalid params: "params" must be an object', known_id
            )
        if known_id is None:
            return Notification(method, params)
        return Request(known_id, method, params)
    if "result" in raw or "error" in raw:
        # A response, possibly to nothing we sent (id null: the client could not parse one of
        # ours). JSON-RPC forbids answering a response, so it is never an error to report.
        result = raw.get("result")
        error = raw.get("error")
        return Response(
            known_id,
            result if isinstance(result, dict) else None,
            error if isinstance(error, dict) else None,
        )
    raise InvalidMessage(
        INVALID_REQUEST, "Invalid request: neither a request nor a response", known_id
    )


def message_problem(raw: object) -> str | None:
    """What makes `raw` not a valid JSON-RPC 2.0 message, strictly; None when it is one.

    The check a client applies to every line a server writes (2026-07-28
    basic/transports/stdio: the server "MUST NOT write anything to its stdout that is not a
    valid MCP message"): exactly one of result/error, an integer code and string message, a
    string-or-integer id (null only on an error), params an object.
    """
    if not isinstance(raw, dict):
        return "not a JSON object"
    if raw.get("jsonrpc") != "2.0":
        return 'missing "jsonrpc": "2.0"'
    if "method" in raw:
        if not isinstance(raw["method"], str):
            return "method is not a string"
        if "params" in raw and not isinstance(raw["params"], dict):
            return "params is not an object"
        if "result" in raw or "error" in raw:
            return "a request with result/error"
        if "id" in raw and not _valid_id(raw["id"]):
            return "invalid request id"
        return None
    if "id" not in raw:
        return "neither a request, a notification nor a response"
    request_id = raw["id"]
    if request_id is not None and not _valid_id(request_id):
        return "invalid response id"
    if ("result" in raw) == ("error" in raw):
        return "a response needs exactly one of result and error"
    if "result" in raw:
        if request_id is None:
            return "a result with a null id"
        return None if isinstance(raw["result"], dict) else "result is not an object"
    error = raw["error"]
    if not isinstance(error, dict):
        return "error is not an object"
    code = error.get("code")
    if not isinstance(code, int) or isinstance(code, bool):
        return "error.code is not an integer"
    if not isinstance(error.get("message"), str):
        return "error.message is not a string"
    return None


#: One encoder for every message: json.dumps with options builds a new encoder per call,
#: which costs a quarter of encoding a typical response.
_ENCODER: Final = json.JSONEncoder(separators=(",", ":"), ensure_ascii=True, allow_nan=False)
_CANONICAL: Final = json.JSONEncoder(
    sort_keys=True, separators=(",", ":"), ensure_ascii=True, allow_nan=False
)


def canonical_json(value: object) -> str:
    """`value` as canonical JSON (sorted keys, compact, ASCII): the one "is this JSON, and how
    big" check (answers, handler state, results a tool built by hand), whose text can also
    stand for the value (equal values, equal text). Raises ValueError, naming the reason, for
    anything JSON cannot carry (NaN, a set, a cycle, nesting past the stack)."""
    try:
        return _CANONICAL.encode(value)
    except (TypeError, ValueError, RecursionError) as error:
        raise ValueError(str(error) or type(error).__name__) from None


def json_size(value: object) -> int:
    """How many characters `value` takes as compact JSON; ValueError if it is not JSON."""
    return len(canonical_json(value))


def encode(message: JSONObject) -> bytes:
    """Serialise one message as a single line, newline included.

    `ensure_ascii` escapes every non-ASCII character, so no output can hold a raw newline or
    an unencodable lone surrogate that a client smuggled in (stdio: messages MUST NOT contain
    embedded newlines); `allow_nan=False` refuses the non-JSON `NaN`/`Infinity`. Raises
    TypeError or ValueError for a message that is not JSON.
    """
    text = _ENCODER.encode(message)
    # The last path out: a secret the process registered (treat_as_secret) never reaches the
    # client, in a result as much as in an error. Redacted string by string and encoded again,
    # so the line stays valid JSON; a server that registered none pays one truthiness check.
    needles = _redact.WIRE_NEEDLES
    if needles and any(needle in text for needle in needles):
        text = _ENCODER.encode(_redact.redact_known(message))
    return text.encode("ascii") + b"\n"


class LineSplitter:
    """Splits a byte stream into lines, discarding any line over `max_bytes`.

    stdio framing (basic/transports/stdio): one message per line. Both ends use it: the server
    on its stdin, the client on the server's stdout. By default blank lines are skipped and a
    trailing CR is dropped (lenient, for the server); `raw=True` returns every line exactly
    as it came (strict, for a client recording what a server wrote).
    """

    def __init__(self, max_bytes: int = MAX_LINE_BYTES, *, raw: bool = False) -> None:
        self._max_bytes = max_bytes
        self._raw = raw
        self._buffer = bytearray()
        self._discarding = False

    def feed(self, chunk: bytes) -> list[bytes | None]:
        """The complete lines in `chunk` (None marks an oversized one)."""
        lines: list[bytes | None] = []
        start = 0
        while (end := chunk.find(b"\n", start)) >= 0:
            if self._discarding:
                self._discarding = False
            else:
                if self._buffer:
                    self._buffer += chunk[start:end]
                    line = bytes(self._buffer)
                    self._buffer.clear()
                else:
                    line = chunk[start:end]
                if len(line) > self._max_bytes:
                    lines.append(None)
                elif self._raw:
                    lines.append(line)
                elif line.strip():
                    lines.append(line.rstrip(b"\r"))
            start = end + 1
        if not self._discarding and start < len(chunk):
            self._buffer += chunk[start:]
            if len(self._buffer) > self._max_bytes:
                self._buffer.clear()
                self._discarding = True
                lines.append(None)
        return lines

    def finish(self) -> list[bytes | None]:
        """At EOF: the last line, when the stream did not end it with a newline."""
        line = bytes(self._buffer)
        self._buffer.clear()
        self._discarding = False
        if self._raw:
            return [line] if line else []
        return [line.rstrip(b"\r")] if line.strip() else []


def success_response(request_id: RequestId, result: JSONObject) -> JSONObject:
    return {"jsonrpc": "2.0", "id": request_id, "result": result}


def error_response(
    request_id: RequestId | None, code: int, message: str, data: object | None = None
) -> JSONObject:
    error: JSONObject = {"code": code, "message": message}
    if data is not None:
        error["data"] = data
    return {"jsonrpc": "2.0", "id": request_id, "error": error}
