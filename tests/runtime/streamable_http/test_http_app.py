"""The Streamable HTTP transport's ASGI app, driven in process (2026-07-28
basic/transports/streamable-http): statuses, JSON and SSE replies, disconnect as cancellation,
the bounds on bodies and concurrency, rounds that cross replicas. `test_http_e2e.py` runs the
same app on uvicorn over real sockets.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, cast

import anyio
import pytest

from mrtr_runtime import Context, Registry
from mrtr_runtime.http import _app as http_module
from mrtr_runtime.http._app import MAX_IN_FLIGHT, MAX_WAITING, HttpApp, HttpSettings
from mrtr_runtime.server import Server
from mrtr_runtime.testing import MemoryClient
from support import (
    ALL_CAPABILITIES,
    BOTH_ANSWERS,
    DEPLOY,
    MODERN,
    OTHER_KEY_HEX,
    Json,
    make_codec,
    make_server,
    meta,
)
from task_tools import Flags, build

pytestmark = pytest.mark.anyio

JSON_AND_SSE = "application/json, text/event-stream"


@dataclass
class Exchange:
    """What the app sent for one request."""

    status: int
    headers: dict[str, str]
    chunks: list[bytes] = field(default_factory=list)
    #: Whether the app sent anything after the client went away.
    sent_after_disconnect: bool = False

    @property
    def body(self) -> bytes:
        return b"".join(self.chunks)

    def json(self) -> Json:
        assert self.headers["content-type"] == "application/json", self.headers
        assert int(self.headers["content-length"]) == len(self.body)
        message: Json = json.loads(self.body)
        return message

    def events(self) -> list[Json]:
        assert self.headers["content-type"] == "text/event-stream", self.headers
        events = []
        for block in self.body.decode().split("\n\n"):
            data = [
                line[len("data: ") :] for line in block.split("\n") if line.startswith("data: ")
            ]
            if data:
                events.append(json.loads("\n".join(data)))
        return events


class Client:
    """An HTTP client of an `HttpApp` that never leaves the process."""

    def __init__(self, app: HttpApp) -> None:
        self.app = app
        self.next_id = 1

    async def post(
        self,
        body: bytes | Json,
        *,
        headers: Mapping[str, str] | None = None,
        path: str = "/mcp",
        method: str = "POST",
        chunks: Sequence[bytes] | None = None,
        disconnect: anyio.Event | None = None,
        on_body: anyio.Event | None = None,
        unfinished: bool = False,
    ) -> Exchange:
        """Send one request; `disconnect` set means the client closes the connection;
        `unfinished` means the body's last part says more is coming, and nothing comes."""
        raw = body if isinstance(body, bytes) else json.dumps(body).encode()
        parts = list(chunks) if chunks is not None else [raw]
        fields = {"host": "127.0.0.1:8000", "content-type": "application/json"}
        fields["accept"] = JSON_AND_SSE
        fields.update(headers or {})
        scope = {
            "type": "http",
            "method": method,
            "path": path,
            "headers": [(k.encode(), v.encode()) for k, v in fields.items() if v is not None],
        }
        gone = disconnect or anyio.Event()
        result = Exchange(0, {})
        finished = False

        async def receive() -> dict[str, Any]:
            if parts:
                part = parts.pop(0)
                return {
                    "type": "http.request",
                    "body": part,
                    "more_body": bool(parts) or unfinished,
                }
            await gone.wait()
            return {"type": "http.disconnect"}

        async def send(message: dict[str, Any]) -> None:
            nonlocal finished
            if gone.is_set():
                result.sent_after_disconnect = True
                return
            if message["type"] == "http.response.start":
                result.status = message["status"]
                result.headers = {k.decode(): v.decode() for k, v in message["headers"]}
            else:
                result.chunks.append(message.get("body", b""))
                if on_body is not None:
                    on_body.set()
                finished = not message.get("more_body", False)

        await self.app(scope, receive, send)
        assert finished or gone.is_set(), "the app returned without finishing its response"
        return result

    async def rpc(
        self,
        method: str,
        params: Json | None = None,
        *,
        headers: Mapping[str, str] | None = None,
        capabilities: Json | None = None,
        on_body: anyio.Event | None = None,
        **meta_extra: Any,
    ) -> Exchange:
        """A well-formed 2026-07-28 request, with its metadata headers."""
        params = dict(params or {})
        params["_meta"] = meta(capabilities, **meta_extra)
        request_id = self.next_id
        self.next_id += 1
        sent = {"mcp-protocol-version": MODERN, "mcp-method": method}
        name = params.get("uri", params.get("name"))
        if isinstance(name, str):
            sent["mcp-name"] = name
        sent.update(headers or {})
        return await self.post(
            {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params},
            headers=sent,
            on_body=on_body,
        )


def app_over(server: Server | None = None, **settings: Any) -> HttpApp:
    return HttpApp(server or make_server(), HttpSettings(**settings))


@pytest.fixture
def http(calls: Counter[str]) -> Client:
    return Client(app_over(make_server(calls=calls)))


# -- replies ------------------------------------------------------------------------------------


async def test_a_request_gets_its_json_response_with_a_length(http: Client) -> None:
    reply = await http.rpc("tools/list")
    assert reply.status == 200
    message = reply.json()
    assert message["id"] == 1
    assert message["result"]["resultType"] == "complete"
    assert "echo" in {tool["name"] for tool in message["result"]["tools"]}
    assert message["result"]["_meta"]["io.modelcontextprotocol/serverInfo"]["name"]


async def test_a_multi_round_call_completes_over_http(http: Client, calls: Counter[str]) -> None:
    first = (await http.rpc("tools/call", DEPLOY)).json()["result"]
    assert first["resultType"] == "input_required"
    retry = {**DEPLOY, "inputResponses": BOTH_ANSWERS, "requestState": first["requestState"]}
    final = (await http.rpc("tools/call", retry)).json()["result"]
    assert final["resultType"] == "complete"
    assert final["content"][0]["text"] == "Deployed prod-api successfully"
    assert calls["deploy_stack"] == 2


async def test_round_two_completes_on_another_replica_with_the_same_key_only() -> None:
    # basic/patterns/mrtr: the state travels with the client, so any replica holding the key
    # finishes the round; one with another key cannot.
    first_replica = Client(app_over())
    second_replica = Client(app_over())
    stranger = Client(app_over(make_server(codec=make_codec(OTHER_KEY_HEX))))
    first = (await first_replica.rpc("tools/call", DEPLOY)).json()["result"]
    retry = {**DEPLOY, "inputResponses": BOTH_ANSWERS, "requestState": first["requestState"]}
    final = (await second_replica.rpc("tools/call", retry)).json()["result"]
    assert final["resultType"] == "complete"
    refused = (await stranger.rpc("tools/call", retry)).json()
    assert "error" in refused or refused["result"]["resultType"] == "input_required"
    assert "Deployed" not in json.dumps(refused)


async def test_progress_turns_the_reply_into_an_sse_stream_ending_with_the_response(
    http: Client,
) -> None:
    reply = await http.rpc(
        "tools/call", {"name": "progress_steps", "arguments": {}}, progressToken=7
    )
    assert reply.status == 200
    assert reply.headers["x-accel-buffering"] == "no"
    events = reply.events()
    progress = [event for event in events if event.get("method") == "notifications/progress"]
    assert [event["params"]["progress"] for event in progress] == [1.0, 2.0, 3.0]
    assert all(event["params"]["progressToken"] == 7 for event in progress)
    assert events[-1]["id"] == 1
    assert events[-1]["result"]["resultType"] == "complete"
    assert "id" not in events[0]


async def test_a_client_that_accepts_only_json_gets_json_and_no_notifications(
    http: Client,
) -> None:
    reply = await http.rpc(
        "tools/call",
        {"name": "progress_steps", "arguments": {}},
        headers={"accept": "application/json"},
        progressToken=7,
    )
    assert reply.json()["result"]["resultType"] == "complete"


def logging_registry() -> Registry:
    registry = Registry()

    @registry.tool()
    async def chatty(*, ctx: Context) -> str:
        await ctx.send_log("debug", "fine detail")
        await ctx.send_log("warning", {"disk": "almost full"})
        return "done"

    return registry


async def test_log_messages_stream_only_when_asked_and_at_the_requested_level() -> None:
    # server/utilities/logging: no notifications/message without a logLevel in _meta.
    http = Client(app_over(make_server(registry=logging_registry())))
    call = {"name": "chatty", "arguments": {}}
    quiet = await http.rpc("tools/call", call)
    assert quiet.json()["result"]["content"][0]["text"] == "done"
    loud = await http.rpc("tools/call", call, **{"io.modelcontextprotocol/logLevel": "info"})
    events = loud.events()
    assert [event.get("method") for event in events] == ["notifications/message", None]
    assert events[0]["params"]["level"] == "warning"
    assert events[1]["result"]["content"][0]["text"] == "done"


# -- cancellation -------------------------------------------------------------------------------


async def test_closing_the_connection_cancels_the_request_and_nothing_more_is_sent(
    http: Client, calls: Counter[str]
) -> None:
    # basic/transports/streamable-http "Cancellation": closing the stream IS the cancellation;
    # the server MUST NOT send further messages for it.
    gone = anyio.Event()
    first_event = anyio.Event()
    replies: list[Exchange] = []

    async def call_gate() -> None:
        params = {"name": "gate", "arguments": {"name": "never"}}
        request = {"jsonrpc": "2.0", "id": 1, "method": "tools/call"}
        request["params"] = {**params, "_meta": meta(progressToken="p")}
        headers = {"mcp-protocol-version": MODERN, "mcp-method": "tools/call", "mcp-name": "gate"}
        replies.append(
            await http.post(request, headers=headers, disconnect=gone, on_body=first_event)
        )

    with anyio.fail_after(10):
        async with anyio.create_task_group() as group:
            group.start_soon(call_gate)
            await first_event.wait()  # the gate's progress: the handler is waiting
            gone.set()
    (reply,) = replies
    assert calls["gate"] == 1
    assert [event["method"] for event in reply.events()] == ["notifications/progress"]
    assert not reply.sent_after_disconnect


async def test_a_quiet_stream_gets_keepalive_comments(monkeypatch: pytest.MonkeyPatch) -> None:
    # "Receiving Messages": an SSE comment keeps intermediaries from closing a quiet stream.
    monkeypatch.setattr(http_module, "KEEPALIVE_SECONDS", 0.05)

    async def stay_quiet(server: Server) -> None:
        await anyio.sleep(0.3)

    reply = await listen_until_shutdown(stay_quiet)
    comments = [chunk for chunk in reply.chunks if chunk == b":\n\n"]
    assert len(comments) >= 2
    assert [event.get("method") for event in reply.events()][-1] is None


# -- statuses -----------------------------------------------------------------------------------


async def error_of(reply: Exchange, status: int) -> Json:
    assert reply.status == status, reply.body
    message = reply.json()
    error: Json = message["error"]
    return {**error, "id": message.get("id", "absent")}


async def test_unknown_and_removed_methods_are_404_with_32601(http: Client) -> None:
    for method in ("no/such", "initialize", "ping", "logging/setLevel", "resources/subscribe"):
        error = await error_of(await http.rpc(method), 404)
        assert error["code"] == -32601, method


async def test_malformed_requests_are_400(http: Client) -> None:
    missing_meta = {"jsonrpc": "2.0", "id": 5, "method": "tools/list", "params": {}}
    headers = {"mcp-protocol-version": MODERN, "mcp-method": "tools/list"}
    error = await error_of(await http.post(missing_meta, headers=headers), 400)
    assert (error["code"], error["id"]) == (-32602, 5)
    unsupported = await http.rpc(
        "tools/list", headers={"mcp-protocol-version": "1999-01-01"}, version="1999-01-01"
    )
    assert (await error_of(unsupported, 400))["code"] == -32022
    no_elicitation = await http.rpc("tools/call", DEPLOY, capabilities={})
    assert (await error_of(no_elicitation, 400))["code"] == -32021
    bad_level = await http.rpc("tools/list", **{"io.modelcontextprotocol/logLevel": "loud"})
    assert (await error_of(bad_level, 400))["code"] == -32602


async def test_errors_about_what_was_asked_are_200(http: Client) -> None:
    unknown_tool = await http.rpc("tools/call", {"name": "no_such_tool", "arguments": {}})
    assert (await error_of(unknown_tool, 200))["code"] == -32602


async def test_a_header_that_disagrees_with_the_body_is_400_with_32020(http: Client) -> None:
    error = await error_of(
        await http.rpc("tools/list", headers={"mcp-method": "prompts/list"}), 400
    )
    assert (error["code"], error["id"]) == (-32020, 1)
    call = {"name": "echo", "arguments": {"text": "hi"}}
    missing_name = await http.rpc("tools/call", call, headers={"mcp-name": "shout"})
    assert (await error_of(missing_name, 400))["code"] == -32020
    padded = await http.rpc("tools/call", call, headers={"mcp-name": "  echo  "})
    assert padded.json()["result"]["content"][0]["text"] == "hi"


async def test_a_modern_request_never_gets_a_session_even_naming_one(http: Client) -> None:
    # 2026-07-28 basic/transports/streamable-http "Backward Compatibility": an Mcp-Session-Id
    # on a request is ignored; the server neither mints nor echoes one. A legacy initialize
    # does open a session (test_http_legacy.py): the modern reply must not carry it.
    initialize = {
        "jsonrpc": "2.0",
        "id": 0,
        "method": "initialize",
        "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {}},
    }
    opened = await http.post(initialize)
    session = opened.headers["mcp-session-id"]
    for headers in ({}, {"mcp-session-id": session}, {"mcp-session-id": "no-such-session"}):
        reply = await http.rpc("tools/list", headers=headers)
        assert reply.status == 200, reply.body
        assert "mcp-session-id" not in reply.headers
        assert reply.json()["result"]["resultType"] == "complete"  # served as 2026-07-28
    # Without _meta or a session, a request is still malformed for 2026-07-28 (and the
    # 2025-11-25 "SHOULD respond ... without an Mcp-Session-Id header ... with 400").
    still_modern = await http.post(
        {"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
        headers={"mcp-protocol-version": MODERN, "mcp-method": "tools/list"},
    )
    assert (await error_of(still_modern, 400))["code"] == -32602
    assert "mcp-session-id" not in still_modern.headers


async def test_no_modern_request_writes_the_session_the_router_is_handed(http: Client) -> None:
    # The 2026-07-28 path hands the router one never-initialized Session: the methods that
    # would write one are legacy-only, so with modern _meta they are -32601 and write nothing.
    for method, params in (
        ("initialize", {"protocolVersion": "2025-11-25", "capabilities": {}}),
        ("logging/setLevel", {"level": "debug"}),
        ("resources/subscribe", {"uri": "memo://notes"}),
    ):
        assert (await error_of(await http.rpc(method, params), 404))["code"] == -32601
    assert (await http.rpc("tools/list")).status == 200
    untouched = http.app._stateless
    assert untouched.legacy_version is None
    assert untouched.log_level is None
    assert untouched.listener is None


@pytest.mark.parametrize(
    ("body", "code"),
    [
        (b"{not json", -32700),
        (b"\xff\xfe", -32700),
        (b"[]", -32600),
        (b'[{"jsonrpc": "2.0", "id": 1, "method": "tools/list"}]', -32600),
        (b'"text"', -32600),
        (b'{"jsonrpc": "2.0", "id": 1, "result": {}}', -32600),
        (b'{"jsonrpc": "1.0", "id": 1, "method": "tools/list"}', -32600),
    ],
)
async def test_bodies_that_are_not_a_request_are_400(http: Client, body: bytes, code: int) -> None:
    assert (await error_of(await http.post(body), 400))["code"] == code


async def test_a_notification_is_accepted_with_202_and_no_body(http: Client) -> None:
    reply = await http.post({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {}})
    assert (reply.status, reply.body) == (202, b"")
    assert "content-type" not in reply.headers


@pytest.mark.parametrize(
    ("headers", "status"),
    [
        ({"origin": "http://evil.example.com"}, 403),
        ({"host": "evil.example.com:8000"}, 403),
        ({"content-type": "text/plain"}, 415),
        ({"accept": "text/html"}, 406),
    ],
)
async def test_who_may_ask_and_how(http: Client, headers: dict[str, str], status: int) -> None:
    reply = await http.rpc("tools/list", headers=headers)
    assert reply.status == status
    assert "id" not in reply.json()


async def test_huge_host_and_origin_values_are_judged_but_never_kept(http: Client) -> None:
    # A cache of verdicts keyed by client-chosen strings must not become a memory sink.
    kept = http_module._judged_access.cache_info().currsize
    for number in range(5):
        origin = f"http://evil{number}.example.com/" + "a" * 1_000_000
        assert (await http.rpc("tools/list", headers={"origin": origin})).status == 403
    assert http_module._judged_access.cache_info().currsize == kept


async def test_only_post_on_the_endpoint_without_a_session(http: Client) -> None:
    # 2026-07-28 "Backward Compatibility": GET and DELETE get 405; with a 2025-11-25 session
    # id they are that era's stream and session ending (test_http_legacy.py).
    for method in ("GET", "DELETE", "PUT"):
        reply = await http.post(b"", method=method)
        assert (reply.status, reply.headers["allow"]) == (405, "POST")
    put = await http.post(b"", method="PUT", headers={"mcp-session-id": "any"})
    assert put.status == 405
    assert (await http.post(b"", path="/other")).status == 404


async def test_a_configured_bearer_token_is_required() -> None:
    client = Client(app_over(bearer_token="t0ken-for-tests"))
    refused = await client.rpc("tools/list")
    assert refused.status == 401
    assert refused.headers["www-authenticate"].startswith("Bearer")
    wrong = await client.rpc("tools/list", headers={"authorization": "Bearer t0ken"})
    assert wrong.status == 401
    right = await client.rpc("tools/list", headers={"authorization": "Bearer t0ken-for-tests"})
    assert right.status == 200


def test_a_blank_or_non_ascii_token_is_a_configuration_error() -> None:
    # Set but blank must not quietly mean "no authentication".
    for token in ("", "   ", "p\u00e4ss"):
        with pytest.raises(ValueError, match="MRTR_HTTP_TOKEN"):
            HttpSettings.from_environment({"MRTR_HTTP_TOKEN": token}, host="127.0.0.1", port=0)
    settings = HttpSettings.from_environment(
        {"MRTR_HTTP_TOKEN": " s3cret ", "MRTR_HTTP_ALLOWED_ORIGINS": "https://a.example, ,"},
        host="127.0.0.1",
        port=0,
    )
    assert settings.bearer_token == "s3cret"
    assert settings.allowed_origins == ("https://a.example",)


async def test_bodies_past_the_limit_are_413_declared_or_streamed() -> None:
    client = Client(app_over(max_body_bytes=1000))
    declared = await client.post(b"x", headers={"content-length": "1001"})
    assert declared.status == 413
    streamed = await client.post(b"", chunks=[b"x" * 600, b"x" * 600])
    assert streamed.status == 413
    ten_times = await client.post(b"", chunks=[b"x" * 1000] * 10)
    assert ten_times.status == 413
    at_the_limit = await client.post(b" " * 990 + b"[]", headers={"content-length": "1000"})
    assert at_the_limit.status == 400  # read whole, then found to be a batch


async def test_a_body_that_never_finishes_gets_408(
    http: Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(http_module, "BODY_TIMEOUT_SECONDS", 0.2)
    with anyio.fail_after(10):
        reply = await http.post(b"", chunks=[b'{"jsonrpc": "2.0",'], unfinished=True)
    assert reply.status == 408
    assert reply.headers["connection"] == "close"


# -- concurrency --------------------------------------------------------------------------------


@pytest.mark.parametrize("requests", [400, 3000])
async def test_past_the_running_and_waiting_bounds_requests_get_503_and_the_rest_complete(
    requests: int,
) -> None:
    server = make_server()
    http = Client(app_over(server))
    admitted = MAX_IN_FLIGHT + MAX_WAITING
    replies: list[Exchange] = []
    refused_all_it_could = anyio.Event()

    async def call_gate() -> None:
        replies.append(await http.rpc("tools/call", {"name": "gate", "arguments": {"name": "g"}}))
        if len(replies) == requests - admitted:
            refused_all_it_could.set()

    with anyio.fail_after(60):
        async with anyio.create_task_group() as group:
            for _ in range(requests):
                group.start_soon(call_gate)
            await refused_all_it_could.wait()
            assert http.app._running == MAX_IN_FLIGHT
            assert http.app._waiting == MAX_WAITING
            busy = list(replies)
            # The app is full; the gate opens from another client of the same server.
            opener = MemoryClient(server, capabilities=ALL_CAPABILITIES)
            await opener.request("tools/call", {"name": "release", "arguments": {"name": "g"}})
    assert {reply.status for reply in busy} == {503}
    assert all(reply.headers["retry-after"] == "1" for reply in busy)
    assert {reply.json()["error"]["code"] for reply in busy} == {-32603}
    done = replies[len(busy) :]
    assert len(done) == admitted
    assert {reply.json()["result"]["content"][0]["text"] for reply in done} == {"gate g opened"}


# -- lifespan -----------------------------------------------------------------------------------


async def lifespan(app: HttpApp, *messages: str) -> list[str]:
    incoming = [{"type": message} for message in messages]
    sent: list[str] = []

    async def receive() -> dict[str, Any]:
        return incoming.pop(0)

    async def send(message: dict[str, Any]) -> None:
        sent.append(message["type"])

    await app({"type": "lifespan"}, receive, send)
    return sent


async def test_startup_loads_the_tools_and_a_broken_tools_package_fails_it() -> None:
    assert await lifespan(app_over(), "lifespan.startup", "lifespan.shutdown") == [
        "lifespan.startup.complete",
        "lifespan.shutdown.complete",
    ]
    server = make_server()
    server.registry.defer_package("no_such_tools_package_anywhere")
    assert await lifespan(app_over(server), "lifespan.startup") == ["lifespan.startup.failed"]


async def listen_until_shutdown(meanwhile: Callable[[Server], Awaitable[None]]) -> Exchange:
    """A `subscriptions/listen` for list changes: once acknowledged, `meanwhile(server)` runs,
    then the app shuts down (which ends the stream)."""
    server = make_server()
    app = app_over(server)
    http = Client(app)
    acknowledged = anyio.Event()
    replies: list[Exchange] = []

    async def listen() -> None:
        params = {"notifications": {"toolsListChanged": True}}
        replies.append(await http.rpc("subscriptions/listen", params, on_body=acknowledged))

    with anyio.fail_after(10):
        async with anyio.create_task_group() as group:
            group.start_soon(listen)
            await acknowledged.wait()
            await meanwhile(server)
            await lifespan(app, "lifespan.shutdown")
    return replies[0]


async def test_a_listen_streams_its_notices_and_ends_at_shutdown() -> None:
    async def add_a_tool(server: Server) -> None:
        @server.registry.tool()
        async def added_later() -> str:
            return "new"

        await anyio.sleep(0.05)

    events = (await listen_until_shutdown(add_a_tool)).events()
    methods = [event.get("method") for event in events]
    assert methods == [
        "notifications/subscriptions/acknowledged",
        "notifications/tools/list_changed",
        "notifications/cancelled",
        None,
    ]
    assert events[-1]["result"]["_meta"]


# -- tasks (io.modelcontextprotocol/tasks) over HTTP --------------------------------------------


async def test_a_task_over_http_is_followed_with_mcp_name_the_task_id() -> None:
    server = make_server(registry=build(Flags()))
    with_tasks = {**ALL_CAPABILITIES, "extensions": {"io.modelcontextprotocol/tasks": {}}}
    http = Client(app_over(server))
    created = (
        await http.rpc(
            "tools/call", {"name": "slow", "arguments": {"seconds": 0}}, capabilities=with_tasks
        )
    ).json()["result"]
    assert created["resultType"] == "task"
    task_id = created["taskId"]
    # tasks "Streamable HTTP: Routing Headers": Mcp-Name MUST be the task id; one that is
    # not is refused, and a request without it is served by its body (test_http_rules).
    refused = await http.rpc(
        "tasks/get",
        {"taskId": task_id},
        headers={"mcp-name": "another-task"},
        capabilities=with_tasks,
    )
    assert refused.status == 400
    assert refused.json()["error"]["code"] == -32020
    unnamed = await http.rpc("tasks/get", {"taskId": task_id}, headers={}, capabilities=with_tasks)
    assert unnamed.status == 200
    assert unnamed.json()["result"]["taskId"] == task_id
    with anyio.fail_after(10):
        while True:
            got = await http.rpc(
                "tasks/get",
                {"taskId": task_id},
                headers={"mcp-name": task_id},
                capabilities=with_tasks,
            )
            assert got.status == 200
            task = got.json()["result"]
            if task["status"] == "completed":
                break
            await anyio.sleep(0.02)
    assert task["result"]["content"] == [{"type": "text", "text": "slept 0.0"}]


async def test_the_lifespan_runs_the_task_engine_and_stops_it() -> None:
    server = make_server(registry=build(Flags()))
    app = app_over(server)
    messages = [{"type": "lifespan.startup"}, {"type": "lifespan.shutdown"}]
    sent: list[str] = []
    started = anyio.Event()

    async def receive() -> dict[str, Any]:
        if len(messages) == 1:
            await started.wait()
        return messages.pop(0)

    async def send(message: dict[str, Any]) -> None:
        sent.append(message["type"])
        if message["type"] == "lifespan.startup.complete":
            assert app._tasks_loop is not None and not app._tasks_loop.done()
            started.set()

    await app(cast("Any", {"type": "lifespan"}), receive, send)
    assert sent == ["lifespan.startup.complete", "lifespan.shutdown.complete"]
    assert app._tasks_loop is None and server.tasks._stopping


WITH_TASKS = {**ALL_CAPABILITIES, "extensions": {"io.modelcontextprotocol/tasks": {}}}


async def test_inline_replays_of_a_task_waiting_for_input_answer_at_once_and_hold_no_slot() -> None:
    # 70 replays (more than MAX_IN_FLIGHT) of a confirmation whose task waits for input only a
    # client following tasks can give: each answers at once, and other calls go on meanwhile.
    assert MAX_IN_FLIGHT < 70
    server = make_server(registry=build(Flags()))
    http = Client(app_over(server))
    params: Json = {"name": "confirm_then_ask", "arguments": {}}
    first = (await http.rpc("tools/call", params, capabilities=WITH_TASKS)).json()["result"]
    retry = {
        **params,
        "inputResponses": {"confirm": {"action": "accept", "content": {"confirmed": True}}},
        "requestState": first["requestState"],
    }
    created = (await http.rpc("tools/call", retry, capabilities=WITH_TASKS)).json()["result"]
    task_id = created["taskId"]
    with anyio.fail_after(10):
        while True:
            got = await http.rpc(
                "tasks/get",
                {"taskId": task_id},
                headers={"mcp-name": task_id},
                capabilities=WITH_TASKS,
            )
            if got.json()["result"]["status"] == "input_required":
                break
            await anyio.sleep(0.02)
    replies: list[Exchange] = []

    async def replay() -> None:
        replies.append(await http.rpc("tools/call", retry))

    with anyio.fail_after(5):
        async with anyio.create_task_group() as group:
            for _ in range(70):
                group.start_soon(replay)
            other = await http.rpc("tools/call", {"name": "slow", "arguments": {"seconds": 0}})
    assert other.json()["result"]["content"][0]["text"] == "slept 0.0"
    assert len(replies) == 70
    for reply in replies:
        result = reply.json()["result"]
        assert result["isError"] is True and task_id in result["content"][0]["text"]


async def test_an_http_stop_gives_a_task_past_its_point_of_no_return_the_grace(
    caplog: pytest.LogCaptureFixture,
) -> None:
    flags = Flags()
    server = make_server(registry=build(flags))
    app = app_over(server)
    http = Client(app)
    created = (
        await http.rpc("tools/call", {"name": "committed_job"}, capabilities=WITH_TASKS)
    ).json()["result"]
    with anyio.fail_after(10):
        while True:
            if flags.runs["committed_job"]:
                break
            await anyio.sleep(0.01)

    async def finish_soon() -> None:
        await anyio.sleep(0.2)
        flags.release.set()

    with caplog.at_level("WARNING", logger="mrtr_runtime"), anyio.fail_after(10):
        async with anyio.create_task_group() as group:
            group.start_soon(finish_soon)
            assert await lifespan(app, "lifespan.shutdown") == ["lifespan.shutdown.complete"]
    store = await server.tasks.store()
    record = await store.load(created["taskId"])
    assert record is not None and record.status == "completed"
    assert record.result is not None and record.result["content"][0]["text"] == "carried out"
    assert not [r for r in caplog.records if "grace" in r.getMessage()]
