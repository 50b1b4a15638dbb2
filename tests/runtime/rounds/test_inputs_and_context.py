"""Input request builders, answer models, client capabilities and the handler's Context.

2026-07-28 basic/patterns/mrtr: inputRequests values are `{method, params}` (ElicitRequest,
CreateMessageRequest, ListRootsRequest); inputResponses values are the client's whole result.
client/elicitation: `elicitation: {}` means form mode only; declining and cancelling are answers.
"""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import BaseModel, ValidationError

from mrtr_runtime import (
    Context,
    InputRequest,
    InputRequired,
    Registry,
    RootsResult,
    SamplingResult,
    elicit_form,
    elicit_url,
    list_roots,
    sample,
)
from mrtr_runtime._answers import ElicitResult
from mrtr_runtime._capabilities import ClientCapabilities
from mrtr_runtime._context import InvalidInputResponse
from mrtr_runtime.testing import MemoryClient
from support import ALL_CAPABILITIES, Json, accept, handed, make_server, meta

pytestmark = pytest.mark.anyio


class Pick(BaseModel):
    colour: str
    count: int


class Confirmed(BaseModel):
    confirmed: bool


def context(
    answers: Json | None = None,
    capabilities: Json | None = None,
    *,
    progress_token: str | int | None = None,
    sent: list[tuple[str, Json]] | None = None,
) -> Context:
    async def notify(method: str, params: dict[str, Any]) -> None:
        if sent is not None:
            sent.append((method, params))

    return Context(
        answers=answers or {},
        request_state=None,
        client_capabilities=ClientCapabilities(capabilities or {}),
        protocol_version="2026-07-28",
        era="modern",
        progress_token=progress_token,
        notify=notify,
    )


# -- builders ----------------------------------------------------------------------------------


def test_sample_builds_a_create_message_request() -> None:
    request = sample("Summarise", max_tokens=100)
    assert request.to_wire() == {
        "method": "sampling/createMessage",
        "params": {
            "messages": [{"role": "user", "content": {"type": "text", "text": "Summarise"}}],
            "maxTokens": 100,
        },
    }
    assert request.required_capabilities == {"sampling": {}}


def test_sample_passes_full_messages_a_system_prompt_and_a_temperature() -> None:
    messages = [
        {"role": "user", "content": {"type": "text", "text": "a"}},
        {"role": "assistant", "content": {"type": "text", "text": "b"}},
    ]
    params = sample(messages, max_tokens=5, system_prompt="Be brief", temperature=0.0).params
    assert params == {
        "messages": messages,
        "maxTokens": 5,
        "systemPrompt": "Be brief",
        "temperature": 0.0,
    }


def test_elicit_url_builds_a_url_mode_request_needing_url_mode() -> None:
    request = elicit_url("Sign in", "https://example.com/a?b=c")
    assert request.to_wire() == {
        "method": "elicitation/create",
        "params": {"mode": "url", "message": "Sign in", "url": "https://example.com/a?b=c"},
    }
    assert request.required_capabilities == {"elicitation": {"url": {}}}


def test_list_roots_is_a_bare_method_needing_roots() -> None:
    request = list_roots()
    assert request.to_wire() == {"method": "roots/list"}
    assert request.required_capabilities == {"roots": {}}


def test_elicit_form_builds_a_form_request_without_a_mode() -> None:
    wire = elicit_form("Pick one", Pick).to_wire()
    assert wire == {
        "method": "elicitation/create",
        "params": {
            "message": "Pick one",
            "requestedSchema": {
                "type": "object",
                "properties": {"colour": {"type": "string"}, "count": {"type": "integer"}},
                "required": ["colour", "count"],
            },
        },
    }


def test_the_wire_form_of_a_request_is_a_fresh_copy() -> None:
    request = elicit_form("Pick one", Pick)
    request.to_wire()["params"]["message"] = "changed"
    assert request.to_wire()["params"]["message"] == "Pick one"


# -- answer models -----------------------------------------------------------------------------


def test_an_accepted_elicitation_carries_typed_content() -> None:
    answer = ElicitResult[Pick].model_validate(accept(colour="red", count=2))
    assert answer.accepted
    assert answer.content == Pick(colour="red", count=2)


@pytest.mark.parametrize("action", ["decline", "cancel"])
def test_declining_or_cancelling_is_a_valid_answer_that_is_not_accepted(action: str) -> None:
    answer = ElicitResult[Pick].model_validate({"action": action})
    assert not answer.accepted
    assert answer.content is None


def test_accept_without_content_is_not_accepted() -> None:
    # URL mode answers {"action": "accept"} alone; for a form that means nothing arrived.
    assert not ElicitResult[Pick].model_validate({"action": "accept"}).accepted


def test_unknown_fields_in_an_answer_are_ignored() -> None:
    answer = ElicitResult[Pick].model_validate(
        {"action": "accept", "content": {"colour": "b", "count": 1}, "_meta": {"x": 1}}
    )
    assert answer.accepted


@pytest.mark.parametrize(
    "raw", [{"action": "ok"}, {}, {"action": "accept", "content": {"colour": "b"}}, "accept"]
)
def test_a_malformed_elicitation_answer_does_not_validate(raw: object) -> None:
    with pytest.raises(ValidationError):
        ElicitResult[Pick].model_validate(raw)


def test_a_sampling_answer_exposes_its_text_and_stop_reason() -> None:
    single = SamplingResult.model_validate(
        {
            "role": "assistant",
            "content": {"type": "text", "text": "hi"},
            "model": "m",
            "stopReason": "endTurn",
        }
    )
    assert (single.text, single.model, single.stop_reason) == ("hi", "m", "endTurn")
    blocks = SamplingResult.model_validate(
        {
            "role": "assistant",
            "content": [
                {"type": "text", "text": "a"},
                {"type": "image", "data": "", "mimeType": "image/png"},
                {"type": "text", "text": "b"},
            ],
        }
    )
    assert blocks.text == "ab"


def test_a_roots_answer_lists_uris_and_optional_names() -> None:
    roots = RootsResult.model_validate(
        {"roots": [{"uri": "file:///a"}, {"uri": "file:///b", "name": "B"}]}
    )
    assert [(root.uri, root.name) for root in roots.roots] == [
        ("file:///a", None),
        ("file:///b", "B"),
    ]


# -- client capabilities -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "form", "url"),
    [
        ({}, False, False),
        ({"elicitation": {}}, True, False),
        ({"elicitation": {"form": {}}}, True, False),
        ({"elicitation": {"url": {}}}, False, True),
        ({"elicitation": {"form": {}, "url": {}}}, True, True),
        ({"elicitation": True}, False, False),
    ],
)
def test_elicitation_modes_follow_the_spec(raw: Json, form: bool, url: bool) -> None:
    capabilities = ClientCapabilities(raw)
    assert (capabilities.elicitation_form, capabilities.elicitation_url) == (form, url)


def test_sampling_roots_and_sampling_tools_are_read_from_their_objects() -> None:
    capabilities = ClientCapabilities({"sampling": {"tools": {}}, "roots": {"listChanged": True}})
    assert (capabilities.sampling, capabilities.sampling_tools, capabilities.roots) == (
        True,
        True,
        True,
    )
    bare = ClientCapabilities({"sampling": {}, "roots": None})
    assert (bare.sampling, bare.sampling_tools, bare.roots) == (True, False, False)


@pytest.mark.parametrize(
    ("declared", "requirement", "missing"),
    [
        ({}, {"elicitation": {"form": {}}}, {"elicitation": {"form": {}}}),
        ({}, {"elicitation": {}}, {"elicitation": {"form": {}}}),
        ({"elicitation": {}}, {"elicitation": {"url": {}}}, {"elicitation": {"url": {}}}),
        (
            {"elicitation": {"url": {}}},
            {"elicitation": {"form": {}, "url": {}}},
            {"elicitation": {"form": {}}},
        ),
        ({}, {"sampling": {}}, {"sampling": {}}),
        ({"sampling": {}}, {"sampling": {"tools": {}}}, {"sampling": {"tools": {}}}),
        ({"sampling": {"tools": {}}}, {"sampling": {"tools": {}}}, {}),
        ({}, {"roots": {}}, {"roots": {}}),
        ({"roots": {}}, {"roots": {}}, {}),
        ({}, {}, {}),
    ],
)
def test_missing_names_exactly_the_capabilities_not_declared(
    declared: Json, requirement: Json, missing: Json
) -> None:
    capabilities = ClientCapabilities(declared)
    assert capabilities.missing(requirement) == missing
    assert capabilities.supports(requirement) is (missing == {})


# -- the Context -------------------------------------------------------------------------------


def test_a_first_round_context_has_no_answers() -> None:
    ctx = context()
    assert ctx.input_response_as("anything", ElicitResult[Pick]) is None
    assert ctx.form_answer("anything", Pick) is None


def test_answers_are_available_validated() -> None:
    raw = accept(colour="red", count=3)
    ctx = context({"pick": raw})
    answer = ctx.input_response_as("pick", ElicitResult[Pick])
    assert answer is not None
    assert answer.content == Pick(colour="red", count=3)


def test_content_that_does_not_fit_reads_as_unanswered_and_the_reask_says_why() -> None:
    ctx = context({"pick": accept(colour=["red"], count="many")})
    assert ctx.input_response_as("pick", ElicitResult[Pick]) is None
    asked = ctx.request_input({"pick": elicit_form("Pick one.", Pick)})
    message = asked.requests["pick"].params["message"]
    assert message.startswith("That answer was not valid (colour: ")
    # Every problem is named (one describer for arguments and answers), up to ten.
    assert "; count: Input should be a valid integer" in message
    assert message.endswith("Pick one.")


@pytest.mark.parametrize("loose", ["yes", "true", 1, 0, 1.0])
def test_answers_are_not_coerced_to_booleans(loose: object) -> None:
    ctx = context({"ok": accept(confirmed=loose)})
    assert ctx.input_response_as("ok", ElicitResult[Confirmed]) is None


def test_a_strict_answer_still_takes_enum_values_and_integers_for_numbers() -> None:
    ctx = context({"pick": accept(colour="red", count=2)})
    answer = ctx.input_response_as("pick", ElicitResult[Pick])
    assert answer is not None and answer.content is not None


def test_an_answer_without_a_valid_action_raises_invalid_input_response() -> None:
    ctx = context({"pick": {"action": "shrug", "content": {"colour": "red"}}})
    with pytest.raises(InvalidInputResponse) as caught:
        ctx.input_response_as("pick", ElicitResult[Pick])
    assert caught.value.key == "pick"
    assert str(caught.value).startswith("Invalid inputResponses['pick']: action: ")


def test_can_request_follows_the_declared_capabilities() -> None:
    form, url, model, roots = (
        elicit_form("?", Pick),
        elicit_url("?", "https://example.com"),
        sample("?", max_tokens=1),
        list_roots(),
    )
    ctx = context(capabilities={"elicitation": {}, "roots": {}})
    assert [ctx.can_request(request) for request in (form, url, model, roots)] == [
        True,
        False,
        False,
        True,
    ]
    nothing = context(capabilities={})
    assert not any(nothing.can_request(request) for request in (form, url, model, roots))


def test_request_input_wraps_the_requests_in_input_required() -> None:
    request = elicit_form("?", Pick)
    outcome = context().request_input({"pick": request})
    assert isinstance(outcome, InputRequired)
    assert dict(outcome.requests) == {"pick": request}
    assert context().request_input({}).requests == {}


def test_request_input_refuses_empty_keys_and_hand_made_requests() -> None:
    with pytest.raises(ValueError, match="non-empty"):
        context().request_input({"": elicit_form("?", Pick)})
    with pytest.raises(TypeError, match="elicit_form"):
        context().request_input({"pick": {"method": "elicitation/create"}})  # type: ignore[dict-item]
    with pytest.raises(TypeError):
        context().request_input({"pick": "elicitation/create"})  # type: ignore[dict-item]
    assert isinstance(InputRequest("roots/list", {}), InputRequest)


async def test_progress_without_a_token_sends_nothing() -> None:
    sent: list[tuple[str, Json]] = []
    ctx = context(sent=sent)
    await ctx.report_progress(1, 10, "starting")
    assert sent == []


async def test_progress_with_a_token_sends_only_strictly_increasing_values() -> None:
    sent: list[tuple[str, Json]] = []
    ctx = context(progress_token="job-1", sent=sent)
    for value in (0.5, 0.5, 0.25, 1, 3, 2, 3.5):
        await ctx.report_progress(value, total=4)
    assert [params["progress"] for _, params in sent] == [0.5, 1, 3, 3.5]
    assert {method for method, _ in sent} == {"notifications/progress"}
    assert all(params["progressToken"] == "job-1" and params["total"] == 4 for _, params in sent)


async def test_progress_leaves_out_total_and_message_when_not_given() -> None:
    sent: list[tuple[str, Json]] = []
    await context(progress_token=0, sent=sent).report_progress(1)
    assert sent == [("notifications/progress", {"progressToken": 0, "progress": 1})]


# -- what a handler sees through the server ----------------------------------------------------


def introspecting_registry(seen: list[Json]) -> Registry:
    registry = Registry()

    @registry.tool()
    async def introspect(*, ctx: Context) -> str | InputRequired:
        seen.append(
            {
                "era": ctx.era,
                "version": ctx.protocol_version,
                "state": ctx.request_state,
                "capabilities": dict(ctx.client_capabilities.raw),
                "answers": dict(handed(ctx)),
            }
        )
        if not handed(ctx):
            return ctx.request_input({"pick": elicit_form("?", Pick)})
        return "seen"

    return registry


async def test_a_modern_handler_sees_its_era_version_capabilities_and_token() -> None:
    seen: list[Json] = []
    client = MemoryClient(
        make_server(registry=introspecting_registry(seen)), capabilities=ALL_CAPABILITIES
    )
    declared: Json = {"elicitation": {"form": {}}, "experimental": {"x": {}}}
    first = await client.request("tools/call", {"name": "introspect", "_meta": meta(declared)})
    await client.request(
        "tools/call",
        {
            "name": "introspect",
            "inputResponses": {"pick": accept(colour="red", count=1)},
            "requestState": first["requestState"],
            "_meta": meta(declared),
        },
    )
    assert seen[0] == {
        "era": "modern",
        "version": "2026-07-28",
        "state": None,
        "capabilities": declared,
        "answers": {},
    }
    assert seen[1]["state"] == first["requestState"]
    assert seen[1]["answers"] == {"pick": accept(colour="red", count=1)}


async def test_a_legacy_handler_sees_the_negotiated_version_and_initialize_capabilities() -> None:
    seen: list[Json] = []

    async def answer(params: Json) -> Json:
        return accept(colour="blue", count=2)

    client = MemoryClient(
        make_server(registry=introspecting_registry(seen)),
        capabilities={"elicitation": {}},
        elicitation=answer,
    )
    await client.initialize("2025-06-18")
    assert await client.request("tools/call", {"name": "introspect"}) == {
        "content": [{"type": "text", "text": "seen"}]
    }
    assert [(entry["era"], entry["version"], entry["state"]) for entry in seen] == [
        ("legacy", "2025-06-18", None),
        ("legacy", "2025-06-18", None),
    ]
    assert seen[0]["capabilities"] == {"elicitation": {}}
