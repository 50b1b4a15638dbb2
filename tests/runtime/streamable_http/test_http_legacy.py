"""The 2025-11-25 Streamable HTTP transport beside the 2026-07-28 one, driven in process.

2025-11-25 basic/transports "Streamable HTTP": sessions opened by `initialize` and named by
`Mcp-Session-Id` ("Session Management"), server-to-client requests on the request's SSE stream
answered by POST ("Sending Messages"), the GET stream ("Listening for Messages", "Multiple
Connections"), DELETE, and resumable streams ("Resumability and Redelivery"). The session
table's bounds are driven with an injected clock. `test_http_e2e.py` has the real subprocess.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections import Counter
from collections.abc import Mapping
from typing import Any

import anyio
import pytest

from mrtr_runtime import Context, Registry
from mrtr_runtime.http import _sessions
from mrtr_runtime.http._app import MAX_IN_FLIGHT, MAX_WAITING, HttpApp, HttpSettings
from mrtr_runtime.http._responses import RETRY_MILLISECONDS
from mrtr_runtime.http._sessions import (
    MAX_DETACHED_STREAMS,
    MAX_LOG_BYTES,
    MAX_LOG_EVENTS,
    EventLog,
    LegacySession,
    SessionTable,
    parse_event_id,
)
from mrtr_runtime.server import Server
from support import ARN, DEPLOY, MODERN, Json, build_registry, make_server, meta

pytestmark = pytest.mark.anyio

LEGACY = "2025-11-25"
CAPABILITIES: Json = {"elicitation": {"form": {}}, "sampling": {}, "roots": {}}
#: "Session Management" 1.: visible ASCII, 0x21 to 0x7E.
VISIBLE_ASCII = re.compile(r"[\x21-\x7e]+")


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class Conn:
    """One HTTP exchange with the app, in flight: its status, headers and SSE events as
    they come."""

    def __init__(self) -> None:
        self.status = 0
        self.headers: dict[str, str] = {}
        self.chunks: list[bytes] = []
        self.done = asyncio.Event()
        self.gone = asyncio.Event()
        self.started = asyncio.Event()
        self.sent_after_disconnect = False
        self._buffer = b""
        #: Every SSE event: its fields (id, data, retry, event), in order.
        self.frames: list[dict[str, str]] = []
        self._new = asyncio.Event()
        self.task: asyncio.Task[None] | None = None

    @property
    def body(self) -> bytes:
        return b"".join(self.chunks)

    def json(self) -> Json:
        assert self.headers.get("content-type") == "application/json", (self.headers, self.body)
        message: Json = json.loads(self.body)
        return message

    def feed(self, chunk: bytes) -> None:
        self.chunks.append(chunk)
        self._buffer += chunk
        while b"\n\n" in self._buffer:
            block, self._buffer = self._buffer.split(b"\n\n", 1)
            fields: dict[str, str] = {}
            for line in block.decode().split("\n"):
                if line.startswith(":"):
                    continue
                name, _, value = line.partition(":")
                fields[name] = value[1:] if value.startswith(" ") else value
            if fields:
                self.frames.append(fields)
        self._new.set()

    def messages(self) -> list[Json]:
        return [json.loads(frame["data"]) for frame in self.frames if frame.get("data")]

    async def message(self, index: int) -> Json:
        """The `index`-th JSON-RPC message of the stream, once it has come."""
        with anyio.fail_after(10):
            while len(self.messages()) <= index:
                if self.done.is_set():
                    raise AssertionError(f"the stream ended after {self.messages()}")
                self._new.clear()
                await self._new.wait()
        return self.messages()[index]

    async def finished(self) -> Conn:
        with anyio.fail_after(30):
            await self.done.wait()
        return self


class LegacyClient:
    """A 2025-11-25 client of an `HttpApp` that never leaves the process."""

    def __init__(self, app: HttpApp, *, token: str | None = None) -> None:
        self.app = app
        self.token = token
        self.session: str | None = None
        self.next_id = 1

    def start(
        self,
        method: str = "POST",
        body: Json | bytes | None = None,
        headers: Mapping[str, str | None] | None = None,
    ) -> Conn:
        fields: dict[str, str | None] = {
            "host": "127.0.0.1:8000",
            "accept": "application/json, text/event-stream",
            "content-type": "application/json",
            "mcp-protocol-version": LEGACY,
        }
        if self.session is not None:
            fields["mcp-session-id"] = self.session
        if self.token is not None:
            fields["authorization"] = f"Bearer {self.token}"
        fields.update(headers or {})
        raw = (
            b"" if body is None else body if isinstance(body, bytes) else json.dumps(body).encode()
        )
        scope = {
            "type": "http",
            "method": method,
            "path": "/mcp",
            "headers": [(k.encode(), v.encode()) for k, v in fields.items() if v is not None],
        }
        conn = Conn()
        parts = [raw]

        async def receive() -> dict[str, Any]:
            if parts:
                return {"type": "http.request", "body": parts.pop(), "more_body": False}
            await conn.gone.wait()
            return {"type": "http.disconnect"}

        async def send(message: dict[str, Any]) -> None:
            if conn.gone.is_set():
                conn.sent_after_disconnect = True
                return
            if message["type"] == "http.response.start":
                conn.status = message["status"]
                conn.headers = {k.decode(): v.decode() for k, v in message["headers"]}
                conn.started.set()
            else:
                conn.feed(message.get("body", b""))
                if not message.get("more_body", False):
                    conn.done.set()

        async def run() -> None:
            try:
                await self.app(scope, receive, send)
            finally:
                conn.done.set()

        conn.task = asyncio.get_running_loop().create_task(run())
        return conn

    def request(self, method: str, params: Json | None = None, **headers: str | None) -> Conn:
        request_id = self.next_id
        self.next_id += 1
        body = {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params or {}}
        return self.start("POST", body, headers)

    async def call(self, method: str, params: Json | None = None, **headers: str | None) -> Conn:
        return await self.request(method, params, **headers).finished()

    async def initialize(self, capabilities: Json | None = None) -> Json:
        reply = await self.call(
            "initialize",
            {
                "protocolVersion": LEGACY,
                "capabilities": CAPABILITIES if capabilities is None else capabilities,
                "clientInfo": {"name": "legacy-test", "version": "1"},
            },
        )
        assert reply.status == 200, reply.body
        self.session = reply.headers["mcp-session-id"]
        notified = await self.notify("notifications/initialized")
        assert (notified.status, notified.body) == (202, b"")
        result: Json = reply.json()["result"]
        return result

    async def notify(self, method: str, params: Json | None = None) -> Conn:
        body = {"jsonrpc": "2.0", "method": method, "params": params or {}}
        return await self.start("POST", body).finished()

    async def answer(self, request: Json, result: Json) -> Conn:
        """POST the response to a server-to-client request."""
        body = {"jsonrpc": "2.0", "id": request["id"], "result": result}
        return await self.start("POST", body).finished()

    def get(self, **headers: str | None) -> Conn:
        return self.start(
            "GET", None, {"content-type": None, "accept": "text/event-stream", **headers}
        )

    async def delete(self) -> Conn:
        return await self.start("DELETE", None, {"content-type": None}).finished()


async def drop(client: LegacyClient, conn: Conn) -> None:
    """The client's connection goes; returns once the server has noticed (the stream is
    detached), so that nothing is sent after it."""
    key = conn.frames[0]["id"].split(".")[0]
    assert client.session is not None
    session = client.app.sessions.find(client.session, None)
    assert session is not None
    conn.gone.set()
    with anyio.fail_after(10):
        while key in session.attached:  # noqa: ASYNC110 -- the server's state; no event to wait on
            await asyncio.sleep(0)


def accepted(**content: Any) -> Json:
    return {"action": "accept", "content": content}


def app_over(server: Server | None = None, clock: Clock | None = None, **settings: Any) -> HttpApp:
    return HttpApp(server or make_server(), HttpSettings(**settings), clock=clock or Clock())


@pytest.fixture
def app(calls: Counter[str]) -> HttpApp:
    return app_over(make_server(calls=calls))


@pytest.fixture
async def client(app: HttpApp) -> LegacyClient:
    legacy = LegacyClient(app)
    await legacy.initialize()
    return legacy


async def deploy_through(client: LegacyClient, conn: Conn, first: int = 0) -> Json:
    """Answer the deploy's two questions as a host would; its final result."""
    confirm = await conn.message(first)
    assert confirm["method"] == "elicitation/create"
    assert (await client.answer(confirm, accepted(confirmed=True))).status == 202
    role = await conn.message(first + 1)
    assert role["method"] == "elicitation/create"
    assert (await client.answer(role, accepted(arn=ARN))).status == 202
    final = await conn.message(first + 2)
    await conn.finished()
    return final


# -- sessions -----------------------------------------------------------------------------------


async def test_initialize_opens_a_session_named_in_its_response(app: HttpApp) -> None:
    # 2026-07-28 basic/versioning "Backward Compatibility": "An initialize request selects
    # legacy semantics, scoped to ... the session (HTTP)".
    first, second = LegacyClient(app), LegacyClient(app)
    result = await first.initialize()
    await second.initialize()

    assert result["protocolVersion"] == LEGACY
    assert "resultType" not in result
    assert first.session is not None and second.session is not None
    assert VISIBLE_ASCII.fullmatch(first.session)
    assert len(first.session) >= 43  # 256 random bits
    assert first.session != second.session
    listed = (await first.call("tools/list")).json()
    assert "resultType" not in listed["result"]  # a 2025-11-25 result
    assert "deploy_stack" in {tool["name"] for tool in listed["result"]["tools"]}
    assert (await first.call("ping")).json()["result"] == {}


async def test_a_failed_initialize_opens_no_session(app: HttpApp) -> None:
    client = LegacyClient(app)
    reply = await client.call("initialize", {"protocolVersion": 7})

    assert reply.json()["error"]["code"] == -32602
    assert "mcp-session-id" not in reply.headers
    assert len(app.sessions) == 0


async def test_an_unknown_or_ended_session_is_404(client: LegacyClient) -> None:
    # "Session Management" 3.: after the session ends the server MUST answer 404.
    assert (await client.call("tools/list")).status == 200
    assert (await client.delete()).status == 200
    for reply in (await client.call("tools/list"), await client.delete()):
        assert reply.status == 404
        assert reply.json()["error"]["code"] == -32600
    client.session = "no-such-session"
    assert (await client.call("tools/list")).status == 404
    assert (await client.get().finished()).status == 404


async def test_a_session_is_the_principals_that_opened_it() -> None:
    # security_best_practices "Session Hijacking": a leaked id is no way in for another token.
    app = app_over(bearer_tokens=(("alice", "alice-token-0123"), ("bob", "bob-token-4567")))
    alice = LegacyClient(app, token="alice-token-0123")
    await alice.initialize()
    bob = LegacyClient(app, token="bob-token-4567")
    bob.session = alice.session

    assert (await bob.call("tools/list")).status == 404
    assert (await bob.get().finished()).status == 404
    assert (await bob.delete()).status == 404
    assert (await alice.call("tools/list")).status == 200  # still alice's, still open


async def test_a_request_with_modern_meta_is_modern_in_a_session(client: LegacyClient) -> None:
    # 2026-07-28 "Backward Compatibility": ignore the session id, never echo one.
    reply = await client.call(
        "tools/list",
        {"_meta": meta()},
        **{"mcp-protocol-version": MODERN, "mcp-method": "tools/list"},
    )

    assert reply.json()["result"]["resultType"] == "complete"
    assert "mcp-session-id" not in reply.headers


@pytest.mark.parametrize("version", [LEGACY, "2025-06-18", None])
async def test_a_session_request_names_a_legacy_version_or_none(
    client: LegacyClient, version: str | None
) -> None:
    reply = await client.call("tools/list", **{"mcp-protocol-version": version})
    assert reply.status == 200


@pytest.mark.parametrize("version", [MODERN, "1999-01-01"])
async def test_a_session_request_naming_another_version_is_400(
    client: LegacyClient, version: str
) -> None:
    # 2025-11-25 "Protocol Version Header": invalid or unsupported -> 400 Bad Request.
    reply = await client.call("tools/list", **{"mcp-protocol-version": version})
    assert reply.status == 400
    assert reply.json()["error"]["code"] == -32600


async def test_notifications_and_responses_in_a_session_are_202(client: LegacyClient) -> None:
    # "Sending Messages" 4.: an accepted notification or response gets 202 and no body.
    for reply in (
        await client.notify("notifications/roots/list_changed"),
        await client.answer({"id": "mrtr-999"}, {"roots": []}),  # to nothing we asked
    ):
        assert (reply.status, reply.body) == (202, b"")


# -- server-to-client requests ------------------------------------------------------------------


async def test_the_bridge_asks_on_the_requests_stream_and_the_answers_come_by_post(
    client: LegacyClient, calls: Counter[str]
) -> None:
    # "Sending Messages" 6.: requests before the response, on the POST's stream; the priming
    # event (an id and empty data) first.
    conn = client.request("tools/call", DEPLOY)
    final = await deploy_through(client, conn)

    assert final["result"]["content"][0]["text"] == "Deployed prod-api successfully"
    assert "resultType" not in final["result"]
    assert conn.headers["content-type"] == "text/event-stream"
    priming = conn.frames[0]
    assert priming["data"] == "" and priming["id"]
    ids = [frame["id"] for frame in conn.frames]
    assert len(set(ids)) == len(ids)  # "globally unique across all streams within that session"
    assert calls["deploy_stack"] == 2  # one round asking both questions, then done


async def test_a_request_that_sends_nothing_first_gets_plain_json(client: LegacyClient) -> None:
    reply = await client.call("tools/call", {"name": "echo", "arguments": {"text": "hi"}})

    assert reply.json()["result"]["content"][0]["text"] == "hi"


async def test_a_client_that_accepts_only_json_cannot_be_asked(client: LegacyClient) -> None:
    reply = await client.call("tools/call", DEPLOY, accept="application/json")

    result = reply.json()["result"]
    assert result["isError"] is True
    assert "text/event-stream" in result["content"][0]["text"]


@pytest.mark.parametrize("requests", [400, 3_000])
async def test_answers_never_wait_behind_the_request_bounds(requests: int) -> None:
    # Every place taken by a request waiting for its elicitation answer, every waiting place
    # taken too: the answers are POSTs, and they must still get through (no deadlock).
    app = app_over(make_server(registry=build_registry()))
    client = LegacyClient(app)
    await client.initialize()
    answered = 0

    async def one() -> int:
        nonlocal answered
        conn = client.request("tools/call", DEPLOY)
        await conn.started.wait()
        if conn.status == 503:
            await conn.finished()
            return 503
        await deploy_through(client, conn)
        answered += 1
        return conn.status

    with anyio.fail_after(120):
        statuses = Counter(await asyncio.gather(*(one() for _ in range(requests))))

    assert set(statuses) <= {200, 503}
    assert statuses[200] == answered >= MAX_IN_FLIGHT + MAX_WAITING
    assert statuses[200] + statuses[503] == requests
    assert app._running == app._waiting == 0


@pytest.mark.parametrize("waiting_users", [8, 80])
async def test_calls_waiting_for_their_user_lend_their_place_to_everyone_else(
    waiting_users: int,
) -> None:
    # A legacy call whose user looks at a confirmation gives its place back while it waits
    # (2026-07-28 MRTR holds nothing between rounds either): with every place's call waiting,
    # a modern request and a legacy one are still served. At most `max_parked` calls wait
    # that way (a bound on memory); past it a waiting call keeps its place, as before.
    parked_bound, in_flight, waiting = 8, 4, 4
    app = app_over(
        make_server(registry=build_registry()),
        max_parked=parked_bound,
        max_in_flight=in_flight,
        max_waiting=waiting,
    )
    client = LegacyClient(app)
    await client.initialize()
    conns = [client.request("tools/call", DEPLOY) for _ in range(waiting_users)]
    parked = min(waiting_users, parked_bound)
    holding = min(waiting_users - parked, in_flight)
    queued = min(waiting_users - parked - holding, waiting)
    with anyio.fail_after(30):
        while sum(conn.started.is_set() for conn in conns) < waiting_users - queued:  # noqa: ASYNC110
            await asyncio.sleep(0.01)
    asking = [conn for conn in conns if conn.status == 200]
    refused = [conn for conn in conns if conn.status == 503]
    confirms = [await conn.message(0) for conn in asking]
    assert app.parked == parked
    assert app._running == holding
    assert len(asking) == parked + holding
    if waiting_users <= parked_bound:
        # Nobody holds a place: the rest of the world is served at once.
        modern = await client.call(
            "tools/list",
            {"_meta": meta()},
            **{"mcp-protocol-version": MODERN, "mcp-method": "tools/list"},
        )
        assert modern.status == 200, modern.body
        assert (await client.call("ping")).status == 200
        assert refused == []
    else:
        # Every place is held by a waiting call past the bound, every waiting place taken:
        # the excess is told to retry (503), never queued without end.
        assert len(refused) == waiting_users - parked - holding - queued
        assert app._waiting == queued

    # The users answer, each in their own time: a call answered takes a place again, which
    # may mean waiting for another user's answer, never for ever.
    async def answered(conn: Conn) -> Json:
        if conn in asking:
            assert (
                await client.answer(confirms[asking.index(conn)], accepted(confirmed=True))
            ).status == 202
            role = await conn.message(1)
            assert (await client.answer(role, accepted(arn=ARN))).status == 202
            final = await conn.message(2)
            await conn.finished()
            return final
        return await deploy_through(client, conn)

    with anyio.fail_after(60):
        finals = await asyncio.gather(*(answered(conn) for conn in conns if conn not in refused))

    assert len(finals) == waiting_users - len(refused)
    assert all(
        final["result"]["content"][0]["text"] == "Deployed prod-api successfully"
        for final in finals
    )
    assert app.parked == app._running == app._waiting == 0


@pytest.mark.parametrize("opened", [5, 50])
def test_at_the_count_bound_a_principal_makes_room_from_its_own_sessions(opened: int) -> None:
    # 2025-11-25 security_best_practices "Session Hijacking" / denial of service: bob opening
    # sessions at and far past the bound never ends alice's while he holds an idle one.
    table = SessionTable(max_sessions=5, clock=Clock())
    alice, _, _ = table.open("token:alice")
    assert alice is not None
    ended: list[LegacySession] = []
    for _ in range(opened):
        session, gone, _ = table.open("token:bob")
        assert session is not None
        ended += gone

    assert table.find(alice.id, "token:alice") is alice
    assert len(table) == 5
    assert all(session.principal == "token:bob" for session in ended)
    assert len(ended) == opened - 4
    # Only once every one of bob's sessions is busy (a connection held open on each) does
    # his next one take the longest-idle session of anyone: alice's.
    for session in list(table):
        if session.principal == "token:bob":
            table.acquire(session)
    session, gone, _ = table.open("token:bob")
    assert session is not None
    assert gone == [alice]


async def test_notifications_cancelled_cancels_the_sessions_request(
    client: LegacyClient, calls: Counter[str]
) -> None:
    # basic/utilities/cancellation; "Sending Messages" 6.: to cancel, the client SHOULD send
    # CancelledNotification. No response follows it.
    conn = client.request(
        "tools/call", {"name": "gate", "arguments": {"name": "c"}, "_meta": {"progressToken": 1}}
    )
    assert (await conn.message(0))["method"] == "notifications/progress"
    cancelled = await client.notify(
        "notifications/cancelled", {"requestId": client.next_id - 1, "reason": "no"}
    )
    await conn.finished()

    assert cancelled.status == 202
    assert [message.get("method") for message in conn.messages()] == ["notifications/progress"]
    assert calls["gate"] == 1


async def test_a_dropped_connection_is_not_a_cancel_and_the_get_resumes_the_stream(
    client: LegacyClient, calls: Counter[str]
) -> None:
    # "Sending Messages" 6.: disconnection SHOULD NOT be interpreted as cancelling;
    # "Resumability and Redelivery" 2.: a GET with Last-Event-ID replays that stream after it.
    conn = client.request("tools/call", DEPLOY)
    confirm = await conn.message(0)
    last_seen = conn.frames[-1]["id"]
    await drop(client, conn)  # the network drops the POST's connection
    assert (await client.answer(confirm, accepted(confirmed=True))).status == 202
    other = await client.call("tools/list")  # a request on another stream meanwhile
    assert other.status == 200

    resumed = client.get(**{"last-event-id": last_seen})
    role = await resumed.message(0)
    assert role["method"] == "elicitation/create"
    assert (await client.answer(role, accepted(arn=ARN))).status == 202
    final = await resumed.message(1)
    await resumed.finished()

    assert final["id"] == client.next_id - 2  # the deploy's own id (tools/list came after)
    assert final["result"]["content"][0]["text"] == "Deployed prod-api successfully"
    assert [m.get("method") for m in resumed.messages()] == ["elicitation/create", None]
    assert not conn.sent_after_disconnect
    assert [m.get("method") for m in conn.messages()] == ["elicitation/create"]
    stream = last_seen.split(".")[0]
    assert all(frame["id"].split(".")[0] == stream for frame in resumed.frames)


async def test_a_response_that_found_no_connection_waits_for_the_resuming_get(
    client: LegacyClient,
) -> None:
    conn = client.request("tools/call", DEPLOY)
    confirm = await conn.message(0)
    last_seen = conn.frames[-1]["id"]
    await drop(client, conn)
    await client.answer(confirm, {"action": "decline"})  # the deploy ends at once
    await asyncio.sleep(0)

    resumed = await client.get(**{"last-event-id": last_seen}).finished()

    (final,) = resumed.messages()
    assert final["result"]["content"][0]["text"] == "Deploy cancelled by user."
    again = await client.get(**{"last-event-id": last_seen}).finished()
    assert again.status == 400  # delivered: forgotten


async def test_a_resuming_get_takes_the_stream_over_and_the_old_connection_is_told_retry(
    client: LegacyClient,
) -> None:
    conn = client.request("tools/call", DEPLOY)
    confirm = await conn.message(0)
    resumed = client.get(**{"last-event-id": conn.frames[0]["id"]})  # the priming event's

    await conn.finished()
    assert conn.frames[-1].get("retry") == "1000"  # "SHOULD send ... retry ... before closing"
    assert (await resumed.message(0)) == confirm  # replayed after the priming event
    await client.answer(confirm, accepted(confirmed=True))
    role = await resumed.message(1)
    await client.answer(role, accepted(arn=ARN))
    assert (await resumed.message(2))["result"]["content"][0]["text"].startswith("Deployed")


async def test_a_last_event_id_of_no_stream_is_400(client: LegacyClient) -> None:
    for value in ("garbage", "99.1", "1", "-1.2", "1." + "9" * 40):
        assert (await client.get(**{"last-event-id": value}).finished()).status == 400


async def test_requests_answered_as_json_keep_no_stream_for_the_sessions_life(
    client: LegacyClient,
) -> None:
    # 2025-11-25 basic/transports "Resumability and Redelivery": what a resuming GET can get
    # is a stream's events; a request whose client takes no stream (Accept without
    # text/event-stream) has none, so nothing of it may stay: ten times the detached bound
    # of such requests leave the session's logs as they were, and a Last-Event-ID naming one
    # is a stream the session does not hold (400), not an error inside the app.
    assert client.session is not None
    session = client.app.sessions.find(client.session, None)
    assert session is not None
    before = set(session.logs)
    for _ in range(MAX_DETACHED_STREAMS * 10):
        reply = await client.call("ping", accept="application/json")
        assert reply.json()["result"] == {}

    assert set(session.logs) == before
    assert (await client.get(**{"last-event-id": "1.0"}).finished()).status == 400


def test_forgetting_a_stream_that_never_detached_is_harmless() -> None:
    session = LegacySession("id", None, _sessions.Session(), 0.0)
    log = session.open_stream()
    log.ended = True

    session.forget_stream(log.key)

    assert set(session.logs) == {"0"}


# -- SSE polling ----------------------------------------------------------------------------------
# 2025-11-25 basic/transports "Sending Messages" 6.: "After the server has sent an SSE event with
# an event ID to the client, the server MAY close the connection (without terminating the SSE
# stream) at any time ... it SHOULD send an SSE event with a standard retry field before
# closing"; the client resumes by GET with Last-Event-ID ("Resumability and Redelivery" 2.).
# With MRTR_HTTP_SSE_POLL_SECONDS each connection is held that long at most. The tools here wait
# for the test (an answer, a gate), never for a clock, so each poll happens where it is expected.
POLL = 0.05
RETRY = {"retry": str(RETRY_MILLISECONDS)}


async def poll_client(server: Server | None = None) -> LegacyClient:
    client = LegacyClient(app_over(server, sse_poll_seconds=POLL))
    await client.initialize()
    return client


def last_id(conn: Conn, before: str) -> str:
    ids = [frame["id"] for frame in conn.frames if "id" in frame]
    return ids[-1] if ids else before


async def resume_until_done(
    client: LegacyClient, last_seen: str, on_message: Any = None
) -> tuple[list[Json], list[Conn]]:
    """Resume the stream by GET with Last-Event-ID, as a polling client does, connection after
    connection, until its response came; every message and every connection."""
    messages: list[Json] = []
    conns: list[Conn] = []
    with anyio.fail_after(30):
        while not messages or "method" in messages[-1]:
            conn = await client.get(**{"last-event-id": last_seen}).finished()
            assert conn.status == 200, conn.body
            conns.append(conn)
            last_seen = last_id(conn, last_seen)
            for message in conn.messages():
                messages.append(message)
                if on_message is not None:
                    await on_message(message)
    return messages, conns


async def test_polling_closes_a_posts_connection_with_retry_and_the_get_resumes_it() -> None:
    client = await poll_client()
    quick = await client.call("tools/list")  # nothing sent before its response: still JSON
    assert quick.headers["content-type"] == "application/json"

    conn = client.request("tools/call", DEPLOY)
    confirm = await conn.message(0)
    await conn.finished()  # held POLL seconds, the question unanswered: the server closed it

    assert not conn.gone.is_set()  # closed by the server, not by the client
    assert conn.frames[-1] == RETRY  # the retry field last, after an event with an id
    assert [m.get("method") for m in conn.messages()] == ["elicitation/create"]
    assert (await client.answer(confirm, accepted(confirmed=True))).status == 202  # detached

    async def answer(message: Json) -> None:
        if message.get("method") == "elicitation/create":
            await client.answer(message, accepted(arn=ARN))

    messages, conns = await resume_until_done(client, last_id(conn, ""), answer)

    # Nothing lost, nothing twice: the second question, then the deploy's own response.
    assert [m.get("method") for m in messages] == ["elicitation/create", None]
    assert messages[0]["params"]["message"].startswith("Provide the IAM role ARN")
    assert messages[-1]["id"] == client.next_id - 1
    assert messages[-1]["result"]["content"][0]["text"] == "Deployed prod-api successfully"
    assert all(polled.frames[-1] == RETRY for polled in conns[:-1])
    assert conns[-1].frames[-1] != RETRY  # the stream ended with its response: no retry
    assert all(
        frame["id"].split(".")[0] == conn.frames[0]["id"].split(".")[0]
        for polled in conns
        for frame in polled.frames
        if "id" in frame
    )


async def test_a_polled_stream_that_sent_nothing_gets_its_priming_event_first() -> None:
    # "Sending Messages" 6.: the event with an id comes before the close, so that the client
    # has an id to resume from; here the call had sent nothing when its connection was closed.
    client = await poll_client()
    conn = await client.request(
        "tools/call", {"name": "gate", "arguments": {"name": "p"}}
    ).finished()

    assert conn.headers["content-type"] == "text/event-stream"
    assert [set(frame) for frame in conn.frames] == [{"id", "data"}, {"retry"}]
    assert conn.frames[0]["data"] == ""
    assert conn.frames[1] == RETRY
    opened = await client.call("tools/call", {"name": "release", "arguments": {"name": "p"}})
    assert opened.status == 200

    messages, _ = await resume_until_done(client, conn.frames[0]["id"])

    assert [m["result"]["content"][0]["text"] for m in messages] == ["gate p opened"]
    assert messages[0]["id"] == client.next_id - 2
    gone = await client.get(**{"last-event-id": conn.frames[0]["id"]}).finished()
    assert gone.status == 400  # delivered: forgotten


async def test_the_get_stream_is_polled_too_and_resumes_where_it_was() -> None:
    client = await poll_client()
    first = await client.get().finished()
    assert [set(frame) for frame in first.frames] == [{"id", "data"}, {"retry"}]

    again = await client.get(**{"last-event-id": first.frames[0]["id"]}).finished()

    assert again.status == 200
    assert again.frames[-1] == RETRY
    assert again.frames[0]["id"].split(".")[0] == first.frames[0]["id"].split(".")[0]


STEPS = 10  # ten polls over one call: the bound's tenfold


def stepping_server(gates: list[asyncio.Event]) -> Server:
    registry = Registry()

    @registry.tool()
    async def steps(*, ctx: Context) -> str:
        """Reports progress i, then waits for gate i, STEPS times."""
        for step, gate in enumerate(gates):
            await ctx.report_progress(step, STEPS)
            await gate.wait()
        return "stepped"

    return make_server(registry=registry)


async def test_ten_polls_over_one_call_lose_nothing_and_repeat_nothing() -> None:
    gates = [asyncio.Event() for _ in range(STEPS)]
    client = await poll_client(stepping_server(gates))
    conn = await client.request(
        "tools/call", {"name": "steps", "arguments": {}, "_meta": {"progressToken": 7}}
    ).finished()
    assert conn.frames[-1] == RETRY

    async def next_step(message: Json) -> None:
        if message.get("method") == "notifications/progress":
            gates[int(message["params"]["progress"])].set()

    for message in conn.messages():
        await next_step(message)
    messages, conns = await resume_until_done(client, last_id(conn, ""), next_step)

    every = [*conn.messages(), *messages]
    assert [m["params"]["progress"] for m in every[:-1]] == list(range(STEPS))
    assert every[-1]["result"]["content"][0]["text"] == "stepped"
    polled = [conn, *conns[:-1]]
    assert len(polled) >= STEPS  # each step came after the last connection closed
    assert all(c.frames[-1] == RETRY for c in polled)
    assert all(not c.gone.is_set() for c in polled)


# -- the GET stream -----------------------------------------------------------------------------


async def test_the_get_stream_carries_list_changes_and_a_second_get_is_409() -> None:
    # "Listening for Messages" 4.: messages unrelated to any request; "Multiple Connections"
    # 2.: each on one stream only, so one GET stream per session.
    registry = build_registry()
    app = app_over(make_server(registry=registry))
    client = LegacyClient(app)
    await client.initialize()
    stream = client.get()
    await stream.started.wait()
    assert stream.frames[0]["data"] == "" and stream.frames[0]["id"].startswith("0.")

    second = await client.get().finished()
    assert second.status == 409

    @registry.tool()
    async def added_later() -> str:
        return "new"

    changed = await stream.message(0)
    assert changed["method"] == "notifications/tools/list_changed"
    request_stream = await client.call("tools/list")
    assert "added_later" in json.dumps(request_stream.json())
    mark = stream.frames[-1]["id"]
    stream.gone.set()
    await stream.finished()

    @registry.prompt()
    async def added_prompt() -> str:
        return "hello"

    await asyncio.sleep(0.05)
    resumed = client.get(**{"last-event-id": mark})
    assert (await resumed.message(0))["method"] == "notifications/prompts/list_changed"
    resumed.gone.set()
    await resumed.finished()


async def test_get_needs_an_event_stream_accept_and_is_guarded_like_post() -> None:
    app = app_over(bearer_token="t0ken-for-tests")
    client = LegacyClient(app, token="t0ken-for-tests")
    await client.initialize()

    assert (await client.get(accept="application/json").finished()).status == 406
    assert (await client.get(authorization="Bearer nope").finished()).status == 401
    assert (await client.get(origin="http://evil.example.com").finished()).status == 403
    deleted = await client.start("DELETE", None, {"authorization": None}).finished()
    assert deleted.status == 401


async def test_delete_cancels_running_requests_and_closes_the_get_stream(
    client: LegacyClient, calls: Counter[str]
) -> None:
    running = client.request(
        "tools/call", {"name": "gate", "arguments": {"name": "d"}, "_meta": {"progressToken": 1}}
    )
    await running.message(0)
    stream = client.get()
    await stream.started.wait()

    assert (await client.delete()).status == 200
    await running.finished()
    await stream.finished()
    assert [m.get("method") for m in running.messages()] == ["notifications/progress"]
    assert (await client.call("tools/list")).status == 404


async def test_stopping_ends_the_get_streams_and_every_session(client: LegacyClient) -> None:
    stream = client.get()
    await stream.started.wait()
    client.app.stop_waiting()
    await stream.finished()

    assert client.app.end_sessions() == 1
    assert len(client.app.sessions) == 0


# -- the bounds, with an injected clock -----------------------------------------------------------


async def test_an_idle_session_ends_after_the_idle_bound() -> None:
    clock = Clock()
    app = app_over(clock=clock, session_idle_seconds=60)
    client = LegacyClient(app)
    await client.initialize()
    clock.now += 59
    assert (await client.call("tools/list")).status == 200  # use resets the bound
    clock.now += 59
    assert (await client.call("tools/list")).status == 200
    clock.now += 60
    assert (await client.call("tools/list")).status == 404


async def test_a_session_with_a_stream_open_is_never_idle() -> None:
    clock = Clock()
    app = app_over(clock=clock, session_idle_seconds=60)
    client = LegacyClient(app)
    await client.initialize()
    stream = client.get()
    await stream.started.wait()
    clock.now += 6_000
    assert (await client.call("tools/list")).status == 200
    stream.gone.set()
    await stream.finished()
    clock.now += 60
    assert (await client.call("tools/list")).status == 404


async def test_at_the_count_bound_the_longest_idle_session_makes_room() -> None:
    # 1,000 sessions, 10,000 initializes: the table never holds more than its bound, and the
    # sessions ended are the longest idle ones.
    clock = Clock()
    app = app_over(clock=clock, max_sessions=1000)
    clients = []
    for _ in range(10_000):
        clock.now += 1
        client = LegacyClient(app)
        opened = await client.call("initialize", {"protocolVersion": LEGACY, "capabilities": {}})
        client.session = opened.headers["mcp-session-id"]
        clients.append(client)
        assert len(app.sessions) <= 1000

    assert len(app.sessions) == 1000
    assert (await clients[-1000].call("ping")).status == 200
    assert (await clients[-1001].call("ping")).status == 404
    assert (await clients[0].call("ping")).status == 404


async def test_when_every_session_is_busy_initialize_is_503_with_retry_after() -> None:
    app = app_over(max_sessions=3)
    clients = [LegacyClient(app) for _ in range(3)]
    streams = []
    for client in clients:
        await client.initialize()
        streams.append(client.get())
    for stream in streams:
        await stream.started.wait()

    refused = await LegacyClient(app).call(
        "initialize", {"protocolVersion": LEGACY, "capabilities": {}}
    )
    assert refused.status == 503
    assert refused.headers["retry-after"] == "1"
    assert refused.json()["error"]["code"] == -32603
    assert "mcp-session-id" not in refused.headers
    for stream in streams:
        stream.gone.set()
        await stream.finished()
    assert (await LegacyClient(app).initialize())["protocolVersion"] == LEGACY


def test_a_principal_parking_calls_in_every_session_fills_its_share_never_the_table() -> None:
    # The lock-out: one token opened sessions by the thousand, parked a call in each (a call
    # waiting for its user holds its session, connected or not), and every other principal's
    # idle session ended and their initialize got 503. With a share, ten times its share
    # of attempts gets it exactly its share; the others keep theirs and still get new ones.
    table = SessionTable(max_sessions=1000, max_per_principal=250, clock=Clock())
    alice, _, _ = table.open("token:alice")
    assert alice is not None
    refused = 0
    for _ in range(2500):
        session, gone, refused_by = table.open("token:mallory")
        assert gone == []  # alice's idle session is never made room with
        if session is None:
            assert refused_by == "principal"
            refused += 1
        else:
            table.acquire(session)  # its parked call
    assert table.held_by("token:mallory") == 250
    assert refused == 2250
    assert table.find(alice.id, "token:alice") is alice
    for _ in range(2500):  # so does everyone else, each to its own share
        for other in ("token:bob", "token:carol"):
            session, _, _ = table.open(other)
            assert session is not None
    assert len(table) <= 1000
    assert table.find(alice.id, "token:alice") is alice  # alice's share is hers
    session, _, _ = table.open("token:alice")
    assert session is not None


def test_at_its_share_a_principal_makes_room_from_its_own_idle_sessions() -> None:
    table = SessionTable(max_sessions=100, max_per_principal=10, clock=Clock())
    first = [table.open("token:bob").session for _ in range(10)]
    session, gone, _ = table.open("token:bob")
    assert session is not None
    assert gone == [first[0]]
    assert table.held_by("token:bob") == 10


async def test_a_shared_token_beside_a_named_one_cannot_lock_it_out() -> None:
    tokens = (("alice", "alice-token-123456"),)
    app = app_over(bearer_tokens=tokens, bearer_token="shared-token-123456", max_sessions=4)
    streams = []
    for _ in range(4 * 10):
        client = LegacyClient(app, token="shared-token-123456")
        opened = await client.call("initialize", {"protocolVersion": LEGACY, "capabilities": {}})
        if opened.status == 200:
            client.session = opened.headers["mcp-session-id"]
            await client.notify("notifications/initialized")
            streams.append(client.get())
            await streams[-1].started.wait()
        else:
            assert opened.status == 503
            assert (
                "your share of 2 (MRTR_HTTP_MAX_SESSIONS_PER_PRINCIPAL"
                in opened.json()["error"]["message"]
            )
    assert len(streams) == 2
    alice = LegacyClient(app, token="alice-token-123456")
    assert (await alice.initialize())["protocolVersion"] == LEGACY
    for stream in streams:
        stream.gone.set()
        await stream.finished()


async def test_a_principal_at_its_share_is_refused_503_naming_the_setting() -> None:
    tokens = (("alice", "alice-token-123456"), ("mallory", "mallory-token-12345"))
    # Its own request rate lifted: what refuses it here is the session share alone.
    app = app_over(
        bearer_tokens=tokens,
        max_sessions=40,
        max_sessions_per_principal=10,
        rate_per_principal=1_000_000,
    )
    assert app.sessions.max_per_principal == 10
    streams = []
    for _ in range(10):
        client = LegacyClient(app, token="mallory-token-12345")
        await client.initialize()
        streams.append(client.get())
    for stream in streams:
        await stream.started.wait()
    for _ in range(100):  # ten times its share
        refused = await LegacyClient(app, token="mallory-token-12345").call(
            "initialize", {"protocolVersion": LEGACY, "capabilities": {}}
        )
        assert refused.status == 503
        assert refused.headers["retry-after"] == "1"
        message = refused.json()["error"]["message"]
        assert "your share of 10 (MRTR_HTTP_MAX_SESSIONS_PER_PRINCIPAL" in message, message
    alice = LegacyClient(app, token="alice-token-123456")
    assert (await alice.initialize())["protocolVersion"] == LEGACY
    for stream in streams:
        stream.gone.set()
        await stream.finished()


def test_the_share_is_an_equal_split_of_the_table_among_the_known_principals() -> None:
    assert HttpSettings(max_sessions=40).session_share() == 40
    one = (("team", "team-token-1234567"),)
    assert HttpSettings(max_sessions=40, bearer_tokens=one).session_share() == 40
    # The shared token is one more principal beside the named ones (an outside review: with
    # both, the shared token filled the table and locked the named one out).
    both = HttpSettings(max_sessions=40, bearer_tokens=one, bearer_token="shared-token-123456")
    assert both.session_share() == 20
    many = tuple((f"user{n}", f"token-{n:04d}-abcdefgh") for n in range(5))
    assert HttpSettings(max_sessions=40, bearer_tokens=many).session_share() == 8  # all fit
    crowd = tuple((f"user{n}", f"token-{n:04d}-abcdefgh") for n in range(100))
    assert HttpSettings(max_sessions=40, bearer_tokens=crowd).session_share() == 1
    environ = {"MRTR_HTTP_MAX_SESSIONS_PER_PRINCIPAL": "7"}
    settings = HttpSettings.from_environment(environ, host="127.0.0.1", port=0)
    assert settings.session_share() == 7
    assert HttpApp(make_server(), settings).sessions.max_per_principal == 7


def test_with_oauth_one_principal_holds_a_tenth_of_the_table() -> None:
    # Before: OAuth principals are not known in advance, so the share was the whole table and
    # one signed-in user could hold every session.
    environ = {
        "MRTR_OAUTH_ISSUER": "https://auth.example.com",
        "MRTR_OAUTH_RESOURCE": "https://mcp.example.com/mcp",
        "MRTR_HTTP_MAX_SESSIONS": "40",
    }
    settings = HttpSettings.from_environment(environ, host="127.0.0.1", port=0)
    assert settings.session_share() == 4
    assert HttpApp(make_server(), settings).sessions.max_per_principal == 4
    few = HttpSettings.from_environment({**environ, "MRTR_HTTP_MAX_SESSIONS": "5"}, host="", port=0)
    assert few.session_share() == 1
    chosen = {**environ, "MRTR_HTTP_MAX_SESSIONS_PER_PRINCIPAL": "30"}
    assert HttpSettings.from_environment(chosen, host="", port=0).session_share() == 30


def test_one_principal_s_undelivered_stream_logs_stay_within_its_budget() -> None:
    # Before: each session kept up to 9 logs of 256 KiB whatever its principal held, so one
    # principal's sessions held gigabytes. Now all its logs together stay within its budget
    # (at ten times over it), the oldest undelivered streams going first, and another
    # principal's logs are untouched.
    table = SessionTable(max_sessions=1000, clock=Clock())
    table.log_bytes_per_principal = budget = 1_000_000
    alice = table.open("token:alice").session
    assert alice is not None
    kept = alice.open_stream()
    kept.record(b'"' + b"a" * 50_000 + b'"')
    alice.close_stream(kept, delivered=False)
    event = b'"' + b"m" * 99_000 + b'"'
    sessions = [table.open("token:mallory").session for _ in range(10)]
    for session in sessions:
        assert session is not None
        for _ in range(10):  # 10 MB in all: ten times the budget
            log = session.open_stream()
            log.record(event)
            session.close_stream(log, delivered=False)
        assert session.budget is not None
        assert session.budget.used <= budget
    mallory = sessions[0].budget
    assert mallory is not None
    frames = [
        frame for session in sessions for log in session.logs.values() for frame in log.after(0)
    ]
    assert mallory.used == sum(map(len, frames))
    newest = sessions[-1]
    assert len(newest.detached) >= 8  # the newest streams survive, the oldest went
    assert alice.logs[kept.key].after(0)  # alice's undelivered response is still there
    for session in sessions:
        table.end(session)
    assert table.held_by("token:mallory") == 0


def test_the_table_holds_its_bound_ten_times_over() -> None:
    clock = Clock()
    table = SessionTable(max_sessions=1000, idle_seconds=3600, clock=clock)
    opened: list[LegacySession] = []
    ended: list[LegacySession] = []
    for _ in range(10_000):
        clock.now += 0.001
        session, gone, _ = table.open(None)
        assert session is not None
        opened.append(session)
        ended += gone
        assert len(table) <= 1000

    assert ended == opened[:9000]  # the longest idle first, each once
    assert all(session.ended for session in ended)
    assert table.find(opened[-1].id, None) is opened[-1]
    assert table.find(opened[0].id, None) is None


def test_the_table_ends_idle_sessions_but_never_busy_ones() -> None:
    clock = Clock()
    table = SessionTable(max_sessions=10, idle_seconds=60, clock=clock)
    quiet, _, _ = table.open(None)
    busy, _, _ = table.open("someone")
    assert quiet is not None and busy is not None
    table.acquire(busy)
    clock.now += 60

    assert table.expire() == [quiet]
    assert table.find(busy.id, "someone") is busy
    assert table.find(busy.id, None) is None  # another principal: unknown
    table.release(busy)
    clock.now += 60
    assert table.expire() == [busy]


def test_bad_table_bounds_are_refused() -> None:
    with pytest.raises(ValueError):
        SessionTable(max_sessions=0)
    with pytest.raises(ValueError):
        SessionTable(idle_seconds=0)


def test_an_event_log_keeps_its_newest_events_within_its_bounds() -> None:
    log = EventLog("3")
    frames = [log.record(json.dumps({"n": n}).encode()) for n in range(MAX_LOG_EVENTS * 10)]

    kept = log.after(0)
    assert kept == frames[-MAX_LOG_EVENTS:]
    assert log.after(log.last_seq() - 1) == frames[-1:]
    big = log.record(b'"' + b"x" * (MAX_LOG_BYTES * 10) + b'"')
    assert log.after(0) == [big]  # the newest is always kept, however big
    assert parse_event_id(big.split(b"\n")[0][4:].decode()) == ("3", log.last_seq())


def test_a_session_keeps_a_bounded_number_of_undelivered_streams() -> None:
    session = LegacySession("id", None, _sessions.Session(), 0.0)
    logs = [session.open_stream() for _ in range(MAX_DETACHED_STREAMS * 10)]
    for log in logs:
        session.close_stream(log, delivered=False)

    assert set(session.logs) == {"0", *(log.key for log in logs[-MAX_DETACHED_STREAMS:])}


@pytest.mark.parametrize(
    ("value", "parsed"),
    [("1.2", ("1", 2)), ("0.17", ("0", 17)), ("007.1", ("7", 1)), (" 4.5\t", ("4", 5))],
)
def test_event_ids_name_their_stream(value: str, parsed: tuple[str, int]) -> None:
    assert parse_event_id(value) == parsed


@pytest.mark.parametrize(
    "value", ["", "1", "a.1", "1.a", "1.2.3", "\u0661.\u0662", "1" * 20 + ".1"]
)
def test_event_ids_of_no_stream_are_none(value: str) -> None:
    assert parse_event_id(value) is None


# -- settings -------------------------------------------------------------------------------------


def test_the_session_bounds_come_from_the_environment() -> None:
    environ = {"MRTR_HTTP_MAX_SESSIONS": " 5 ", "MRTR_HTTP_SESSION_IDLE_SECONDS": "60"}
    settings = HttpSettings.from_environment(environ, host="127.0.0.1", port=0)
    defaults = HttpSettings.from_environment({}, host="127.0.0.1", port=0)

    assert (settings.max_sessions, settings.session_idle_seconds) == (5, 60)
    assert (defaults.max_sessions, defaults.session_idle_seconds) == (
        _sessions.DEFAULT_MAX_SESSIONS,
        _sessions.DEFAULT_SESSION_IDLE_SECONDS,
    )
    table = HttpApp(make_server(), settings).sessions
    assert (table.max_sessions, table.idle_seconds) == (5, 60)


def test_the_poll_bound_comes_from_the_environment_and_is_off_by_default() -> None:
    environ = {"MRTR_HTTP_SSE_POLL_SECONDS": "30"}
    assert HttpSettings.from_environment(environ, host="127.0.0.1", port=0).sse_poll_seconds == 30
    assert HttpSettings.from_environment({}, host="127.0.0.1", port=0).sse_poll_seconds is None


@pytest.mark.parametrize(
    "variable",
    [
        "MRTR_HTTP_MAX_SESSIONS",
        "MRTR_HTTP_SESSION_IDLE_SECONDS",
        "MRTR_HTTP_SSE_POLL_SECONDS",
        "MRTR_HTTP_MAX_SESSIONS_PER_PRINCIPAL",
    ],
)
@pytest.mark.parametrize("value", ["0", "-1", "1.5", "many", "1" * 11])
def test_a_bad_session_bound_stops_the_http_server(variable: str, value: str) -> None:
    with pytest.raises(ValueError, match=variable):
        HttpSettings.from_environment({variable: value}, host="127.0.0.1", port=0)


async def test_idle_sessions_are_swept_while_no_legacy_request_comes() -> None:
    # The idle bound holds without traffic to notice it: the lifespan's sweeper ends them.
    clock = Clock()
    app = app_over(clock=clock, session_idle_seconds=0.04)
    client = LegacyClient(app)
    await client.initialize()
    started, stop = asyncio.Event(), asyncio.Event()
    incoming = iter(("lifespan.startup", "lifespan.shutdown"))

    async def receive() -> dict[str, Any]:
        kind = next(incoming)
        if kind == "lifespan.shutdown":
            await stop.wait()
        return {"type": kind}

    async def send(message: dict[str, Any]) -> None:
        if message["type"] == "lifespan.startup.complete":
            started.set()

    running = asyncio.get_running_loop().create_task(app({"type": "lifespan"}, receive, send))
    with anyio.fail_after(10):
        await started.wait()
        session = next(iter(app.sessions))
        clock.now += 1
        while len(app.sessions):  # noqa: ASYNC110 -- the sweeper's effect; no event to wait on
            await asyncio.sleep(0.01)
        stop.set()
        await running
    assert session.ended
    assert session.state.listener is not None and session.state.listener.closed
