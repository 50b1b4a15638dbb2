"""An answer counts only if this server asked for it: a confirmation proves the user was asked.

2026-07-28 basic/patterns/mrtr: the server SHOULD ignore information in `inputResponses` it did
not ask for, and MUST treat `requestState` as attacker-controlled. Here that becomes one rule:
an answer is taken only for a key that a verified requestState records as asked in the round
it closes; everything else is ignored, never shown to a handler and never signed. A tool may
name keys it takes unasked (`accept_unasked`), visibly, in its decorator.
"""

from __future__ import annotations

import base64
import json
from collections import Counter
from typing import Any

import pytest
from pydantic import BaseModel

from mrtr_runtime import Context, InputRequired, Registry, elicit_form
from mrtr_runtime._answers import ElicitResult
from mrtr_runtime.testing import MemoryClient, RpcError
from support import (
    ALL_CAPABILITIES,
    ARN,
    BOTH_ANSWERS,
    DEPLOY,
    DEPLOY_INPUT_REQUESTS,
    accept,
    canonical,
    make_server,
    next_round,
    text_of,
)

pytestmark = pytest.mark.anyio


def signed_answers(token: str) -> dict[str, Any]:
    """The answers a token carries (its payload is signed, not encrypted)."""
    payload = token.split(".")[2]
    data: dict[str, Any] = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
    answers: dict[str, Any] = data["a"]
    return answers


async def test_answers_sent_with_the_first_call_are_ignored() -> None:
    calls: Counter[str] = Counter()
    client = MemoryClient(make_server(calls=calls), capabilities=ALL_CAPABILITIES)
    result = await client.request("tools/call", {**DEPLOY, "inputResponses": BOTH_ANSWERS})
    assert result["resultType"] == "input_required"
    assert canonical(result["inputRequests"]) == canonical(DEPLOY_INPUT_REQUESTS)
    assert signed_answers(result["requestState"]) == {}


async def test_a_client_without_elicitation_cannot_deploy_by_pre_answering() -> None:
    client = MemoryClient(make_server(), capabilities={})
    with pytest.raises(RpcError) as raised:
        await client.request("tools/call", {**DEPLOY, "inputResponses": BOTH_ANSWERS})
    assert raised.value.code == -32021


async def test_a_pre_answered_confirmation_is_never_signed_into_the_next_token() -> None:
    client = MemoryClient(make_server(), capabilities=ALL_CAPABILITIES)
    result = await client.request(
        "tools/call", {**DEPLOY, "inputResponses": {"confirm": BOTH_ANSWERS["confirm"]}}
    )
    assert sorted(result["inputRequests"]) == ["confirm", "role-arn"]
    assert "confirm" not in signed_answers(result["requestState"])


async def test_junk_keys_are_never_signed_into_a_token() -> None:
    client = MemoryClient(make_server(), capabilities=ALL_CAPABILITIES)
    junk = {f"junk-{n}": accept(x="y" * 100) for n in range(20)}
    first = await client.request("tools/call", {"name": "wizard", "inputResponses": junk})
    assert signed_answers(first["requestState"]) == {}
    second = await next_round(
        client,
        "tools/call",
        {"name": "wizard"},
        first,
        {**junk, "name": accept(name="Ada"), "colour": accept(colour="red")},
    )
    # Only "name" was asked in round 1; "colour" is asked next, not taken ahead of its turn.
    assert list(second["inputRequests"]) == ["colour"]
    assert set(signed_answers(second["requestState"])) == {"name"}


async def test_a_second_round_cannot_add_answers_the_handler_did_not_ask_for() -> None:
    calls: Counter[str] = Counter()
    client = MemoryClient(make_server(calls=calls), capabilities=ALL_CAPABILITIES)
    first = await client.request("tools/call", {"name": "wizard"})
    second = await next_round(
        client,
        "tools/call",
        {"name": "wizard"},
        first,
        {"name": accept(name="Ada"), "size": accept(size=3)},
    )
    third = await next_round(
        client, "tools/call", {"name": "wizard"}, second, {"colour": accept(colour="red")}
    )
    assert list(third["inputRequests"]) == ["size"]


class Name(BaseModel):
    name: str


def opted_in_registry() -> Registry:
    registry = Registry()

    @registry.tool(accept_unasked=("user_name",))
    async def greet(*, ctx: Context) -> str | InputRequired:
        """Greets; a client may answer `user_name` before being asked."""
        answer = ctx.input_response_as("user_name", ElicitResult[Name])
        if answer is None or answer.content is None:
            return ctx.request_input({"user_name": elicit_form("Your name?", Name)})
        return f"Hello, {answer.content.name}!"

    return registry


async def test_a_tool_may_opt_in_to_named_unasked_answers_and_only_those() -> None:
    client = MemoryClient(make_server(registry=opted_in_registry()), capabilities=ALL_CAPABILITIES)
    result = await client.request(
        "tools/call",
        {
            "name": "greet",
            "inputResponses": {"user_name": accept(name="Ada"), "other": accept(x=1)},
        },
    )
    assert text_of(result) == "Hello, Ada!"


async def test_an_opted_in_unasked_answer_is_still_validated_strictly() -> None:
    client = MemoryClient(make_server(registry=opted_in_registry()), capabilities=ALL_CAPABILITIES)
    result = await client.request(
        "tools/call", {"name": "greet", "inputResponses": {"user_name": accept(name=12345)}}
    )
    assert result["resultType"] == "input_required"
    message = result["inputRequests"]["user_name"]["params"]["message"]
    assert message.startswith("That answer was not valid (name: Input should be a valid string")


def test_accept_unasked_takes_keys_not_one_string() -> None:
    with pytest.raises(TypeError):
        Registry().tool(accept_unasked="user_name")


async def test_legacy_pre_answers_are_ignored_and_the_user_is_asked() -> None:
    asked: list[str] = []

    async def elicit(params: dict[str, Any]) -> dict[str, Any]:
        asked.append(params["message"])
        if "IAM role" in params["message"]:
            return accept(arn=ARN)
        return {"action": "decline"}

    client = MemoryClient(make_server(), capabilities=ALL_CAPABILITIES, elicitation=elicit)
    await client.initialize()
    result = await client.request("tools/call", {**DEPLOY, "inputResponses": BOTH_ANSWERS})
    assert text_of(result) == "Deploy cancelled by user."
    # The user declined "Deploy?": the role question that came after it was never asked.
    assert asked == ["Deploy stack 'prod-api' to AWS production?"]


async def test_legacy_content_that_does_not_fit_is_asked_again_with_the_reason() -> None:
    replies = [accept(confirmed="yes"), accept(arn=ARN), accept(confirmed=True)]
    asked: list[str] = []

    async def elicit(params: dict[str, Any]) -> dict[str, Any]:
        asked.append(params["message"])
        return replies[len(asked) - 1]

    client = MemoryClient(make_server(), capabilities=ALL_CAPABILITIES, elicitation=elicit)
    await client.initialize()
    result = await client.request("tools/call", DEPLOY)
    assert text_of(result) == "Deployed prod-api successfully"
    assert asked[2].startswith("That answer was not valid (confirmed: Input should be a valid")


async def test_a_legacy_clients_error_message_is_quoted_short() -> None:
    async def refuse(params: dict[str, Any]) -> dict[str, Any]:
        raise RpcError(-1, "A" * 100_000)

    client = MemoryClient(make_server(), elicitation=refuse)
    await client.initialize()
    result = await client.request("tools/call", DEPLOY)
    assert result["isError"] is True
    assert len(text_of(result)) < 300
    assert "(100000 characters)" in text_of(result)
