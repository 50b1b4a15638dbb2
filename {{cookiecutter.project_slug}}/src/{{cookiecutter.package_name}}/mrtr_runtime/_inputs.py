"""Input requests a handler can ask the client to resolve, and the answers that come back.

2026-07-28 basic/patterns/mrtr: each `inputRequests` value "MUST be one of ElicitRequest,
CreateMessageRequest, or ListRootsRequest", carried as `{method, params}` with no id; each
`inputResponses` value is the client's whole result for it (an ElicitResult, a
CreateMessageResult or a ListRootsResult).
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import Enum
from typing import TYPE_CHECKING, Any, Final

if TYPE_CHECKING:
    from pydantic import BaseModel

from ._wire import ELICIT, LIST_ROOTS, SAMPLE

__all__ = (
    "ChoiceTitles",
    "InputRequest",
    "choice_titles",
    "elicit_form",
    "elicit_url",
    "list_roots",
    "sample",
)


@dataclass(frozen=True)
class InputRequest:
    """One thing to ask the client: build it with `elicit_form`, `elicit_url`, `sample`...."""

    method: str
    params: Mapping[str, Any]
    #: What the client must have declared before this may be sent (mrtr: "Servers MUST NOT
    #: send an inputRequests that the client has not declared support for").
    required_capabilities: Mapping[str, Any] = field(default_factory=dict)

    def to_wire(self) -> dict[str, Any]:
        if not self.params:
            return {"method": self.method}
        return {"method": self.method, "params": dict(self.params)}


# client/elicitation "Supported Schema Types" (schema.ts PrimitiveSchemaDefinition): flat
# objects whose properties are StringSchema, NumberSchema, BooleanSchema or one of the enum
# schemas (single-select `enum` / titled `oneOf`, multi-select arrays, legacy `enumNames`).
_PRIMITIVE_TYPES: Final = frozenset({"string", "number", "integer", "boolean"})
_KEPT_KEYWORDS: Final = frozenset(
    {
        "type",
        "title",
        "description",
        "default",
        "enum",
        "enumNames",
        "format",
        "pattern",
        "minLength",
        "maxLength",
        "minimum",
        "maximum",
    }
)
_ARRAY_KEYWORDS: Final = frozenset(
    {"type", "title", "description", "default", "minItems", "maxItems"}
)
#: StringSchema `format`: the only ones a client is asked to render; others are checked on the
#: answer but not announced.
_STRING_FORMATS: Final = frozenset({"email", "uri", "date", "date-time"})


@dataclass(frozen=True)
class ChoiceTitles:
    """What `choice_titles` puts in a field's `Annotated[...]`: a title for every choice."""

    titles: tuple[tuple[str, str], ...]
    enum_names: bool = False


def choice_titles(titles: Mapping[Any, str], *, enum_names: bool = False) -> ChoiceTitles:
    """Titles a person reads for a choice field's values, used in `Annotated[...]`:

        plan: Annotated[Literal["free", "pro"], choice_titles({"free": "Free", "pro": "Pro"})]
        extras: Annotated[list[Literal["ssd", "gpu"]], choice_titles({"ssd": "SSD", "gpu": "GPU"})]

    A single choice becomes `oneOf: [{const, title}]` and a list of choices `items.anyOf` (the
    titled enum schemas of client/elicitation); `enum_names=True` on a single choice sends the
    deprecated `enum` + `enumNames` instead, for clients that know only that. Keys are the
    values (an `Enum` member stands for its value); every value needs a title.
    """
    pairs = tuple(
        (key.value if isinstance(key, Enum) else key, title) for key, title in titles.items()
    )
    if not pairs or not all(
        isinstance(key, str) and isinstance(title, str) and title for key, title in pairs
    ):
        raise TypeError("choice_titles takes a non-empty mapping of str values to str titles")
    return ChoiceTitles(pairs, enum_names)


def _resolved(schema: Mapping[str, Any], definitions: Mapping[str, Any]) -> dict[str, Any]:
    """`schema` with an `Enum`'s `$ref` (pydantic puts enums in `$defs`) replaced inline."""
    ref = schema.get("$ref")
    if not isinstance(ref, str):
        return dict(schema)
    target = definitions.get(ref.rpartition("/")[2], {})
    # The enum class's own name is not a title the author wrote for this field.
    inline = {key: value for key, value in target.items() if key != "title"}
    return {**inline, **{key: value for key, value in schema.items() if key != "$ref"}}


def _choices(schema: dict[str, Any]) -> list[Any] | None:
    if "const" in schema:  # Literal["only"]: one choice
        schema["enum"] = [schema.pop("const")]
    choices = schema.get("enum")
    return choices if isinstance(choices, list) else None


def _titled(titles: ChoiceTitles, choices: list[Any], where: str) -> list[dict[str, str]]:
    by_value = dict(titles.titles)
    if set(by_value) != set(choices):
        raise TypeError(
            f"{where}: choice_titles must title exactly the choices {choices}, "
            f"not {sorted(by_value)}"
        )
    return [{"const": value, "title": by_value[value]} for value in choices]


def _primitive_property(
    model: type[BaseModel], name: str, schema: Mapping[str, Any], definitions: Mapping[str, Any]
) -> dict[str, Any]:
    where = f"{model.__name__}.{name}"
    schema = _resolved(schema, definitions)
    options = schema.get("anyOf")
    if isinstance(options, list):
        # `x: str | None = None` is an optional primitive, not a union the client must render.
        non_null = [option for option in options if option.get("type") != "null"]
        if len(non_null) == 1:
            merged = {key: value for key, value in schema.items() if key != "anyOf"}
            schema = {**_resolved(non_null[0], definitions), **merged}
    fields = {field.alias or field_name: field for field_name, field in model.model_fields.items()}
    field = fields[name]
    titles = next((item for item in field.metadata if isinstance(item, ChoiceTitles)), None)
    kind = schema.get("type")
    if kind == "array":
        prop = _multi_select(schema, definitions, titles, where)
    elif kind in _PRIMITIVE_TYPES:
        prop = _single_value(schema, titles, where)
    else:
        raise TypeError(
            f"{where}: elicitation forms allow only flat string, number, integer or boolean "
            "fields, choices (Literal[...] or an Enum) and lists of choices"
        )
    # Pydantic invents a title for every field; keep only the ones the author wrote.
    if field.title is None:
        prop.pop("title", None)
    if prop.get("default", ...) is None:
        del prop["default"]
    return prop


def _single_value(
    schema: dict[str, Any], titles: ChoiceTitles | None, where: str
) -> dict[str, Any]:
    kind = schema["type"]
    choices = _choices(schema)
    if choices is not None and (kind != "string" or not all(isinstance(c, str) for c in choices)):
        # schema.ts: every enum schema holds strings.
        raise TypeError(f"{where}: choices in a form are strings (Literal['a', 'b'] or a str Enum)")
    if schema.get("format") == "password":
        raise TypeError(
            f"{where}: client/elicitation forbids asking for secrets in a form; use elicit_url"
        )
    if "format" in schema and schema["format"] not in _STRING_FORMATS:
        del schema["format"]
    # "type" first, as people write schemas (and as the spec's elicitation examples read).
    prop = {"type": kind} | {key: value for key, value in schema.items() if key in _KEPT_KEYWORDS}
    if titles is None:
        return prop
    if choices is None:
        raise TypeError(f"{where}: choice_titles needs a choice field (Literal[...] or an Enum)")
    titled = _titled(titles, choices, where)
    if titles.enum_names:
        prop["enumNames"] = [choice["title"] for choice in titled]
        return prop
    # TitledSingleSelectEnumSchema: oneOf replaces enum (the default stays last).
    del prop["enum"]
    default = prop.pop("default", None)
    prop["oneOf"] = titled
    if default is not None:
        prop["default"] = default
    return prop


def _multi_select(
    schema: Mapping[str, Any],
    definitions: Mapping[str, Any],
    titles: ChoiceTitles | None,
    where: str,
) -> dict[str, Any]:
    items = _resolved(schema.get("items", {}), definitions)
    choices = _choices(items)
    if choices is None or not all(isinstance(choice, str) for choice in choices):
        raise TypeError(
            f"{where}: a list in a form must be a multi-select of string choices "
            "(list[Literal['a', 'b']]), not flat values of its own"
        )
    prop = {"type": "array"} | {
        key: value for key, value in schema.items() if key in _ARRAY_KEYWORDS
    }
    if titles is not None and titles.enum_names:
        raise TypeError(f"{where}: enumNames is for single choices; drop enum_names=True")
    if titles is None:
        prop["items"] = {"type": "string", "enum": choices}
    else:
        prop["items"] = {"anyOf": _titled(titles, choices, where)}
    if "default" in prop:
        prop["default"] = prop.pop("default")  # after items, as schema.ts lists them
    return prop


@functools.cache
def _requested_schema(model: type[BaseModel]) -> dict[str, Any]:
    generated = model.model_json_schema(by_alias=True)
    definitions = generated.get("$defs", {})
    properties = {
        name: _primitive_property(model, name, schema, definitions)
        for name, schema in generated.get("properties", {}).items()
    }
    requested: dict[str, Any] = {"type": "object", "properties": properties}
    if generated.get("required"):
        requested["required"] = list(generated["required"])
    return requested


def elicit_form(message: str, schema: type[BaseModel]) -> InputRequest:
    """Ask the user to fill in a form whose fields are those of `schema`, an ordinary model.

    Each field becomes one of client/elicitation's primitive schemas: `str` (with
    `Field(min_length=, max_length=, pattern=)`; `date`, `datetime` and `AnyUrl` send their
    `format`), `int` / `float` (with `ge=` / `le=`), `bool`, a choice (`Literal[...]` or a str
    `Enum`; titled with `choice_titles`) or a list of choices (`list[Literal[...]]`, with
    `min_length=` / `max_length=` as minItems / maxItems). Defaults, titles and descriptions
    come from the fields. The answer is validated strictly against the same model
    (`ctx.form_answer`): a multi-select answer is an array of the allowed values.

    client/elicitation: servers "MUST NOT use form mode elicitation to request sensitive
    information" such as passwords or API keys; use `elicit_url` for those.
    """
    return InputRequest(
        ELICIT,
        {"message": message, "requestedSchema": _requested_schema(schema)},
        {"elicitation": {"form": {}}},
    )


def elicit_url(message: str, url: str) -> InputRequest:
    """Send the user to `url` (sign-in, payment, anything secret); the answer is only `action`."""
    return InputRequest(
        ELICIT, {"mode": "url", "message": message, "url": url}, {"elicitation": {"url": {}}}
    )


def sample(
    prompt: str | Sequence[Mapping[str, Any]],
    *,
    max_tokens: int,
    system_prompt: str | None = None,
    temperature: float | None = None,
) -> InputRequest:
    """Ask the client's model for a completion (`prompt` text or full sampling messages).

    Sampling is deprecated in 2026-07-28 (SEP-2577) but still part of the protocol.
    """
    if isinstance(prompt, str):
        messages: list[Any] = [{"role": "user", "content": {"type": "text", "text": prompt}}]
    else:
        messages = [dict(message) for message in prompt]
    params: dict[str, Any] = {"messages": messages, "maxTokens": max_tokens}
    if system_prompt is not None:
        params["systemPrompt"] = system_prompt
    if temperature is not None:
        params["temperature"] = temperature
    return InputRequest(SAMPLE, params, {"sampling": {}})


def list_roots() -> InputRequest:
    """Ask which filesystem roots the client exposes (client/roots)."""
    return InputRequest(LIST_ROOTS, {}, {"roots": {}})
