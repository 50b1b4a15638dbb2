"""List changes and resource updates: 2026-07-28 `subscriptions/listen`, 2025-11-25 sessions.

basic/patterns/subscriptions: a listen stream is acknowledged first, carries its subscription
id on every notice, sends only what its filter asked for, and ends with the client's
`notifications/cancelled` (or, when the server stops, the server's own, the only cancellation a
server sends). 2025-11-25: `notifications/*/list_changed` to an initialized session, and
`notifications/resources/updated` for what it `resources/subscribe`d. Tools, prompts and
resources declared after start-up are the changes; `Registry.resource_updated` is how tool code
says a resource changed.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import pytest

import support
from mrtr_runtime import Context, Registry, RequestCancelled
from mrtr_runtime._jsonrpc import Request
from mrtr_runtime._router import Session
from mrtr_runtime._subscriptions import MAX_LISTENS, MAX_RESOURCE_SUBSCRIPTIONS
from mrtr_runtime.server import Server
from mrtr_runtime.testing import MemoryClient, RpcError
from support import (
    BOUND,
    meta,
    raw_server,
    read_message,
    read_until_end,
    reader,
    request,
    rpc_error,
    send,
    server_env,
)

pytestmark = pytest.mark.anyio

SUBSCRIPTION_ID = "io.modelcontextprotocol/subscriptionId"
CONFIG_URI = "memo://config"
OTHER_URI = "memo://other"


def changing_registry() -> Registry:
    """A registry whose tools change it, the way a server grows at runtime."""
    registry = Registry()

    async def added(text: str = "") -> str:
        """Declared at runtime."""
        return text

    @registry.tool()
    async def add_tool(name: str) -> str:
        """Declares a tool named `name`."""
        registry.tool(name)(added)
        return f"added {name}"

    @registry.tool()
    def add_tool_in_a_thread(name: str) -> str:
        """Declares a tool from a worker thread (a plain `def` tool runs in one)."""
        assert threading.current_thread() is not threading.main_thread()
        registry.tool(name)(added)
        return f"added {name}"

    @registry.tool()
    async def add_prompt(name: str) -> str:
        """Declares a prompt named `name`."""
        registry.prompt(name)(added)
        return f"added {name}"

    @registry.tool()
    async def add_resource(uri: str) -> str:
        """Declares a resource at `uri`."""
        registry.resource(uri, name="added")(added)
        return f"added {uri}"

    @registry.tool()
    async def touch(uri: str) -> str:
        """Says the resource at `uri` changed."""
        registry.resource_updated(uri)
        return f"touched {uri}"

    @registry.tool()
    async def log(*, ctx: Context) -> str:
        """Sends one log message."""
        await ctx.send_log("info", "from the tool")
        return "logged"

    @registry.resource(CONFIG_URI)
    async def config() -> str:
        """The configuration."""
        return "config"

    @registry.resource(OTHER_URI)
    async def other() -> str:
        """Something else."""
        return "other"

    return registry


def make_server() -> Server:
    return support.make_server(registry=changing_registry())


async def settle(until: Callable[[], bool] = lambda: False, turns: int = 50) -> None:
    """Let the loop run the notices already scheduled (no clock: a bounded number of turns)."""
    for _ in range(turns):
        if until():
            return
        await asyncio.sleep(0)


def methods(notifications: list[dict[str, Any]]) -> list[str]:
    return [notification["method"] for notification in notifications]


# -- 2026-07-28: subscriptions/listen ---------------------------------------------------------


async def test_the_acknowledgment_comes_first_with_the_subscription_id_and_agreed_filter() -> None:
    client = MemoryClient(make_server())
    asked = {"toolsListChanged": True, "promptsListChanged": False, "resourcesListChanged": True}
    async with client.listen(asked) as stream:
        first = client.notifications[0]
        assert first["method"] == "notifications/subscriptions/acknowledged"
        assert first["params"]["_meta"] == {SUBSCRIPTION_ID: stream.id}
        # Only what was asked for (a false flag is not a request).
        assert stream.acknowledged == {"toolsListChanged": True, "resourcesListChanged": True}
        assert stream.notifications == []


async def test_a_tool_declared_at_runtime_is_announced_tagged_with_the_subscription_id() -> None:
    client = MemoryClient(make_server())
    async with client.listen({"toolsListChanged": True}) as stream:
        await client.call_tool("add_tool", {"name": "fresh"})
        await settle(lambda: bool(stream.notifications))
        assert methods(stream.notifications) == ["notifications/tools/list_changed"]
        assert stream.notifications[0]["params"] == {"_meta": {SUBSCRIPTION_ID: stream.id}}
    listed = await client.request("tools/list")
    assert "fresh" in [tool["name"] for tool in listed["tools"]]


async def test_a_tool_declared_from_a_worker_thread_is_announced_too() -> None:
    client = MemoryClient(make_server())
    async with client.listen({"toolsListChanged": True}) as stream:
        await client.call_tool("add_tool_in_a_thread", {"name": "threaded"})
        await settle(lambda: bool(stream.notifications))
        assert methods(stream.notifications) == ["notifications/tools/list_changed"]


@pytest.mark.parametrize(
    ("tool", "arguments", "flag", "method"),
    [
        ("add_tool", {"name": "t2"}, "toolsListChanged", "notifications/tools/list_changed"),
        ("add_prompt", {"name": "p2"}, "promptsListChanged", "notifications/prompts/list_changed"),
        (
            "add_resource",
            {"uri": "memo://new"},
            "resourcesListChanged",
            "notifications/resources/list_changed",
        ),
    ],
)
async def test_each_stream_gets_only_what_its_filter_asked_for(
    tool: str, arguments: dict[str, Any], flag: str, method: str
) -> None:
    # subscriptions: the server MUST NOT send notification types the client has not requested.
    client = MemoryClient(make_server())
    others = {"toolsListChanged", "promptsListChanged", "resourcesListChanged"} - {flag}
    async with (
        client.listen({flag: True}) as wanted,
        client.listen(dict.fromkeys(others, True)) as unwanted,
    ):
        await client.call_tool(tool, arguments)
        await settle(lambda: bool(wanted.notifications))
        await settle()
        assert methods(wanted.notifications) == [method]
        assert unwanted.notifications == []


async def test_resource_updates_reach_only_streams_that_named_the_resource() -> None:
    client = MemoryClient(make_server())
    async with (
        client.listen({"resourceSubscriptions": [CONFIG_URI, "memo://nowhere"]}) as config,
        client.listen({"resourceSubscriptions": [OTHER_URI]}) as other,
        client.listen({"toolsListChanged": True}) as tools,
    ):
        # The acknowledgment carries the subset honoured: resources that exist.
        assert config.acknowledged == {"resourceSubscriptions": [CONFIG_URI]}
        await client.call_tool("touch", {"uri": CONFIG_URI})
        await client.call_tool("touch", {"uri": "memo://nowhere"})
        await settle(lambda: bool(config.notifications))
        await settle()
        assert [n["params"] for n in config.notifications] == [
            {"_meta": {SUBSCRIPTION_ID: config.id}, "uri": CONFIG_URI}
        ]
        assert other.notifications == []
        assert tools.notifications == []


async def test_nothing_is_sent_on_a_stream_after_the_client_cancels_it() -> None:
    client = MemoryClient(make_server())
    async with client.listen({"toolsListChanged": True}) as stream:
        subscription = stream
    count_after_cancel = len(client.notifications)
    await client.call_tool("add_tool", {"name": "late"})
    await settle()
    assert subscription.notifications == []
    assert len(client.notifications) == count_after_cancel
    # A cancelled request gets no response at all.
    with pytest.raises(RequestCancelled):
        await subscription.closed()


async def test_a_stream_the_server_ends_is_cancelled_then_answered() -> None:
    server = make_server()
    client = MemoryClient(server)
    async with client.listen({"toolsListChanged": True}) as stream:
        assert server.end_subscriptions() == 1
        result = await stream.closed()
        # cancellation: the server MUST send notifications/cancelled for a listen it tears
        # down; subscriptions "Graceful Closure": it SHOULD answer with the subscription id.
        assert client.notifications[-1] == {
            "jsonrpc": "2.0",
            "method": "notifications/cancelled",
            "params": {"requestId": stream.id, "reason": "the server is shutting down"},
        }
        assert result["resultType"] == "complete"
        assert result["_meta"][SUBSCRIPTION_ID] == stream.id
    assert server.end_subscriptions() == 0


async def test_nothing_goes_out_on_a_stream_before_its_acknowledgment() -> None:
    # subscriptions: the acknowledgment MUST be the first message carrying the subscription id,
    # even when the lists change while it is being written.
    registry = changing_registry()
    sent: list[tuple[str, dict[str, Any]]] = []

    class SlowPeer:
        async def notify(self, method: str, params: dict[str, Any]) -> None:
            if method == "notifications/subscriptions/acknowledged":
                registry.tool("declared_meanwhile")(lambda: "x")
                await settle(turns=5)
            sent.append((method, params))

        async def request(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
            raise AssertionError("no requests in this era")

    server = support.make_server(registry=registry)
    listen = Request(
        "s", "subscriptions/listen", {"_meta": meta(), "notifications": {"toolsListChanged": True}}
    )
    stream = asyncio.create_task(server.handle_request(listen, Session(), SlowPeer()))
    await settle(lambda: len(sent) >= 2, turns=100)
    assert [method for method, _ in sent] == [
        "notifications/subscriptions/acknowledged",
        "notifications/tools/list_changed",
    ]
    stream.cancel()
    await asyncio.wait({stream})


@pytest.mark.parametrize(
    "notifications",
    [None, [], "tools", {"resourceSubscriptions": "memo://config"}, {"resourceSubscriptions": [1]}],
)
async def test_a_malformed_filter_is_invalid_params(notifications: object) -> None:
    client = MemoryClient(make_server())
    params = {} if notifications is None else {"notifications": notifications}
    error = await rpc_error(client, "subscriptions/listen", params)
    assert error.code == -32602


@pytest.mark.parametrize("extra", [1, 10 * MAX_LISTENS])
async def test_open_streams_are_bounded(extra: int) -> None:
    server = make_server()
    client = MemoryClient(server)
    async with contextlib.AsyncExitStack() as stack:
        streams = [
            await stack.enter_async_context(client.listen({"toolsListChanged": True}))
            for _ in range(MAX_LISTENS)
        ]
        for _ in range(extra):
            with pytest.raises(RpcError) as refused:
                await stack.enter_async_context(client.listen({"toolsListChanged": True}))
            assert refused.value.code == -32603
            assert str(MAX_LISTENS) in refused.value.message
        # Those at the bound still work.
        await client.call_tool("add_tool", {"name": "seen"})
        await settle(lambda: all(stream.notifications for stream in streams))
        assert all(
            methods(s.notifications) == ["notifications/tools/list_changed"] for s in streams
        )
    # Closed streams make room again.
    async with client.listen({"toolsListChanged": True}) as again:
        assert again.acknowledged == {"toolsListChanged": True}


@pytest.mark.parametrize(
    ("count", "accepted"),
    [
        (MAX_RESOURCE_SUBSCRIPTIONS, True),
        (MAX_RESOURCE_SUBSCRIPTIONS + 1, False),
        (10 * MAX_RESOURCE_SUBSCRIPTIONS, False),
    ],
)
async def test_resource_subscriptions_per_stream_are_bounded(count: int, accepted: bool) -> None:
    client = MemoryClient(make_server())
    uris = [CONFIG_URI] + [f"memo://x/{number}" for number in range(count - 1)]
    if accepted:
        async with client.listen({"resourceSubscriptions": uris}) as stream:
            assert stream.acknowledged == {"resourceSubscriptions": [CONFIG_URI]}
        return
    with pytest.raises(RpcError) as refused:
        async with client.listen({"resourceSubscriptions": uris}):
            pass
    assert refused.value.code == -32602
    assert str(MAX_RESOURCE_SUBSCRIPTIONS) in refused.value.message


@pytest.mark.parametrize("method", ["resources/subscribe", "resources/unsubscribe"])
async def test_the_legacy_subscribe_methods_are_not_served_in_2026(method: str) -> None:
    error = await rpc_error(MemoryClient(make_server()), method, {"uri": CONFIG_URI})
    assert error.code == -32601


async def test_log_messages_never_travel_on_a_stream() -> None:
    # server/utilities/logging: notifications/message is request-scoped.
    client = MemoryClient(make_server())
    async with client.listen({"toolsListChanged": True, "resourcesListChanged": True}) as stream:
        await client.call_tool("log", meta={"io.modelcontextprotocol/logLevel": "debug"})
        await settle()
        assert stream.notifications == []
    logged = [n for n in client.notifications if n["method"] == "notifications/message"]
    assert len(logged) == 1
    assert "_meta" not in logged[0]["params"]


# -- capabilities -------------------------------------------------------------------------


async def test_discover_and_initialize_declare_the_same_capabilities_and_handlers_match() -> None:
    server = make_server()
    discover = await MemoryClient(server).request("server/discover")
    initialized = await MemoryClient(server, era="legacy").initialize()
    # The same promises, but for the extensions, which 2026-07-28 declares only (the tasks
    # extension has no 2025-11-25 form).
    extensions = {"io.modelcontextprotocol/tasks": {}}
    assert discover["capabilities"] == {**initialized["capabilities"], "extensions": extensions}
    capabilities = discover["capabilities"]
    assert capabilities["tools"] == {"listChanged": True}
    assert capabilities["prompts"] == {"listChanged": True}
    assert capabilities["resources"] == {"listChanged": True, "subscribe": True}
    assert capabilities["logging"] == {}
    assert capabilities["completions"] == {}
    client = MemoryClient(server)
    for method in ("tools/list", "prompts/list", "resources/list"):
        await client.request(method)
    # The completion handler is there: a ref that names nothing is -32602, not -32601.
    ref = {"type": "ref/prompt", "name": "nothing"}
    params = {"ref": ref, "argument": {"name": "x", "value": ""}}
    assert (await rpc_error(client, "completion/complete", params)).code == -32602


# -- 2025-11-25: sessions ------------------------------------------------------------------


async def test_a_legacy_session_hears_of_list_changes_without_a_subscription_id() -> None:
    client = MemoryClient(make_server(), era="legacy")
    await client.call_tool("add_tool", {"name": "fresh"})
    await client.call_tool("add_prompt", {"name": "fresh"})
    await client.call_tool("add_resource", {"uri": "memo://fresh"})
    await settle(lambda: len(client.notifications) >= 3)
    assert methods(client.notifications) == [
        "notifications/tools/list_changed",
        "notifications/prompts/list_changed",
        "notifications/resources/list_changed",
    ]
    assert all(notification["params"] == {} for notification in client.notifications)


async def test_legacy_subscribe_and_unsubscribe() -> None:
    client = MemoryClient(make_server(), era="legacy")
    assert await client.request("resources/subscribe", {"uri": CONFIG_URI}) == {}
    await client.call_tool("touch", {"uri": CONFIG_URI})
    await client.call_tool("touch", {"uri": OTHER_URI})
    await settle(lambda: bool(client.notifications))
    await settle()
    assert client.notifications == [
        {
            "jsonrpc": "2.0",
            "method": "notifications/resources/updated",
            "params": {"uri": CONFIG_URI},
        }
    ]
    assert await client.request("resources/unsubscribe", {"uri": CONFIG_URI}) == {}
    await client.call_tool("touch", {"uri": CONFIG_URI})
    await settle()
    assert len(client.notifications) == 1


@pytest.mark.parametrize("params", [{}, {"uri": 7}, {"uri": "memo://nowhere"}])
async def test_legacy_subscribe_to_nothing_is_invalid_params(params: dict[str, Any]) -> None:
    client = MemoryClient(make_server(), era="legacy")
    error = await rpc_error(client, "resources/subscribe", params)
    assert error.code == -32602


@pytest.mark.parametrize("beyond", [1, 10 * MAX_RESOURCE_SUBSCRIPTIONS])
async def test_legacy_subscriptions_are_bounded(beyond: int) -> None:
    registry = changing_registry()

    @registry.resource_template("memo://item/{number}")
    async def item(number: str) -> str:
        """An item."""
        return number

    client = MemoryClient(support.make_server(registry=registry), era="legacy")
    for number in range(MAX_RESOURCE_SUBSCRIPTIONS):
        await client.request("resources/subscribe", {"uri": f"memo://item/{number}"})
    # Subscribing again to one already held is no growth.
    await client.request("resources/subscribe", {"uri": "memo://item/0"})
    for number in range(beyond):
        uri = f"memo://item/{MAX_RESOURCE_SUBSCRIPTIONS + number}"
        error = await rpc_error(client, "resources/subscribe", {"uri": uri})
        assert error.code == -32602
        assert str(MAX_RESOURCE_SUBSCRIPTIONS) in error.message
    await client.request("resources/unsubscribe", {"uri": "memo://item/0"})
    await client.request(
        "resources/subscribe", {"uri": f"memo://item/{MAX_RESOURCE_SUBSCRIPTIONS}"}
    )


async def test_legacy_listen_is_method_not_found() -> None:
    client = MemoryClient(make_server(), era="legacy")
    error = await rpc_error(client, "subscriptions/listen", {"notifications": {}})
    assert error.code == -32601


async def test_declarations_while_the_tools_load_are_not_changes(tmp_path: Path) -> None:
    # The tools package loads after the first answer: the lists a client reads already hold
    # them, so loading them announces nothing.
    package = tmp_path / "late_tools"
    package.mkdir()
    (package / "__init__.py").write_text(
        "from mrtr_runtime import Registry\n\nregistry = Registry()\n", encoding="utf-8"
    )
    (package / "greet.py").write_text(
        "from late_tools import registry\n\n\n"
        "@registry.tool()\nasync def greet() -> str:\n    return 'hi'\n",
        encoding="utf-8",
    )
    sys.path.insert(0, str(tmp_path))
    try:
        import late_tools  # type: ignore[import-not-found]

        registry: Registry = late_tools.registry
        registry.defer_package("late_tools")
        client = MemoryClient(support.make_server(registry=registry), era="legacy")
        await client.initialize()
        listed = await client.request("tools/list")
        await settle()
        assert [tool["name"] for tool in listed["tools"]] == ["greet"]
        assert client.notifications == []
    finally:
        sys.path.remove(str(tmp_path))
        for name in [name for name in sys.modules if name.startswith("late_tools")]:
            del sys.modules[name]


# -- over real pipes ------------------------------------------------------------------------

STDIO_SCRIPT = """\
import os

import support
from test_subscriptions import changing_registry

from mrtr_runtime.server import codec_from_environment, serve_stdio

codec = codec_from_environment(os.environ, default_key_file=None)
serve_stdio(support.make_server(registry=changing_registry(), codec=codec))
"""


@pytest.fixture
def changing_command(tmp_path: Path) -> list[str]:
    script = tmp_path / "serve_changing.py"
    script.write_text(STDIO_SCRIPT, encoding="utf-8")
    return [sys.executable, str(script)]


async def read_until_id(stdout: Any, request_id: object) -> list[dict[str, Any]]:
    seen: list[dict[str, Any]] = []
    while not seen or seen[-1].get("id") != request_id:
        seen.append(await read_message(stdout))
    return seen


async def test_stdio_listen_carries_list_changes_and_the_client_ends_it(
    changing_command: list[str],
) -> None:
    with anyio.fail_after(BOUND):
        async with raw_server(changing_command, server_env()) as process:
            stdout = reader(process)
            await send(
                process,
                request(
                    "listen-1",
                    "subscriptions/listen",
                    {"notifications": {"toolsListChanged": True}},
                ),
            )
            ack = await read_message(stdout)
            assert ack["method"] == "notifications/subscriptions/acknowledged"
            assert ack["params"]["_meta"] == {SUBSCRIPTION_ID: "listen-1"}
            await send(
                process,
                request(2, "tools/call", {"name": "add_tool", "arguments": {"name": "fresh"}}),
            )
            messages = await read_until_id(stdout, 2)
            if not any(m.get("method") == "notifications/tools/list_changed" for m in messages):
                messages.append(await read_message(stdout))
            changed = [m for m in messages if m.get("method") == "notifications/tools/list_changed"]
            assert changed == [
                {
                    "jsonrpc": "2.0",
                    "method": "notifications/tools/list_changed",
                    "params": {"_meta": {SUBSCRIPTION_ID: "listen-1"}},
                }
            ]
            cancel = {"requestId": "listen-1", "reason": "done"}
            await send(
                process, {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": cancel}
            )
            await send(
                process,
                request(3, "tools/call", {"name": "add_tool", "arguments": {"name": "later"}}),
            )
            after = await read_until_id(stdout, 3)
            assert process.stdin is not None
            await process.stdin.aclose()
            after += await read_until_end(stdout)
            # Nothing more for the cancelled stream: no notice, no response.
            assert [m for m in after if m.get("id") == "listen-1"] == []
            assert [m for m in after if "method" in m] == []
            assert await process.wait() == 0


async def test_stdio_listen_open_at_shutdown_is_cancelled_and_answered(
    changing_command: list[str],
) -> None:
    with anyio.fail_after(BOUND):
        async with raw_server(changing_command, server_env()) as process:
            stdout = reader(process)
            await send(
                process,
                request(7, "subscriptions/listen", {"notifications": {"promptsListChanged": True}}),
            )
            assert (await read_message(stdout))["params"]["_meta"] == {SUBSCRIPTION_ID: 7}
            assert process.stdin is not None
            await process.stdin.aclose()
            rest = await read_until_end(stdout)
            assert rest[0] == {
                "jsonrpc": "2.0",
                "method": "notifications/cancelled",
                "params": {"requestId": 7, "reason": "the server is shutting down"},
            }
            assert rest[1]["id"] == 7
            assert rest[1]["result"]["_meta"][SUBSCRIPTION_ID] == 7
            assert len(rest) == 2
            assert await process.wait() == 0


async def test_stdio_log_messages_are_protocol_messages_on_stdout(
    changing_command: list[str],
) -> None:
    with anyio.fail_after(BOUND):
        async with raw_server(changing_command, server_env()) as process:
            stdout = reader(process)
            await send(
                process,
                request(
                    1,
                    "tools/call",
                    {"name": "log", "arguments": {}},
                    **{"io.modelcontextprotocol/logLevel": "info"},
                ),
            )
            messages = await read_until_id(stdout, 1)
            assert messages[0] == {
                "jsonrpc": "2.0",
                "method": "notifications/message",
                "params": {"level": "info", "data": "from the tool"},
            }
            await send(process, request(2, "tools/call", {"name": "log", "arguments": {}}))
            assert len(await read_until_id(stdout, 2)) == 1
            assert process.stdin is not None
            await process.stdin.aclose()
            assert await read_until_end(stdout) == []
            assert await process.wait() == 0
