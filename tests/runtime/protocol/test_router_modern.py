"""The 2026-07-28 era, sans-IO: per-request `_meta`, discover, lists, error codes, statelessness.

2026-07-28 basic/index: every request carries `params._meta` with protocolVersion and
clientCapabilities (-32602 when missing); every result carries `resultType` and SHOULD carry
`_meta["io.modelcontextprotocol/serverInfo"]`; unknown methods are -32601; an unsupported version
is -32022 with `data.supported`/`data.requested`; a missing capability is -32021 with
`data.requiredCapabilities`. Servers MUST NOT rely on earlier requests.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from mrtr_runtime._jsonrpc import Request
from mrtr_runtime._router import Session
from mrtr_runtime.server import MODERN_VERSIONS
from mrtr_runtime.testing import MemoryClient
from support import (
    ALL_CAPABILITIES,
    META_SERVER_INFO,
    SERVER_NAME,
    SERVER_VERSION,
    Json,
    accept,
    make_server,
    meta,
    next_round,
    rpc_error,
    text_of,
)

pytestmark = pytest.mark.anyio

SERVER_INFO = {"name": SERVER_NAME, "version": SERVER_VERSION}
LIST_METHODS = ("tools/list", "prompts/list", "resources/list", "resources/templates/list")


async def raw_error(client: MemoryClient, method: str, params: Json) -> Json:
    """The error of a request sent exactly as given (MemoryClient.request would add `_meta`)."""
    response = await client.send({"jsonrpc": "2.0", "id": 1, "method": method, "params": params})
    assert response is not None
    assert "result" not in response, response
    error: Json = response["error"]
    return error


# -- server/discover ---------------------------------------------------------------------------


async def test_discover_is_answered_without_any_initialize(client: MemoryClient) -> None:
    result = await client.request("server/discover", {})
    assert result["resultType"] == "complete"
    assert result["supportedVersions"] == list(MODERN_VERSIONS)
    assert set(result["capabilities"]) >= {"tools", "prompts", "resources"}
    assert isinstance(result["ttlMs"], int)
    assert result["ttlMs"] >= 0
    assert result["cacheScope"] in ("public", "private")
    assert result["_meta"][META_SERVER_INFO] == SERVER_INFO
    # PR #3002 moved serverInfo into _meta: no top-level serverInfo.
    assert "serverInfo" not in result


async def test_discover_carries_the_instructions_when_the_server_has_them() -> None:
    client = MemoryClient(
        make_server(instructions="Ask before deploying."), capabilities=ALL_CAPABILITIES
    )
    result = await client.request("server/discover", {})
    assert result["instructions"] == "Ask before deploying."


async def test_discover_without_client_info_is_still_served(client: MemoryClient) -> None:
    result = await client.request("server/discover", {"_meta": meta()})
    assert result["resultType"] == "complete"


# -- result envelope ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("method", "params"),
    [
        ("server/discover", {}),
        ("tools/list", {}),
        ("prompts/list", {}),
        ("resources/list", {}),
        ("resources/templates/list", {}),
        ("tools/call", {"name": "echo", "arguments": {"text": "hi"}}),
        ("tools/call", {"name": "deploy_stack", "arguments": {"stack": "prod-api"}}),
        ("tools/call", {"name": "refuse", "arguments": {"reason": "no"}}),
        ("prompts/get", {"name": "ask", "arguments": {"topic": "tea"}}),
        ("resources/read", {"uri": "memo://notes/today"}),
        ("resources/read", {"uri": "memo://greeting"}),
    ],
)
async def test_every_modern_result_has_a_result_type_and_server_info(
    client: MemoryClient, method: str, params: Json
) -> None:
    result = await client.request(method, params)
    assert result["resultType"] in ("complete", "input_required")
    assert result["_meta"][META_SERVER_INFO] == SERVER_INFO


@pytest.mark.parametrize("method", ["server/discover", *LIST_METHODS])
async def test_list_results_carry_caching_hints(client: MemoryClient, method: str) -> None:
    result = await client.request(method, {})
    assert isinstance(result["ttlMs"], int)
    assert result["ttlMs"] >= 0
    assert result["cacheScope"] in ("public", "private")


async def test_a_resource_read_carries_caching_hints(client: MemoryClient) -> None:
    result = await client.request("resources/read", {"uri": "memo://notes/today"})
    assert result["contents"] == [
        {"uri": "memo://notes/today", "mimeType": "text/plain", "text": "note today"}
    ]
    assert result["cacheScope"] in ("public", "private")
    assert isinstance(result["ttlMs"], int)


async def test_an_input_required_result_carries_no_caching_hints(client: MemoryClient) -> None:
    # server/utilities/caching: interim input_required results "carry no caching hints".
    result = await client.request("resources/read", {"uri": "memo://greeting"})
    assert result["resultType"] == "input_required"
    assert "ttlMs" not in result
    assert "cacheScope" not in result


async def test_a_resource_read_that_carried_answers_is_not_cacheable(client: MemoryClient) -> None:
    first = await client.request("resources/read", {"uri": "memo://greeting"})
    final = await next_round(
        client, "resources/read", {"uri": "memo://greeting"}, first, {"name": accept(name="Ada")}
    )
    assert final["contents"][0]["text"] == "Hello, Ada!"
    # caching: retries carrying inputResponses or requestState MUST NOT be cached.
    assert (final["ttlMs"], final["cacheScope"]) == (0, "private")


async def test_the_response_echoes_the_request_id(client: MemoryClient) -> None:
    for request_id in ("abc", 0, 2**53):
        response = await client.send(
            {
                "jsonrpc": "2.0",
                "id": request_id,
                "method": "tools/list",
                "params": {"_meta": meta()},
            }
        )
        assert response is not None
        assert response["id"] == request_id
        assert response["jsonrpc"] == "2.0"


# -- -32602: the per-request _meta -------------------------------------------------------------


@pytest.mark.parametrize(
    "params",
    [
        {},
        {"_meta": {}},
        {"_meta": None},
        {"_meta": ["io.modelcontextprotocol/protocolVersion"]},
        {"_meta": {"progressToken": 1}},
        {"_meta": {"io.modelcontextprotocol/clientCapabilities": {}}},
    ],
    ids=["no-meta", "empty-meta", "null-meta", "list-meta", "token-only", "no-version"],
)
async def test_a_request_without_a_protocol_version_is_invalid_params(
    client: MemoryClient, params: Json
) -> None:
    for method in ("server/discover", "tools/list", "tools/call"):
        error = await raw_error(client, method, {**params, "name": "echo"})
        assert error["code"] == -32602
        assert "protocolVersion" in error["message"]


@pytest.mark.parametrize("capabilities", [None, "all", ["elicitation"], 1])
async def test_a_request_without_client_capabilities_is_invalid_params(
    client: MemoryClient, capabilities: object
) -> None:
    bad_meta: Json = {"io.modelcontextprotocol/protocolVersion": "2026-07-28"}
    if capabilities is not None:
        bad_meta["io.modelcontextprotocol/clientCapabilities"] = capabilities
    error = await rpc_error(client, "server/discover", {"_meta": bad_meta})
    assert error.code == -32602
    assert "clientCapabilities" in error.message


@pytest.mark.parametrize("version", [20260728, None, ["2026-07-28"], True])
async def test_a_protocol_version_that_is_not_a_string_is_invalid_params(
    client: MemoryClient, version: object
) -> None:
    error = await rpc_error(client, "server/discover", {"_meta": meta(version=version)})
    assert error.code == -32602


# -- -32022 ------------------------------------------------------------------------------------


@pytest.mark.parametrize("version", ["2099-01-01", "2025-11-25", "", "2026-07-28 "])
async def test_an_unsupported_version_is_minus_32022_naming_supported_and_requested(
    client: MemoryClient, version: str
) -> None:
    error = await rpc_error(client, "server/discover", {"_meta": meta(version=version)})
    assert error.code == -32022
    assert error.data == {"supported": list(MODERN_VERSIONS), "requested": version}


async def test_an_unsupported_version_is_refused_on_every_method(client: MemoryClient) -> None:
    for method in ("tools/list", "tools/call", "prompts/get", "resources/read"):
        error = await rpc_error(client, method, {"_meta": meta(version="2030-01-01")})
        assert error.code == -32022


# -- -32601 ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "method",
    [
        "ping",
        "logging/setLevel",
        "resources/subscribe",
        "resources/unsubscribe",
        "tools/run",
        "notifications/initialized",
        "",
        "TOOLS/LIST",
    ],
)
async def test_a_method_the_modern_era_does_not_have_is_method_not_found(
    client: MemoryClient, method: str
) -> None:
    error = await rpc_error(client, method, {})
    assert error.code == -32601


async def test_initialize_with_modern_meta_is_method_not_found_and_changes_nothing(
    client: MemoryClient,
) -> None:
    # basic/versioning: a request carrying modern _meta is served by 2026-07-28 rules, which
    # have no initialize; it must not switch the process to the legacy era.
    error = await raw_error(
        client,
        "initialize",
        {
            "protocolVersion": "2025-11-25",
            "capabilities": {},
            "clientInfo": {"name": "c", "version": "1"},
            "_meta": meta(),
        },
    )
    assert error["code"] == -32601
    still_modern = await raw_error(client, "tools/list", {})
    assert still_modern["code"] == -32602


async def test_method_not_found_wins_over_a_missing_meta(client: MemoryClient) -> None:
    response = await client.send({"jsonrpc": "2.0", "id": 1, "method": "nope/nothing"})
    assert response is not None
    assert response["error"]["code"] == -32601


# -- -32602: names, arguments, cursors, resources ------------------------------------------------


async def test_an_unknown_tool_is_invalid_params(client: MemoryClient) -> None:
    error = await rpc_error(client, "tools/call", {"name": "no_such_tool", "arguments": {}})
    assert error.code == -32602
    assert "no_such_tool" in error.message


@pytest.mark.parametrize("name", [None, 3, ["echo"]])
async def test_a_tool_call_without_a_string_name_is_invalid_params(
    client: MemoryClient, name: object
) -> None:
    params: Json = {"arguments": {"text": "x"}}
    if name is not None:
        params["name"] = name
    assert (await rpc_error(client, "tools/call", params)).code == -32602


async def test_an_unknown_prompt_is_invalid_params(client: MemoryClient) -> None:
    error = await rpc_error(client, "prompts/get", {"name": "no_such_prompt"})
    assert error.code == -32602
    assert "no_such_prompt" in error.message


async def test_a_missing_resource_is_invalid_params_naming_the_uri(client: MemoryClient) -> None:
    error = await rpc_error(client, "resources/read", {"uri": "memo://nowhere"})
    assert error.code == -32602
    assert error.data == {"uri": "memo://nowhere"}
    # A template matches one path segment only.
    assert (await rpc_error(client, "resources/read", {"uri": "memo://notes/a/b"})).code == -32602


@pytest.mark.parametrize("method", LIST_METHODS)
async def test_a_cursor_we_never_issued_is_invalid_params(
    client: MemoryClient, method: str
) -> None:
    error = await rpc_error(client, method, {"cursor": "page-2"})
    assert error.code == -32602
    assert "cursor" in error.message.lower()


@pytest.mark.parametrize("arguments", [[1, 2], "text", 5, True])
async def test_arguments_that_are_not_an_object_are_invalid_params(
    client: MemoryClient, arguments: object
) -> None:
    tool = await rpc_error(client, "tools/call", {"name": "echo", "arguments": arguments})
    prompt = await rpc_error(client, "prompts/get", {"name": "ask", "arguments": arguments})
    assert (tool.code, prompt.code) == (-32602, -32602)


async def test_null_arguments_mean_no_arguments(client: MemoryClient) -> None:
    result = await client.request("tools/call", {"name": "load_shed", "arguments": None})
    assert result["resultType"] == "input_required"


async def test_tool_arguments_that_fail_validation_are_an_is_error_result(
    client: MemoryClient,
) -> None:
    # server/tools (SEP-1303): input validation errors are tool results the model can act on.
    result = await client.request("tools/call", {"name": "echo", "arguments": {"txt": "typo"}})
    assert result["resultType"] == "complete"
    assert result["isError"] is True
    message = text_of(result)
    assert "echo" in message
    assert "text" in message
    assert "txt" in message


async def test_prompt_arguments_that_fail_validation_are_invalid_params(
    client: MemoryClient,
) -> None:
    error = await rpc_error(client, "prompts/get", {"name": "ask", "arguments": {"topic": 3}})
    assert error.code == -32602
    assert "topic" in error.message


# -- lists -------------------------------------------------------------------------------------


async def test_tools_list_describes_each_tool_in_declaration_order(client: MemoryClient) -> None:
    tools = (await client.request("tools/list", {}))["tools"]
    names = [tool["name"] for tool in tools]
    assert names[:4] == ["echo", "deploy_stack", "wizard", "ask"]
    assert names == [tool["name"] for tool in (await client.request("tools/list", {}))["tools"]]
    echo = tools[0]
    assert echo["description"] == "Say `text` back."
    assert echo["annotations"] == {"readOnlyHint": True}
    assert echo["inputSchema"]["type"] == "object"
    assert echo["inputSchema"]["required"] == ["text"]
    assert "ctx" not in tools[1]["inputSchema"]["properties"]


async def test_prompts_and_resources_are_listed(client: MemoryClient) -> None:
    prompts = (await client.request("prompts/list", {}))["prompts"]
    assert prompts == [
        {
            "name": "ask",
            "description": "A prompt named like the `ask` tool, with the same arguments "
            "(cross-method replay).",
            "arguments": [{"name": "topic", "required": True}],
        }
    ]
    resources = (await client.request("resources/list", {}))["resources"]
    assert [(r["uri"], r["name"], r["mimeType"]) for r in resources] == [
        ("memo://greeting", "greeting", "text/plain")
    ]
    templates = (await client.request("resources/templates/list", {}))["resourceTemplates"]
    assert [t["uriTemplate"] for t in templates] == ["memo://notes/{slug}"]


async def test_list_methods_ignore_mrtr_fields_and_never_ask_for_input(
    client: MemoryClient,
) -> None:
    # mrtr: InputRequiredResult only on tools/call, prompts/get and resources/read.
    for method in ("server/discover", *LIST_METHODS):
        result = await client.request(
            method, {"inputResponses": {"x": accept(text="y")}, "requestState": "junk"}
        )
        assert result["resultType"] == "complete"
        assert "inputRequests" not in result
        assert "requestState" not in result


# -- capabilities, per request -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("tool", "declared", "required"),
    [
        ("deploy_stack", {}, {"elicitation": {"form": {}}}),
        ("deploy_stack", {"elicitation": {"url": {}}}, {"elicitation": {"form": {}}}),
        ("sign_in", {"elicitation": {"form": {}}}, {"elicitation": {"url": {}}}),
        ("sign_in", {"elicitation": {}}, {"elicitation": {"url": {}}}),
        ("roots_count", {"sampling": {}}, {"roots": {}}),
        ("summarise", {"roots": {}}, {"elicitation": {"form": {}}}),
    ],
)
async def test_a_missing_client_capability_is_minus_32021_with_exactly_what_is_missing(
    client: MemoryClient, tool: str, declared: Json, required: Json
) -> None:
    params = {"name": tool, "arguments": {"stack": "s"} if tool == "deploy_stack" else {}}
    if tool == "summarise":
        params["arguments"] = {"topic": "t"}
    error = await rpc_error(client, "tools/call", {**params, "_meta": meta(declared)})
    assert error.code == -32021
    assert error.data == {"requiredCapabilities": required}


async def test_elicitation_declared_as_an_empty_object_means_form_mode(
    client: MemoryClient,
) -> None:
    result = await client.request(
        "tools/call",
        {"name": "deploy_stack", "arguments": {"stack": "s"}, "_meta": meta({"elicitation": {}})},
    )
    assert result["resultType"] == "input_required"


async def test_capabilities_are_never_inferred_from_an_earlier_request(
    client: MemoryClient,
) -> None:
    call = {"name": "deploy_stack", "arguments": {"stack": "s"}}
    first = await client.request("tools/call", {**call, "_meta": meta()})
    assert first["resultType"] == "input_required"
    error = await rpc_error(client, "tools/call", {**call, "_meta": meta({})})
    assert error.code == -32021


async def test_a_request_needs_no_earlier_request_on_any_connection() -> None:
    # Stateless: a fresh session (a new connection) serves a round-2 retry all the same.
    server = make_server()
    first = await MemoryClient(server, capabilities=ALL_CAPABILITIES).request(
        "tools/call", {"name": "ask", "arguments": {"topic": "x"}}
    )
    second = await MemoryClient(server, capabilities=ALL_CAPABILITIES).request(
        "tools/call",
        {
            "name": "ask",
            "arguments": {"topic": "x"},
            "inputResponses": {"answer": accept(text="y")},
            "requestState": first["requestState"],
        },
    )
    assert text_of(second) == "x: y"


# -- the core's own contract -------------------------------------------------------------------


async def test_handle_request_answers_instead_of_raising_for_what_a_client_sends() -> None:
    server = make_server()

    async def notify(method: str, params: dict[str, Any]) -> None:
        raise AssertionError("no notification expected")

    async def ask_client(method: str, params: dict[str, Any]) -> dict[str, Any]:
        raise AssertionError("no client request expected in the modern era")

    peer: Any = SimpleNamespace(notify=notify, request=ask_client)
    weird: list[Json] = [
        {"_meta": meta(), "name": {"nested": True}},
        {"_meta": meta(), "name": "echo", "arguments": {"text": {"not": "a string"}}},
        {"_meta": meta(), "name": "echo", "inputResponses": "x", "requestState": 5},
        {
            "_meta": {
                "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                "io.modelcontextprotocol/clientCapabilities": {"elicitation": "yes"},
            },
            "name": "deploy_stack",
            "arguments": {"stack": "s"},
        },
    ]
    for params in weird:
        response = await server.handle_request(Request(1, "tools/call", params), Session(), peer)
        assert response["id"] == 1
        assert ("result" in response) != ("error" in response)
        if "error" in response:
            assert response["error"]["code"] in (-32600, -32602, -32021)
