"""plan_release and release_announcement, in process: every round, answer and fallback.

The tool is the project's AWS-free multi-round sample, so these tests pin the behaviour a
reader copies: progressive rounds that send only their new key, decline and cancel as
ordinary answers, re-asking with a reason, the capability-aware fallbacks, idempotence, and
the 2025-11-25 bridge. Everything goes through the public wire (MemoryClient), nothing
through the handler's internals.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any

import pytest

from {{ cookiecutter.package_name }}.app import build_server
from {{ cookiecutter.package_name }}.mrtr_runtime.server import Server
from {{ cookiecutter.package_name }}.mrtr_runtime.testing import (
    Declined,
    MemoryClient,
    RpcError,
    ToolCallResult,
    answers,
)
from {{ cookiecutter.package_name }}.tools._release_notes import (
    Version,
    classify,
    split_highlights,
)
from {{ cookiecutter.package_name }}.tools.plan_release import ReleasePlan

Json = dict[str, Any]

KEY_HEX = "3f1c9a7e5b2d4f6081a3c5e7092b4d6f8a1c3e5b7d9f0a2c4e6b8d0f1a3c5e79"
ARGS: Json = {
    "project": "demo",
    "previous_version": "1.4.2",
    "changes": ["feat: add --json output", "fix(cli): exit 2 on a bad flag", "chore: bump ruff"],
}
FORMS_ONLY: Json = {"elicitation": {"form": {}}}
#: What a full-featured host declares.
ALL: Json = {"elicitation": {"form": {}, "url": {}}, "sampling": {}, "roots": {}}
SAMPLING_ONLY: Json = {"sampling": {}}


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def server() -> Server:
    return build_server({"MRTR_SIGNING_KEY": KEY_HEX})


def accept(**content: Any) -> Json:
    return {"action": "accept", "content": content}


class Person:
    """An elicitation callback that fills each form by its first field, and remembers it all.

    `answers` maps a form's first field (version, highlights, migration, confirmed, audience)
    to the ElicitResult to give, or to a list of them given in turn (for re-asks).
    """

    DEFAULTS: Mapping[str, Json] = {
        "version": accept(version="1.5.0", kind="minor"),
        "highlights": accept(highlights="JSON output for scripts; clearer errors"),
        "migration": accept(migration="The --format flag is gone; use --json."),
        "confirmed": accept(confirmed=True),
        "audience": accept(audience="developers", channel="mailing list"),
    }

    def __init__(self, **answers: Json | list[Json]) -> None:
        self.answers: dict[str, list[Json]] = {
            field: [value] if isinstance(value, dict) else list(value)
            for field, value in {**self.DEFAULTS, **answers}.items()
        }
        self.asked: list[str] = []
        self.messages: list[str] = []

    async def __call__(self, params: Mapping[str, object]) -> Json:
        schema = params["requestedSchema"]
        assert isinstance(schema, dict)
        field = next(iter(schema["properties"]))
        self.asked.append(field)
        self.messages.append(str(params["message"]))
        queue = self.answers[field]
        return queue.pop(0) if len(queue) > 1 else queue[0]


async def plan(
    server: Server, person: Person | None = None, arguments: Json | None = None
) -> ToolCallResult:
    """plan_release through every round, for a host that declares everything."""
    client = MemoryClient(server, capabilities=ALL, elicitation=person or Person())
    return await client.call_tool("plan_release", arguments or ARGS)


def call(arguments: Json | None = None, **retry: Any) -> Json:
    params: Json = {"name": "plan_release", "arguments": arguments or ARGS}
    params.update(retry)
    return params


def only_request(result: Json) -> tuple[str, Json]:
    assert result["resultType"] == "input_required"
    ((key, request),) = result["inputRequests"].items()
    return key, request


# -- declared shape ---------------------------------------------------------------------------


@pytest.mark.anyio
async def test_tool_declares_honest_annotations_and_an_output_schema(server: Server) -> None:
    tools = (await MemoryClient(server, capabilities=ALL).request("tools/list", {}))["tools"]
    (tool,) = [tool for tool in tools if tool["name"] == "plan_release"]
    assert tool["annotations"] == {
        "title": "Plan a release",
        "readOnlyHint": True,
        "idempotentHint": True,
        "openWorldHint": False,
    }
    assert tool["outputSchema"] == ReleasePlan.model_json_schema()
    assert tool["inputSchema"]["required"] == ["project"]
    assert tool["inputSchema"]["additionalProperties"] is False


@pytest.mark.anyio
async def test_prompts_list_offers_the_release_announcement(server: Server) -> None:
    prompts = (await MemoryClient(server, capabilities=ALL).request("prompts/list", {}))["prompts"]
    (prompt,) = [prompt for prompt in prompts if prompt["name"] == "release_announcement"]
    assert [argument["name"] for argument in prompt["arguments"]] == [
        "project",
        "version",
        "highlights",
    ]
    assert [argument["required"] for argument in prompt["arguments"]] == [True, True, False]


# -- the three rounds -------------------------------------------------------------------------


@pytest.mark.anyio
async def test_three_rounds_each_send_only_their_new_key(server: Server) -> None:
    client = MemoryClient(server, capabilities=FORMS_ONLY)

    first = await client.request("tools/call", call())
    key, request = only_request(first)
    assert key == "release"
    assert request["method"] == "elicitation/create"
    schema = request["params"]["requestedSchema"]
    assert schema["required"] == ["version", "kind"]
    assert schema["properties"]["kind"]["enum"] == ["major", "minor", "patch"]
    assert "Suggested: 1.5.0 (minor)" in request["params"]["message"]

    second = await client.request(
        "tools/call",
        call(
            inputResponses={"release": accept(version="1.5.0", kind="minor")},
            requestState=first["requestState"],
        ),
    )
    key, request = only_request(second)
    assert key == "highlights"
    # Round 2 is worded with round 1's answers, which only the signed state still carries.
    assert "demo 1.5.0, a minor release" in request["params"]["message"]
    assert "add --json output; exit 2 on a bad flag" in request["params"]["message"]

    third = await client.request(
        "tools/call",
        call(
            inputResponses={"highlights": accept(highlights="JSON output; clearer errors")},
            requestState=second["requestState"],
        ),
    )
    confirm_key, request = only_request(third)
    assert confirm_key.startswith("confirm-")
    message = request["params"]["message"]
    # What the yes is for comes first, in the 3 lines a host shows (Claude Code cuts each at
    # an 80-column terminal's width): the release, what it writes, what the notes hold; then
    # the notes' digest (the one the confirm key carries) and the notes themselves.
    digest = confirm_key.removeprefix("confirm-")
    notes = message.split("\n\n", 1)[1]
    assert hashlib.sha256(f"{notes}\n".encode()).hexdigest()[:12] == digest
    assert message.splitlines()[:4] == [
        "Release demo 1.5.0 (minor) with these notes?",
        "Sets the version, adds the notes to CHANGELOG.md, pushes tag v1.5.0",
        "Notes: 2 highlights, 1 feature, 1 fix, 1 other change",
        f"The notes ({len(notes.splitlines())} lines, sha256 {digest}) are below; a yes is for "
        "exactly these.",
    ]
    assert all(len(line) <= 74 for line in message.splitlines()[:3])
    assert notes.startswith("## demo 1.5.0\n")
    assert "- JSON output\n- clearer errors" in message

    done = await client.request(
        "tools/call",
        call(
            inputResponses={confirm_key: accept(confirmed=True)},
            requestState=third["requestState"],
        ),
    )
    assert done["resultType"] == "complete"
    assert "isError" not in done
    plan_ = ReleasePlan.model_validate(done["structuredContent"])
    assert plan_.status == "confirmed"
    assert (plan_.version, plan_.kind, plan_.tag) == ("1.5.0", "minor", "v1.5.0")
    assert plan_.highlights == ["JSON output", "clearer errors"]
    assert plan_.checklist[2] == "git tag -a v1.5.0 -m 'demo 1.5.0'"
    assert "### Features\n- add --json output" in plan_.notes_markdown
    assert "### Fixes\n- exit 2 on a bad flag" in plan_.notes_markdown
    assert "### Other changes\n- bump ruff" in plan_.notes_markdown
    (block,) = done["content"]  # the summary a person reads; the data is structuredContent
    assert block["text"].startswith("Release plan for demo 1.5.0 (minor), confirmed by the user.")
    assert "## demo 1.5.0" in block["text"]
    assert "1. Set the project's version to 1.5.0" in block["text"]


@pytest.mark.anyio
async def test_call_tool_runs_the_three_rounds_in_order(server: Server) -> None:
    person = Person()
    result = await plan(server, person)
    assert result.structured["status"] == "confirmed"
    assert [keys[0].split("-")[0] for keys in result.asked] == ["release", "highlights", "confirm"]
    assert all(len(keys) == 1 for keys in result.asked)
    assert result.rounds == 3
    assert person.asked == ["version", "highlights", "confirmed"]


@pytest.mark.anyio
async def test_a_major_release_asks_for_upgrade_notes_beside_the_highlights(
    server: Server,
) -> None:
    person = Person(version=accept(version="2.0.0", kind="major"))
    result = await plan(server, person)
    assert result.asked[1] == ("highlights", "migration")
    plan_ = ReleasePlan.model_validate(result.structured)
    assert (plan_.status, plan_.version, plan_.kind) == ("confirmed", "2.0.0", "major")
    assert plan_.migration == "The --format flag is gone; use --json."
    assert "### Upgrading\nThe --format flag is gone; use --json." in plan_.notes_markdown


# -- decline and cancel are answers -----------------------------------------------------------


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("field", "step"),
    [("version", "version"), ("highlights", "highlights"), ("confirmed", "confirmation")],
)
@pytest.mark.parametrize(("action", "status"), [("decline", "declined"), ("cancel", "cancelled")])
async def test_decline_or_cancel_at_any_step_ends_with_an_ordinary_result(
    server: Server, field: str, step: str, action: str, status: str
) -> None:
    person = Person(**{field: {"action": action}})
    result = await plan(server, person)
    assert not result.is_error
    plan_ = ReleasePlan.model_validate(result.structured)
    assert (plan_.status, plan_.stopped_at) == (status, step)
    assert plan_.checklist == []
    assert person.asked[-1] == field  # nothing was asked after the refusal
    assert "do not tag or publish" in result.text


@pytest.mark.anyio
async def test_declining_the_upgrade_notes_stops_a_major_release(server: Server) -> None:
    person = Person(version=accept(version="2.0.0", kind="major"), migration={"action": "decline"})
    result = await plan(server, person)
    plan_ = ReleasePlan.model_validate(result.structured)
    assert (plan_.status, plan_.stopped_at, plan_.version) == ("declined", "highlights", "2.0.0")


@pytest.mark.anyio
async def test_answering_no_to_the_plan_is_a_decline(server: Server) -> None:
    result = await plan(server, Person(confirmed=accept(confirmed=False)))
    plan_ = ReleasePlan.model_validate(result.structured)
    assert (plan_.status, plan_.stopped_at) == ("declined", "confirmation")
    assert "the user declined the final confirmation" in result.text


# -- invalid answers are asked again, with the reason ------------------------------------------


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("version", "kind", "reason"),
    [
        ("1.5", "minor", '"1.5" is not a semantic version: use MAJOR.MINOR.PATCH'),
        ("1.4.2", "patch", "1.4.2 does not come after the last release, 1.4.2."),
        ("1.4.2-rc.1", "patch", "1.4.2-rc.1 does not come after the last release, 1.4.2."),
        ("2.0.0", "minor", "1.4.2 to 2.0.0 is a major release, not a minor one."),
    ],
)
async def test_an_invalid_version_is_asked_again_with_the_reason(
    server: Server, version: str, kind: str, reason: str
) -> None:
    person = Person(
        version=[accept(version=version, kind=kind), accept(version="v1.5.0", kind="minor")]
    )
    result = await plan(server, person)
    assert result.asked[:2] == (("release",), ("release",))
    assert person.messages[1].startswith(reason)
    assert person.messages[1].endswith(person.messages[0])  # the question itself is unchanged
    plan_ = ReleasePlan.model_validate(result.structured)
    assert (plan_.status, plan_.version) == ("confirmed", "1.5.0")  # "v" dropped


@pytest.mark.anyio
async def test_the_kind_is_not_checked_before_1_0(server: Server) -> None:
    # semver §4: in 0.y.z anything may change, so a break in a minor bump is legitimate.
    arguments = {**ARGS, "previous_version": "0.3.1"}
    person = Person(version=accept(version="0.4.0", kind="major"))
    result = await plan(server, person, arguments)
    assert result.asked[0] == ("release",)
    assert result.asked[1] == ("highlights", "migration")
    assert result.structured["status"] == "confirmed"


@pytest.mark.anyio
async def test_empty_highlights_are_asked_again(server: Server) -> None:
    person = Person(highlights=[accept(highlights=" ; - ;"), accept(highlights="Real news")])
    result = await plan(server, person)
    assert result.asked[1:3] == (("highlights",), ("highlights",))
    assert person.messages[2].startswith("No highlight was given.")
    assert result.structured["highlights"] == ["Real news"]


@pytest.mark.anyio
@pytest.mark.parametrize("field", ["version", "confirmed"])
async def test_an_accept_without_content_is_asked_again(server: Server, field: str) -> None:
    person = Person(**{field: [{"action": "accept"}, Person.DEFAULTS[field]]})
    result = await plan(server, person)
    asked_twice = person.asked.index(field) + 1
    assert person.asked[asked_twice] == field
    assert person.messages[asked_twice].startswith(
        "That answer was not valid (the form came back accepted but empty). "
    )
    assert result.asked[asked_twice] == result.asked[asked_twice - 1]  # the same key, asked again
    assert result.structured["status"] == "confirmed"


@pytest.mark.anyio
async def test_an_answer_outside_the_requested_schema_is_asked_again(server: Server) -> None:
    # client/elicitation: servers SHOULD validate received data against the requested schema;
    # a kind outside the enum is never acted on: the question comes back, saying why.
    client = MemoryClient(server, capabilities=FORMS_ONLY)
    first = await client.request("tools/call", call())
    again = await client.request(
        "tools/call",
        call(
            inputResponses={"release": accept(version="1.5.0", kind="huge")},
            requestState=first["requestState"],
        ),
    )
    key, request = only_request(again)
    assert key == "release"
    assert request["params"]["message"].startswith("That answer was not valid (kind: ")


@pytest.mark.anyio
async def test_a_yes_is_bound_to_the_plan_it_was_given_for(server: Server) -> None:
    client = MemoryClient(server, capabilities=FORMS_ONLY)
    first = await client.request("tools/call", call())
    second = await client.request(
        "tools/call",
        call(
            inputResponses={"release": accept(version="1.5.0", kind="minor")},
            requestState=first["requestState"],
        ),
    )
    third = await client.request(
        "tools/call",
        call(
            inputResponses={"highlights": accept(highlights="Shown to the user")},
            requestState=second["requestState"],
        ),
    )
    confirm_key, _ = only_request(third)
    # The client rewrites an earlier answer in the same retry as the yes: only the question
    # this round asked is answered, so the rewrite is ignored and the yes confirms the plan
    # the user was shown.
    confirmed = await client.request(
        "tools/call",
        call(
            inputResponses={
                "highlights": accept(highlights="Never shown"),
                confirm_key: accept(confirmed=True),
            },
            requestState=third["requestState"],
        ),
    )
    assert confirmed["resultType"] == "complete"
    assert confirmed["structuredContent"]["highlights"] == ["Shown to the user"]


# -- capability-aware fallbacks ---------------------------------------------------------------


@pytest.mark.anyio
async def test_without_forms_the_hosts_model_drafts_the_highlights(server: Server) -> None:
    client = MemoryClient(server, capabilities=SAMPLING_ONLY)
    first = await client.request("tools/call", call())
    key, request = only_request(first)
    assert key == "draft"
    assert request["method"] == "sampling/createMessage"
    prompt = request["params"]["messages"][0]["content"]["text"]
    assert "demo 1.5.0, a minor release" in prompt
    assert "- feat: add --json output" in prompt
    answer = {
        "role": "assistant",
        "content": {"type": "text", "text": "1. Machine-readable output\n- Friendlier errors\n"},
        "model": "tiny-model",
    }
    done = await client.request(
        "tools/call", call(inputResponses={"draft": answer}, requestState=first["requestState"])
    )
    plan_ = ReleasePlan.model_validate(done["structuredContent"])
    assert plan_.status == "drafted"
    assert plan_.highlights == ["Machine-readable output", "Friendlier errors"]
    assert plan_.assumptions == [
        "Version 1.5.0 (minor): the changes add features, after 1.4.2.",
        "The highlights were drafted by the host's model (tiny-model); review them.",
        "Nobody confirmed this plan: the host cannot show forms (elicitation).",
    ]
    assert "drafted without asking the user" in done["content"][0]["text"]


@pytest.mark.anyio
async def test_an_empty_model_answer_falls_back_to_the_changes(server: Server) -> None:
    async def says_nothing(params: Mapping[str, object]) -> Json:
        return {"role": "assistant", "content": {"type": "text", "text": "  \n"}, "model": "m"}

    client = MemoryClient(server, capabilities=SAMPLING_ONLY, sampling=says_nothing)
    result = await client.call_tool("plan_release", ARGS)
    plan_ = ReleasePlan.model_validate(result.structured)
    assert plan_.highlights == ["add --json output", "exit 2 on a bad flag"]
    assert "The host's model gave no usable highlights." in plan_.assumptions


@pytest.mark.anyio
@pytest.mark.parametrize("capabilities", [{}, {"elicitation": {"url": {}}}, {"roots": {}}])
async def test_with_neither_forms_nor_sampling_it_plans_from_the_arguments(
    server: Server, capabilities: Json
) -> None:
    client = MemoryClient(server, capabilities=capabilities)
    arguments = {**ARGS, "changes": ["feat!: drop the --format flag", "fix: typo"]}
    result = await client.request("tools/call", call(arguments))
    assert result["resultType"] == "complete"  # a host without MRTR input support still works
    plan_ = ReleasePlan.model_validate(result["structuredContent"])
    assert (plan_.status, plan_.version, plan_.kind) == ("drafted", "2.0.0", "major")
    assert plan_.highlights == ["drop the --format flag", "typo"]
    assert plan_.assumptions[0] == (
        "Version 2.0.0 (major): the changes include a breaking change, after 1.4.2."
    )
    assert "### Breaking changes\n- drop the --format flag" in plan_.notes_markdown


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("arguments", "version", "assumption"),
    [
        ({"project": "fresh"}, "0.1.0", "no previous_version was given (a first release)"),
        (
            {"project": "p", "version": "3.1.0", "previous_version": "3.0.9"},
            "3.1.0",
            "it was given",
        ),
        ({"project": "p", "previous_version": "0.9.0", "changes": ["feat!: x"]}, "0.10.0", "break"),
        ({"project": "p", "previous_version": "2.0.0-rc.2", "changes": ["fix: y"]}, "2.0.0", "2.0"),
    ],
)
async def test_the_assumed_version_and_why_come_from_the_arguments(
    server: Server, arguments: Json, version: str, assumption: str
) -> None:
    result = await MemoryClient(server, capabilities={}).request("tools/call", call(arguments))
    plan_ = ReleasePlan.model_validate(result["structuredContent"])
    assert plan_.version == version
    assert assumption in plan_.assumptions[0]


@pytest.mark.anyio
async def test_answers_keep_the_path_when_capabilities_change_between_rounds(
    server: Server,
) -> None:
    # The forms path has begun; a retry that no longer declares elicitation does not quietly
    # switch to an unconfirmed draft: the runtime answers -32021 for the next form instead.
    first = await MemoryClient(server, capabilities=FORMS_ONLY).request("tools/call", call())
    with pytest.raises(RpcError) as raised:
        await MemoryClient(server, capabilities=SAMPLING_ONLY).request(
            "tools/call",
            call(
                inputResponses={"release": accept(version="1.5.0", kind="minor")},
                requestState=first["requestState"],
            ),
        )
    assert raised.value.code == -32021
    assert raised.value.data == {"requiredCapabilities": {"elicitation": {"form": {}}}}


@pytest.mark.anyio
async def test_a_model_drafted_round_stays_drafted_when_the_retry_declares_forms(
    server: Server,
) -> None:
    first = await MemoryClient(server, capabilities=SAMPLING_ONLY).request("tools/call", call())
    answer = {"role": "assistant", "content": {"type": "text", "text": "Big news"}, "model": "m"}
    done = await MemoryClient(server, capabilities=ALL).request(
        "tools/call", call(inputResponses={"draft": answer}, requestState=first["requestState"])
    )
    assert done["resultType"] == "complete"
    assert done["structuredContent"]["status"] == "drafted"
    assert done["structuredContent"]["highlights"] == ["Big news"]


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("arguments", "problem"),
    [
        ({"project": "p", "version": "1.5"}, '"1.5" is not a semantic version'),
        ({"project": "p", "version": "1.0.0", "previous_version": "1.2.0"}, "does not come after"),
        ({"project": "p", "colour": "red"}, "colour"),
    ],
)
async def test_invalid_arguments_are_a_tool_error_the_model_can_fix(
    server: Server, arguments: Json, problem: str
) -> None:
    result = await MemoryClient(server, capabilities=ALL).call_tool("plan_release", arguments)
    assert result.is_error
    assert problem in result.text


# -- idempotence ------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_the_same_final_request_twice_gives_the_same_result(server: Server) -> None:
    client = MemoryClient(server, capabilities=FORMS_ONLY)
    first = await client.request("tools/call", call())
    second = await client.request(
        "tools/call",
        call(
            inputResponses={"release": accept(version="1.5.0", kind="minor")},
            requestState=first["requestState"],
        ),
    )
    third = await client.request(
        "tools/call",
        call(
            inputResponses={"highlights": accept(highlights="x")},
            requestState=second["requestState"],
        ),
    )
    confirm_key, _ = only_request(third)
    final = call(
        inputResponses={confirm_key: accept(confirmed=True)}, requestState=third["requestState"]
    )
    once = await client.request("tools/call", final)
    # The same token replayed, by this client or by another one (a retry after a lost reply).
    again = await MemoryClient(server, capabilities=FORMS_ONLY).request("tools/call", final)
    assert once == again
    assert once["structuredContent"]["status"] == "confirmed"


@pytest.mark.anyio
async def test_the_same_arguments_and_answers_give_the_same_plan_on_every_path(
    server: Server,
) -> None:
    results = [await plan(server, Person()) for _ in range(2)]
    assert results[0] == results[1]
    no_input = [
        await MemoryClient(server, capabilities={}).request("tools/call", call()) for _ in range(2)
    ]
    assert no_input[0] == no_input[1]


# -- the 2025-11-25 bridge --------------------------------------------------------------------


@pytest.mark.anyio
async def test_a_legacy_session_completes_through_real_elicitation_requests(
    server: Server,
) -> None:
    person = Person(
        version=[accept(version="1.5", kind="minor"), accept(version="1.5.0", kind="minor")]
    )
    client = MemoryClient(server, elicitation=person)
    await client.initialize()
    result = await client.request("tools/call", call())
    assert "resultType" not in result  # 2025-11-25 results have none
    assert "input_required" not in json.dumps(result)
    assert [request["method"] for request in client.server_requests] == ["elicitation/create"] * 4
    assert person.asked == ["version", "version", "highlights", "confirmed"]
    plan_ = ReleasePlan.model_validate(result["structuredContent"])
    assert (plan_.status, plan_.version) == ("confirmed", "1.5.0")


@pytest.mark.anyio
async def test_a_legacy_session_with_sampling_only_gets_a_drafted_plan(server: Server) -> None:
    async def model(params: Mapping[str, object]) -> Json:
        return {"role": "assistant", "content": {"type": "text", "text": "Big news"}, "model": "m"}

    client = MemoryClient(server, capabilities=SAMPLING_ONLY, sampling=model)
    await client.initialize()
    result = await client.request("tools/call", call())
    assert [request["method"] for request in client.server_requests] == ["sampling/createMessage"]
    assert result["structuredContent"]["highlights"] == ["Big news"]


@pytest.mark.anyio
async def test_a_legacy_decline_is_an_ordinary_result(server: Server) -> None:
    person = Person(highlights={"action": "cancel"})
    client = MemoryClient(server, elicitation=person)
    await client.initialize()
    result = await client.request("tools/call", call())
    assert "isError" not in result
    assert result["structuredContent"]["status"] == "cancelled"
    assert result["structuredContent"]["stopped_at"] == "highlights"


# -- the prompt -------------------------------------------------------------------------------


def prompt_params(**arguments: str) -> Json:
    return {
        "name": "release_announcement",
        "arguments": {"project": "demo", "version": "1.5.0", **arguments},
    }


def prompt_text(result: Json) -> str:
    (message,) = result["messages"]
    assert message["role"] == "user"
    text: str = message["content"]["text"]
    return text


@pytest.mark.anyio
async def test_the_prompt_asks_for_its_readers_before_it_is_written(server: Server) -> None:
    client = MemoryClient(server, capabilities=FORMS_ONLY)
    first = await client.request("prompts/get", prompt_params(highlights="JSON output"))
    assert first["resultType"] == "input_required"
    assert list(first["inputRequests"]) == ["context"]
    person = Person()
    result = await MemoryClient(server, capabilities=FORMS_ONLY, elicitation=person).get_prompt(
        "release_announcement", {"project": "demo", "version": "1.5.0", "highlights": "JSON output"}
    )
    text = prompt_text(result)
    assert "Write the announcement of demo 1.5.0." in text
    assert "developers who build on it" in text
    assert "a plain-text email" in text
    assert "What is new: JSON output" in text
    assert "defaults" not in text


@pytest.mark.anyio
@pytest.mark.parametrize("capabilities", [{}, SAMPLING_ONLY])
async def test_the_prompt_without_forms_uses_stated_defaults(
    server: Server, capabilities: Json
) -> None:
    result = await MemoryClient(server, capabilities=capabilities).request(
        "prompts/get", prompt_params()
    )
    assert result["resultType"] == "complete"
    text = prompt_text(result)
    assert "the people who use it" in text
    assert "a blog post" in text
    assert "these are the defaults" in text
    assert "Ask me what is new" in text


@pytest.mark.anyio
async def test_a_declined_prompt_form_uses_stated_defaults(server: Server) -> None:
    person = Person(audience={"action": "decline"})
    client = MemoryClient(server, capabilities=ALL, elicitation=person)
    result = await client.get_prompt(
        "release_announcement", {"project": "demo", "version": "1.5.0"}
    )
    assert "these are the defaults" in prompt_text(result)


@pytest.mark.anyio
async def test_the_prompt_works_through_the_legacy_bridge(server: Server) -> None:
    client = MemoryClient(server, elicitation=Person())
    await client.initialize()
    result = await client.request("prompts/get", prompt_params())
    assert "developers who build on it" in prompt_text(result)


# -- the pieces the plan is made of -----------------------------------------------------------


@pytest.mark.parametrize(
    ("lower", "higher"),
    [
        ("1.0.0-alpha", "1.0.0-alpha.1"),
        ("1.0.0-alpha.1", "1.0.0-alpha.beta"),
        ("1.0.0-beta.2", "1.0.0-beta.11"),
        ("1.0.0-rc.1", "1.0.0"),
        ("1.0.0", "1.0.1"),
        ("1.9.0", "1.10.0"),
    ],
)
def test_versions_sort_by_semver_precedence(lower: str, higher: str) -> None:
    low, high = Version.parse(lower), Version.parse(higher)
    assert low is not None
    assert high is not None
    assert low.precedence() < high.precedence()


@pytest.mark.parametrize("text", ["1.2", "01.2.3", "1.2.3.4", "1.2.3-", "version 1", ""])
def test_non_semver_text_is_not_a_version(text: str) -> None:
    assert Version.parse(text) is None


def test_build_metadata_is_kept_but_does_not_count() -> None:
    with_build = Version.parse("v1.2.3+sha.5114f85")
    assert str(with_build) == "1.2.3+sha.5114f85"
    assert with_build is not None
    plain = Version.parse("1.2.3")
    assert plain is not None
    assert with_build.precedence() == plain.precedence()


@pytest.mark.parametrize(
    ("change", "group", "text"),
    [
        ("feat(api): add a thing", "feature", "add a thing"),
        ("fix: stop crashing", "fix", "stop crashing"),
        ("refactor!: rename everything", "breaking", "rename everything"),
        (
            "feat: new\n\nBREAKING CHANGE: old flags go",
            "breaking",
            "new BREAKING CHANGE: old flags go",
        ),
        ("Update the README", "other", "Update the README"),
    ],
)
def test_changes_are_sorted_by_their_conventional_commit_type(
    change: str, group: str, text: str
) -> None:
    assert (classify(change).group, classify(change).text) == (group, text)


def test_highlights_split_on_semicolons_and_lines_without_bullets() -> None:
    assert split_highlights("- one; * two\n3. three\n\u2022 four;;") == [
        "one",
        "two",
        "three",
        "four",
    ]


@pytest.mark.anyio
async def test_a_release_declined_at_the_first_question_is_not_planned() -> None:
    # The pattern the README's "Testing a tool that asks" points to, whole.
    client = MemoryClient(build_server(), elicitation=answers({"release": Declined()}))
    result = await client.call_tool(
        "plan_release", {"project": "demo", "previous_version": "1.4.2"}
    )
    assert result.structured["status"] == "declined"
    assert result.asked == (("release",),)
