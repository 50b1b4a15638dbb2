"""What a test reads from a tool call: `ToolCallResult`, typed, from the wire's CallToolResult.

`call_tool` returns it on both clients. It holds the final CallToolResult's parts under
Python names (2026-07-28 server/tools: ``content``, ``structuredContent``, ``isError``), the
progress the call was sent (basic/utilities/progress) and the input rounds it took
(basic/patterns/mrtr). Standard library only.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple, cast

__all__ = ("Progress", "ToolCallResult")

# The 0.4 face (call_tool returned the wire dict) -> what to write now.
_OLD_KEYS: Mapping[str, str] = {
    "content": "result.content (the blocks) or result.text (their text, joined)",
    "structuredContent": "result.structured",
    "isError": "result.is_error",
}


class Progress(NamedTuple):
    """One ``notifications/progress`` a call was sent: its progress, total and message."""

    progress: float
    total: float | None = None
    message: str | None = None


@dataclass(frozen=True, slots=True)
class ToolCallResult:
    """The final result of a ``tools/call``, after every input round.

    ``text`` is the text blocks' text, joined by newlines; ``structured`` the
    ``structuredContent`` (``{}`` when the tool sent none: a tool returning a model always
    sends it, and a test indexes it without a None check); ``is_error`` whether the tool
    reported an error (an ``isError`` result is returned, never raised); ``content`` the
    content blocks as they came (dicts); ``progress`` the progress notifications this call
    was sent, in order, as ``(progress, total, message)``; ``rounds`` how many times it was
    asked for input (0: answered at once) and ``asked`` the input keys each time asked, sorted
    (rounds of the request first, then questions asked inside its task).
    ``task_id`` is the task the server made of the call (tasks extension), which the client
    followed to its end; None for a call answered in its response.
    """

    content: tuple[dict[str, Any], ...]
    structured: dict[str, Any] = field(default_factory=dict)
    is_error: bool = False
    progress: tuple[Progress, ...] = ()
    asked: tuple[tuple[str, ...], ...] = ()
    task_id: str | None = None
    _wire: Mapping[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def from_wire(
        cls,
        result: Mapping[str, Any],
        *,
        progress: Sequence[Progress] = (),
        asked: Sequence[Sequence[str]] = (),
        task_id: str | None = None,
    ) -> ToolCallResult:
        """Read a CallToolResult (as a client gets it off the wire, already validated JSON)."""
        content = result.get("content")
        structured = result.get("structuredContent")
        blocks = cast("list[object]", content) if isinstance(content, list) else []
        return cls(
            content=tuple(
                dict(cast("Mapping[str, Any]", block))
                for block in blocks
                if isinstance(block, Mapping)
            ),
            structured=(
                dict(cast("Mapping[str, Any]", structured))
                if isinstance(structured, Mapping)
                else {}
            ),
            is_error=result.get("isError") is True,
            progress=tuple(progress),
            asked=tuple(tuple(keys) for keys in asked),
            task_id=task_id,
            _wire=result,
        )

    @property
    def text(self) -> str:
        """The text of the ``text`` blocks, in order, joined by newlines ("" when none)."""
        return "\n".join(
            block["text"]
            for block in self.content
            if block.get("type") == "text" and isinstance(block.get("text"), str)
        )

    @property
    def rounds(self) -> int:
        """How many times the call was asked for input: its retries after the first request,
        and the `tasks/update`s of the task it became."""
        return len(self.asked)

    # -- the 0.4 face, kept for tests written on it ----------------------------------------------

    def __getitem__(self, key: str) -> Any:
        """``result["content"]``, as when `call_tool` returned the wire dict, with a warning.

        A DeprecationWarning names what to write instead; under the project's
        ``filterwarnings = ["error"]`` that fails the test with the same message.
        """
        _warn_old_face(key)
        return self._wire[key]

    def __contains__(self, key: object) -> bool:
        _warn_old_face(key)
        return key in self._wire

    def get(self, key: str, default: Any = None) -> Any:
        """``result.get("structuredContent")`` on the 0.4 face, with the same warning."""
        _warn_old_face(key)
        return self._wire.get(key, default)


def _warn_old_face(key: object) -> None:
    # stacklevel 3: the test's line, past this helper and the dunder that called it.
    instead = _OLD_KEYS.get(key) if isinstance(key, str) else None
    warnings.warn(
        f"call_tool() returns a ToolCallResult since runtime 0.5.0; result[{key!r}] reads the "
        f"old wire dict: write {instead or 'the ToolCallResult attribute'} instead "
        "(.text, .structured, .is_error, .content, .progress, .rounds)",
        DeprecationWarning,
        stacklevel=3,
    )
