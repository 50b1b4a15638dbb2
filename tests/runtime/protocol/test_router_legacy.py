"""The 2025-11-25 era, sans-IO: `initialize`, version negotiation, and the legacy MRTR bridge.

basic/versioning "Backward Compatibility": an `initialize` selects legacy semantics for the stdio
process, while requests carrying modern `_meta` are still served statelessly. Legacy results have
no `resultType`; `input_required` is never sent to a legacy client: the runtime asks with real
`elicitation/create` / `sampling/createMessage` / `roots/list` requests instead.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import pytest

from mrtr_runtime._legacy import MAX_LEGACY_ROUNDS
from mrtr_runtime.server import LEGACY_VERSIONS
from mrtr_runtime.testing import MemoryClient, RpcError
from support import (
    ALL_CAPABILITIES,
    ARN,
    DEPLOY_INPUT_REQUESTS,
    META_SERVER_INFO,
    SERVER_NAME,
    SERVER_VERSION,
    Json,
    accept,
    make_server,
    meta,
    text_of,
)

pytestmark = pytest.mark.anyio

Handler = Callable[[Json], Awaitable[Json]]
MODERN_ONLY_KEYS = {"resultType", "ttlMs", "cacheScope", "_meta", "inputRequests", "requestState"}


async def deploy_answers(params: Json) -> Json:
    properties = params["requestedSchema"]["properties"]
    return accept(confirmed=True) if "confirmed" in properties else accept(arn=ARN)


async def legacy_client(
    calls: Counter[str] | None = None,
    *,
    capabilities: Mapping[str, Any] | None = None,
    handlers: Mapping[str, Handler] | None = None,
    version: str = "2025-11-25",
) -> MemoryClient:
    by_method = dict(handlers or {})
    client = MemoryClient(
        make_server(calls=calls),
        capabilities=ALL_CAPABILITIES if capabilities is None else capabilities,
        elicitation=by_method.pop("elicitation/create", None),
        sampling=by_method.pop("sampling/createMessage", None),
        roots=by_method.pop("roots/list", None),
    )
    assert not by_method, f"no callback for {sorted(by_method)}"
    await client.initialize(version)
    return client


def assert_legacy(result: Mapping[str, Any]) -> None:
    leaked = MODERN_ONLY_KEYS & set(result)
    assert not leaked, f"modern-only keys on a legacy result: {sorted(leaked)}"


# -- initialize and version negotiation --------------------------------------------------------


async def test_initialize_answers_with_the_legacy_handshake_shape() -> None:
    client = MemoryClient(make_server(instructions="Be careful."), capabilities=ALL_CAPABILITIES)
    result = await client.initialize()
    assert result == {
        "protocolVersion": "2025-11-25",
        "capabilities": {
            "completions": {},
            "logging": {},
            "prompts": {"listChanged": True},
            "resources": {"listChanged": True, "subscribe": True},
            "tools": {"listChanged": True},
        },
        "serverInfo": {"name": SERVER_NAME, "version": SERVER_VERSION},
        "instructions": "Be careful.",
    }


@pytest.mark.parametrize("version", LEGACY_VERSIONS)
async def test_each_supported_legacy_version_is_echoed(version: str) -> None:
    client = MemoryClient(make_server(), capabilities=ALL_CAPABILITIES)
    assert (await client.initialize(version))["protocolVersion"] == version


@pytest.mark.parametrize("version", ["2024-01-01", "2026-07-28", "2099-12-31", "latest", ""])
async def test_an_unknown_legacy_version_gets_our_latest(version: str) -> None:
    client = MemoryClient(make_server(), capabilities=ALL_CAPABILITIES)
    assert (await client.initialize(version))["protocolVersion"] == "2025-11-25"


@pytest.mark.parametrize(
    "params",
    [{}, {"protocolVersion": 20251125}, {"protocolVersion": "2025-11-25", "capabilities": []}],
    ids=["empty", "numeric-version", "list-capabilities"],
)
async def test_an_initialize_without_a_version_or_with_bad_capabilities_is_invalid_params(
    params: Json,
) -> None:
    client = MemoryClient(make_server(), capabilities=ALL_CAPABILITIES)
    with pytest.raises(RpcError) as caught:
        await client.request("initialize", params)
    assert caught.value.code == -32602


async def test_initialized_notification_is_accepted_silently() -> None:
    client = await legacy_client()
    assert await client.send({"jsonrpc": "2.0", "method": "notifications/initialized"}) is None


# -- legacy results ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("method", "params"),
    [
        ("ping", {}),
        ("tools/list", {}),
        ("prompts/list", {}),
        ("resources/list", {}),
        ("resources/templates/list", {}),
        ("tools/call", {"name": "echo", "arguments": {"text": "hi"}}),
        ("tools/call", {"name": "refuse", "arguments": {"reason": "no"}}),
        ("tools/call", {"name": "echo", "arguments": {"bad": 1}}),
        ("resources/read", {"uri": "memo://notes/today"}),
    ],
)
async def test_legacy_results_carry_no_result_type_caching_hints_or_meta(
    method: str, params: Json
) -> None:
    client = await legacy_client()
    result = await client.request(method, params)
    assert_legacy(result)


async def test_ping_answers_an_empty_result() -> None:
    client = await legacy_client()
    assert await client.request("ping", {}) == {}


async def test_a_legacy_request_with_only_a_progress_token_in_meta_stays_legacy() -> None:
    client = await legacy_client()
    result = await client.request(
        "tools/call", {"name": "progress_steps", "_meta": {"progressToken": 5}}
    )
    assert_legacy(result)
    assert [note["params"]["progress"] for note in client.notifications] == [1.0, 2.0, 3.0]
    assert {note["params"]["progressToken"] for note in client.notifications} == {5}


async def test_discover_on_a_legacy_request_is_method_not_found() -> None:
    client = await legacy_client()
    with pytest.raises(RpcError) as caught:
        await client.request("server/discover", {})
    assert caught.value.code == -32601


@pytest.mark.parametrize("method", ["tools/run", "logging/getLevel", "completion/nope"])
async def test_an_unknown_legacy_method_is_method_not_found(method: str) -> None:
    client = await legacy_client()
    with pytest.raises(RpcError) as caught:
        await client.request(method, {})
    assert caught.value.code == -32601


# -- both eras in one process ------------------------------------------------------------------


async def test_modern_requests_are_still_served_statelessly_after_a_legacy_initialize() -> None:
    client = await legacy_client(capabilities={})
    discover = await client.request("server/discover", {"_meta": meta()})
    assert discover["resultType"] == "complete"
    assert META_SERVER_INFO in discover["_meta"]
    tools = await client.request("tools/list", {"_meta": meta()})
    assert "ttlMs" in tools
    # The modern request's own capabilities count, not the ones given at initialize...
    asked = await client.request(
        "tools/call", {"name": "deploy_stack", "arguments": {"stack": "s"}, "_meta": meta()}
    )
    assert asked["resultType"] == "input_required"
    # ...and a legacy request in the same session still gets legacy treatment.
    legacy = await client.request("tools/call", {"name": "echo", "arguments": {"text": "x"}})
    assert_legacy(legacy)


async def test_a_modern_request_never_borrows_the_capabilities_given_at_initialize() -> None:
    client = await legacy_client()
    with pytest.raises(RpcError) as caught:
        await client.request(
            "tools/call", {"name": "deploy_stack", "arguments": {"stack": "s"}, "_meta": meta({})}
        )
    assert caught.value.code == -32021
    assert client.server_requests == []


async def test_a_modern_ping_after_initialize_is_still_method_not_found() -> None:
    client = await legacy_client()
    with pytest.raises(RpcError) as caught:
        await client.request("ping", {"_meta": meta()})
    assert caught.value.code == -32601


# -- the bridge: MRTR handlers answered with real server-to-client requests ---------------------


async def test_the_two_round_deploy_completes_with_real_elicitation_requests(
    calls: Counter[str],
) -> None:
    client = await legacy_client(calls, handlers={"elicitation/create": deploy_answers})
    result = await client.request(
        "tools/call", {"name": "deploy_stack", "arguments": {"stack": "prod-api"}}
    )
    assert result == {"content": [{"type": "text", "text": "Deployed prod-api successfully"}]}
    # The deploy example's round-1 questions, asked one real request at a time, in order.
    assert client.server_requests == list(DEPLOY_INPUT_REQUESTS.values())
    assert calls["deploy_stack"] == 2


async def test_three_rounds_run_through_the_bridge_one_request_per_round(
    calls: Counter[str],
) -> None:
    answers = {
        "Your name?": accept(name="Ada"),
        "Your colour?": accept(colour="green"),
        "Your size?": accept(size=4),
    }

    async def elicitation(params: Json) -> Json:
        return answers[params["message"]]

    client = await legacy_client(calls, handlers={"elicitation/create": elicitation})
    result = await client.request("tools/call", {"name": "wizard"})
    assert_legacy(result)
    assert result["structuredContent"] == {
        "name": "Ada",
        "colour": "green",
        "size": 4,
        "seen": ["colour", "name", "size"],
    }
    assert [request["params"]["message"] for request in client.server_requests] == list(answers)
    assert calls["wizard"] == 4


async def test_declining_through_the_bridge_reaches_the_handler() -> None:
    async def decline(params: Json) -> Json:
        return {"action": "decline"}

    client = await legacy_client(handlers={"elicitation/create": decline})
    result = await client.request(
        "tools/call", {"name": "deploy_stack", "arguments": {"stack": "s"}}
    )
    assert text_of(result) == "Deploy cancelled by user."


async def test_url_mode_elicitation_gets_an_elicitation_id_in_the_legacy_era() -> None:
    async def done(params: Json) -> Json:
        return {"action": "accept"}

    client = await legacy_client(handlers={"elicitation/create": done})
    result = await client.request("tools/call", {"name": "sign_in"})
    assert text_of(result) == "sign-in: accept"
    (request,) = client.server_requests
    params = request["params"]
    assert (params["mode"], params["message"], params["url"]) == (
        "url",
        "Sign in to continue",
        "https://example.com/login",
    )
    assert isinstance(params["elicitationId"], str)
    assert params["elicitationId"]


async def test_sampling_and_roots_go_out_as_real_requests() -> None:
    async def complete(params: Json) -> Json:
        return {"role": "assistant", "content": {"type": "text", "text": "short"}, "model": "m"}

    async def roots(params: Json) -> Json:
        return {"roots": [{"uri": "file:///work"}]}

    client = await legacy_client(
        capabilities={"sampling": {}, "roots": {}},
        handlers={"sampling/createMessage": complete, "roots/list": roots},
    )
    summary = await client.request("tools/call", {"name": "summarise", "arguments": {"topic": "x"}})
    assert text_of(summary) == "model: short"
    count = await client.request("tools/call", {"name": "roots_count"})
    assert text_of(count) == "1 roots"
    assert [request["method"] for request in client.server_requests] == [
        "sampling/createMessage",
        "roots/list",
    ]


async def test_prompts_get_runs_through_the_bridge() -> None:
    async def answer(params: Json) -> Json:
        return accept(text="oolong")

    client = await legacy_client(handlers={"elicitation/create": answer})
    result = await client.request("prompts/get", {"name": "ask", "arguments": {"topic": "tea"}})
    assert_legacy(result)
    assert result["messages"] == [
        {"role": "user", "content": {"type": "text", "text": "tea: oolong"}}
    ]


async def test_resources_read_runs_through_the_bridge() -> None:
    async def answer(params: Json) -> Json:
        return accept(name="Ada")

    client = await legacy_client(handlers={"elicitation/create": answer})
    result = await client.request("resources/read", {"uri": "memo://greeting"})
    assert result["contents"][0]["text"] == "Hello, Ada!"


@pytest.mark.parametrize(
    ("capabilities", "tool", "arguments", "named"),
    [
        ({}, "deploy_stack", {"stack": "s"}, "elicitation"),
        ({"elicitation": {"form": {}}}, "sign_in", {}, "url"),
        ({"elicitation": {}}, "roots_count", {}, "roots"),
        ({"roots": {}}, "summarise", {"topic": "t"}, "elicitation"),
    ],
)
async def test_a_client_without_the_capability_gets_an_is_error_result_naming_it(
    calls: Counter[str], capabilities: Json, tool: str, arguments: Json, named: str
) -> None:
    client = await legacy_client(calls, capabilities=capabilities)
    result = await client.request("tools/call", {"name": tool, "arguments": arguments})
    assert_legacy(result)
    assert result["isError"] is True
    assert named in text_of(result)
    assert client.server_requests == []


async def test_a_client_that_answers_with_an_error_gets_an_is_error_result() -> None:
    async def refuse(params: Json) -> Json:
        raise RpcError(-32603, "the user closed the dialog")

    client = await legacy_client(handlers={"elicitation/create": refuse})
    result = await client.request(
        "tools/call", {"name": "deploy_stack", "arguments": {"stack": "s"}}
    )
    assert_legacy(result)
    assert result["isError"] is True
    assert "elicitation/create" in text_of(result)
    assert "the user closed the dialog" in text_of(result)


async def test_a_client_that_declared_elicitation_but_cannot_answer_gets_an_is_error_result() -> (
    None
):
    client = await legacy_client(handlers={})
    result = await client.request(
        "tools/call", {"name": "deploy_stack", "arguments": {"stack": "s"}}
    )
    assert result["isError"] is True
    # The client has no callback for it: -32600 "... not supported", as the Python SDK answers.
    assert "-32600" in text_of(result)


async def test_a_memory_client_handler_refusing_with_rpc_error_is_an_is_error_result() -> None:
    # The public way for a client callback to answer with a JSON-RPC error (ClientSession does
    # the same) is to raise RpcError.
    async def refuse(params: Json) -> Json:
        raise RpcError(-1, "User rejected")

    client = await legacy_client(handlers={"elicitation/create": refuse})
    result = await client.request(
        "tools/call", {"name": "deploy_stack", "arguments": {"stack": "s"}}
    )
    assert result["isError"] is True
    assert "User rejected" in text_of(result)


async def test_a_client_answer_of_the_wrong_shape_is_an_is_error_result() -> None:
    async def nonsense(params: Json) -> Json:
        return {"confirmed": True}

    client = await legacy_client(handlers={"elicitation/create": nonsense})
    result = await client.request(
        "tools/call", {"name": "deploy_stack", "arguments": {"stack": "s"}}
    )
    assert result["isError"] is True
    assert "invalid" in text_of(result)


async def test_a_handler_that_never_settles_hits_the_round_cap_as_an_is_error_result(
    calls: Counter[str],
) -> None:
    async def again(params: Json) -> Json:
        return accept(text="again")

    client = await legacy_client(calls, handlers={"elicitation/create": again})
    result = await client.request("tools/call", {"name": "always_ask"})
    assert_legacy(result)
    assert result["isError"] is True
    assert str(MAX_LEGACY_ROUNDS) in text_of(result)
    assert calls["always_ask"] == MAX_LEGACY_ROUNDS + 1


async def test_at_the_round_cap_the_client_is_never_asked_a_question_whose_answer_is_unused(
    calls: Counter[str],
) -> None:
    async def again(params: Json) -> Json:
        return accept(text="again")

    client = await legacy_client(calls, handlers={"elicitation/create": again})
    await client.request("tools/call", {"name": "always_ask"})
    # Like the client loop: max_rounds retries means max_rounds answers, max_rounds + 1 runs.
    assert len(client.server_requests) == calls["always_ask"] - 1


async def test_no_legacy_result_ever_says_input_required() -> None:
    async def deny(params: Json) -> Json:
        return {"action": "cancel"}

    client = await legacy_client(handlers={"elicitation/create": deny})
    for params in (
        {"name": "deploy_stack", "arguments": {"stack": "s"}},
        {"name": "wizard"},
        {"name": "load_shed"},
        {"name": "sign_in"},
    ):
        result = await client.request("tools/call", params)
        assert_legacy(result)


async def test_a_legacy_resource_read_carries_no_caching_hints() -> None:
    client = await legacy_client()
    result = await client.request("resources/read", {"uri": "memo://notes/today"})
    assert "ttlMs" not in result
    assert "cacheScope" not in result
