"""Forms from ordinary pydantic fields, and their answers, validated strictly.

client/elicitation "Supported Schema Types" (schema.ts PrimitiveSchemaDefinition, the same in
2025-11-25 and 2026-07-28): StringSchema (minLength, maxLength, format email | uri | date |
date-time), NumberSchema (number | integer, minimum, maximum), BooleanSchema, untitled
single-select (`enum`), titled single-select (`oneOf: [{const, title}]`), untitled multi-select
(`type: array, items: {type: string, enum}`), titled multi-select (`items: {anyOf: [{const,
title}]}`), both with minItems/maxItems, and the deprecated LegacyTitledEnumSchema (`enum` +
`enumNames`); each may carry a `default`. Servers SHOULD validate what comes back; a
multi-select answer is an array of the allowed values.
"""

from __future__ import annotations

import datetime
import enum
import json
from typing import Annotated, Any, Literal

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import AnyUrl, BaseModel, Field, SecretStr

from mrtr_runtime import (
    Accepted,
    Context,
    Registry,
    ToolResult,
    choice_titles,
    elicit_form,
)
from mrtr_runtime._capabilities import ClientCapabilities
from mrtr_runtime.testing import MemoryClient, answers
from support import ALL_CAPABILITIES, Json, make_server

pytestmark = pytest.mark.anyio


class Region(enum.StrEnum):
    EU = "eu-west-1"
    US = "us-east-1"


class Every(BaseModel):
    name: str = Field(title="Your name", description="As on your badge", max_length=40)
    nickname: str = Field(default="", min_length=0, pattern="^[a-z]*$")
    email: str = Field(json_schema_extra={"format": "email"})
    homepage: AnyUrl | None = None
    born: datetime.date = datetime.date(2000, 1, 1)
    meeting: datetime.datetime | None = None
    age: int = Field(default=30, ge=0, le=150)
    score: float = 95.5
    verified: bool = True
    plan: Literal["free", "pro"] = "free"
    region: Region = Region.EU
    size: Annotated[
        Literal["s", "m", "l"], choice_titles({"s": "Small", "m": "Medium", "l": "Large"})
    ] = "m"
    legacy: Annotated[
        Literal["a", "b"], choice_titles({"a": "Option A", "b": "Option B"}, enum_names=True)
    ] = "a"
    tags: list[Literal["red", "green", "blue"]] = Field(default=["red"], min_length=1, max_length=2)
    regions: Annotated[
        list[Region], choice_titles({Region.EU: "Europe", Region.US: "North America"})
    ] = Field(default_factory=list)


EVERY_SCHEMA: Json = {
    "type": "object",
    "properties": {
        "name": {
            "type": "string",
            "title": "Your name",
            "description": "As on your badge",
            "maxLength": 40,
        },
        "nickname": {"type": "string", "default": "", "minLength": 0, "pattern": "^[a-z]*$"},
        "email": {"type": "string", "format": "email"},
        "homepage": {"type": "string", "format": "uri", "minLength": 1},
        "born": {"type": "string", "default": "2000-01-01", "format": "date"},
        "meeting": {"type": "string", "format": "date-time"},
        "age": {"type": "integer", "default": 30, "minimum": 0, "maximum": 150},
        "score": {"type": "number", "default": 95.5},
        "verified": {"type": "boolean", "default": True},
        "plan": {"type": "string", "default": "free", "enum": ["free", "pro"]},
        "region": {"type": "string", "enum": ["eu-west-1", "us-east-1"], "default": "eu-west-1"},
        "size": {
            "type": "string",
            "oneOf": [
                {"const": "s", "title": "Small"},
                {"const": "m", "title": "Medium"},
                {"const": "l", "title": "Large"},
            ],
            "default": "m",
        },
        "legacy": {
            "type": "string",
            "default": "a",
            "enum": ["a", "b"],
            "enumNames": ["Option A", "Option B"],
        },
        "tags": {
            "type": "array",
            "maxItems": 2,
            "minItems": 1,
            "items": {"type": "string", "enum": ["red", "green", "blue"]},
            "default": ["red"],
        },
        "regions": {
            "type": "array",
            "items": {
                "anyOf": [
                    {"const": "eu-west-1", "title": "Europe"},
                    {"const": "us-east-1", "title": "North America"},
                ]
            },
        },
    },
    "required": ["name", "email"],
}


def test_every_field_kind_becomes_its_primitive_schema() -> None:
    schema = elicit_form("Sign up", Every).params["requestedSchema"]
    assert schema == EVERY_SCHEMA
    # Key order matters to people reading the wire: "type" first, "default" after choices.
    assert next(iter(schema["properties"]["size"])) == "type"
    assert list(schema["properties"]["size"])[-1] == "default"
    assert list(schema["properties"]["tags"])[-1] == "default"


class Sep1034(BaseModel):
    """The defaults the conformance scenario elicitation-sep1034-defaults checks."""

    name: str = "John Doe"
    age: int = 30
    score: float = 95.5
    status: Literal["active", "inactive", "pending"] = "active"
    verified: bool = True


class Sep1330(BaseModel):
    """The five enum variants the conformance scenario elicitation-sep1330-enums checks."""

    untitledSingle: Literal["option1", "option2", "option3"]
    titledSingle: Annotated[
        Literal["value1", "value2", "value3"],
        choice_titles(
            {"value1": "First Option", "value2": "Second Option", "value3": "Third Option"}
        ),
    ]
    legacyEnum: Annotated[
        Literal["opt1", "opt2", "opt3"],
        choice_titles(
            {"opt1": "Option One", "opt2": "Option Two", "opt3": "Option Three"},
            enum_names=True,
        ),
    ]
    untitledMulti: list[Literal["option1", "option2", "option3"]]
    titledMulti: Annotated[
        list[Literal["value1", "value2", "value3"]],
        choice_titles(
            {"value1": "First Choice", "value2": "Second Choice", "value3": "Third Choice"}
        ),
    ]


def test_the_defaults_scenario_gets_a_default_of_every_primitive_type() -> None:
    properties = elicit_form("?", Sep1034).params["requestedSchema"]["properties"]
    assert properties == {
        "name": {"type": "string", "default": "John Doe"},
        "age": {"type": "integer", "default": 30},
        "score": {"type": "number", "default": 95.5},
        "status": {
            "type": "string",
            "default": "active",
            "enum": ["active", "inactive", "pending"],
        },
        "verified": {"type": "boolean", "default": True},
    }


def test_the_enums_scenario_gets_all_five_variants() -> None:
    properties = elicit_form("?", Sep1330).params["requestedSchema"]["properties"]
    assert properties["untitledSingle"] == {
        "type": "string",
        "enum": ["option1", "option2", "option3"],
    }
    assert properties["titledSingle"] == {
        "type": "string",
        "oneOf": [
            {"const": "value1", "title": "First Option"},
            {"const": "value2", "title": "Second Option"},
            {"const": "value3", "title": "Third Option"},
        ],
    }
    assert properties["legacyEnum"] == {
        "type": "string",
        "enum": ["opt1", "opt2", "opt3"],
        "enumNames": ["Option One", "Option Two", "Option Three"],
    }
    assert properties["untitledMulti"] == {
        "type": "array",
        "items": {"type": "string", "enum": ["option1", "option2", "option3"]},
    }
    assert properties["titledMulti"] == {
        "type": "array",
        "items": {
            "anyOf": [
                {"const": "value1", "title": "First Choice"},
                {"const": "value2", "title": "Second Choice"},
                {"const": "value3", "title": "Third Choice"},
            ]
        },
    }


class OneChoice(BaseModel):
    only: Literal["yes"]


class UnannouncedFormat(BaseModel):
    ticket: Annotated[str, Field(json_schema_extra={"format": "uuid"})]


def test_a_single_literal_is_a_one_choice_enum_and_unknown_formats_stay_off_the_wire() -> None:
    assert elicit_form("?", OneChoice).params["requestedSchema"]["properties"] == {
        "only": {"type": "string", "enum": ["yes"]}
    }
    assert elicit_form("?", UnannouncedFormat).params["requestedSchema"]["properties"] == {
        "ticket": {"type": "string"}
    }


class MissingTitle(BaseModel):
    pick: Annotated[Literal["a", "b"], choice_titles({"a": "A"})]


class ExtraTitle(BaseModel):
    pick: Annotated[Literal["a"], choice_titles({"a": "A", "z": "Z"})]


class TitledText(BaseModel):
    text: Annotated[str, choice_titles({"a": "A"})]


class EnumNamesOnAList(BaseModel):
    picks: Annotated[list[Literal["a"]], choice_titles({"a": "A"}, enum_names=True)]


class NumberChoices(BaseModel):
    level: Literal[1, 2, 3]


class FreeList(BaseModel):
    words: list[str]


class Password(BaseModel):
    secret: SecretStr


@pytest.mark.parametrize(
    ("model", "message"),
    [
        (MissingTitle, "exactly the choices"),
        (ExtraTitle, "exactly the choices"),
        (TitledText, "needs a choice field"),
        (EnumNamesOnAList, "single choices"),
        (NumberChoices, "choices in a form are strings"),
        (FreeList, "multi-select of string choices"),
        (Password, "elicit_url"),
    ],
)
def test_forms_the_spec_cannot_carry_are_refused_when_built(
    model: type[BaseModel], message: str
) -> None:
    with pytest.raises(TypeError, match=message):
        elicit_form("?", model)


@pytest.mark.parametrize("titles", [{}, {"a": ""}, {"a": 1}, {1: "One"}])
def test_choice_titles_are_non_empty_strings(titles: dict[Any, Any]) -> None:
    with pytest.raises(TypeError, match="choice_titles"):
        choice_titles(titles)


# -- answers, strictly ---------------------------------------------------------------------------


def context(answer: Json) -> Context:
    return Context(
        answers={"form": answer},
        request_state=None,
        client_capabilities=ClientCapabilities({"elicitation": {"form": {}}}),
        protocol_version="2026-07-28",
        era="modern",
    )


VALID_CONTENT: Json = {
    "name": "Ada",
    "email": "ada@example.com",
    "homepage": "https://example.com/",
    "born": "1815-12-10",
    "meeting": "2026-07-28T10:00:00Z",
    "age": 36,
    "score": 1,
    "verified": False,
    "plan": "pro",
    "region": "us-east-1",
    "size": "l",
    "legacy": "b",
    "tags": ["green", "blue"],
    "regions": ["eu-west-1", "us-east-1"],
}


def test_a_full_valid_answer_is_accepted_with_typed_values() -> None:
    answer = context({"action": "accept", "content": VALID_CONTENT}).form_answer("form", Every)
    assert isinstance(answer, Accepted)
    form = answer.content
    assert form.born == datetime.date(1815, 12, 10)
    assert form.region is Region.US
    assert form.tags == ["green", "blue"]
    assert form.regions == [Region.EU, Region.US]


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("tags", "green"),  # one value where an array of values is asked
        ("tags", ["green", "purple"]),  # a value nobody offered
        ("tags", []),  # fewer than minItems
        ("tags", ["red", "green", "blue"]),  # more than maxItems
        ("tags", [1]),
        ("regions", ["Europe"]),  # the title, not the value
        ("size", "Large"),
        ("size", ["l"]),
        ("legacy", "Option B"),
        ("plan", "enterprise"),
        ("region", "EU"),
        ("age", "36"),
        ("age", 151),
        ("age", 36.5),
        ("verified", "false"),
        ("verified", 0),
        ("born", "10/12/1815"),
        ("name", "x" * 41),
        ("nickname", "UPPER"),
    ],
)
def test_an_answer_outside_the_form_is_no_answer(field: str, value: object) -> None:
    content = {**VALID_CONTENT, field: value}
    ctx = context({"action": "accept", "content": content})
    assert ctx.form_answer("form", Every) is None
    # The next time the form is asked, the user is told what was wrong with the answer.
    asked = ctx.request_input({"form": elicit_form("Sign up", Every)})
    assert asked.requests["form"].params["message"].startswith("That answer was not valid")


CHOICES = ["option1", "option2", "option3"]


@given(st.lists(st.one_of(st.sampled_from([*CHOICES, "option4", "Option1"]), st.integers())))
def test_a_multi_select_answer_is_accepted_exactly_when_it_holds_offered_values(
    picks: list[object],
) -> None:
    content = {
        "untitledSingle": "option1",
        "titledSingle": "value1",
        "legacyEnum": "opt1",
        "untitledMulti": picks,
        "titledMulti": ["value2"],
    }
    answer = context({"action": "accept", "content": content}).form_answer("form", Sep1330)
    if all(pick in CHOICES for pick in picks):
        assert isinstance(answer, Accepted)
        assert answer.content.untitledMulti == picks
    else:
        assert answer is None


@given(st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=8), st.lists))
def test_a_single_choice_takes_only_an_offered_string(value: object) -> None:
    content = {**VALID_CONTENT, "size": value}
    answer = context({"action": "accept", "content": content}).form_answer("form", Every)
    if value in ("s", "m", "l"):
        assert isinstance(answer, Accepted)
    else:
        assert answer is None


# -- on the wire, both eras ------------------------------------------------------------------------


def form_registry() -> Registry:
    registry = Registry()

    @registry.tool()
    async def test_elicitation_sep1330_enums(*, ctx: Context) -> ToolResult | Any:
        answer = ctx.form_answer("enums", Sep1330)
        if answer is None:
            return ctx.request_input({"enums": elicit_form("Pick", Sep1330)})
        content = answer.content.model_dump() if isinstance(answer, Accepted) else None
        return ToolResult.of(f"Elicitation completed: content={json.dumps(content)}")

    return registry


SEP1330_ANSWER: Json = {
    "untitledSingle": "option1",
    "titledSingle": "value1",
    "legacyEnum": "opt1",
    "untitledMulti": ["option1", "option2"],
    "titledMulti": ["value1", "value2"],
}


@pytest.mark.parametrize("era", ["modern", "legacy"])
async def test_the_form_travels_and_its_answer_comes_back_in_both_eras(era: str) -> None:
    seen: list[Json] = []
    reply = answers({"enums": SEP1330_ANSWER})

    async def elicitation(params: Json) -> Any:
        seen.append(params)
        return await reply(params)

    client = MemoryClient(
        make_server(registry=form_registry()),
        capabilities=ALL_CAPABILITIES,
        elicitation=elicitation,
    )
    if era == "legacy":
        await client.initialize()
    result = await client.call_tool("test_elicitation_sep1330_enums")
    assert result.text == (f"Elicitation completed: content={json.dumps(SEP1330_ANSWER)}")
    assert seen[0]["requestedSchema"] == elicit_form("Pick", Sep1330).params["requestedSchema"]
