"""Log messages to the client (`Context.send_log`), the way each era asks for them.

server/utilities/logging: 2026-07-28 requests ask per request with
`_meta["io.modelcontextprotocol/logLevel"]` and get no `notifications/message` without it;
2025-11-25 clients set a level for the session with `logging/setLevel`. Either way only
messages at or above the level are sent, an unknown level is -32602, the server declares the
`logging` capability, and nothing is sent for a request once it is cancelled.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

import support
from mrtr_runtime import Context, Registry
from mrtr_runtime._context import MAX_LOG_MESSAGES, Cancellation, LoggingLevel
from mrtr_runtime._jsonrpc import Request
from mrtr_runtime._router import Session
from mrtr_runtime.server import Server
from mrtr_runtime.testing import MemoryClient
from support import meta, rpc_error

pytestmark = pytest.mark.anyio

META_LOG_LEVEL = "io.modelcontextprotocol/logLevel"
EVERY_LEVEL: tuple[LoggingLevel, ...] = (
    "debug",
    "info",
    "notice",
    "warning",
    "error",
    "critical",
    "alert",
    "emergency",
)


def logging_registry() -> Registry:
    registry = Registry()

    @registry.tool()
    async def log_every_level(*, ctx: Context) -> str:
        """Logs one message at each level, least severe first."""
        for level in EVERY_LEVEL:
            await ctx.send_log(level, f"{level} message", logger="levels")
        return "logged"

    @registry.tool()
    async def log_many(count: int, *, ctx: Context) -> str:
        """Logs `count` info messages."""
        for number in range(count):
            await ctx.send_log("info", {"number": number})
        return "logged"

    @registry.tool()
    async def log_not_json(*, ctx: Context) -> str:
        """Logs a value that is not JSON."""
        await ctx.send_log("info", {1, 2})
        return "unreachable"

    @registry.tool()
    async def log_bad_level(*, ctx: Context) -> str:
        """Logs at a level that does not exist."""
        await ctx.send_log("verbose", "x")  # type: ignore[arg-type]
        return "unreachable"

    @registry.tool()
    async def log_a_library_error(*, ctx: Context) -> str:
        """Logs what a failing AWS call quoted, and reports progress quoting it too."""
        await ctx.send_log("error", {"response": {"SessionToken": SESSION_TOKEN}, "n": 1})
        await ctx.send_log("error", f"sent Authorization: AWS4-HMAC-SHA256 Credential={KEY_ID}/x")
        await ctx.report_progress(1.0, message=f"<SecretAccessKey>{SECRET_KEY}</SecretAccessKey>")
        return "logged"

    return registry


KEY_ID = "ASIAQ3EGZK7BXMPL4Y2N"
SECRET_KEY = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYzEXAMPLEKEY"
SESSION_TOKEN = "FwoGZXIvYXdzEJr//////////wEaDOLf+Assumed/Session=Token"


def make_server() -> Server:
    return support.make_server(registry=logging_registry())


def messages(client: MemoryClient) -> list[dict[str, Any]]:
    return [n["params"] for n in client.notifications if n["method"] == "notifications/message"]


# -- 2026-07-28: per request ------------------------------------------------------------------


async def test_modern_sends_nothing_without_a_log_level() -> None:
    # server/utilities/logging: the server MUST NOT emit notifications/message for a request
    # that does not include the field.
    client = MemoryClient(make_server())
    result = await client.call_tool("log_every_level")
    assert result.text == "logged"
    assert messages(client) == []


@pytest.mark.parametrize("floor", EVERY_LEVEL)
async def test_modern_sends_the_asked_level_and_above(floor: LoggingLevel) -> None:
    client = MemoryClient(make_server())
    await client.call_tool("log_every_level", meta={META_LOG_LEVEL: floor})
    wanted = EVERY_LEVEL[EVERY_LEVEL.index(floor) :]
    assert [m["level"] for m in messages(client)] == list(wanted)
    first = messages(client)[0]
    assert first == {"level": floor, "logger": "levels", "data": f"{floor} message"}


@pytest.mark.parametrize("level", ["verbose", "INFO", "", 3, None, ["debug"]])
async def test_modern_unknown_log_level_is_invalid_params(level: object) -> None:
    client = MemoryClient(make_server())
    params = {"name": "log_every_level", "arguments": {}, "_meta": meta(**{META_LOG_LEVEL: level})}
    if level is None:
        # An explicit null is no level at all: nothing is sent, the call is served.
        await client.request("tools/call", params)
        assert messages(client) == []
        return
    error = await rpc_error(client, "tools/call", params)
    assert error.code == -32602
    assert "log level" in error.message
    assert messages(client) == []


async def test_modern_log_level_is_per_request() -> None:
    client = MemoryClient(make_server())
    await client.call_tool("log_every_level", meta={META_LOG_LEVEL: "emergency"})
    await client.call_tool("log_every_level")
    assert [m["level"] for m in messages(client)] == ["emergency"]


async def test_modern_has_no_set_level_method() -> None:
    # 2026-07-28 replaced logging/setLevel with the per-request level: -32601.
    client = MemoryClient(make_server())
    error = await rpc_error(client, "logging/setLevel", {"level": "debug"})
    assert error.code == -32601


async def test_logging_capability_in_discover_and_initialize() -> None:
    discover = await MemoryClient(make_server()).request("server/discover")
    assert discover["capabilities"]["logging"] == {}
    legacy = MemoryClient(make_server(), era="legacy")
    initialized = await legacy.initialize()
    assert initialized["capabilities"]["logging"] == {}


# -- 2025-11-25: logging/setLevel for the session -------------------------------------------


async def test_legacy_sends_nothing_before_set_level() -> None:
    client = MemoryClient(make_server(), era="legacy")
    await client.call_tool("log_every_level")
    assert messages(client) == []


async def test_legacy_set_level_filters_later_calls() -> None:
    client = MemoryClient(make_server(), era="legacy")
    assert await client.request("logging/setLevel", {"level": "debug"}) == {}
    await client.call_tool("log_every_level")
    assert len(messages(client)) == len(EVERY_LEVEL)
    client.notifications.clear()
    assert await client.request("logging/setLevel", {"level": "error"}) == {}
    await client.call_tool("log_every_level")
    assert [m["level"] for m in messages(client)] == ["error", "critical", "alert", "emergency"]


@pytest.mark.parametrize("params", [{"level": "loud"}, {"level": 1}, {}])
async def test_legacy_set_level_rejects_unknown_levels(params: dict[str, Any]) -> None:
    client = MemoryClient(make_server(), era="legacy")
    await client.request("logging/setLevel", {"level": "warning"})
    error = await rpc_error(client, "logging/setLevel", params)
    assert error.code == -32602
    # The level set before still holds.
    await client.call_tool("log_every_level")
    assert messages(client)[0]["level"] == "warning"


async def test_legacy_ignores_a_modern_log_level_key() -> None:
    client = MemoryClient(make_server(), era="legacy")
    await client.call_tool("log_every_level", meta={META_LOG_LEVEL: "debug"})
    assert messages(client) == []


# -- bounds, bad values, cancellation ---------------------------------------------------------


@pytest.mark.parametrize("count", [MAX_LOG_MESSAGES, 10 * MAX_LOG_MESSAGES])
async def test_one_request_sends_at_most_max_log_messages(
    count: int, caplog: pytest.LogCaptureFixture
) -> None:
    client = MemoryClient(make_server())
    result = await client.call_tool("log_many", {"count": count}, meta={META_LOG_LEVEL: "info"})
    assert result.text == "logged"
    assert len(messages(client)) == MAX_LOG_MESSAGES
    assert messages(client)[-1]["data"] == {"number": MAX_LOG_MESSAGES - 1}
    stopped = [r for r in caplog.records if "log messages to the client stopped" in r.message]
    assert len(stopped) == (1 if count > MAX_LOG_MESSAGES else 0)


async def test_log_messages_and_progress_to_the_client_carry_no_secret() -> None:
    # server/utilities/logging: log messages MUST NOT contain credentials or secrets. A tool's
    # log data and progress messages often quote a library's error; they are redacted as the
    # server's own log lines are, and what is not secret arrives as it was sent.
    client = MemoryClient(make_server())
    result = await client.call_tool(
        "log_a_library_error", meta={META_LOG_LEVEL: "info", "progressToken": "p"}
    )
    assert result.text == "logged"
    sent = str(client.notifications)
    for secret in (KEY_ID, SECRET_KEY, SESSION_TOKEN):
        assert secret not in sent
    first, second = (m["data"] for m in messages(client))
    assert first == {"response": {"SessionToken": "[redacted]"}, "n": 1}
    assert isinstance(second, str) and second.startswith("sent Authorization: [redacted]")
    (progress,) = [n["params"] for n in client.notifications if n["method"].endswith("progress")]
    assert progress["message"] == "<SecretAccessKey>[redacted]</SecretAccessKey>"


async def test_data_that_is_not_json_is_the_tools_error() -> None:
    client = MemoryClient(make_server())
    result = await client.call_tool("log_not_json", meta={META_LOG_LEVEL: "info"})
    assert result.is_error
    assert messages(client) == []


async def test_an_unknown_level_from_the_tool_is_its_error() -> None:
    client = MemoryClient(make_server())
    result = await client.call_tool("log_bad_level", meta={META_LOG_LEVEL: "debug"})
    assert result.is_error


async def test_nothing_is_logged_after_a_cancel() -> None:
    sent: list[tuple[str, dict[str, Any]]] = []
    started = asyncio.Event()
    release = asyncio.Event()
    registry = Registry()

    @registry.tool()
    async def slow_logger(*, ctx: Context) -> str:
        """Logs, waits, logs again."""
        await ctx.send_log("info", "before")
        started.set()
        await release.wait()
        await ctx.send_log("info", "after")
        return "done"

    class Peer:
        async def notify(self, method: str, params: dict[str, Any]) -> None:
            sent.append((method, params))

        async def request(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
            raise AssertionError("no requests in this era")

    server = support.make_server(registry=registry)
    cancellation = Cancellation()
    request = Request(
        1,
        "tools/call",
        {"name": "slow_logger", "arguments": {}, "_meta": meta(**{META_LOG_LEVEL: "info"})},
    )
    call = asyncio.create_task(server.handle_request(request, Session(), Peer(), cancellation))
    await started.wait()
    cancellation.cancel()
    release.set()
    await call
    assert [params["data"] for _, params in sent] == ["before"]
