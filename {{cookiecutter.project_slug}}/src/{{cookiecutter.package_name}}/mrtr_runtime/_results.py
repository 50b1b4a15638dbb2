"""What handlers return: a finished result, a request for input, or an error for the user."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ._errors import MrtrError
from ._inputs import InputRequest
from ._removed import Removed

if TYPE_CHECKING:
    from ._content import ContentBlock

__all__ = ("InputRequired", "ToolError", "ToolResult", "structured_json")


def _text(text: str) -> dict[str, Any]:
    # _content.text_block's shape; _content itself loads with the tools, not at start-up.
    return {"type": "text", "text": text}


def structured_json(data: Any) -> Any:
    """`structuredContent` of a tool's data: a pydantic model as JSON, anything else as is.

    An optional field left at None is left out, in nested models too: its output schema does
    not require it, and a host that hands the model `structuredContent` (not the text) should
    not make it read `"stack_id": null` for "there is none". A required field keeps its null.
    """
    dump = getattr(data, "model_dump", None)
    if not callable(dump):
        return data
    return dump(mode="json", by_alias=True, exclude=_unset_optionals(data) or None)


def _unset_optionals(model: Any) -> dict[Any, Any]:
    """pydantic's `exclude` for the optional fields of `model` (and of the models inside it,
    in fields, lists and mappings) whose value is None."""
    left_out: dict[Any, Any] = {}
    for name, declared in type(model).model_fields.items():
        value = getattr(model, name)
        if value is None:
            if not declared.is_required():
                left_out[name] = True
            continue
        if hasattr(type(value), "model_fields"):
            inner: dict[Any, Any] = _unset_optionals(value)
        elif isinstance(value, (list, tuple)):
            inner = _inside(enumerate(value))
        elif isinstance(value, Mapping):
            inner = _inside(value.items())
        else:
            continue
        if inner:
            left_out[name] = inner
    return left_out


def _inside(items: Any) -> dict[Any, Any]:
    found = {}
    for key, item in items:
        if hasattr(type(item), "model_fields") and (inner := _unset_optionals(item)):
            found[key] = inner
    return found


@dataclass(frozen=True)
class ToolResult:
    """A finished tool call: content blocks, optional structured content, and the error flag.

    server/tools: tool execution errors (bad input, failed API calls, business rules) are
    results with `isError: true` so the model can see them and correct itself.
    """

    content: Sequence[Mapping[str, Any]] = ()
    structured: Any = None
    is_error: bool = False

    if not TYPE_CHECKING:  # gone in 0.5.0; hidden from mypy, which reports the old names
        text = Removed("ToolResult.text(t) is ToolResult.of(t)")
        summarized = Removed(
            "ToolResult.summarized(s, model) is ToolResult.of(s, structured=model)"
        )

    @classmethod
    def of(
        cls, *blocks: ContentBlock | str, structured: Any = None, is_error: bool = False
    ) -> ToolResult:
        """Any mix of content blocks (`content.image`, `content.resource_link`...; a str is a
        text block), in order, with optional structured content (a pydantic model is dumped to
        JSON). `ToolResult.of(summary, structured=report)` gives a model's data with the text a
        person reads. server/tools: a tool with structured content SHOULD also give its JSON as
        text, so say what it holds in that text when a host may show only text."""
        content = tuple(_text(block) if isinstance(block, str) else block for block in blocks)
        for block in content:
            if not isinstance(block, dict) or not isinstance(block.get("type"), str):
                raise TypeError(
                    "ToolResult.of takes str or content blocks (content.text, content.image, "
                    f"...), not {type(block).__name__}"
                )
        return cls(content=content, structured=structured_json(structured), is_error=is_error)

    @classmethod
    def error(cls, text: str) -> ToolResult:
        """A result with `isError: true` and `text`: what went wrong, for the model to act on."""
        return cls(content=(_text(text),), is_error=True)

    def to_wire(self) -> dict[str, Any]:
        wire: dict[str, Any] = {"content": [dict(block) for block in self.content]}
        if self.structured is not None:
            wire["structuredContent"] = self.structured
        if self.is_error:
            wire["isError"] = True
        return wire


class ToolError(MrtrError):
    """Raise from a tool to end the call with an `isError` result carrying this message."""


@dataclass(frozen=True)
class InputRequired:
    """A handler's request for more input; made by `Context.request_input`, returned as is.

    An empty `requests` is legal: the client retries with the fresh requestState alone
    (mrtr: at least one of inputRequests or requestState MUST be present; we always mint one).
    """

    requests: Mapping[str, InputRequest] = field(default_factory=dict)
    #: The handler's own JSON value, signed into requestState and given back next round.
    state: object = None
    #: Keys asked again because their answer did not fit the form, with why (the runtime's:
    #: a task says so in its statusMessage; the questions' messages already start with it).
    rejected: Mapping[str, str] = field(default_factory=dict, compare=False, repr=False)
