"""The one rule of a round (`_dispatch.round_step`), which every era applies after a handler runs:
finish, or refuse what the client cannot give, or ask and keep only the answers that still stand.

Each era keeps only its way of asking; the same handler, answered the same way, comes to the same
end in each (the era tests drive them one by one: test_dispatch_mrtr, test_router_legacy,
test_tasks).
"""

from __future__ import annotations

from typing import Any, Literal

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import BaseModel

from mrtr_runtime import Accepted, Context, InputRequired, Registry, elicit_form
from mrtr_runtime._capabilities import ClientCapabilities
from mrtr_runtime._dispatch import Ask, Finish, MissingCapability, round_step
from mrtr_runtime._inputs import list_roots, sample
from mrtr_runtime.testing import MemoryClient, RpcError
from support import ALL_CAPABILITIES, make_server

FORMS = ClientCapabilities({"elicitation": {"form": {}}})


class Confirm(BaseModel):
    confirmed: bool


ASK_CONFIRM = elicit_form("Go?", Confirm)


def test_a_value_finishes_the_call() -> None:
    assert round_step("done", FORMS, {"confirm": {}}) == Finish("done")
    assert round_step(None, FORMS, {}) == Finish(None)


def test_what_the_client_cannot_give_is_not_asked_and_names_every_capability() -> None:
    asking = InputRequired({"draft": sample("Say hi", max_tokens=5), "roots": list_roots()})
    step = round_step(asking, FORMS, {"x": 1})
    assert step == MissingCapability({"sampling": {}, "roots": {}})


@given(
    st.dictionaries(st.sampled_from(["a", "b", "c", "confirm"]), st.integers(), max_size=4),
    st.sets(st.sampled_from(["a", "b", "c", "confirm"]), min_size=0, max_size=4),
)
def test_an_answer_to_a_question_asked_again_no_longer_stands(
    given_answers: dict[str, int], asked: set[str]
) -> None:
    asking = InputRequired({key: ASK_CONFIRM for key in sorted(asked)}, state={"n": 1})
    step = round_step(asking, FORMS, given_answers)
    assert isinstance(step, Ask)
    assert step.outcome is asking
    assert step.kept == {k: v for k, v in given_answers.items() if k not in asked}
    assert given_answers == dict(given_answers)  # the caller's mapping is left as it was


def test_a_round_that_only_carries_state_asks_nothing_and_keeps_every_answer() -> None:
    step = round_step(InputRequired({}, state=[1, 2]), FORMS, {"a": 1})
    assert step == Ask(InputRequired({}, state=[1, 2]), {"a": 1})


# -- every era, the same end ---------------------------------------------------------------------


def asking_again() -> Registry:
    """A tool that asks `confirm` again once, whatever the first answer, then finishes."""
    registry = Registry()

    @registry.tool()
    async def confirm_twice(*, ctx: Context) -> str | InputRequired:
        match ctx.form_answer("confirm", Confirm):
            case None:
                return ctx.request_input({"confirm": ASK_CONFIRM}, state=0)
            case Accepted() if ctx.state == 0:
                return ctx.request_input({"confirm": ASK_CONFIRM}, state=1)
            case Accepted(content=Confirm(confirmed=confirmed)):
                return f"confirmed={confirmed}"
            case _:
                return "declined"

    return registry


async def _accept(content: dict[str, Any]) -> dict[str, Any]:
    return {"action": "accept", "content": content}


@pytest.mark.anyio
@pytest.mark.parametrize("era", ["modern", "legacy"])
async def test_each_era_asks_again_and_finishes_on_the_fresh_answer(
    era: Literal["modern", "legacy"],
) -> None:
    replies = iter([{"confirmed": False}, {"confirmed": True}])
    client = MemoryClient(
        make_server(registry=asking_again()),
        capabilities=ALL_CAPABILITIES,
        elicitation=lambda params: _accept(next(replies)),
        era=era,
    )
    result = await client.call_tool("confirm_twice")
    assert result.text == "confirmed=True"


@pytest.mark.anyio
@pytest.mark.parametrize("era", ["modern", "legacy"])
async def test_a_client_without_forms_is_refused_in_each_era_before_anything_is_asked(
    era: Literal["modern", "legacy"],
) -> None:
    client = MemoryClient(make_server(registry=asking_again()), capabilities={}, era=era)
    if era == "modern":
        with pytest.raises(RpcError) as raised:
            await client.call_tool("confirm_twice")
        assert raised.value.code == -32021
    else:
        result = await client.call_tool("confirm_twice")
        assert result.is_error and "elicitation" in result.text
    assert client.server_requests == []
