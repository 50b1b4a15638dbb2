"""The tool-author API added with the restructure: state across rounds, narrowing answers, results.

`ctx.request_input(..., state=...)` signs a small JSON value into the requestState and gives it
back as `ctx.state` next round (capped at MAX_STATE_BYTES); `ctx.form_answer` narrows an
elicitation answer to Accepted / Declined / Cancelled / None; `ToolResult.of(summary,
structured=model)` gives structured content with its text in one call.
"""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest
from pydantic import BaseModel

from mrtr_runtime import (
    Accepted,
    Cancelled,
    Context,
    Declined,
    InputRequired,
    Registry,
    ToolResult,
    elicit_form,
)
from mrtr_runtime._context import MAX_STATE_BYTES
from mrtr_runtime.testing import MemoryClient, RpcError
from support import ALL_CAPABILITIES, accept, make_server, next_round, text_of

pytestmark = pytest.mark.anyio


class Pick(BaseModel):
    colour: str


def payload(token: str) -> dict[str, Any]:
    encoded = token.split(".")[2]
    data: dict[str, Any] = json.loads(base64.urlsafe_b64decode(encoded + "=" * (-len(encoded) % 4)))
    return data


def stateful_registry() -> Registry:
    registry = Registry()

    @registry.tool()
    async def counter(size: int = 0, *, ctx: Context) -> str | InputRequired:
        """Asks twice, carrying a step count and `size` bytes of padding in its state."""
        step = ctx.state["step"] if isinstance(ctx.state, dict) else 0
        if step < 2:
            state = {"step": step + 1, "pad": "x" * size} if size else {"step": step + 1}
            return ctx.request_input({f"q{step}": elicit_form("Colour?", Pick)}, state=state)
        return f"done after {step} rounds"

    @registry.tool()
    async def not_json(*, ctx: Context) -> str | InputRequired:
        """Tries to carry a set between rounds."""
        return ctx.request_input({"q": elicit_form("Colour?", Pick)}, state={1, 2})

    @registry.tool()
    async def narrow(*, ctx: Context) -> str | InputRequired:
        """Says which kind of answer came back."""
        match ctx.form_answer("pick", Pick):
            case None:
                return ctx.request_input({"pick": elicit_form("Colour?", Pick)})
            case Accepted(content=Pick(colour=colour)):
                return f"accepted {colour}"
            case Declined():
                return "declined"
            case Cancelled():
                return "cancelled"

    @registry.tool()
    async def summary() -> ToolResult:
        """A structured result with its summary."""
        return ToolResult.of("one red pick", structured=Pick(colour="red"))

    return registry


@pytest.fixture
def client() -> MemoryClient:
    return MemoryClient(make_server(registry=stateful_registry()), capabilities=ALL_CAPABILITIES)


async def test_state_comes_back_next_round_signed_in_the_token(client: MemoryClient) -> None:
    params = {"name": "counter"}
    first = await client.request("tools/call", params)
    assert payload(first["requestState"])["s"] == {"step": 1}
    second = await next_round(client, "tools/call", params, first, {"q0": accept(colour="red")})
    assert payload(second["requestState"])["s"] == {"step": 2}
    done = await next_round(client, "tools/call", params, second, {"q1": accept(colour="red")})
    assert text_of(done) == "done after 2 rounds"


async def test_a_changed_state_is_a_tampered_token(client: MemoryClient) -> None:
    params = {"name": "counter"}
    first = await client.request("tools/call", params)
    version, kid, _, tag = first["requestState"].split(".")
    forged = json.dumps({**payload(first["requestState"]), "s": {"step": 2}}, separators=(",", ":"))
    body = base64.urlsafe_b64encode(forged.encode()).rstrip(b"=").decode()
    with pytest.raises(RpcError) as raised:
        await client.request(
            "tools/call", {**params, "requestState": f"{version}.{kid}.{body}.{tag}"}
        )
    assert (raised.value.code, raised.value.message) == (-32602, "Invalid requestState: signature")


async def test_without_state_the_token_carries_no_state_key(client: MemoryClient) -> None:
    first = await client.request("tools/call", {"name": "narrow"})
    assert "s" not in payload(first["requestState"])


def state_size(padding: int) -> int:
    return len(json.dumps({"step": 1, "pad": "x" * padding}, separators=(",", ":")))


@pytest.mark.parametrize("over", [0, 1, 10 * MAX_STATE_BYTES])
async def test_state_is_capped_at_its_bound_and_refused_beyond_it(
    client: MemoryClient, over: int
) -> None:
    at_bound = MAX_STATE_BYTES - state_size(0)
    size = at_bound + over
    result = await client.request("tools/call", {"name": "counter", "arguments": {"size": size}})
    if over == 0:
        assert state_size(size) == MAX_STATE_BYTES
        assert result["resultType"] == "input_required"
    else:
        # A programming error of the tool: an isError result, details in the server log.
        assert result["isError"] is True
        assert "ValueError" in text_of(result)


async def test_state_that_is_not_json_is_refused(client: MemoryClient) -> None:
    result = await client.request("tools/call", {"name": "not_json"})
    assert result["isError"] is True


async def test_the_legacy_bridge_carries_state_between_its_rounds() -> None:
    async def pick(params: dict[str, Any]) -> dict[str, Any]:
        return accept(colour="red")

    client = MemoryClient(make_server(registry=stateful_registry()), elicitation=pick)
    await client.initialize()
    result = await client.request("tools/call", {"name": "counter"})
    assert text_of(result) == "done after 2 rounds"


@pytest.mark.parametrize(
    ("answer", "text"),
    [
        (accept(colour="red"), "accepted red"),
        ({"action": "decline"}, "declined"),
        ({"action": "cancel"}, "cancelled"),
    ],
)
async def test_form_answer_narrows_to_one_kind(
    client: MemoryClient, answer: dict[str, Any], text: str
) -> None:
    first = await client.request("tools/call", {"name": "narrow"})
    done = await next_round(client, "tools/call", {"name": "narrow"}, first, {"pick": answer})
    assert text_of(done) == text


@pytest.mark.parametrize(
    ("answer", "reason"),
    [
        ({"action": "accept"}, "the form came back accepted but empty"),
        (accept(colour=7), "colour: Input should be a valid string"),
    ],
)
async def test_an_accepted_form_without_usable_content_is_asked_again(
    client: MemoryClient, answer: dict[str, Any], reason: str
) -> None:
    first = await client.request("tools/call", {"name": "narrow"})
    again = await next_round(client, "tools/call", {"name": "narrow"}, first, {"pick": answer})
    message = again["inputRequests"]["pick"]["params"]["message"]
    assert message == f"That answer was not valid ({reason}). Colour?"


async def test_a_summary_with_structured_content_gives_both(client: MemoryClient) -> None:
    result = await client.request("tools/call", {"name": "summary"})
    assert result["structuredContent"] == {"colour": "red"}
    assert result["content"] == [{"type": "text", "text": "one red pick"}]
