"""Bad input: each malformed message gets the right JSON-RPC error or is ignored, as the spec
says, and the server then serves the next request.

Wire-level cases (bytes that are not a message, oversized lines, batches, stray responses) drive
the real server as a subprocess. Everything above the wire (tool arguments, ``inputResponses``,
``requestState``) runs in process through ``MemoryClient`` against the small registry of test
tools below, so no case depends on which tools this project ships.

2026-07-28 basic/patterns/mrtr: "servers MUST treat requestState as an attacker-controlled
input" and "MUST reject state that fails verification"; tampered, expired or mismatched state is
answered with -32602 and never with a re-prompt or a result.
"""

from __future__ import annotations

import base64
import json
import os
import sys
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import pytest
from pydantic import BaseModel

from mrtr_runtime import Context, InputRequired, Registry, elicit_form
from mrtr_runtime._answers import ElicitResult
from mrtr_runtime._jsonrpc import (
    INVALID_PARAMS,
    INVALID_REQUEST,
    MAX_LINE_BYTES,
    METHOD_NOT_FOUND,
    PARSE_ERROR,
    InvalidMessage,
    Request,
    encode,
    parse_line,
)
from mrtr_runtime._router import Session
from mrtr_runtime._tokens import MAX_TOKEN_CHARS, KeyRing, RequestStateCodec, SigningKey
from mrtr_runtime.server import Server
from mrtr_runtime.testing import MemoryClient, RpcError
from support import ALL_CAPABILITIES, PACKAGE, PROJECT

BOUND = 20  # seconds; every wait on the server subprocess is bounded
MODERN = "2026-07-28"
META = {
    "io.modelcontextprotocol/protocolVersion": MODERN,
    "io.modelcontextprotocol/clientCapabilities": {"elicitation": {"form": {}}},
}
TEST_KEY_HEX = bytes(range(64, 96)).hex()
KEY = SigningKey(bytes(range(32)))
OTHER_KEY = SigningKey(bytes(range(100, 132)))
NOW = 1_800_000_000.0
TTL = 600
ACCEPT_ADA = {"action": "accept", "content": {"name": "Ada"}}

# Counted by the tests that try bad inputs; printed at the end of the module (pytest -s).
TRIED: list[str] = []


@pytest.fixture(scope="module", autouse=True)
def report_bad_inputs_tried(request: pytest.FixtureRequest) -> Iterator[None]:
    """After the module: how many bad inputs it tried (the issue asks for the count)."""
    yield
    reporter = request.config.pluginmanager.getplugin("terminalreporter")
    capture = request.config.pluginmanager.getplugin("capturemanager")
    if reporter is not None and capture is not None:
        with capture.global_and_fixture_disabled():
            reporter.write_line(f"bad inputs tried: {len(TRIED)}")


# --- the real server over pipes --------------------------------------------------------------


def server_env() -> dict[str, str]:
    env = dict(os.environ)
    env["MRTR_SIGNING_KEY"] = TEST_KEY_HEX
    env.pop("MRTR_SIGNING_KEY_FILE", None)
    env.pop("MRTR_PREVIOUS_SIGNING_KEYS", None)
    env["MRTR_LOG_LEVEL"] = "DEBUG"
    return env


def line(message: object) -> bytes:
    return json.dumps(message, separators=(",", ":")).encode() + b"\n"


def request_line(request_id: object, method: str, params: dict[str, Any] | None = None) -> bytes:
    body = {"_meta": META, **(params or {})}
    return line({"jsonrpc": "2.0", "id": request_id, "method": method, "params": body})


SENTINEL = "next-request"
SENTINEL_LINE = request_line(SENTINEL, "server/discover")


def strict_json(raw: bytes) -> Any:
    def reject(name: str) -> Any:
        raise ValueError(f"{name} is not JSON")

    return json.loads(raw.decode("utf-8"), parse_constant=reject)


@dataclass
class Exchange:
    """What one server run wrote: every stdout message, stderr, exit code, peak memory."""

    messages: list[dict[str, Any]] = field(default_factory=list)
    bad_lines: list[bytes] = field(default_factory=list)
    stderr: str = ""
    returncode: int | None = None
    peak_rss_kib: int | None = None

    def answers(self) -> list[tuple[object, int | None]]:
        """(id, error code or None for a result) of every response except the sentinel's."""
        return [
            (message.get("id"), message["error"]["code"] if "error" in message else None)
            for message in self.messages
            if message.get("id") != SENTINEL
        ]

    def sentinel_served(self) -> bool:
        found = [message for message in self.messages if message.get("id") == SENTINEL]
        return len(found) == 1 and "result" in found[0]


def peak_rss_kib(pid: int) -> int | None:
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return None
    for row in status.splitlines():
        if row.startswith("VmHWM:"):
            return int(row.split()[1])
    return None


async def exchange(lines: Sequence[bytes]) -> Exchange:
    """Start the server, send ``lines`` then the sentinel request, and once the sentinel is
    answered (so every earlier line was read) close stdin and collect everything until exit."""
    result = Exchange()
    sentinel_seen = anyio.Event()
    with anyio.fail_after(BOUND):
        async with await anyio.open_process(
            [sys.executable, "-m", PACKAGE], env=server_env(), cwd=PROJECT
        ) as process:
            assert process.stdin is not None and process.stdout is not None
            assert process.stderr is not None
            stdout, stderr, stdin = process.stdout, process.stderr, process.stdin

            async def read_stdout() -> None:
                buffer = bytearray()
                async for chunk in stdout:
                    buffer += chunk
                    while (end := buffer.find(b"\n")) >= 0:
                        raw = bytes(buffer[:end])
                        del buffer[: end + 1]
                        try:
                            message = strict_json(raw)
                        except ValueError:
                            result.bad_lines.append(raw[:200])
                            continue
                        if not isinstance(message, dict):
                            result.bad_lines.append(raw[:200])
                            continue
                        result.messages.append(message)
                        if message.get("id") == SENTINEL:
                            sentinel_seen.set()
                if buffer:
                    result.bad_lines.append(bytes(buffer[:200]))

            async def read_stderr() -> None:
                chunks = [chunk async for chunk in stderr]
                result.stderr = b"".join(chunks).decode("utf-8", "replace")

            async def write() -> None:
                for data in (*lines, SENTINEL_LINE):
                    await stdin.send(data)
                await sentinel_seen.wait()
                result.peak_rss_kib = peak_rss_kib(process.pid)
                await stdin.aclose()

            async with anyio.create_task_group() as task_group:
                task_group.start_soon(read_stdout)
                task_group.start_soon(read_stderr)
                task_group.start_soon(write)
            result.returncode = await process.wait()
    return result


def assert_clean(result: Exchange) -> None:
    assert result.bad_lines == [], "stdout must hold only JSON-RPC messages, one per line"
    for message in result.messages:
        assert message.get("jsonrpc") == "2.0"
        assert ("result" in message) != ("error" in message)
    assert result.sentinel_served(), "the request after the bad input must be served"
    assert result.returncode == 0
    assert "Traceback" not in result.stderr


# Each case: a name, the bad line for a request id `i`, and the answers it must get: (id, code)
# with id None for "id": null. Request ids are unique per case so the cases can share one stream.
Case = tuple[str, Callable[[int], bytes], Callable[[int], list[tuple[object, int]]]]


def null_error(code: int) -> Callable[[int], list[tuple[object, int]]]:
    return lambda i: [(None, code)]


def own_error(code: int) -> Callable[[int], list[tuple[object, int]]]:
    return lambda i: [(i, code)]


def no_answer(i: int) -> list[tuple[object, int]]:
    return []


def raw(text: str) -> Callable[[int], bytes]:
    return lambda i: text.replace("ID", str(i)).encode("latin-1") + b"\n"


def message(**fields: Any) -> Callable[[int], bytes]:
    return lambda i: line({key: (i if value == "ID" else value) for key, value in fields.items()})


WIRE_CASES: list[Case] = [
    ("not JSON", raw("hello there"), null_error(PARSE_ERROR)),
    ("truncated JSON", raw('{"jsonrpc":"2.0","id":ID,"method":'), null_error(PARSE_ERROR)),
    (
        "invalid UTF-8",
        raw('{"jsonrpc":"2.0","id":ID,"method":"tools/list\xff\xfe"}'),
        null_error(PARSE_ERROR),
    ),
    ("a lone continuation byte", raw("\x80"), null_error(PARSE_ERROR)),
    ("NUL bytes", raw("\x00\x00\x00"), null_error(PARSE_ERROR)),
    (
        "NaN literal",
        raw('{"jsonrpc":"2.0","id":ID,"method":"tools/list","params":{"x":NaN}}'),
        null_error(PARSE_ERROR),
    ),
    (
        "a huge integer",
        raw('{"jsonrpc":"2.0","id":ID,"method":"tools/list","params":{"x":' + "9" * 5000 + "}}"),
        null_error(PARSE_ERROR),
    ),
    (
        "nesting deeper than the parser takes",
        raw("[" * 100_000 + "]" * 100_000),
        null_error(PARSE_ERROR),
    ),
    ("empty line", raw(""), no_answer),
    ("whitespace-only line", raw(" \t \r"), no_answer),
    ("JSON number", raw("42"), null_error(INVALID_REQUEST)),
    ("JSON string", raw('"tools/list"'), null_error(INVALID_REQUEST)),
    ("JSON null", raw("null"), null_error(INVALID_REQUEST)),
    (
        "batch array",
        lambda i: line(
            [{"jsonrpc": "2.0", "id": i, "method": "tools/list", "params": {"_meta": META}}]
        ),
        null_error(INVALID_REQUEST),
    ),
    ("empty batch", raw("[]"), null_error(INVALID_REQUEST)),
    ("missing jsonrpc", message(id="ID", method="tools/list"), own_error(INVALID_REQUEST)),
    (
        "jsonrpc 1.0",
        message(jsonrpc="1.0", id="ID", method="tools/list"),
        own_error(INVALID_REQUEST),
    ),
    (
        "jsonrpc a number",
        message(jsonrpc=2.0, id="ID", method="tools/list"),
        own_error(INVALID_REQUEST),
    ),
    ("null id", message(jsonrpc="2.0", id=None, method="tools/list"), null_error(INVALID_REQUEST)),
    ("float id", message(jsonrpc="2.0", id=1.5, method="tools/list"), null_error(INVALID_REQUEST)),
    (
        "boolean id",
        message(jsonrpc="2.0", id=True, method="tools/list"),
        null_error(INVALID_REQUEST),
    ),
    (
        "object id",
        message(jsonrpc="2.0", id={"a": 1}, method="tools/list"),
        null_error(INVALID_REQUEST),
    ),
    ("array id", message(jsonrpc="2.0", id=[1], method="tools/list"), null_error(INVALID_REQUEST)),
    ("method a number", message(jsonrpc="2.0", id="ID", method=5), own_error(INVALID_REQUEST)),
    ("method null", message(jsonrpc="2.0", id="ID", method=None), own_error(INVALID_REQUEST)),
    ("neither method nor result", message(jsonrpc="2.0", id="ID"), own_error(INVALID_REQUEST)),
    (
        "params an array",
        message(jsonrpc="2.0", id="ID", method="tools/list", params=[META]),
        own_error(INVALID_PARAMS),
    ),
    (
        "params a string",
        message(jsonrpc="2.0", id="ID", method="tools/list", params="x"),
        own_error(INVALID_PARAMS),
    ),
    ("unknown method", lambda i: request_line(i, "tools/explode"), own_error(METHOD_NOT_FOUND)),
    (
        "legacy-only ping on a modern request",
        lambda i: request_line(i, "ping"),
        own_error(METHOD_NOT_FOUND),
    ),
    (
        "request without _meta",
        message(jsonrpc="2.0", id="ID", method="tools/list", params={}),
        own_error(INVALID_PARAMS),
    ),
    (
        "initialize without a version",
        message(jsonrpc="2.0", id="ID", method="initialize", params={}),
        own_error(INVALID_PARAMS),
    ),
    (
        "tools/call without a name",
        lambda i: request_line(i, "tools/call", {"arguments": {}}),
        own_error(INVALID_PARAMS),
    ),
    ("an unexpected result", message(jsonrpc="2.0", id="ID", result={}), no_answer),
    (
        "an unexpected error response",
        message(jsonrpc="2.0", id="server-1", error={"code": 1, "message": "x"}),
        no_answer,
    ),
    (
        "an unexpected notification",
        message(jsonrpc="2.0", method="notifications/initialized"),
        no_answer,
    ),
    (
        "a cancellation of an unknown id",
        message(jsonrpc="2.0", method="notifications/cancelled", params={"requestId": 99_999}),
        no_answer,
    ),
    (
        "a cancellation with a garbage id",
        message(
            jsonrpc="2.0", method="notifications/cancelled", params={"requestId": [1, {"x": None}]}
        ),
        no_answer,
    ),
    (
        "a cancellation without params",
        message(jsonrpc="2.0", method="notifications/cancelled"),
        no_answer,
    ),
    (
        "a progress notification from the client",
        message(
            jsonrpc="2.0",
            method="notifications/progress",
            params={"progressToken": 1, "progress": 1},
        ),
        no_answer,
    ),
]


@pytest.mark.anyio
async def test_every_bad_line_gets_the_right_error_or_none_and_the_server_keeps_serving() -> None:
    """One stream: every bad line of WIRE_CASES, each followed by a good request.

    Errors for lines without a usable id ("id": null) are written by the reader in line order,
    so they are matched to their cases in order; the rest are matched by id.
    """
    lines: list[bytes] = []
    expected_by_id: dict[object, tuple[str, int]] = {}
    expected_null: list[tuple[str, int]] = []
    good_ids: set[object] = set()
    for number, (name, build, answers) in enumerate(WIRE_CASES, start=1):
        lines.append(build(number))
        for answer_id, code in answers(number):
            if answer_id is None:
                expected_null.append((name, code))
            else:
                expected_by_id[answer_id] = (name, code)
        good_ids.add(f"good-{number}")
        lines.append(request_line(f"good-{number}", "tools/list"))
        TRIED.append(name)
    result = await exchange(lines)
    assert_clean(result)
    got_by_id = {i: code for i, code in result.answers() if i is not None and i not in good_ids}
    got_null = [code for i, code in result.answers() if i is None]
    problems = [
        f"{name}: expected {code}, got {got_by_id.get(i)}"
        for i, (name, code) in expected_by_id.items()
        if got_by_id.get(i) != code
    ]
    problems += [f"unexpected answer for id {i!r}" for i in got_by_id if i not in expected_by_id]
    assert problems == []
    assert got_null == [code for _, code in expected_null], expected_null
    served = {i for i, code in result.answers() if i in good_ids and code is None}
    assert served == good_ids, "the good request after each bad line must be served"


@pytest.mark.anyio
async def test_an_error_response_with_a_null_id_is_not_answered() -> None:
    # JSON-RPC 2.0 section 5: a response is never answered. A client echoing our -32700 back
    # with "id": null must not start an error ping-pong.
    TRIED.append("error response with null id")
    error = {"jsonrpc": "2.0", "id": None, "error": {"code": -32700, "message": "x"}}
    result = await exchange([line(error)])
    assert_clean(result)
    assert result.answers() == []


@pytest.mark.anyio
async def test_a_line_over_the_size_cap_is_refused_without_a_memory_blow_up() -> None:
    # A valid-looking request padded to several MB: refused with -32600 as it streams in, never
    # held whole. Three in a row, one split by a CRLF, to cross chunk boundaries.
    padding = "x" * (MAX_LINE_BYTES + 1_000_000)
    huge = request_line(1, "tools/list", {"padding": padding})
    TRIED.extend(["oversized line"] * 3)
    result = await exchange([huge, huge[:-1] + b"\r\n", huge])
    assert_clean(result)
    assert result.answers() == [(None, INVALID_REQUEST)] * 3
    if result.peak_rss_kib is not None:
        # The three lines are 15 MB; a reader that buffered them whole would show it here.
        assert result.peak_rss_kib < 150 * 1024


@pytest.mark.anyio
async def test_a_line_just_under_the_size_cap_is_served() -> None:
    head = request_line(1, "tools/list", {"padding": ""})
    padded = request_line(1, "tools/list", {"padding": "y" * (MAX_LINE_BYTES - len(head) - 16)})
    assert len(padded) <= MAX_LINE_BYTES
    result = await exchange([padded])
    assert_clean(result)
    assert result.answers() == [(1, None)]


@pytest.mark.anyio
async def test_a_crlf_terminated_request_is_served() -> None:
    result = await exchange([request_line(1, "tools/list")[:-1] + b"\r\n"])
    assert_clean(result)
    assert result.answers() == [(1, None)]


# --- the parser on its own -----------------------------------------------------------------------


def test_a_number_too_large_for_a_float_never_reaches_stdout_as_infinity() -> None:
    # json.loads turns 1e400 into inf; whatever the server does with it, what it writes must
    # still be JSON (Infinity is not: RFC 8259 section 6).
    raw = (
        b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo",'
        b'"arguments":{"value":1e400},"_meta":' + json.dumps(META).encode() + b"}}"
    )
    TRIED.append("1e400 argument")
    try:
        message = parse_line(raw)
    except InvalidMessage as error:
        assert error.code in (PARSE_ERROR, INVALID_PARAMS)
        return
    assert isinstance(message, Request)
    response = anyio.run(make_server().handle_request, message, Session(), NullPeer())
    strict_json(encode(response))


# --- in process: a registry of test tools ---------------------------------------------------------


class NameForm(BaseModel):
    name: str


registry = Registry()


@registry.tool()
async def count_words(text: str, limit: int = 10) -> dict[str, int]:
    """Count the words of `text`, up to `limit`."""
    return {"words": min(len(text.split()), limit)}


@registry.tool()
async def echo(value: Any = None) -> dict[str, Any]:
    """Echo `value` back as structured content."""
    return {"value": value}


@registry.tool()
async def greet(greeting: str = "Hello", *, ctx: Context) -> str | InputRequired:
    """Two rounds: ask for a name, then greet."""
    answer = ctx.input_response_as("name", ElicitResult[NameForm])
    if answer is None:
        return ctx.request_input({"name": elicit_form("Your name?", NameForm)})
    if not answer.accepted or answer.content is None:
        return "Nobody to greet."
    return f"{greeting}, {answer.content.name}!"


@registry.tool()
async def farewell(*, ctx: Context) -> str | InputRequired:
    """Another tool asking the same question under the same key."""
    answer = ctx.input_response_as("name", ElicitResult[NameForm])
    if answer is None or answer.content is None:
        return ctx.request_input({"name": elicit_form("Your name?", NameForm)})
    return f"Goodbye, {answer.content.name}."


@registry.prompt("greet")
async def greet_prompt(*, ctx: Context) -> str | InputRequired:
    """A prompt under the same name as the tool, asking the same question."""
    answer = ctx.input_response_as("name", ElicitResult[NameForm])
    if answer is None or answer.content is None:
        return ctx.request_input({"name": elicit_form("Your name?", NameForm)})
    return f"Write a poem for {answer.content.name}."


class Clock:
    def __init__(self, now: float = NOW) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


class NullPeer:
    async def notify(self, method: str, params: dict[str, Any]) -> None:
        return None

    async def request(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        raise AssertionError("a modern request must not make the server ask the client")


def make_server(
    current: SigningKey = KEY, previous: tuple[SigningKey, ...] = (), clock: Clock | None = None
) -> Server:
    codec = RequestStateCodec(KeyRing(current, previous), ttl_seconds=TTL, clock=clock or Clock())
    return Server(name="bad-input", version="0", registry=registry, signing=codec)


async def call(
    client: MemoryClient, name: Any, arguments: Any = None, **extra: Any
) -> dict[str, Any]:
    params: dict[str, Any] = {"name": name, **extra}
    if arguments is not None:
        params["arguments"] = arguments
    return await client.request("tools/call", params)


async def assert_still_serving(client: MemoryClient) -> None:
    listed = await client.request("tools/list")
    assert {tool["name"] for tool in listed["tools"]} == set(registry.tools)
    done = await call(client, "count_words", {"text": "still here"})
    assert done["structuredContent"] == {"words": 2}


async def round_one(client: MemoryClient, tool: str = "greet", arguments: Any = None) -> str:
    first = await call(client, tool, arguments if arguments is not None else {})
    assert first["resultType"] == "input_required"
    token = first["requestState"]
    assert isinstance(token, str)
    return token


def deeply_nested(depth: int) -> list[Any]:
    outer: list[Any] = []
    inner = outer
    for _ in range(depth):
        nested: list[Any] = []
        inner.append(nested)
        inner = nested
    return outer


def error_text(result: dict[str, Any]) -> str:
    assert result.get("isError") is True
    return " ".join(block["text"] for block in result["content"])


# --- tool arguments -------------------------------------------------------------------------------


ARGUMENT_CASES: list[tuple[str, dict[str, Any], str]] = [
    ("a number for a string", {"text": 5}, "text"),
    ("a list for a string", {"text": ["a", "b"]}, "text"),
    ("an object for a string", {"text": {"a": 1}}, "text"),
    ("null for a string", {"text": None}, "text"),
    ("a string for an int", {"text": "a", "limit": "many"}, "limit"),
    ("a float for an int", {"text": "a", "limit": 1.5}, "limit"),
    ("a list for an int", {"text": "a", "limit": [1]}, "limit"),
    ("missing required", {"limit": 3}, "text"),
    ("no arguments at all", {}, "text"),
    ("an extra argument", {"text": "a", "bogus": 1}, "bogus"),
    ("many extra arguments", {"text": "a", **{f"k{i}": i for i in range(20_000)}}, "k0"),
    ("a deeply nested value for a string", {"text": deeply_nested(10_000)}, "text"),
]


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("arguments", "named"),
    [case[1:] for case in ARGUMENT_CASES],
    ids=[case[0] for case in ARGUMENT_CASES],
)
async def test_bad_tool_arguments_are_an_is_error_result_naming_the_field(
    arguments: dict[str, Any], named: str
) -> None:
    # server/tools: input validation errors are tool results the model can act on.
    TRIED.append(f"arguments: {named}")
    client = MemoryClient(make_server(), capabilities=ALL_CAPABILITIES)
    with anyio.fail_after(BOUND):
        result = await call(client, "count_words", arguments)
        assert result["resultType"] == "complete"
        assert named in error_text(result)
        await assert_still_serving(client)


@pytest.mark.anyio
@pytest.mark.parametrize(
    "arguments",
    [[], ["text"], "text=a", 5, True],
    ids=["empty list", "list", "string", "number", "boolean"],
)
async def test_arguments_that_are_not_an_object_are_invalid_params(arguments: Any) -> None:
    TRIED.append("arguments not an object")
    client = MemoryClient(make_server(), capabilities=ALL_CAPABILITIES)
    with pytest.raises(RpcError) as info:
        await call(client, "count_words", arguments)
    assert info.value.code == INVALID_PARAMS
    await assert_still_serving(client)


@pytest.mark.anyio
@pytest.mark.parametrize(
    "name",
    [None, 5, ["greet"], {"name": "greet"}, "", "no_such_tool"],
    ids=["null", "number", "list", "object", "empty", "unknown"],
)
async def test_a_bad_tool_name_is_invalid_params(name: Any) -> None:
    TRIED.append("bad tool name")
    client = MemoryClient(make_server(), capabilities=ALL_CAPABILITIES)
    with pytest.raises(RpcError) as info:
        await client.request("tools/call", {"name": name, "arguments": {}})
    assert info.value.code == INVALID_PARAMS
    await assert_still_serving(client)


@pytest.mark.anyio
async def test_a_huge_argument_is_served() -> None:
    TRIED.append("3 MB argument")
    client = MemoryClient(make_server(), capabilities=ALL_CAPABILITIES)
    text = "word " * 600_000
    result = await call(client, "count_words", {"text": text, "limit": 10**9})
    assert result["structuredContent"] == {"words": 600_000}


@pytest.mark.anyio
async def test_a_deeply_nested_argument_never_crashes_the_server() -> None:
    # 10,000 levels: deeper than Python's recursion limit. Any answer is acceptable as long as it
    # is a well-formed response and the next request is served.
    TRIED.append("10k-deep argument")
    server = make_server()
    request = Request(
        1,
        "tools/call",
        {"_meta": META, "name": "echo", "arguments": {"value": deeply_nested(10_000)}},
    )
    with anyio.fail_after(BOUND):
        response = await server.handle_request(request, Session(), NullPeer())
    assert response["id"] == 1
    assert ("result" in response) != ("error" in response)
    if "error" in response:
        assert response["error"]["code"] in (INVALID_PARAMS, -32603)
    await assert_still_serving(MemoryClient(server, capabilities=ALL_CAPABILITIES))


@pytest.mark.anyio
async def test_deeply_nested_arguments_with_a_request_state_are_invalid_params() -> None:
    # The arguments digest (binding) of a 10k-deep value cannot be computed; that is the
    # client's fault (-32602), not an internal error with a traceback.
    TRIED.append("10k-deep argument with requestState")
    client = MemoryClient(make_server(), capabilities=ALL_CAPABILITIES)
    token = await round_one(client)
    with pytest.raises(RpcError) as info:
        await call(
            client,
            "greet",
            {"greeting": deeply_nested(10_000)},
            requestState=token,
            inputResponses={"name": ACCEPT_ADA},
        )
    assert info.value.code == INVALID_PARAMS
    await assert_still_serving(client)


# --- inputResponses -----------------------------------------------------------------------------


NOT_AN_OBJECT: list[Any] = [[], [ACCEPT_ADA], "accept", 1, 0.5, True, None]


@pytest.mark.anyio
@pytest.mark.parametrize("with_state", [False, True], ids=["first call", "with requestState"])
@pytest.mark.parametrize(
    "responses", NOT_AN_OBJECT, ids=["empty list", "list", "string", "int", "float", "bool", "null"]
)
async def test_input_responses_that_are_not_an_object_are_invalid_params(
    responses: Any, with_state: bool
) -> None:
    TRIED.append("inputResponses not an object")
    client = MemoryClient(make_server(), capabilities=ALL_CAPABILITIES)
    extra: dict[str, Any] = {"inputResponses": responses}
    if with_state:
        extra["requestState"] = await round_one(client)
    with pytest.raises(RpcError) as info:
        await call(client, "greet", {}, **extra)
    assert info.value.code == INVALID_PARAMS
    assert info.value.message.startswith("Invalid inputResponses")
    await assert_still_serving(client)


@pytest.mark.anyio
@pytest.mark.parametrize("with_state", [False, True], ids=["first call", "with requestState"])
@pytest.mark.parametrize(
    "answer", ["Ada", ["accept"], None, 7, True], ids=["string", "list", "null", "int", "bool"]
)
async def test_an_answer_that_is_not_an_object_is_invalid_params(
    answer: Any, with_state: bool
) -> None:
    TRIED.append("inputResponses entry not an object")
    client = MemoryClient(make_server(), capabilities=ALL_CAPABILITIES)
    extra: dict[str, Any] = {"inputResponses": {"name": answer}}
    if with_state:
        extra["requestState"] = await round_one(client)
    with pytest.raises(RpcError) as info:
        await call(client, "greet", {}, **extra)
    assert info.value.code == INVALID_PARAMS
    assert "'name'" in info.value.message
    await assert_still_serving(client)


@pytest.mark.anyio
@pytest.mark.parametrize(
    "answer",
    [
        {},
        {"action": "maybe"},
        {"action": 1},
        {"action": "accept", "content": "Ada"},
        {"action": "accept", "content": ["Ada"]},
    ],
    ids=["empty", "unknown action", "numeric action", "content a string", "content a list"],
)
async def test_an_answer_of_the_wrong_shape_for_the_asked_method_is_invalid_params(
    answer: dict[str, Any],
) -> None:
    TRIED.append("inputResponses wrong shape for method")
    client = MemoryClient(make_server(), capabilities=ALL_CAPABILITIES)
    token = await round_one(client)
    with pytest.raises(RpcError) as info:
        await call(client, "greet", {}, requestState=token, inputResponses={"name": answer})
    assert info.value.code == INVALID_PARAMS
    assert "'name'" in info.value.message
    await assert_still_serving(client)


@pytest.mark.anyio
@pytest.mark.parametrize(
    "content",
    [{"name": 5}, {"name": None}, {}, {"name": ["Ada"]}],
    ids=["number", "null", "missing field", "list"],
)
async def test_form_content_that_does_not_fit_the_form_is_asked_again(
    content: dict[str, Any],
) -> None:
    TRIED.append("inputResponses content does not fit the form")
    client = MemoryClient(make_server(), capabilities=ALL_CAPABILITIES)
    token = await round_one(client)
    again = await call(
        client,
        "greet",
        {},
        requestState=token,
        inputResponses={"name": {"action": "accept", "content": content}},
    )
    assert again["resultType"] == "input_required"
    assert again["inputRequests"]["name"]["params"]["message"].startswith(
        "That answer was not valid ("
    )
    await assert_still_serving(client)


@pytest.mark.anyio
async def test_too_many_answers_are_invalid_params() -> None:
    TRIED.append("inputResponses with 65 keys")
    client = MemoryClient(make_server(), capabilities=ALL_CAPABILITIES)
    token = await round_one(client)
    responses = {f"k{i}": dict(ACCEPT_ADA) for i in range(65)}
    with pytest.raises(RpcError) as info:
        await call(client, "greet", {}, requestState=token, inputResponses=responses)
    assert info.value.code == INVALID_PARAMS
    await assert_still_serving(client)


@pytest.mark.anyio
async def test_an_oversized_answer_is_invalid_params() -> None:
    TRIED.append("inputResponses over 32 KiB")
    client = MemoryClient(make_server(), capabilities=ALL_CAPABILITIES)
    token = await round_one(client)
    huge = {"name": {"action": "accept", "content": {"name": "A" * 40_000}}}
    with pytest.raises(RpcError) as info:
        await call(client, "greet", {}, requestState=token, inputResponses=huge)
    assert info.value.code == INVALID_PARAMS
    await assert_still_serving(client)


@pytest.mark.anyio
async def test_a_deeply_nested_answer_is_invalid_params_not_an_internal_error() -> None:
    TRIED.append("10k-deep inputResponses")
    client = MemoryClient(make_server(), capabilities=ALL_CAPABILITIES)
    with pytest.raises(RpcError) as info:
        await call(client, "greet", {}, inputResponses={"name": {"a": deeply_nested(10_000)}})
    assert info.value.code == INVALID_PARAMS
    await assert_still_serving(client)


@pytest.mark.anyio
async def test_unexpected_answers_are_ignored_and_the_asked_one_is_used() -> None:
    # mrtr "Error Handling": unexpected parameters in InputResponses SHOULD be ignored.
    TRIED.append("inputResponses with unexpected keys")
    client = MemoryClient(make_server(), capabilities=ALL_CAPABILITIES)
    token = await round_one(client)
    responses = {"name": ACCEPT_ADA, "bogus": {"action": "accept", "content": {"x": 1}}}
    done = await call(client, "greet", {}, requestState=token, inputResponses=responses)
    assert done["content"][0]["text"] == "Hello, Ada!"


@pytest.mark.anyio
async def test_only_unexpected_answers_get_the_question_asked_again() -> None:
    # mrtr: missing information SHOULD get a new InputRequiredResult, not an error.
    TRIED.append("inputResponses with only unexpected keys")
    client = MemoryClient(make_server(), capabilities=ALL_CAPABILITIES)
    token = await round_one(client)
    again = await call(
        client, "greet", {}, requestState=token, inputResponses={"bogus": dict(ACCEPT_ADA)}
    )
    assert again["resultType"] == "input_required"
    assert set(again["inputRequests"]) == {"name"}


@pytest.mark.anyio
async def test_a_decline_is_an_answer_not_an_error() -> None:
    client = MemoryClient(make_server(), capabilities=ALL_CAPABILITIES)
    token = await round_one(client)
    done = await call(
        client, "greet", {}, requestState=token, inputResponses={"name": {"action": "decline"}}
    )
    assert done["content"][0]["text"] == "Nobody to greet."


# --- requestState ---------------------------------------------------------------------------------


def b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


JWT = (
    "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIiwibmFtZSI6IkFkYSJ9."
    "SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c"
)
FORGED_PLAINTEXT = "p1." + b64(
    json.dumps(
        {
            "a": {"name": ACCEPT_ADA},
            "d": "x",
            "e": 4_000_000_000,
            "m": "tools/call",
            "q": {"name": "elicitation/create"},
            "t": "greet",
        }
    ).encode()
)

SHAPE_CASES: list[tuple[str, Any, str]] = [
    ("an int", 12345, "malformed"),
    ("a float", 1.5, "malformed"),
    ("a bool", True, "malformed"),
    ("null", None, "malformed"),
    ("a list", ["m1", KEY.key_id], "malformed"),
    ("an object", {"token": "m1"}, "malformed"),
    ("empty", "", "malformed"),
    ("only dots", "...", "malformed"),
    ("huge", "m1." + "A" * (MAX_TOKEN_CHARS + 1), "oversized"),
    ("random bytes as text", bytes(range(256)).decode("latin-1"), "malformed"),
    ("random base64url", b64(bytes(range(7, 200, 3))), "malformed"),
    ("a valid-looking JWT", JWT, "malformed"),
    ("an unsigned plaintext token", FORGED_PLAINTEXT, "signature"),
    (
        "a signed shape with an unknown key id",
        f"m1.0badc0de.{b64(b'{}')}.{b64(bytes(32))}",
        "unknown key",
    ),
    (
        "a signed shape with our key id and a zero tag",
        f"m1.{KEY.key_id}.{b64(b'{}')}.{b64(bytes(32))}",
        "signature",
    ),
    ("an upper-case key id", f"m1.{KEY.key_id.upper()}.{b64(b'{}')}.{b64(bytes(32))}", "malformed"),
    ("a short tag", f"m1.{KEY.key_id}.{b64(b'{}')}.{b64(bytes(16))}", "malformed"),
    ("a future version", f"m2.{KEY.key_id}.{b64(b'{}')}.{b64(bytes(32))}", "malformed"),
]


async def assert_state_rejected(
    client: MemoryClient, state: Any, reason: str, **overrides: Any
) -> None:
    params: dict[str, Any] = {
        "arguments": {},
        "inputResponses": {"name": dict(ACCEPT_ADA)},
        "requestState": state,
    }
    params.update(overrides)
    name = params.pop("name", "greet")
    with pytest.raises(RpcError) as info:
        await call(client, name, **params)
    assert info.value.code == INVALID_PARAMS
    assert info.value.message == f"Invalid requestState: {reason}"
    assert info.value.data is None
    await assert_still_serving(client)


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("state", "reason"), [case[1:] for case in SHAPE_CASES], ids=[case[0] for case in SHAPE_CASES]
)
async def test_request_state_of_a_wrong_shape_is_rejected_with_invalid_params(
    state: Any, reason: str
) -> None:
    TRIED.append(f"requestState: {reason}")
    await assert_state_rejected(
        MemoryClient(make_server(), capabilities=ALL_CAPABILITIES), state, reason
    )


@pytest.mark.anyio
async def test_the_servers_own_token_completes_the_round() -> None:
    client = MemoryClient(make_server(), capabilities=ALL_CAPABILITIES)
    token = await round_one(client, arguments={"greeting": "Hi"})
    done = await call(
        client,
        "greet",
        {"greeting": "Hi"},
        requestState=token,
        inputResponses={"name": dict(ACCEPT_ADA)},
    )
    assert done["content"][0]["text"] == "Hi, Ada!"


@pytest.mark.anyio
@pytest.mark.parametrize("cut", [1, 10, 40])
async def test_a_truncated_or_extended_token_is_rejected(cut: int) -> None:
    TRIED.extend(["requestState truncated", "requestState extended"])
    client = MemoryClient(make_server(), capabilities=ALL_CAPABILITIES)
    token = await round_one(client)
    with pytest.raises(RpcError) as info:
        await call(
            client, "greet", {}, requestState=token[:-cut], inputResponses={"name": ACCEPT_ADA}
        )
    assert info.value.code == INVALID_PARAMS
    with pytest.raises(RpcError) as info:
        await call(
            client, "greet", {}, requestState=token + "A" * cut, inputResponses={"name": ACCEPT_ADA}
        )
    assert info.value.code == INVALID_PARAMS
    assert token not in info.value.message


@pytest.mark.anyio
async def test_a_token_with_surrounding_whitespace_is_rejected() -> None:
    TRIED.append("requestState with whitespace")
    client = MemoryClient(make_server(), capabilities=ALL_CAPABILITIES)
    token = await round_one(client)
    await assert_state_rejected(client, f" {token}\n", "malformed")


@pytest.mark.anyio
async def test_another_tools_token_is_rejected_as_a_binding_mismatch() -> None:
    TRIED.append("requestState of another tool")
    client = MemoryClient(make_server(), capabilities=ALL_CAPABILITIES)
    token = await round_one(client, "farewell")
    await assert_state_rejected(client, token, "binding")


@pytest.mark.anyio
async def test_a_token_for_other_arguments_is_rejected_as_a_binding_mismatch() -> None:
    TRIED.append("requestState of another argument set")
    client = MemoryClient(make_server(), capabilities=ALL_CAPABILITIES)
    token = await round_one(client, arguments={"greeting": "Hi"})
    await assert_state_rejected(client, token, "binding", arguments={"greeting": "Bye"})


@pytest.mark.anyio
async def test_a_tools_token_on_a_prompt_of_the_same_name_is_rejected_as_a_binding_mismatch() -> (
    None
):
    TRIED.append("requestState on another method")
    client = MemoryClient(make_server(), capabilities=ALL_CAPABILITIES)
    token = await round_one(client)
    params = {"name": "greet", "requestState": token, "inputResponses": {"name": ACCEPT_ADA}}
    with pytest.raises(RpcError) as info:
        await client.request("prompts/get", params)
    assert info.value.code == INVALID_PARAMS
    assert info.value.message == "Invalid requestState: binding"
    await assert_still_serving(client)


@pytest.mark.anyio
async def test_an_expired_token_starts_the_questions_over() -> None:
    TRIED.append("requestState expired")
    clock = Clock()
    client = MemoryClient(make_server(clock=clock), capabilities=ALL_CAPABILITIES)
    token = await round_one(client)
    clock.now += TTL
    again = await call(
        client, "greet", {}, requestState=token, inputResponses={"name": dict(ACCEPT_ADA)}
    )
    assert again["resultType"] == "input_required"
    assert list(again["inputRequests"]) == ["name"]
    assert again["requestState"] != token
    await assert_still_serving(client)


@pytest.mark.anyio
async def test_a_token_from_a_key_kept_for_rotation_is_accepted() -> None:
    old = MemoryClient(make_server(current=OTHER_KEY), capabilities=ALL_CAPABILITIES)
    token = await round_one(old)
    rotated = MemoryClient(
        make_server(current=KEY, previous=(OTHER_KEY,)), capabilities=ALL_CAPABILITIES
    )
    done = await call(rotated, "greet", {}, requestState=token, inputResponses={"name": ACCEPT_ADA})
    assert done["content"][0]["text"] == "Hello, Ada!"


@pytest.mark.anyio
async def test_a_token_from_a_dropped_old_key_is_rejected_as_unknown_key() -> None:
    TRIED.append("requestState signed by a dropped key")
    old = MemoryClient(make_server(current=OTHER_KEY), capabilities=ALL_CAPABILITIES)
    token = await round_one(old)
    await assert_state_rejected(
        MemoryClient(make_server(current=KEY), capabilities=ALL_CAPABILITIES), token, "unknown key"
    )


@pytest.mark.anyio
async def test_requests_after_a_rejected_token_are_unaffected() -> None:
    # Fail closed, remember nothing: a rejection leaves no state behind for the next round.
    client = MemoryClient(make_server(), capabilities=ALL_CAPABILITIES)
    token = await round_one(client)
    for bad in (token[:-2], "", 7, JWT):
        with pytest.raises(RpcError):
            await call(client, "greet", {}, requestState=bad, inputResponses={"name": ACCEPT_ADA})
    done = await call(client, "greet", {}, requestState=token, inputResponses={"name": ACCEPT_ADA})
    assert done["content"][0]["text"] == "Hello, Ada!"
