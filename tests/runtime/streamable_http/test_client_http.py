"""`ClientSession.connect(url)`: the testing face's client over Streamable HTTP 2026-07-28
(basic/transports/streamable-http), and both transports' retry on -32022
(basic/versioning "Protocol Version Negotiation").

Against the real HttpApp on uvicorn in this process (over a real socket, so a test can watch the
server's side), against `serve_http` and `<package> http` as subprocesses, and against scripted
servers: one that speaks only other versions (HTTP and stdio), and hostile ones that try to make
the client read without bound.
"""

from __future__ import annotations

import base64
import json
import socket
import sys
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any

import anyio
import pytest
from anyio.abc import SocketAttribute, SocketStream
from anyio.streams.buffered import BufferedByteReceiveStream
from pydantic import Field
from test_http_e2e import replica

from mrtr_runtime import Context, Registry
from mrtr_runtime._jsonrpc import UNSUPPORTED_PROTOCOL_VERSION
from mrtr_runtime.http._app import HttpApp, HttpSettings
from mrtr_runtime.server import Server
from mrtr_runtime.testing import ClientSession, MemoryClient, RpcError, answers
from mrtr_runtime.testing._client import SessionClosed
from mrtr_runtime.testing._http import Limits, SseParser, encode_header_value
from mrtr_runtime.testing._rounds import InvalidServerResponse
from support import ARN, BOUND, MODERN, Json, make_codec, make_server, server_env

pytestmark = pytest.mark.anyio

META_VERSION = "io.modelcontextprotocol/protocolVersion"
DEPLOY_ANSWERS = answers({"confirm": {"confirmed": True}, "role-arn": {"arn": ARN}})
#: A version no server here speaks, offered first: what a newer client would send.
NEWER = "2099-01-01"


# -- the real app, in process ------------------------------------------------------------------


@dataclass
class Served:
    url: str
    #: The JSON-RPC method of every POST the app was sent, in order.
    methods: list[str] = field(default_factory=list)


@asynccontextmanager
async def served(server: Server | None = None, **settings: Any) -> AsyncIterator[Served]:
    """`HttpApp` on uvicorn in this process, on a socket of its own."""
    import uvicorn

    app = HttpApp(server or make_server(), HttpSettings(**settings))
    listening = socket.socket()
    listening.bind(("127.0.0.1", 0))
    listening.listen()
    port = listening.getsockname()[1]
    seen = Served(f"http://127.0.0.1:{port}/mcp")

    async def counting(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            method = dict(scope["headers"]).get(b"mcp-method", b"").decode()
            seen.methods.append(method)
        await app(scope, receive, send)

    config = uvicorn.Config(counting, lifespan="on", log_level="warning")
    runner = uvicorn.Server(config)
    try:
        async with anyio.create_task_group() as task_group:
            task_group.start_soon(runner.serve, [listening])
            try:
                yield seen
            finally:
                runner.should_exit = True
    finally:
        listening.close()


async def test_a_multi_round_call_completes_over_http_with_the_same_callbacks() -> None:
    calls: Counter[str] = Counter()
    async with (
        served(make_server(calls=calls)) as http,
        ClientSession.connect(http.url, elicitation=DEPLOY_ANSWERS) as session,
    ):
        result = await session.call_tool("deploy_stack", {"stack": "prod-api"})
    assert result.text == "Deployed prod-api successfully"
    # 2026-07-28 basic/patterns/mrtr: one input round, both questions asked together.
    assert result.asked == (("confirm", "role-arn"),)
    assert calls["deploy_stack"] == 2
    assert http.methods == ["tools/call", "tools/call"]
    assert session.protocol_violations == []


async def test_sampling_and_roots_callbacks_answer_their_rounds_over_http() -> None:
    async def model(params: dict[str, Any]) -> dict[str, Any]:
        text = {"type": "text", "text": "it is short"}
        return {"role": "assistant", "content": text, "model": "m", "stopReason": "endTurn"}

    async def roots(params: dict[str, Any]) -> dict[str, Any]:
        return {"roots": [{"uri": "file:///a"}, {"uri": "file:///b"}]}

    async with (
        served() as http,
        ClientSession.connect(http.url, sampling=model, roots=roots) as session,
    ):
        summary = await session.call_tool("summarise", {"topic": "x"})
        counted = await session.call_tool("roots_count")
    assert summary.text == "model: it is short"
    assert counted.text == "2 roots"


async def test_prompts_and_resources_drive_their_rounds_and_a_non_ascii_uri_is_encoded() -> None:
    # "Standard Request Headers": Mcp-Name mirrors params.uri; a value outside plain ASCII is
    # sent Base64-encoded ("Value Encoding"), which the server decodes before comparing.
    async with (
        served() as http,
        ClientSession.connect(
            http.url, elicitation=answers({"answer": {"text": "yes"}, "name": {"name": "Ada"}})
        ) as session,
    ):
        prompt = await session.get_prompt("ask", {"topic": "y"})
        greeting = await session.read_resource("memo://greeting")
        note = await session.read_resource("memo://notes/café au lait")
    assert "yes" in json.dumps(prompt)
    assert greeting["contents"][0]["text"] == "Hello, Ada!"
    assert note["contents"][0]["text"] == "note café au lait"


async def test_progress_streams_over_sse_as_it_does_in_process() -> None:
    seen: list[dict[str, Any]] = []

    async def handler(notification: dict[str, Any]) -> None:
        seen.append(notification)

    in_process = await MemoryClient(make_server()).call_tool("progress_steps")
    async with (
        served() as http,
        ClientSession.connect(http.url, notification_handler=handler) as session,
    ):
        result = await session.call_tool("progress_steps")
    assert result.text == "done"
    assert result.progress == in_process.progress != ()
    assert [note["method"] for note in seen] == ["notifications/progress"] * len(result.progress)


def watched_registry(cancelled: anyio.Event, waiting: anyio.Event) -> Registry:
    registry = Registry()

    @registry.tool()
    async def wait_forever(*, ctx: Context) -> str:
        """Reports progress, then waits until cancelled."""
        try:
            await ctx.report_progress(1)
            waiting.set()
            await anyio.sleep_forever()
        finally:
            cancelled.set()
        return "never"  # pragma: no cover

    @registry.tool()
    async def chatty(*, ctx: Context) -> str:
        """Logs one line at info and one at debug."""
        await ctx.send_log("info", "shown")
        await ctx.send_log("debug", "hidden")
        return "logged"

    return registry


def watched_server(cancelled: anyio.Event, waiting: anyio.Event) -> Server:
    registry = watched_registry(cancelled, waiting)
    return Server(name="watched", version="1", registry=registry, signing=make_codec())


async def test_cancelling_a_call_closes_its_connection_and_the_server_stops_the_handler() -> None:
    # basic/transports/streamable-http "Cancellation": closing the response stream is the
    # cancel; the server MUST treat it so. No notifications/cancelled is sent over HTTP.
    cancelled, waiting = anyio.Event(), anyio.Event()
    async with (
        served(watched_server(cancelled, waiting)) as http,
        ClientSession.connect(http.url) as session,
    ):
        with anyio.fail_after(BOUND):
            async with anyio.create_task_group() as task_group:
                task_group.start_soon(session.call_tool, "wait_forever")
                await waiting.wait()
                task_group.cancel_scope.cancel()
            await cancelled.wait()
    assert http.methods == ["tools/call"]


async def test_a_timeout_is_a_cancel_too() -> None:
    cancelled, waiting = anyio.Event(), anyio.Event()
    async with (
        served(watched_server(cancelled, waiting)) as http,
        ClientSession.connect(http.url) as session,
    ):
        with pytest.raises(TimeoutError):
            await session.request(
                "tools/call", {"name": "wait_forever", "arguments": {}}, timeout=0.5
            )
        with anyio.fail_after(BOUND):
            await cancelled.wait()


async def test_log_messages_reach_the_session_at_the_level_asked() -> None:
    cancelled, waiting = anyio.Event(), anyio.Event()
    async with (
        served(watched_server(cancelled, waiting)) as http,
        ClientSession.connect(http.url) as session,
    ):
        result = await session.call_tool(
            "chatty", meta={"io.modelcontextprotocol/logLevel": "info"}
        )
    assert result.text == "logged"
    logged = [n["params"]["data"] for n in session.notifications if "message" in n["method"]]
    assert logged == ["shown"]


async def test_the_bearer_token_is_sent_and_without_it_the_401_is_an_rpc_error() -> None:
    token = "a-long-random-token-for-tests"
    async with served(bearer_token=token) as http:
        async with ClientSession.connect(http.url) as anonymous:
            with pytest.raises(RpcError, match="Unauthorized"):
                await anonymous.request("tools/list")
        async with ClientSession.connect(http.url, token=token) as session:
            listed = await session.request("tools/list")
    assert "deploy_stack" in {tool["name"] for tool in listed["tools"]}


async def test_an_unknown_method_is_the_servers_32601() -> None:
    async with served() as http, ClientSession.connect(http.url) as session:
        with pytest.raises(RpcError) as raised:
            await session.request("no/such/method")
    assert raised.value.code == -32601


async def test_nobody_listening_is_session_closed() -> None:
    with socket.socket() as unused:
        unused.bind(("127.0.0.1", 0))
        port = unused.getsockname()[1]
    async with ClientSession.connect(f"http://127.0.0.1:{port}/mcp") as session:
        with pytest.raises(SessionClosed, match="cannot connect"):
            await session.request("tools/list")


def test_only_http_urls_are_endpoints() -> None:
    from mrtr_runtime.testing._http import parse_endpoint

    assert parse_endpoint("http://localhost:9/mcp").authority == "localhost:9"
    for url in ("https://example.com/mcp", "ftp://x/y", "http:///mcp", "http://u:p@h/mcp"):
        with pytest.raises(ValueError):
            parse_endpoint(url)


def regional_server() -> Server:
    registry = Registry()

    @registry.tool()
    async def regional(
        region: Annotated[str, Field(json_schema_extra={"x-mcp-header": "Region"})],
        query: str,
    ) -> str:
        """Runs `query` in `region`."""
        return f"{query} in {region}"

    return Server(name="regional", version="1", registry=registry, signing=make_codec())


async def test_x_mcp_header_arguments_are_mirrored_after_a_mismatch_then_from_the_schema() -> None:
    # "Custom Headers from Tool Parameters": the client MUST send Mcp-Param-{Name} for each
    # x-mcp-header argument; on HeaderMismatch it SHOULD read tools/list and retry.
    async with served(regional_server()) as http, ClientSession.connect(http.url) as session:
        first = await session.call_tool("regional", {"region": "eu-west-1", "query": "q"})
        after_first = list(http.methods)
        second = await session.call_tool("regional", {"region": "Zürich ", "query": "q"})
    assert first.text == "q in eu-west-1"
    assert second.text == "q in Zürich "
    assert after_first == ["tools/call", "tools/list", "tools/call"]
    assert http.methods[len(after_first) :] == ["tools/call"]


# -- the real server as a process -------------------------------------------------------------


async def test_serve_http_in_its_own_process_finishes_a_two_round_call(tmp_path: Path) -> None:
    with replica(tmp_path) as server:
        url = f"http://{server.host}:{server.port}/mcp"
        async with ClientSession.connect(url, elicitation=DEPLOY_ANSWERS) as session:
            result = await session.call_tool("deploy_stack", {"stack": "prod-api"})
    assert result.text == "Deployed prod-api successfully"
    assert result.rounds == 1


async def test_the_projects_http_command_is_a_server_the_session_lists(
    server_command: list[str], tmp_path: Path
) -> None:
    env = server_env(XDG_STATE_HOME=str(tmp_path / "state"))
    process = await anyio.open_process([*server_command, "http", "--port", "0"], env=env)
    try:
        assert process.stderr is not None
        stderr = BufferedByteReceiveStream(process.stderr)
        with anyio.fail_after(BOUND):
            while b"serving MCP at " not in (line := await stderr.receive_until(b"\n", 65536)):
                pass
        url = line.decode().rsplit("serving MCP at ", 1)[1].strip()
        async with ClientSession.connect(url, protocol_versions=(NEWER, MODERN)) as session:
            discovered = await session.request("server/discover")
            listed = await session.request("tools/list")
        assert MODERN in discovered["supportedVersions"]
        assert listed["tools"]
        assert session.protocol_version == MODERN
    finally:
        process.terminate()
        with anyio.fail_after(BOUND):
            await process.wait()
        await process.aclose()


# -- -32022: retry once with a version both speak ---------------------------------------------


async def test_over_http_a_32022_is_retried_once_with_the_newest_version_both_speak() -> None:
    async with (
        served() as http,
        ClientSession.connect(
            http.url, protocol_versions=(NEWER, MODERN), elicitation=DEPLOY_ANSWERS
        ) as session,
    ):
        result = await session.call_tool("deploy_stack", {"stack": "prod-api"})
        again = await session.request("tools/list")
    assert result.text == "Deployed prod-api successfully"
    assert again["tools"]
    # The first request is refused once; the session keeps the version that worked.
    assert http.methods == ["tools/call", "tools/call", "tools/call", "tools/list"]
    assert session.protocol_version == MODERN


async def test_concurrent_requests_refused_with_32022_each_retry_once_and_succeed() -> None:
    results: list[dict[str, Any]] = []

    async def list_tools(session: ClientSession) -> None:
        results.append(await session.request("tools/list"))

    async with (
        served() as http,
        ClientSession.connect(http.url, protocol_versions=(NEWER, MODERN)) as session,
        anyio.create_task_group() as task_group,
    ):
        for _ in range(4):
            task_group.start_soon(list_tools, session)
    assert len(results) == 4
    assert all(result["tools"] for result in results)
    # Each request is refused at most once: never more than two POSTs per request.
    assert 4 < len(http.methods) <= 8


async def test_over_stdio_a_32022_is_retried_once_with_the_newest_version_both_speak(
    command: list[str],
) -> None:
    async with ClientSession.spawn(
        command, env=server_env(), protocol_versions=(NEWER, MODERN)
    ) as session:
        result = await session.call_tool("echo", {"text": "hi"})
    assert result.text == "hi"
    assert session.protocol_version == MODERN


async def test_a_version_the_caller_put_in_meta_is_sent_as_it_is_and_never_retried() -> None:
    async with served() as http, ClientSession.connect(http.url) as session:
        with pytest.raises(RpcError) as raised:
            await session.request("tools/list", {"_meta": {META_VERSION: NEWER}})
    assert raised.value.code == UNSUPPORTED_PROTOCOL_VERSION
    assert http.methods == ["tools/list"]


#: A stdio server that speaks only the versions in argv[1] (a JSON list); with argv[2] ==
#: "refuse-all" it refuses every version, listing them all the same. `fake/seen`: the
#: versions each request carried.
VERSIONED_STDIO = """\
import json, sys
supported = json.loads(sys.argv[1])
refuse_all = sys.argv[2] == "refuse-all"
seen = []
for line in sys.stdin:
    message = json.loads(line)
    if "id" not in message:
        continue
    params = message.get("params") or {}
    if message["method"] == "fake/seen":
        reply = {"result": {"resultType": "complete", "seen": seen}}
    else:
        if message["method"] == "initialize":
            version = params.get("protocolVersion")
            info = {"name": "versioned", "version": "1"}
            answer = {"protocolVersion": version, "capabilities": {}, "serverInfo": info}
        else:
            version = params.get("_meta", {}).get("io.modelcontextprotocol/protocolVersion")
            answer = {"resultType": "complete", "tools": []}
        seen.append(version)
        if version in supported and not refuse_all:
            reply = {"result": answer}
        else:
            data = {"supported": supported, "requested": version}
            message_text = "Unsupported protocol version"
            reply = {"error": {"code": -32022, "message": message_text, "data": data}}
    sys.stdout.write(json.dumps({"jsonrpc": "2.0", "id": message["id"], **reply}) + "\\n")
    sys.stdout.flush()
"""


def versioned_command(tmp_path: Path, supported: list[str], mode: str = "") -> list[str]:
    script = tmp_path / "versioned.py"
    script.write_text(VERSIONED_STDIO, encoding="utf-8")
    return [sys.executable, str(script), json.dumps(supported), mode or "-"]


async def seen_versions(session: ClientSession) -> list[str]:
    seen: list[str] = (await session.request("fake/seen", with_meta=False))["seen"]
    return seen


async def test_over_stdio_no_common_version_is_one_request_and_an_error_naming_both_lists(
    tmp_path: Path,
) -> None:
    async with ClientSession.spawn(versioned_command(tmp_path, ["2027-01-01"])) as session:
        with pytest.raises(RpcError) as raised:
            await session.request("tools/list")
        assert await seen_versions(session) == [MODERN]
    assert raised.value.code == UNSUPPORTED_PROTOCOL_VERSION
    assert "'2027-01-01'" in raised.value.message
    assert f"'{MODERN}'" in raised.value.message


async def test_over_stdio_a_server_refusing_what_it_lists_gets_one_retry_never_a_loop(
    tmp_path: Path,
) -> None:
    command = versioned_command(tmp_path, [MODERN], "refuse-all")
    async with ClientSession.spawn(command, protocol_versions=(NEWER, MODERN)) as session:
        with pytest.raises(RpcError, match="refused") as raised:
            await session.request("tools/list")
        assert await seen_versions(session) == [NEWER, MODERN]
    assert raised.value.code == UNSUPPORTED_PROTOCOL_VERSION


async def test_a_legacy_initialize_refused_with_32022_is_sent_again_with_a_listed_version(
    tmp_path: Path,
) -> None:
    command = versioned_command(tmp_path, ["2025-06-18", "2024-11-05"])
    async with ClientSession.spawn(command, era="legacy") as session:
        assert await seen_versions(session) == ["2025-11-25", "2025-06-18"]
    assert session.protocol_version == "2025-06-18"


# -- scripted HTTP servers ----------------------------------------------------------------------


@dataclass
class Received:
    headers: dict[str, str]
    body: Json


Responder = Callable[[Received, SocketStream], Awaitable[None]]


@asynccontextmanager
async def scripted(respond: Responder) -> AsyncIterator[tuple[str, list[Received]]]:
    """A TCP server that reads each POST and lets `respond` write whatever it likes."""
    received: list[Received] = []
    listener = await anyio.create_tcp_listener(local_host="127.0.0.1")
    port = listener.extra(SocketAttribute.local_port)  # noqa: S610 - anyio's, not Django's

    async def handle(stream: SocketStream) -> None:
        async with stream:
            buffered = BufferedByteReceiveStream(stream)
            with suppress(anyio.EndOfStream, anyio.IncompleteRead, anyio.BrokenResourceError):
                head = (await buffered.receive_until(b"\r\n\r\n", 1 << 20)).decode("latin-1")
                lines = head.split("\r\n")[1:]
                headers = {
                    name.strip().lower(): value.strip()
                    for name, _, value in (line.partition(":") for line in lines)
                }
                body = await buffered.receive_exactly(int(headers["content-length"]))
                message = Received(headers, json.loads(body))
                received.append(message)
                await respond(message, stream)
            # The client closing mid-response is what the hostile responders wait for.

    async with listener, anyio.create_task_group() as task_group:
        task_group.start_soon(listener.serve, handle)
        try:
            yield f"http://127.0.0.1:{port}/mcp", received
        finally:
            task_group.cancel_scope.cancel()


def reply(status: int, message: Json, content_type: str = "application/json") -> bytes:
    body = json.dumps(message).encode()
    return (
        f"HTTP/1.1 {status} X\r\ncontent-type: {content_type}\r\n"
        f"content-length: {len(body)}\r\n\r\n"
    ).encode() + body


def version_of(request: Received) -> str:
    version: str = request.body["params"]["_meta"][META_VERSION]
    return version


def only(supported: list[str], *, refuse_all: bool = False) -> Responder:
    async def respond(request: Received, stream: SocketStream) -> None:
        version = version_of(request)
        if version in supported and not refuse_all:
            result = {"resultType": "complete", "tools": []}
            await stream.send(
                reply(200, {"jsonrpc": "2.0", "id": request.body["id"], "result": result})
            )
            return
        error = {
            "code": -32022,
            "message": "Unsupported protocol version",
            "data": {"supported": supported, "requested": version},
        }
        await stream.send(reply(400, {"jsonrpc": "2.0", "id": request.body["id"], "error": error}))

    return respond


async def test_over_http_no_common_version_is_one_request_and_an_error_naming_both_lists() -> None:
    async with (
        scripted(only(["2027-01-01"])) as (url, received),
        ClientSession.connect(url) as session,
    ):
        with pytest.raises(RpcError) as raised:
            await session.request("tools/list")
    assert [version_of(request) for request in received] == [MODERN]
    assert raised.value.code == UNSUPPORTED_PROTOCOL_VERSION
    assert "'2027-01-01'" in raised.value.message and f"'{MODERN}'" in raised.value.message


async def test_over_http_a_server_refusing_what_it_lists_gets_one_retry_never_a_loop() -> None:
    responder = only([MODERN], refuse_all=True)
    async with (
        scripted(responder) as (url, received),
        ClientSession.connect(url, protocol_versions=(NEWER, MODERN)) as session,
    ):
        with pytest.raises(RpcError, match="refused"):
            await session.request("tools/list")
    assert [version_of(request) for request in received] == [NEWER, MODERN]


async def test_over_http_the_retry_keeps_the_version_that_worked_and_the_header_follows() -> None:
    async with (
        scripted(only(["2026-01-01"])) as (url, received),
        ClientSession.connect(url, protocol_versions=(MODERN, "2026-01-01")) as session,
    ):
        await session.request("tools/list")
        await session.request("tools/list")
    assert [version_of(request) for request in received] == [MODERN, "2026-01-01", "2026-01-01"]
    # "Protocol Version Header": the header MUST match the body's _meta version.
    assert [request.headers["mcp-protocol-version"] for request in received] == [
        version_of(request) for request in received
    ]


async def test_every_post_carries_the_metadata_headers_the_token_and_the_callers_headers() -> None:
    async def respond(request: Received, stream: SocketStream) -> None:
        if "id" not in request.body:
            await stream.send(b"HTTP/1.1 202 Accepted\r\ncontent-length: 0\r\n\r\n")
            return
        result = {"resultType": "complete", "content": []}
        await stream.send(
            reply(200, {"jsonrpc": "2.0", "id": request.body["id"], "result": result})
        )

    async with (
        scripted(respond) as (url, received),
        ClientSession.connect(
            url, token="t0ken-value", headers={"Origin": "http://127.0.0.1"}
        ) as session,
    ):
        await session.call_tool("Ünïcode tool", {"x": 1})
        await session.request("resources/read", {"uri": "memo://plain"})
        await session.notify("notifications/x")
    call, read, note = received
    # "Sending Messages": Accept lists both media types; "Standard Request Headers".
    assert call.headers["accept"] == "application/json, text/event-stream"
    assert call.headers["mcp-method"] == "tools/call"
    assert call.headers["mcp-name"] == encode_header_value("Ünïcode tool")
    assert base64.b64decode(call.headers["mcp-name"][9:-2]).decode() == "Ünïcode tool"
    assert call.headers["mcp-protocol-version"] == MODERN == version_of(call)
    assert read.headers["mcp-name"] == "memo://plain"
    assert {call.headers["authorization"], read.headers["authorization"]} == {"Bearer t0ken-value"}
    assert call.headers["origin"] == "http://127.0.0.1"
    assert "id" not in note.body and note.headers["mcp-method"] == "notifications/x"


async def test_a_refused_notification_raises_the_servers_error() -> None:
    async with (
        served(bearer_token="the-right-token-for-tests") as http,
        ClientSession.connect(http.url, token="a-wrong-token-for-tests") as session,
    ):
        with pytest.raises(RpcError, match="Unauthorized"):
            await session.notify("notifications/initialized")
    assert http.methods == ["notifications/initialized"]


@pytest.mark.parametrize(
    ("value", "encoded"),
    [
        # basic/transports/streamable-http "Value Encoding", its table of examples.
        ("us-west1", "us-west1"),
        ("Hello, 世界", "=?base64?SGVsbG8sIOS4lueVjA==?="),
        (" padded ", "=?base64?IHBhZGRlZCA=?="),
        ("line1\nline2", "=?base64?bGluZTEKbGluZTI=?="),
        ("=?base64?literal?=", "=?base64?PT9iYXNlNjQ/bGl0ZXJhbD89?="),
    ],
)
def test_header_values_are_encoded_as_the_spec_shows(value: str, encoded: str) -> None:
    assert encode_header_value(value) == encoded


def test_mirrored_arguments_are_found_where_the_schema_marks_them_to_a_bounded_depth() -> None:
    from mrtr_runtime.testing._http import metadata_headers

    marked = {"type": "string", "x-mcp-header": "Region"}
    flag = {"type": "boolean", "x-mcp-header": "Dry-Run"}
    count = {"type": "integer", "x-mcp-header": "Count"}
    # A schema 10,000 levels deep (a hostile server's): walked to a bound, never to the end.
    deep: dict[str, Any] = {"type": "object"}
    for _ in range(10_000):
        deep = {"type": "object", "properties": {"next": deep}}
    schema = {
        "type": "object",
        "properties": {
            "where": {"type": "object", "properties": {"region": marked}},
            "dry": flag,
            "count": count,
            "absent": {"type": "string", "x-mcp-header": "Absent"},
            "deep": deep,
        },
    }
    arguments = {"where": {"region": "eu-west-1"}, "dry": False, "count": 3, "deep": {}}
    fields = metadata_headers("tools/call", {"name": "t", "arguments": arguments}, MODERN, schema)
    assert fields == {
        "MCP-Protocol-Version": MODERN,
        "Mcp-Method": "tools/call",
        "Mcp-Name": "t",
        "Mcp-Param-Region": "eu-west-1",
        "Mcp-Param-Dry-Run": "false",
        "Mcp-Param-Count": "3",
    }


async def test_a_test_may_send_its_own_host_and_a_rebinding_one_is_refused() -> None:
    async with (
        served() as http,
        ClientSession.connect(http.url, headers={"Host": "evil.example.com"}) as session,
    ):
        with pytest.raises(RpcError, match=r"evil\.example\.com"):
            await session.request("tools/list")


def test_the_sse_parser_reads_events_however_the_bytes_are_split() -> None:
    stream = (
        b'\xef\xbb\xbf: a comment\r\nevent: message\r\ndata: {"a":\r\ndata: 1}\r\n\r\n'
        b"event: other\ndata: dropped\n\n"
        b"data:no-space\rid: 7\rretry: 10\r\r"
    )
    expected = [b'{"a":\n1}', b"no-space"]
    for size in (1, 2, 3, 7, len(stream)):
        parser = SseParser(1024)
        events: list[bytes] = []
        for start in range(0, len(stream), size):
            events += parser.feed(stream[start : start + size])
        assert events == expected, size


def test_the_sse_parser_refuses_an_event_past_its_bound_in_lines_or_pieces() -> None:
    from mrtr_runtime.testing._http import HttpProtocolError

    assert SseParser(100).feed(b"data: " + b"x" * 90 + b"\n\n") == [b"x" * 90]
    with pytest.raises(HttpProtocolError):
        SseParser(100).feed(b"data: " + b"x" * 1000)  # one line, never ended
    parser = SseParser(100)
    with pytest.raises(HttpProtocolError):
        for _ in range(100):
            parser.feed(b"data: " + b"x" * 10 + b"\n")  # many lines, one event


async def test_a_stream_with_junk_a_server_request_and_another_id_records_violations() -> None:
    async def respond(request: Received, stream: SocketStream) -> None:
        events = [
            b"data: not json",
            b'data: {"jsonrpc": "2.0", "id": 99, "method": "elicitation/create", "params": {}}',
            b'data: {"jsonrpc": "2.0", "id": 12345, "result": {"resultType": "complete"}}',
            b'data: {"jsonrpc": "2.0", "method": "notifications/progress", "params": '
            b'{"progressToken": "t", "progress": 1}}',
            b'data: {"jsonrpc": "2.0", "id": %d, "result": {"tools": []}}' % request.body["id"],
        ]
        body = b"".join(event + b"\n\n" for event in events)
        await stream.send(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n\r\n" + body)

    async with scripted(respond) as (url, _), ClientSession.connect(url) as session:
        listed = await session.request("tools/list")
    assert listed == {"tools": []}
    reasons = [violation.split(": ")[1] for violation in session.protocol_violations]
    assert reasons == [
        "not JSON",
        "server-initiated request on the stream",
        "a response to another request",
        "result without resultType",
    ]
    assert [note["method"] for note in session.notifications] == ["notifications/progress"]


# -- a hostile server cannot make the client read without bound ---------------------------------

SMALL = Limits(
    max_head_bytes=4096,
    max_headers=20,
    max_body_bytes=4096,
    max_event_bytes=4096,
    max_notifications=50,
)


def result_body(request: Received, size: int | None = None) -> bytes:
    body = json.dumps(
        {"jsonrpc": "2.0", "id": request.body["id"], "result": {"resultType": "complete"}}
    ).encode()
    return body if size is None else body.ljust(size)


async def outcome(respond: Responder) -> object:
    """What the client's request ends with: its result, or the exception it raised."""
    async with scripted(respond) as (url, _), ClientSession.connect(url, limits=SMALL) as session:
        with anyio.fail_after(BOUND):
            try:
                return await session.request("tools/list")
            except Exception as error:
                return error


def padded_head(header_bytes: int) -> Responder:
    async def respond(request: Received, stream: SocketStream) -> None:
        body = result_body(request)
        pad = b"x-pad: " + b"p" * header_bytes + b"\r\n"
        head = b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n" + pad
        await stream.send(head + b"content-length: %d\r\n\r\n" % len(body) + body)

    return respond


def many_headers(count: int) -> Responder:
    async def respond(request: Received, stream: SocketStream) -> None:
        body = result_body(request)
        fields = b"".join(b"x-h%d: 1\r\n" % n for n in range(count))
        head = b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n" + fields
        await stream.send(head + b"content-length: %d\r\n\r\n" % len(body) + body)

    return respond


def body_of(size: int) -> Responder:
    async def respond(request: Received, stream: SocketStream) -> None:
        body = result_body(request, size)
        head = b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n"
        await stream.send(head + b"content-length: %d\r\n\r\n" % len(body) + body)

    return respond


async def declared_but_never_sent(request: Received, stream: SocketStream) -> None:
    head = b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 40960\r\n\r\n"
    await stream.send(head)
    await anyio.sleep_forever()


async def endless_chunks(request: Received, stream: SocketStream) -> None:
    head = (
        b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ntransfer-encoding: chunked\r\n\r\n"
    )
    await stream.send(head)
    while True:
        await stream.send(b"400\r\n" + b" " * 1024 + b"\r\n")


async def endless_chunk_size_line(request: Received, stream: SocketStream) -> None:
    head = (
        b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ntransfer-encoding: chunked\r\n\r\n"
    )
    await stream.send(head + b"0" * 10240)
    await anyio.sleep_forever()


async def endless_event(request: Received, stream: SocketStream) -> None:
    await stream.send(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n\r\ndata: ")
    while True:
        await stream.send(b"x" * 1024)


def notifications_then_result(count: int | None) -> Responder:
    """`count` progress notifications then the result; None: notifications for ever."""

    async def respond(request: Received, stream: SocketStream) -> None:
        await stream.send(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n\r\n")
        note = {"jsonrpc": "2.0", "method": "notifications/progress", "params": {"progress": 1}}
        sent = 0
        while count is None or sent < count:
            await stream.send(b"data: " + json.dumps(note).encode() + b"\n\n")
            sent += 1
        await stream.send(b"data: " + result_body(request) + b"\n\n")

    return respond


async def test_a_head_within_the_bound_is_read_and_one_ten_times_past_it_is_refused() -> None:
    assert await outcome(padded_head(SMALL.max_head_bytes // 2)) == {"resultType": "complete"}
    refused = await outcome(padded_head(SMALL.max_head_bytes * 10))
    assert isinstance(refused, InvalidServerResponse), refused
    assert "response head" in str(refused)


async def test_headers_up_to_their_count_are_read_and_more_are_refused() -> None:
    # Two fields besides the padding ones: content-type and content-length.
    assert await outcome(many_headers(SMALL.max_headers - 2)) == {"resultType": "complete"}
    for count in (SMALL.max_headers - 1, SMALL.max_headers * 10):
        refused = await outcome(many_headers(count))
        assert isinstance(refused, InvalidServerResponse), (count, refused)


async def test_a_json_body_of_exactly_the_bound_is_read_and_one_byte_more_is_refused() -> None:
    assert await outcome(body_of(SMALL.max_body_bytes)) == {"resultType": "complete"}
    for size in (SMALL.max_body_bytes + 1, SMALL.max_body_bytes * 10):
        refused = await outcome(body_of(size))
        assert isinstance(refused, InvalidServerResponse), (size, refused)


async def test_a_declared_length_past_the_bound_is_refused_before_reading_it() -> None:
    refused = await outcome(declared_but_never_sent)
    assert isinstance(refused, InvalidServerResponse), refused


async def test_endless_chunks_and_an_endless_chunk_size_line_are_cut_off() -> None:
    for respond in (endless_chunks, endless_chunk_size_line):
        refused = await outcome(respond)
        assert isinstance(refused, InvalidServerResponse), (respond, refused)


async def test_an_endless_event_is_cut_off() -> None:
    refused = await outcome(endless_event)
    assert isinstance(refused, InvalidServerResponse), refused
    assert "server-sent event over" in str(refused)


async def test_notifications_up_to_the_bound_are_taken_and_an_endless_stream_is_cut_off() -> None:
    assert await outcome(notifications_then_result(SMALL.max_notifications)) == {
        "resultType": "complete"
    }
    for count in (SMALL.max_notifications + 1, None):
        refused = await outcome(notifications_then_result(count))
        assert isinstance(refused, InvalidServerResponse), (count, refused)
        assert "notifications before the response" in str(refused)


async def test_a_stream_that_ends_without_the_response_is_session_closed() -> None:
    async def respond(request: Received, stream: SocketStream) -> None:
        await stream.send(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n\r\n: bye\n\n")

    closed = await outcome(respond)
    assert isinstance(closed, SessionClosed), closed


async def test_a_reply_that_is_not_http_is_invalid() -> None:
    async def respond(request: Received, stream: SocketStream) -> None:
        await stream.send(b"SSH-2.0-OpenSSH_9.6\r\n\r\n")

    refused = await outcome(respond)
    assert isinstance(refused, InvalidServerResponse), refused
