"""MRTR dispatch through the server, sans-IO: rounds, answers, requestState, capabilities.

2026-07-28 basic/patterns/mrtr: the handler asks with
`ctx.request_input`; dispatch answers `input_required` with a signed `requestState`; on the
retry it verifies the token BEFORE the handler runs, merges the answers (this round wins) and
calls the same handler again. Bad state is -32602, never a re-prompt; missing answers are a
re-prompt, never an error.
"""

from __future__ import annotations

import base64
import json
import time
from collections import Counter
from collections.abc import Callable

import anyio
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mrtr_runtime import Context, InputRequired, Registry, SamplingResult, sample
from mrtr_runtime._capabilities import ClientCapabilities
from mrtr_runtime._tokens import digest_arguments
from mrtr_runtime.server import Server
from mrtr_runtime.testing import MemoryClient, RpcError, TooManyRounds
from mrtr_runtime.testing._rounds import (
    call_tool_with_inputs,
    default_input_handler,
    request_with_inputs,
)
from support import (
    ALL_CAPABILITIES,
    ARN,
    BOTH_ANSWERS,
    DEPLOY,
    DEPLOY_INPUT_REQUESTS,
    META_SERVER_INFO,
    OTHER_KEY_HEX,
    THIRD_KEY_HEX,
    Json,
    accept,
    canonical,
    make_codec,
    make_server,
    meta,
    next_round,
    rpc_error,
    text_of,
)

pytestmark = pytest.mark.anyio


async def round_one(client: MemoryClient, params: Json = DEPLOY, method: str = "tools/call") -> str:
    result = await client.request(method, params)
    assert result["resultType"] == "input_required", result
    state: str = result["requestState"]
    return state


# -- the two-round deploy example --------------------------------------------------------------


async def test_round_one_of_the_deploy_example_has_the_design_notes_shape(
    client: MemoryClient,
) -> None:
    response = await client.send(
        {"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {**DEPLOY, "_meta": meta()}}
    )
    assert response is not None
    assert set(response) == {"jsonrpc", "id", "result"}
    assert (response["jsonrpc"], response["id"]) == ("2.0", 7)
    result = response["result"]
    # The notes' fields, plus the serverInfo _meta every 2026-07-28 result SHOULD carry.
    assert set(result) == {"resultType", "inputRequests", "requestState", "_meta"}
    assert result["resultType"] == "input_required"
    assert canonical(result["inputRequests"]) == canonical(DEPLOY_INPUT_REQUESTS)
    assert isinstance(result["requestState"], str)
    assert result["requestState"].startswith("m1.")
    assert set(result["_meta"]) == {META_SERVER_INFO}


async def test_round_two_of_the_deploy_example_completes_with_the_design_notes_shape(
    client: MemoryClient, calls: Counter[str]
) -> None:
    state = await round_one(client)
    response = await client.send(
        {
            "jsonrpc": "2.0",
            "id": 8,
            "method": "tools/call",
            "params": {
                **DEPLOY,
                "inputResponses": BOTH_ANSWERS,
                "requestState": state,
                "_meta": meta(),
            },
        }
    )
    assert response is not None
    assert response["id"] == 8
    result = response["result"]
    assert set(result) == {"resultType", "content", "_meta"}
    assert result["resultType"] == "complete"
    assert result["content"] == [{"type": "text", "text": "Deployed prod-api successfully"}]
    assert calls["deploy_stack"] == 2


async def test_the_design_notes_content_only_answers_are_refused_as_invalid_params(
    client: MemoryClient, calls: Counter[str]
) -> None:
    # The notes' round 2 sends {"confirmed": true}; the spec's InputResponse is the whole
    # ElicitResult ({"action", "content"}), and schema.json rejects content alone.
    state = await round_one(client)
    error = await rpc_error(
        client,
        "tools/call",
        {
            **DEPLOY,
            "inputResponses": {"confirm": {"confirmed": True}, "role-arn": {"arn": ARN}},
            "requestState": state,
        },
    )
    assert error.code == -32602
    assert "inputResponses" in error.message
    assert "action" in error.message
    assert calls["deploy_stack"] == 1


async def test_declining_is_an_ordinary_answer_the_handler_branches_on(
    client: MemoryClient,
) -> None:
    state = await round_one(client)
    result = await client.request(
        "tools/call",
        {
            **DEPLOY,
            "inputResponses": {"confirm": {"action": "decline"}, "role-arn": {"action": "cancel"}},
            "requestState": state,
        },
    )
    assert text_of(result) == "Deploy cancelled by user."


async def test_the_client_loop_completes_the_deploy_example(client: MemoryClient) -> None:
    asked: list[Json] = []

    async def elicitation(params: Json) -> Json:
        asked.append(params)
        properties = params["requestedSchema"]["properties"]
        return accept(confirmed=True) if "confirmed" in properties else accept(arn=ARN)

    result = await call_tool_with_inputs(
        client,
        "deploy_stack",
        {"stack": "prod-api"},
        default_input_handler(elicitation=elicitation),
    )
    assert text_of(result) == "Deployed prod-api successfully"
    assert [params["message"] for params in asked] == [
        "Deploy stack 'prod-api' to AWS production?",
        "Provide the IAM role ARN to assume:",
    ]


# -- accumulation, collisions, extra and missing answers ---------------------------------------


async def test_three_rounds_accumulate_answers_when_each_round_sends_only_its_new_key(
    client: MemoryClient, calls: Counter[str]
) -> None:
    first = await client.request("tools/call", {"name": "wizard"})
    assert list(first["inputRequests"]) == ["name"]
    second = await next_round(
        client, "tools/call", {"name": "wizard"}, first, {"name": accept(name="Ada")}
    )
    assert list(second["inputRequests"]) == ["colour"]
    third = await next_round(
        client, "tools/call", {"name": "wizard"}, second, {"colour": accept(colour="red")}
    )
    assert list(third["inputRequests"]) == ["size"]
    final = await next_round(
        client, "tools/call", {"name": "wizard"}, third, {"size": accept(size=3)}
    )
    assert final["structuredContent"] == {
        "name": "Ada",
        "colour": "red",
        "size": 3,
        "seen": ["colour", "name", "size"],
    }
    assert json.loads(text_of(final)) == final["structuredContent"]
    # One handler call per round, each seeing one more answer than the last.
    assert [calls[f"wizard:{n}"] for n in range(4)] == [1, 1, 1, 1]


async def test_an_earlier_answer_cannot_be_replaced_by_sending_it_again(
    client: MemoryClient,
) -> None:
    # Round 3's token asked only "colour": a new "name" is information nobody asked for, so
    # it is ignored (mrtr: unexpected answers SHOULD be ignored) and round 2's answer stands.
    first = await client.request("tools/call", {"name": "wizard"})
    second = await next_round(
        client, "tools/call", {"name": "wizard"}, first, {"name": accept(name="Ada")}
    )
    third = await next_round(
        client,
        "tools/call",
        {"name": "wizard"},
        second,
        {"colour": accept(colour="red"), "name": accept(name="Grace")},
    )
    final = await next_round(
        client, "tools/call", {"name": "wizard"}, third, {"size": accept(size=1)}
    )
    assert final["structuredContent"]["name"] == "Ada"


async def test_unknown_extra_answers_are_ignored(client: MemoryClient) -> None:
    first = await client.request("tools/call", {"name": "wizard"})
    second = await client.request(
        "tools/call",
        {
            "name": "wizard",
            "inputResponses": {
                "name": accept(name="Ada"),
                "bogus": accept(anything="goes"),
                "odd-shape": {"not": "an elicit result"},
            },
            "requestState": first["requestState"],
        },
    )
    assert list(second["inputRequests"]) == ["colour"]
    third = await next_round(
        client, "tools/call", {"name": "wizard"}, second, {"colour": accept(colour="blue")}
    )
    final = await next_round(
        client, "tools/call", {"name": "wizard"}, third, {"size": accept(size=2)}
    )
    assert final["structuredContent"]["seen"] == ["colour", "name", "size"]


async def test_a_missing_answer_is_asked_again_not_an_error(
    client: MemoryClient, calls: Counter[str]
) -> None:
    state = await round_one(client)
    again = await client.request(
        "tools/call",
        {**DEPLOY, "inputResponses": {"confirm": accept(confirmed=True)}, "requestState": state},
    )
    assert again["resultType"] == "input_required"
    assert list(again["inputRequests"]) == ["role-arn"]
    assert again["requestState"] != state
    final = await client.request(
        "tools/call",
        {
            **DEPLOY,
            "inputResponses": {"role-arn": accept(arn=ARN)},
            "requestState": again["requestState"],
        },
    )
    assert text_of(final) == "Deployed prod-api successfully"
    assert calls["deploy_stack"] == 3


async def test_a_retry_with_state_but_no_answers_asks_everything_again(
    client: MemoryClient,
) -> None:
    state = await round_one(client)
    again = await client.request("tools/call", {**DEPLOY, "requestState": state})
    assert again["resultType"] == "input_required"
    assert canonical(again["inputRequests"]) == canonical(DEPLOY_INPUT_REQUESTS)


async def test_absent_arguments_and_empty_arguments_are_the_same_call(
    client: MemoryClient,
) -> None:
    first = await client.request("tools/call", {"name": "wizard"})
    second = await next_round(
        client,
        "tools/call",
        {"name": "wizard", "arguments": {}},
        first,
        {"name": accept(name="Ada")},
    )
    assert list(second["inputRequests"]) == ["colour"]


async def test_a_state_only_round_is_legal_and_the_retry_completes(client: MemoryClient) -> None:
    # mrtr: at least one of inputRequests/requestState; requestState alone is "load shedding".
    first = await client.request("tools/call", {"name": "load_shed"})
    assert first["resultType"] == "input_required"
    assert "inputRequests" not in first
    assert isinstance(first["requestState"], str)
    final = await client.request(
        "tools/call", {"name": "load_shed", "requestState": first["requestState"]}
    )
    assert text_of(final) == "served after a state-only round"


# -- answers of the wrong shape ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("answer", "fragment"),
    [
        ({"action": "maybe"}, "action"),
        ({"content": {"confirmed": True}}, "action"),
        ({"action": "accept", "content": "yes"}, "content"),
    ],
)
async def test_an_answer_that_is_not_a_result_of_the_asked_method_is_invalid_params(
    client: MemoryClient, calls: Counter[str], answer: Json, fragment: str
) -> None:
    state = await round_one(client)
    error = await rpc_error(
        client,
        "tools/call",
        {**DEPLOY, "inputResponses": {"confirm": answer}, "requestState": state},
    )
    assert error.code == -32602
    assert error.message.startswith("Invalid inputResponses['confirm']: ")
    assert fragment in error.message
    assert calls["deploy_stack"] == 1


async def test_a_wrong_sampling_or_roots_answer_is_invalid_params(client: MemoryClient) -> None:
    sampling_only = {
        "name": "summarise",
        "arguments": {"topic": "t"},
        "_meta": meta({"sampling": {}}),
    }
    state = await round_one(client, sampling_only)
    error = await rpc_error(
        client,
        "tools/call",
        {**sampling_only, "inputResponses": {"model": {"role": "robot"}}, "requestState": state},
    )
    assert error.code == -32602
    assert "'model'" in error.message
    state = await round_one(client, {"name": "roots_count"})
    error = await rpc_error(
        client,
        "tools/call",
        {
            "name": "roots_count",
            "inputResponses": {"roots": {"roots": "none"}},
            "requestState": state,
        },
    )
    assert error.code == -32602
    assert "'roots'" in error.message


@pytest.mark.parametrize("loose", ["perhaps", "yes", 1, 0, "true", None])
async def test_content_that_does_not_fit_the_form_is_asked_again_with_the_reason(
    client: MemoryClient, calls: Counter[str], loose: object
) -> None:
    # Strict, as the form's JSON Schema reads: no string-to-bool or int-to-bool coercion.
    # The handler sees no answer for the key, asks it again, and the user learns why; the
    # valid answer to the other question stays in the token; nothing is deployed.
    state = await round_one(client)
    result = await client.request(
        "tools/call",
        {
            **DEPLOY,
            "inputResponses": {"confirm": accept(confirmed=loose), "role-arn": accept(arn=ARN)},
            "requestState": state,
        },
    )
    assert result["resultType"] == "input_required"
    assert list(result["inputRequests"]) == ["confirm"]
    message = result["inputRequests"]["confirm"]["params"]["message"]
    assert message.startswith("That answer was not valid (confirmed: Input should be a valid bool")
    assert message.endswith("Deploy stack 'prod-api' to AWS production?")
    final = await client.request(
        "tools/call",
        {
            **DEPLOY,
            "inputResponses": {"confirm": accept(confirmed=True)},
            "requestState": result["requestState"],
        },
    )
    assert text_of(final) == "Deployed prod-api successfully"
    assert calls["deploy_stack"] == 3


async def test_content_breaking_the_requested_pattern_is_asked_again(
    client: MemoryClient,
) -> None:
    state = await round_one(client)
    result = await client.request(
        "tools/call",
        {
            **DEPLOY,
            "inputResponses": {"confirm": accept(confirmed=True), "role-arn": accept(arn="root")},
            "requestState": state,
        },
    )
    assert list(result["inputRequests"]) == ["role-arn"]
    message = result["inputRequests"]["role-arn"]["params"]["message"]
    assert message.startswith("That answer was not valid (arn: String should match pattern")


async def test_a_malformed_answer_to_a_question_not_asked_is_ignored_too(
    client: MemoryClient,
) -> None:
    # "name" was asked in round 1, not in the round this token closes: whatever comes under
    # that key now, well-formed or not, is ignored rather than merged or judged.
    first = await client.request("tools/call", {"name": "wizard"})
    second = await next_round(
        client, "tools/call", {"name": "wizard"}, first, {"name": accept(name="Ada")}
    )
    third = await next_round(
        client,
        "tools/call",
        {"name": "wizard"},
        second,
        {"colour": accept(colour="red"), "name": {"action": "shrug"}},
    )
    assert list(third["inputRequests"]) == ["size"]


async def test_a_sampling_answer_is_validated_once_into_the_model_the_handler_reads() -> None:
    # Dispatch checks the answer before the handler runs (into SamplingResult, strictly), and
    # the handler's read hands out that very instance instead of validating it again.
    registry = Registry()
    same: list[bool] = []

    @registry.tool()
    async def ask_model(*, ctx: Context) -> str | InputRequired:
        answer = ctx.input_response_as("model", SamplingResult)
        if answer is None:
            return ctx.request_input({"model": sample("Say hi.", max_tokens=5)})
        same.append(answer is ctx.input_response_as("model", SamplingResult))
        return answer.text

    server = Server(name="support-server", version="1", registry=registry, signing=make_codec())
    client = MemoryClient(server, capabilities=ALL_CAPABILITIES)
    first = await client.request("tools/call", {"name": "ask_model"})
    reply = {"role": "assistant", "content": {"type": "text", "text": "hi"}, "model": "m"}
    final = await client.request(
        "tools/call",
        {
            "name": "ask_model",
            "requestState": first["requestState"],
            "inputResponses": {"model": reply},
        },
    )
    assert text_of(final) == "hi"
    assert same == [True]


# -- malformed inputResponses ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("responses", "fragment"),
    [
        (None, "must be an object"),
        ([accept(confirmed=True)], "must be an object"),
        ("confirm", "must be an object"),
        ({"confirm": None}, "'confirm'"),
        ({"confirm": "yes"}, "'confirm'"),
        ({"confirm": True}, "'confirm'"),
        ({"confirm": [accept(confirmed=True)]}, "'confirm'"),
        ({f"k{n}": accept(text="x") for n in range(65)}, "more than 64"),
        ({"confirm": accept(confirmed=True, padding="x" * 40_000)}, "larger than"),
    ],
    ids=[
        "null",
        "list",
        "string",
        "null-answer",
        "string-answer",
        "bool-answer",
        "list-answer",
        "too-many-keys",
        "too-large",
    ],
)
async def test_malformed_input_responses_are_invalid_params_and_the_handler_does_not_run(
    client: MemoryClient, calls: Counter[str], responses: object, fragment: str
) -> None:
    state = await round_one(client)
    error = await rpc_error(
        client, "tools/call", {**DEPLOY, "inputResponses": responses, "requestState": state}
    )
    assert error.code == -32602
    assert error.message.startswith("Invalid inputResponses")
    assert fragment in error.message
    assert calls["deploy_stack"] == 1


@pytest.mark.parametrize("number", [float("nan"), float("inf")])
async def test_answers_holding_non_finite_numbers_are_invalid_params(
    client: MemoryClient, calls: Counter[str], number: float
) -> None:
    state = await round_one(client)
    error = await rpc_error(
        client,
        "tools/call",
        {**DEPLOY, "inputResponses": {"confirm": accept(confirmed=number)}, "requestState": state},
    )
    assert error.code == -32602
    assert calls["deploy_stack"] == 1


async def test_answers_that_together_outgrow_a_token_are_invalid_params_not_a_crash(
    client: MemoryClient,
) -> None:
    big = "x" * 30_000
    first = await client.request("tools/call", {"name": "wizard"})
    second = await next_round(
        client, "tools/call", {"name": "wizard"}, first, {"name": accept(name=big)}
    )
    assert second["resultType"] == "input_required"
    error = await rpc_error(
        client,
        "tools/call",
        {
            "name": "wizard",
            "inputResponses": {"colour": accept(colour="red", note=big)},
            "requestState": second["requestState"],
        },
    )
    assert error.code == -32602


# -- requestState: tampering and replay --------------------------------------------------------


def flip(token: str, index: int) -> str:
    alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
    current = token[index]
    replacement = (
        alphabet[(alphabet.index(current) + 1) % len(alphabet)] if current in alphabet else "A"
    )
    return token[:index] + replacement + token[index + 1 :]


def swap_payload_and_signature(token: str) -> str:
    version, kid, payload, tag = token.split(".")
    return ".".join((version, kid, tag, payload))


TAMPERINGS: dict[str, Callable[[str], object]] = {
    "flip-payload-middle": lambda token: flip(token, len(token) // 2),
    "flip-first-payload-char": lambda token: flip(token, len("m1.12345678.")),
    "flip-last-char": lambda token: flip(token, len(token) - 1),
    "flip-kid": lambda token: flip(token, 3),
    "flip-version": lambda token: "m2" + token[2:],
    "append-text": lambda token: token + "-TAMPERED",
    "append-dot": lambda token: token + ".",
    "truncate-one": lambda token: token[:-1],
    "truncate-half": lambda token: token[: len(token) // 2],
    "drop-signature": lambda token: token.rsplit(".", 1)[0],
    "swap-payload-signature": swap_payload_and_signature,
    "uppercase": lambda token: token.upper(),
    "padded": lambda token: token + "==",
    "whitespace": lambda token: f" {token} ",
    "empty": lambda token: "",
    "number": lambda token: 12345,
    "null": lambda token: None,
    "object": lambda token: {"token": token},
}


@pytest.mark.parametrize("tamper", list(TAMPERINGS.values()), ids=list(TAMPERINGS))
async def test_a_tampered_request_state_is_invalid_params_and_the_handler_never_runs(
    client: MemoryClient, calls: Counter[str], tamper: Callable[[str], object]
) -> None:
    state = await round_one(client)
    error = await rpc_error(
        client,
        "tools/call",
        {**DEPLOY, "inputResponses": BOTH_ANSWERS, "requestState": tamper(state)},
    )
    assert error.code == -32602
    assert error.message.startswith("Invalid requestState: ")
    assert calls["deploy_stack"] == 1


async def test_a_rejection_never_echoes_the_token_or_the_answers(client: MemoryClient) -> None:
    state = await round_one(client)
    error = await rpc_error(
        client,
        "tools/call",
        {**DEPLOY, "inputResponses": BOTH_ANSWERS, "requestState": state + "x"},
    )
    assert state[3:20] not in error.message
    assert ARN not in error.message
    assert error.data is None


async def test_a_token_from_another_tool_is_refused_before_that_tool_runs(
    client: MemoryClient, calls: Counter[str]
) -> None:
    state = await round_one(client, {"name": "ask", "arguments": {"topic": "tea"}})
    error = await rpc_error(
        client,
        "tools/call",
        {
            "name": "ask_other",
            "arguments": {"topic": "tea"},
            "inputResponses": {"answer": accept(text="green")},
            "requestState": state,
        },
    )
    assert (error.code, error.message) == (-32602, "Invalid requestState: binding")
    assert calls["ask_other"] == 0


async def test_a_token_from_a_tool_is_refused_by_the_prompt_of_the_same_name(
    client: MemoryClient, calls: Counter[str]
) -> None:
    state = await round_one(client, {"name": "ask", "arguments": {"topic": "tea"}})
    error = await rpc_error(
        client,
        "prompts/get",
        {
            "name": "ask",
            "arguments": {"topic": "tea"},
            "inputResponses": {"answer": accept(text="green")},
            "requestState": state,
        },
    )
    assert (error.code, error.message) == (-32602, "Invalid requestState: binding")
    assert calls["prompt:ask"] == 0


@pytest.mark.parametrize(
    "arguments",
    [{"topic": "coffee"}, {"topic": "Tea"}, {"topic": "tea "}],
)
async def test_a_token_for_other_arguments_is_refused_before_the_handler_runs(
    client: MemoryClient, calls: Counter[str], arguments: Json
) -> None:
    state = await round_one(client, {"name": "ask", "arguments": {"topic": "tea"}})
    error = await rpc_error(
        client,
        "tools/call",
        {
            "name": "ask",
            "arguments": arguments,
            "inputResponses": {"answer": accept(text="green")},
            "requestState": state,
        },
    )
    assert (error.code, error.message) == (-32602, "Invalid requestState: binding")
    assert calls["ask"] == 1


async def test_a_token_for_one_resource_is_refused_by_another(client: MemoryClient) -> None:
    state = await round_one(client, {"uri": "memo://greeting"}, method="resources/read")
    error = await rpc_error(
        client,
        "resources/read",
        {
            "uri": "memo://notes/x",
            "inputResponses": {"name": accept(name="A")},
            "requestState": state,
        },
    )
    assert (error.code, error.message) == (-32602, "Invalid requestState: binding")


async def test_argument_key_order_does_not_change_the_binding(client: MemoryClient) -> None:
    params = {"name": "ask", "arguments": {"topic": "tea"}}
    state = await round_one(client, params)
    result = await client.request(
        "tools/call",
        {
            "arguments": {"topic": "tea"},
            "requestState": state,
            "name": "ask",
            "inputResponses": {"answer": accept(text="green")},
        },
    )
    assert text_of(result) == "tea: green"


# -- requestState: expiry, keys, restarts, forgeries -------------------------------------------


async def test_an_expired_request_state_starts_the_questions_over(calls: Counter[str]) -> None:
    # An authentic token bound to this call, only past its expiry: its answers are too old
    # to act on, so the handler runs with none and asks again, with a fresh token.
    now = [1_900_000_000.0]
    client = MemoryClient(
        make_server(codec=make_codec(ttl_seconds=60, clock=lambda: now[0]), calls=calls),
        capabilities=ALL_CAPABILITIES,
    )
    state = await round_one(client)
    now[0] += 59
    still_fresh = await client.request("tools/call", {**DEPLOY, "requestState": state})
    assert still_fresh["resultType"] == "input_required"
    now[0] += 1
    again = await client.request(
        "tools/call", {**DEPLOY, "inputResponses": BOTH_ANSWERS, "requestState": state}
    )
    assert again["resultType"] == "input_required"
    assert canonical(again["inputRequests"]) == canonical(DEPLOY_INPUT_REQUESTS)
    assert again["requestState"] != state
    assert calls["deploy_stack"] == 3
    final = await client.request(
        "tools/call",
        {**DEPLOY, "inputResponses": BOTH_ANSWERS, "requestState": again["requestState"]},
    )
    assert text_of(final) == "Deployed prod-api successfully"


async def test_a_token_minted_before_a_restart_completes_on_a_new_server_with_the_same_key() -> (
    None
):
    before = MemoryClient(make_server(), capabilities=ALL_CAPABILITIES)
    state = await round_one(before)
    calls_after: Counter[str] = Counter()
    after = MemoryClient(make_server(calls=calls_after), capabilities=ALL_CAPABILITIES)
    result = await after.request(
        "tools/call", {**DEPLOY, "inputResponses": BOTH_ANSWERS, "requestState": state}
    )
    assert text_of(result) == "Deployed prod-api successfully"
    assert calls_after["deploy_stack"] == 1


async def test_a_token_signed_with_a_previous_key_is_accepted_after_rotation() -> None:
    state = await round_one(MemoryClient(make_server(), capabilities=ALL_CAPABILITIES))
    rotated = MemoryClient(
        make_server(codec=make_codec(OTHER_KEY_HEX, previous=(make_key_hex(),))),
        capabilities=ALL_CAPABILITIES,
    )
    again = await rotated.request(
        "tools/call",
        {**DEPLOY, "inputResponses": {"confirm": accept(confirmed=True)}, "requestState": state},
    )
    # The next round is signed with the new current key.
    new_kid = again["requestState"].split(".")[1]
    assert new_kid != state.split(".")[1]
    final = await MemoryClient(
        make_server(codec=make_codec(OTHER_KEY_HEX)), capabilities=ALL_CAPABILITIES
    ).request(
        "tools/call",
        {
            **DEPLOY,
            "inputResponses": {"role-arn": accept(arn=ARN)},
            "requestState": again["requestState"],
        },
    )
    assert text_of(final) == "Deployed prod-api successfully"


def make_key_hex() -> str:
    from support import KEY_HEX

    return KEY_HEX


async def test_a_token_signed_with_a_key_the_server_does_not_hold_is_refused() -> None:
    state = await round_one(MemoryClient(make_server(), capabilities=ALL_CAPABILITIES))
    calls: Counter[str] = Counter()
    stranger = MemoryClient(
        make_server(codec=make_codec(OTHER_KEY_HEX, previous=(THIRD_KEY_HEX,)), calls=calls),
        capabilities=ALL_CAPABILITIES,
    )
    error = await rpc_error(
        stranger, "tools/call", {**DEPLOY, "inputResponses": BOTH_ANSWERS, "requestState": state}
    )
    assert (error.code, error.message) == (-32602, "Invalid requestState: unknown key")
    assert calls["deploy_stack"] == 0


def forged_plaintext_token(arguments: Json, answers: Json) -> str:
    payload = {
        "a": answers,
        "d": digest_arguments(arguments),
        "e": int(time.time()) + 3600,
        "m": "tools/call",
        "q": {},
        "t": "deploy_stack",
    }
    body = json.dumps(payload, sort_keys=True, separators=(",", ":")).encode()
    return "p1." + base64.urlsafe_b64encode(body).rstrip(b"=").decode()


async def test_a_forged_plaintext_token_is_refused_by_a_signing_server(calls: Counter[str]) -> None:
    client = MemoryClient(make_server(calls=calls), capabilities=ALL_CAPABILITIES)
    forged = forged_plaintext_token(DEPLOY["arguments"], BOTH_ANSWERS)
    error = await rpc_error(client, "tools/call", {**DEPLOY, "requestState": forged})
    assert (error.code, error.message) == (-32602, "Invalid requestState: signature")
    assert calls["deploy_stack"] == 0


def test_any_single_character_change_to_a_valid_token_is_rejected() -> None:
    server = make_server()

    async def mint() -> str:
        return await round_one(MemoryClient(server, capabilities=ALL_CAPABILITIES))

    token = anyio.run(mint)

    @settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(
        index=st.integers(min_value=0, max_value=len(token) - 1),
        char=st.characters(codec="ascii", exclude_characters="\n"),
    )
    def mutated_token_is_rejected(index: int, char: str) -> None:
        mutated = token[:index] + char + token[index + 1 :]
        if mutated == token:
            return
        calls: Counter[str] = Counter()
        client = MemoryClient(make_server(calls=calls), capabilities=ALL_CAPABILITIES)

        async def attempt() -> RpcError:
            return await rpc_error(
                client,
                "tools/call",
                {**DEPLOY, "inputResponses": BOTH_ANSWERS, "requestState": mutated},
            )

        error = anyio.run(attempt)
        assert error.code == -32602
        assert error.message.startswith("Invalid requestState: ")
        assert calls["deploy_stack"] == 0

    mutated_token_is_rejected()


# -- capabilities and degradation --------------------------------------------------------------


async def test_a_handler_degrades_to_sampling_when_the_client_cannot_elicit(
    client: MemoryClient,
) -> None:
    params = {"name": "summarise", "arguments": {"topic": "MRTR"}, "_meta": meta({"sampling": {}})}
    first = await client.request("tools/call", params)
    assert {key: request["method"] for key, request in first["inputRequests"].items()} == {
        "model": "sampling/createMessage"
    }
    assert first["inputRequests"]["model"]["params"] == {
        "messages": [
            {"role": "user", "content": {"type": "text", "text": "Summarise MRTR in one line."}}
        ],
        "maxTokens": 50,
    }
    answer = {"role": "assistant", "content": {"type": "text", "text": "rounds"}, "model": "m"}
    final = await client.request(
        "tools/call",
        {**params, "inputResponses": {"model": answer}, "requestState": first["requestState"]},
    )
    assert text_of(final) == "model: rounds"


async def test_the_same_handler_elicits_when_the_client_can(client: MemoryClient) -> None:
    first = await client.request(
        "tools/call", {"name": "summarise", "arguments": {"topic": "MRTR"}}
    )
    assert list(first["inputRequests"]) == ["form"]


async def test_a_handler_never_sends_an_input_request_the_client_did_not_declare(
    client: MemoryClient,
) -> None:
    # mrtr: "Servers MUST NOT send an inputRequests that the client has not declared".
    declarations: list[Json] = [{}, {"sampling": {}}, {"roots": {}}, {"elicitation": {"url": {}}}]
    for declared in declarations:
        for tool, arguments in (
            ("deploy_stack", {"stack": "s"}),
            ("summarise", {"topic": "t"}),
            ("roots_count", {}),
            ("sign_in", {}),
        ):
            try:
                result = await client.request(
                    "tools/call", {"name": tool, "arguments": arguments, "_meta": meta(declared)}
                )
            except RpcError as error:
                assert error.code == -32021
                continue
            capabilities = ClientCapabilities(declared)
            for request in result.get("inputRequests", {}).values():
                method = request["method"]
                if method == "elicitation/create":
                    mode = request["params"].get("mode", "form")
                    assert (
                        capabilities.elicitation_url
                        if mode == "url"
                        else capabilities.elicitation_form
                    )
                elif method == "sampling/createMessage":
                    assert capabilities.sampling
                else:
                    assert capabilities.roots


async def test_url_mode_elicitation_has_no_elicitation_id_in_the_modern_era(
    client: MemoryClient,
) -> None:
    first = await client.request("tools/call", {"name": "sign_in"})
    assert first["inputRequests"] == {
        "login": {
            "method": "elicitation/create",
            "params": {
                "mode": "url",
                "message": "Sign in to continue",
                "url": "https://example.com/login",
            },
        }
    }
    final = await next_round(
        client, "tools/call", {"name": "sign_in"}, first, {"login": {"action": "accept"}}
    )
    assert text_of(final) == "sign-in: accept"


async def test_roots_are_asked_as_a_bare_method(client: MemoryClient) -> None:
    first = await client.request("tools/call", {"name": "roots_count"})
    assert first["inputRequests"] == {"roots": {"method": "roots/list"}}
    final = await client.request(
        "tools/call",
        {
            "name": "roots_count",
            "inputResponses": {
                "roots": {"roots": [{"uri": "file:///a"}, {"uri": "file:///b", "name": "b"}]}
            },
            "requestState": first["requestState"],
        },
    )
    assert text_of(final) == "2 roots"


# -- prompts and resources ---------------------------------------------------------------------


async def test_prompts_get_runs_mrtr_rounds(client: MemoryClient) -> None:
    params = {"name": "ask", "arguments": {"topic": "tea"}}
    first = await client.request("prompts/get", params)
    assert first["resultType"] == "input_required"
    assert list(first["inputRequests"]) == ["answer"]
    final = await client.request(
        "prompts/get",
        {
            **params,
            "inputResponses": {"answer": accept(text="green")},
            "requestState": first["requestState"],
        },
    )
    assert final["resultType"] == "complete"
    assert final["messages"] == [
        {"role": "user", "content": {"type": "text", "text": "tea: green"}}
    ]


async def test_resources_read_runs_mrtr_rounds_through_the_client_loop(
    client: MemoryClient,
) -> None:
    async def elicitation(params: Json) -> Json:
        return accept(name="Ada")

    result = await request_with_inputs(
        client,
        "resources/read",
        {"uri": "memo://greeting"},
        default_input_handler(elicitation=elicitation),
    )
    assert result["contents"] == [
        {"uri": "memo://greeting", "mimeType": "text/plain", "text": "Hello, Ada!"}
    ]


# -- the client's round cap --------------------------------------------------------------------


async def test_the_client_round_cap_makes_exactly_max_rounds_plus_one_calls(
    client: MemoryClient, calls: Counter[str]
) -> None:
    asked: list[Json] = []

    async def elicitation(params: Json) -> Json:
        asked.append(params)
        return accept(text="again")

    with pytest.raises(TooManyRounds):
        await call_tool_with_inputs(
            client, "always_ask", {}, default_input_handler(elicitation=elicitation), max_rounds=3
        )
    assert calls["always_ask"] == 4
    assert len(asked) == 3


# -- progress ----------------------------------------------------------------------------------


async def test_progress_is_sent_only_with_a_progress_token_and_only_increasing(
    client: MemoryClient,
) -> None:
    await client.request("tools/call", {"name": "progress_steps"})
    assert client.notifications == []
    await client.request(
        "tools/call", {"name": "progress_steps", "_meta": meta(progressToken="tok-1")}
    )
    sent = [note["params"] for note in client.notifications]
    assert all(note["method"] == "notifications/progress" for note in client.notifications)
    assert [params["progress"] for params in sent] == [1.0, 2.0, 3.0]
    assert all(params["progressToken"] == "tok-1" for params in sent)
    assert sent[0] == {
        "progressToken": "tok-1",
        "progress": 1.0,
        "total": 3.0,
        "message": "step 1.0",
    }
    assert sent[-1] == {"progressToken": "tok-1", "progress": 3.0}


@pytest.mark.parametrize("token", [0, 7, "t"])
async def test_integer_and_string_progress_tokens_are_echoed(
    client: MemoryClient, token: object
) -> None:
    await client.request(
        "tools/call", {"name": "progress_steps", "_meta": meta(progressToken=token)}
    )
    assert {note["params"]["progressToken"] for note in client.notifications} == {token}


@pytest.mark.parametrize("token", [True, None, 1.5, {"t": 1}])
async def test_a_progress_token_of_another_type_is_ignored(
    client: MemoryClient, token: object
) -> None:
    result = await client.request(
        "tools/call", {"name": "progress_steps", "_meta": meta(progressToken=token)}
    )
    assert text_of(result) == "done"
    assert client.notifications == []


async def test_a_server_instance_holds_no_round_state(calls: Counter[str]) -> None:
    # Two servers, one key: rounds may alternate between them freely.
    servers: list[Server] = [make_server(calls=calls), make_server(calls=calls)]
    result = await MemoryClient(servers[0], capabilities=ALL_CAPABILITIES).request(
        "tools/call", {"name": "wizard"}
    )
    answers = [
        {"name": accept(name="Ada")},
        {"colour": accept(colour="green")},
        {"size": accept(size=9)},
    ]
    for turn, answer in enumerate(answers, start=1):
        result = await MemoryClient(servers[turn % 2], capabilities=ALL_CAPABILITIES).request(
            "tools/call",
            {"name": "wizard", "inputResponses": answer, "requestState": result["requestState"]},
        )
    assert result["structuredContent"]["size"] == 9
