"""Content blocks: what a tool result, a prompt message or a resource read can hold.

A sub-face of `mrtr_runtime`, for tools that return more than text::

    from ..mrtr_runtime import ToolResult, content

    return ToolResult.of("The chart:", content.image(png, "image/png"))

Each builder returns the block exactly as the wire carries it (schema.ts `ContentBlock`, the
same in 2025-11-25 and 2026-07-28), checked as it is built, so a tool never spells a wire key;
bytes go in, base64 comes out. Pure, no pydantic: it loads when a tool module imports it, with
the tools, never before a server's first answer.
"""

from __future__ import annotations

from ._content import (
    ContentBlock,
    blob_contents,
    embedded_blob,
    embedded_text,
    prompt_message,
    resource_link,
    text_contents,
)
from ._content import audio_block as audio
from ._content import image_block as image
from ._content import text_block as text

__all__ = (
    "ContentBlock",
    "audio",
    "blob_contents",
    "embedded_blob",
    "embedded_text",
    "image",
    "prompt_message",
    "resource_link",
    "text",
    "text_contents",
)
