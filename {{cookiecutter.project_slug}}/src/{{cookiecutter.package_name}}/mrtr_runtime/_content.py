"""Content blocks as they travel: text, image, audio, resource links and embedded resources.

The shapes are the `ContentBlock` union of schema.ts (2025-11-25 and 2026-07-28 agree on
every one): TextContent, ImageContent, AudioContent, ResourceLink, EmbeddedResource, with
TextResourceContents / BlobResourceContents inside an embedded resource and in
`resources/read` results. Plain dicts, built here once and checked as they are built, so a
tool never spells a wire key. Pure, no pydantic. Tools reach it through the `content` sub-face
(`content.text`, `content.image`, ...), which loads with the tools.
"""

from __future__ import annotations

import base64
from collections.abc import Mapping
from typing import Any, Final, Literal

__all__ = (
    "ContentBlock",
    "audio_block",
    "blob_contents",
    "embedded_blob",
    "embedded_text",
    "image_block",
    "prompt_message",
    "resource_link",
    "text_block",
    "text_contents",
)

#: One content block on the wire (a JSON object).
ContentBlock = dict[str, Any]

#: basic/index "Annotations": who the content is for, how much it matters, when it changed.
_ANNOTATION_KEYS: Final = frozenset({"audience", "priority", "lastModified"})
_ROLES: Final = frozenset({"user", "assistant"})


def _annotations(annotations: Mapping[str, Any] | None) -> dict[str, Any] | None:
    if annotations is None:
        return None
    unknown = set(annotations) - _ANNOTATION_KEYS
    if unknown:
        raise ValueError(
            f"unknown annotation keys {sorted(unknown)}: use audience, priority, lastModified"
        )
    audience = annotations.get("audience")
    if audience is not None and (
        not isinstance(audience, list | tuple) or not all(role in _ROLES for role in audience)
    ):
        raise ValueError('annotations["audience"] is a list of "user" and "assistant"')
    priority = annotations.get("priority")
    if priority is not None and (
        isinstance(priority, bool)
        or not isinstance(priority, int | float)
        or not 0 <= priority <= 1
    ):
        raise ValueError('annotations["priority"] is a number from 0 to 1')
    last_modified = annotations.get("lastModified")
    if last_modified is not None and not isinstance(last_modified, str):
        raise ValueError('annotations["lastModified"] is an ISO 8601 timestamp string')
    built = dict(annotations)
    if audience is not None:
        built["audience"] = list(audience)
    return built


def _with_annotations(block: ContentBlock, annotations: Mapping[str, Any] | None) -> ContentBlock:
    checked = _annotations(annotations)
    if checked:
        block["annotations"] = checked
    return block


def _base64(data: bytes, what: str) -> str:
    if not isinstance(data, bytes | bytearray | memoryview):
        # A str here is most often base64 already: encoding it again corrupts it silently.
        raise TypeError(
            f"{what} takes the raw bytes (they are base64-encoded here), not {data!r:.40}"
        )
    return base64.b64encode(data).decode("ascii")


def _mime_type(mime_type: str, what: str) -> str:
    if not isinstance(mime_type, str) or "/" not in mime_type:
        raise ValueError(f"{what} needs a MIME type such as 'image/png', not {mime_type!r:.40}")
    return mime_type


def text_block(text: str, *, annotations: Mapping[str, Any] | None = None) -> ContentBlock:
    """TextContent: `{"type": "text", "text": ...}`."""
    if not isinstance(text, str):
        raise TypeError(f"content.text takes a str, not {type(text).__name__}")
    return _with_annotations({"type": "text", "text": text}, annotations)


def image_block(
    data: bytes, mime_type: str, *, annotations: Mapping[str, Any] | None = None
) -> ContentBlock:
    """ImageContent: the image's bytes, sent base64-encoded with their MIME type."""
    block = {
        "type": "image",
        "data": _base64(data, "content.image"),
        "mimeType": _mime_type(mime_type, "content.image"),
    }
    return _with_annotations(block, annotations)


def audio_block(
    data: bytes, mime_type: str, *, annotations: Mapping[str, Any] | None = None
) -> ContentBlock:
    """AudioContent: the audio's bytes, sent base64-encoded with their MIME type."""
    block = {
        "type": "audio",
        "data": _base64(data, "content.audio"),
        "mimeType": _mime_type(mime_type, "content.audio"),
    }
    return _with_annotations(block, annotations)


def resource_link(
    uri: str,
    *,
    name: str,
    title: str | None = None,
    description: str | None = None,
    mime_type: str | None = None,
    size: int | None = None,
    annotations: Mapping[str, Any] | None = None,
) -> ContentBlock:
    """ResourceLink: a pointer the client may read with `resources/read` (server/tools:
    resource links need not appear in `resources/list`)."""
    if not isinstance(uri, str) or not uri:
        raise ValueError("content.resource_link needs a URI")
    if not isinstance(name, str) or not name:
        raise ValueError("content.resource_link needs a name")
    block: ContentBlock = {"type": "resource_link", "uri": uri, "name": name}
    if title is not None:
        block["title"] = title
    if description is not None:
        block["description"] = description
    if mime_type is not None:
        block["mimeType"] = mime_type
    if size is not None:
        if isinstance(size, bool) or not isinstance(size, int) or size < 0:
            raise ValueError("content.resource_link size is a byte count (an int >= 0)")
        block["size"] = size
    return _with_annotations(block, annotations)


def text_contents(uri: str, text: str, *, mime_type: str | None = None) -> dict[str, Any]:
    """TextResourceContents: what `resources/read` returns for text, and what
    `embedded_text` wraps."""
    if not isinstance(text, str):
        raise TypeError(f"text contents are a str, not {type(text).__name__}")
    contents: dict[str, Any] = {"uri": uri}
    if mime_type is not None:
        contents["mimeType"] = mime_type
    contents["text"] = text
    return contents


def blob_contents(uri: str, data: bytes, *, mime_type: str | None = None) -> dict[str, Any]:
    """BlobResourceContents: binary contents, base64-encoded."""
    contents: dict[str, Any] = {"uri": uri}
    if mime_type is not None:
        contents["mimeType"] = mime_type
    contents["blob"] = _base64(data, "blob contents")
    return contents


def embedded_text(
    uri: str,
    text: str,
    *,
    mime_type: str | None = None,
    annotations: Mapping[str, Any] | None = None,
) -> ContentBlock:
    """EmbeddedResource holding text: the resource travels inside the result."""
    block = {"type": "resource", "resource": text_contents(uri, text, mime_type=mime_type)}
    return _with_annotations(block, annotations)


def embedded_blob(
    uri: str,
    data: bytes,
    *,
    mime_type: str | None = None,
    annotations: Mapping[str, Any] | None = None,
) -> ContentBlock:
    """EmbeddedResource holding bytes (base64 on the wire)."""
    block = {"type": "resource", "resource": blob_contents(uri, data, mime_type=mime_type)}
    return _with_annotations(block, annotations)


def prompt_message(
    role: Literal["user", "assistant"], content: ContentBlock | str
) -> dict[str, Any]:
    """PromptMessage: one message of a `prompts/get` result; a str becomes a text block."""
    if role not in _ROLES:
        raise ValueError(f'a prompt message\'s role is "user" or "assistant", not {role!r:.40}')
    block = text_block(content) if isinstance(content, str) else content
    if not isinstance(block, dict) or not isinstance(block.get("type"), str):
        raise TypeError("a prompt message's content is a str or one content block")
    return {"role": role, "content": block}
