"""Names the tool face lost in 0.5.0, each failing where it is used with what to write instead.

A tool written for 0.4.0 must not end in a bare ImportError, nor in "failed with AttributeError"
only once a client calls it: the old name says what replaced it (CHANGELOG.md, 0.5.0). None of
this type-checks: mypy still reports each old name in a project (the shims are hidden from it).
Standard library only, like the face's start-up path.
"""

from __future__ import annotations

import re
from typing import Final, NoReturn

__all__ = ("FACE_NAMES", "READ_ANSWERS", "Removed", "import_hint")

_CONTENT = "(from ..mrtr_runtime import content)"
#: What replaces Context's raw readers (`input_response`, `input_responses`, `has_...`).
READ_ANSWERS: Final = (
    "read an answer with ctx.form_answer(key, Form) or ctx.input_response_as(key, Model)"
)

#: The tool face's (`mrtr_runtime`) removed names, with the sentence that replaces each.
FACE_NAMES: Final = {
    "text_block": f"text_block moved: use content.text {_CONTENT}",
    "image_block": f"image_block moved: use content.image {_CONTENT}",
    "audio_block": f"audio_block moved: use content.audio {_CONTENT}",
    "resource_link": f"resource_link moved: use content.resource_link {_CONTENT}",
    "embedded_text": f"embedded_text moved: use content.embedded_text {_CONTENT}",
    "embedded_blob": f"embedded_blob moved: use content.embedded_blob {_CONTENT}",
    "text_contents": f"text_contents moved: use content.text_contents {_CONTENT}",
    "blob_contents": f"blob_contents moved: use content.blob_contents {_CONTENT}",
    "prompt_message": f"prompt_message moved: use content.prompt_message {_CONTENT}",
    "ContentBlock": f"ContentBlock moved: use content.ContentBlock {_CONTENT}",
    "ElicitResult": (
        "ElicitResult was removed: read a form's answer with ctx.form_answer(key, Form), "
        "which gives Accepted(content), Declined() or Cancelled()"
    ),
    "Root": (
        "Root was removed: read list_roots' answer with ctx.input_response_as(key, "
        "RootsResult); each of its .roots has .uri and .name"
    ),
    "InvalidInputResponse": (
        "InvalidInputResponse was removed: the runtime answers a malformed answer with "
        "-32602 itself, so a tool has nothing to catch"
    ),
    "LoggingLevel": (
        'LoggingLevel was removed: ctx.send_log takes the level as a string ("debug", '
        '"info", "notice", "warning", "error", "critical", "alert", "emergency")'
    ),
}

# The text of the ImportError that `from m import x` raises when m's `__getattr__` refuses x
# (Python 3.11-3.13): the refusal's own message is dropped, so the loader puts it back.
_CANNOT_IMPORT: Final = re.compile(r"cannot import name '(\w+)' from '([\w.]+)'")


def import_hint(error: ImportError, face: str) -> str | None:
    """What replaces the name `error` could not import from the module `face`, if it was removed."""
    found = _CANNOT_IMPORT.match(str(error))
    if found is None or found.group(2) != face:
        return None
    return FACE_NAMES.get(found.group(1))


class Removed:
    """A removed class attribute: reading it raises AttributeError saying what to use instead.

    Set it under `if not TYPE_CHECKING:`, so a type checker still sees the attribute as absent.
    """

    def __init__(self, instead: str) -> None:
        self._instead = instead
        self._where = "this attribute"

    def __set_name__(self, owner: type, name: str) -> None:
        self._where = f"{owner.__name__}.{name}"

    def __get__(self, instance: object, owner: type | None = None) -> NoReturn:
        raise AttributeError(f"{self._where} was removed in 0.5.0: {self._instead}")
