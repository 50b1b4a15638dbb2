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
from typing import TYPE_CHECKING, Any, Final

if TYPE_CHECKING:
    from pydantic import BaseModel

from ._wire import ELICIT, LIST_ROOTS, SAMPLE

__all__ = (
    "InputRequest",
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


# client/elicitation "Supported Schema Types": flat objects of primitives only.
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


def _primitive_property(
    model: type[BaseModel], name: str, schema: Mapping[str, Any]
) -> dict[str, Any]:
    options = schema.get("anyOf")
    if isinstance(options, list):
        # `x: str | None = None` is an optional primitive, not a union the client must render.
        non_null = [option for option in options if option.get("type") != "null"]
        if len(non_null) == 1:
            merged = {key: value for key, value in schema.items() if key != "anyOf"}
            schema = {**non_null[0], **merged}
    kind = schema.get("type")
    if kind not in _PRIMITIVE_TYPES:
        raise TypeError(
            f"{model.__name__}.{name}: elicitation forms allow only flat string, number, "
            "integer or boolean fields (use Literal[...] for choices)"
        )
    # "type" first, as people write schemas (and as the spec's elicitation examples read).
    prop = {"type": kind} | {key: value for key, value in schema.items() if key in _KEPT_KEYWORDS}
    # Pydantic invents a title for every field; keep only the ones the author wrote.
    fields = {field.alias or field_name: field for field_name, field in model.model_fields.items()}
    if fields[name].title is None:
        prop.pop("title", None)
    if prop.get("default", ...) is None:
        del prop["default"]
    return prop


@functools.cache
def _requested_schema(model: type[BaseModel]) -> dict[str, Any]:
    generated = model.model_json_schema(by_alias=True)
    properties = {
        name: _primitive_property(model, name, schema)
        for name, schema in generated.get("properties", {}).items()
    }
    requested: dict[str, Any] = {"type": "object", "properties": properties}
    if generated.get("required"):
        requested["required"] = list(generated["required"])
    return requested


def elicit_form(message: str, schema: type[BaseModel]) -> InputRequest:
    """Ask the user to fill in a form whose fields are those of `schema` (flat primitives).

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
