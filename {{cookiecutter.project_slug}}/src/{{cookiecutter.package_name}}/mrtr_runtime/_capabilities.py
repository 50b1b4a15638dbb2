"""What the client said it can do, and whether that covers what a request needs.

2026-07-28 basic/index: capabilities arrive with every request in
`params._meta["io.modelcontextprotocol/clientCapabilities"]`, and "Servers MUST NOT infer
capabilities from prior requests". In the 2025-11-25 era they arrive once, in `initialize`.
Both have the same shape, so one type serves both.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = ("ClientCapabilities",)


def _is_object(value: object) -> bool:
    return isinstance(value, Mapping)


@dataclass(frozen=True)
class ClientCapabilities:
    """A client's declared capabilities, as sent (`raw`), with the questions tools ask of it."""

    raw: Mapping[str, Any] = field(default_factory=dict)

    @property
    def elicitation_form(self) -> bool:
        elicitation = self.raw.get("elicitation")
        if not isinstance(elicitation, Mapping):
            return False
        # client/elicitation: `elicitation: {}` "is equivalent to declaring support for form
        # mode only".
        return "form" in elicitation or "url" not in elicitation

    @property
    def elicitation_url(self) -> bool:
        elicitation = self.raw.get("elicitation")
        return isinstance(elicitation, Mapping) and _is_object(elicitation.get("url"))

    @property
    def sampling(self) -> bool:
        return _is_object(self.raw.get("sampling"))

    @property
    def sampling_tools(self) -> bool:
        sampling = self.raw.get("sampling")
        return isinstance(sampling, Mapping) and _is_object(sampling.get("tools"))

    @property
    def roots(self) -> bool:
        return _is_object(self.raw.get("roots"))

    def extension(self, name: str) -> bool:
        """Whether the client declared the extension `name` (`extensions: {name: {...}}`)."""
        extensions = self.raw.get("extensions")
        return isinstance(extensions, Mapping) and _is_object(extensions.get(name))

    def missing(self, requirement: Mapping[str, Any]) -> dict[str, Any]:
        """The part of `requirement` this client did not declare (empty when all is there).

        The result is itself a ClientCapabilities-shaped object, as the -32021 error's
        `data.requiredCapabilities` wants it.
        """
        lacking: dict[str, Any] = {}
        for name, detail in requirement.items():
            if name == "elicitation":
                modes = detail if isinstance(detail, Mapping) else {}
                wanted = [mode for mode in ("form", "url") if mode in modes] or ["form"]
                absent = [
                    mode
                    for mode in wanted
                    if not (self.elicitation_form if mode == "form" else self.elicitation_url)
                ]
                if absent:
                    lacking["elicitation"] = {mode: {} for mode in absent}
            elif name == "sampling":
                if not self.sampling:
                    lacking["sampling"] = dict(detail) if isinstance(detail, Mapping) else {}
                elif isinstance(detail, Mapping) and "tools" in detail and not self.sampling_tools:
                    lacking["sampling"] = {"tools": {}}
            elif not _is_object(self.raw.get(name)):
                lacking[name] = dict(detail) if isinstance(detail, Mapping) else {}
        return lacking

    def supports(self, requirement: Mapping[str, Any]) -> bool:
        return not self.missing(requirement)
