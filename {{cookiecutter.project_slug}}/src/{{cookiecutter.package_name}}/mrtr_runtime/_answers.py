"""The answers a client sends back: ElicitResult, SamplingResult and RootsResult.

2026-07-28 basic/patterns/mrtr: each `inputResponses` value is the client's whole result for
its request. Handlers validate answers into these with `ctx.input_response_as(key, Model)`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Generic, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field

from ._wire import LIST_ROOTS, SAMPLE

__all__ = (
    "Accepted",
    "Cancelled",
    "Declined",
    "ElicitResult",
    "Root",
    "RootsResult",
    "SamplingResult",
    "answer_model",
)

ContentT = TypeVar("ContentT")


@dataclass(frozen=True, slots=True)
class Accepted(Generic[ContentT]):
    """The user filled in the form and sent it: `content` is the form, validated."""

    content: ContentT


@dataclass(frozen=True, slots=True)
class Declined:
    """The user said no to the question (client/elicitation action "decline")."""


@dataclass(frozen=True, slots=True)
class Cancelled:
    """The user dismissed the question without answering (action "cancel")."""


class ElicitResult(BaseModel, Generic[ContentT]):
    """The answer to an elicitation: `action` plus, on accept, the form's `content`.

    Declining and cancelling are ordinary answers (client/elicitation: servers "MUST handle
    cases where the user declines or cancels"), so a handler branches on them.
    """

    model_config = ConfigDict(defer_build=True, extra="ignore")

    action: Literal["accept", "decline", "cancel"]
    content: ContentT | None = None

    @property
    def accepted(self) -> bool:
        return self.action == "accept" and self.content is not None


class SamplingResult(BaseModel):
    model_config = ConfigDict(defer_build=True, extra="ignore", populate_by_name=True)

    role: Literal["user", "assistant"]
    content: dict[str, Any] | list[dict[str, Any]]
    model: str = ""
    stop_reason: str | None = Field(default=None, alias="stopReason")

    @property
    def text(self) -> str:
        blocks = self.content if isinstance(self.content, list) else [self.content]
        return "".join(
            str(block.get("text", "")) for block in blocks if block.get("type") == "text"
        )


class Root(BaseModel):
    model_config = ConfigDict(defer_build=True, extra="ignore")

    uri: str
    name: str | None = None


class RootsResult(BaseModel):
    model_config = ConfigDict(defer_build=True, extra="ignore")

    roots: list[Root]


#: The model each non-elicitation answer is validated into, once, when it arrives.
_ANSWER_MODELS: dict[str, type[BaseModel]] = {SAMPLE: SamplingResult, LIST_ROOTS: RootsResult}


def answer_model(method: str) -> type[BaseModel] | None:
    return _ANSWER_MODELS.get(method)
