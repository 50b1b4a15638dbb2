"""mrtr_runtime: a small MCP server runtime with multi round-trip requests (SEP-2322).

Vendored from the mrtr-server cookiecutter template, version 0.5.0 (`__version__` below; the
template's CHANGELOG.md says what each version changed). It is part of this project now: change
it if you must, but a tool needs only what this page exports, and `cruft update` brings the
template's fixes (README.md, "Updating from the template").

Three faces, one per audience; everything else (`_name` modules) is private:

- `mrtr_runtime`: what a tool module imports (this page).
- `mrtr_runtime.server`: what `app.py` and `cli.py` need to build and run the server.
- `mrtr_runtime.testing`: clients that drive a server in tests and scripts.

Serves MCP 2026-07-28 (stateless, per-request `_meta`) and, in the same process, 2025-11-25
(`initialize`) over stdio; 2026-07-28 also over Streamable HTTP (`server.serve_http`, which needs
uvicorn, the project's `http` extra). Depends on anyio and pydantic only.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from ._context import Context, InvalidInputResponse, LoggingLevel, RequestCancelled
from ._inputs import InputRequest, choice_titles, elicit_form, elicit_url, list_roots, sample
from ._redact import redact_secrets, treat_as_secret
from ._registry import Registry, ToolAnnotations
from ._results import InputRequired, ToolError, ToolResult

if TYPE_CHECKING:
    from ._answers import (
        Accepted,
        Cancelled,
        Declined,
        ElicitResult,
        Root,
        RootsResult,
        SamplingResult,
    )
    from ._content import (
        ContentBlock,
        audio_block,
        blob_contents,
        embedded_blob,
        embedded_text,
        image_block,
        prompt_message,
        resource_link,
        text_block,
        text_contents,
    )

__version__ = "0.5.0"

# Imported on first use (PEP 562), which is when the tools load: the first answer a server
# sends must not wait for them. The answer models are pydantic models, which come with the
# tools; the content builders are only ever called by tools.
_LAZY = {
    "Accepted": "._answers",
    "Cancelled": "._answers",
    "ContentBlock": "._content",
    "Declined": "._answers",
    "ElicitResult": "._answers",
    "Root": "._answers",
    "RootsResult": "._answers",
    "SamplingResult": "._answers",
    "audio_block": "._content",
    "blob_contents": "._content",
    "embedded_blob": "._content",
    "embedded_text": "._content",
    "image_block": "._content",
    "prompt_message": "._content",
    "resource_link": "._content",
    "text_block": "._content",
    "text_contents": "._content",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module, __name__), name)
    globals()[name] = value
    return value


__all__ = (
    "Accepted",
    "Cancelled",
    "ContentBlock",
    "Context",
    "Declined",
    "ElicitResult",
    "InputRequest",
    "InputRequired",
    "InvalidInputResponse",
    "LoggingLevel",
    "Registry",
    "RequestCancelled",
    "Root",
    "RootsResult",
    "SamplingResult",
    "ToolAnnotations",
    "ToolError",
    "ToolResult",
    "audio_block",
    "blob_contents",
    "choice_titles",
    "elicit_form",
    "elicit_url",
    "embedded_blob",
    "embedded_text",
    "image_block",
    "list_roots",
    "prompt_message",
    "redact_secrets",
    "resource_link",
    "sample",
    "text_block",
    "text_contents",
    "treat_as_secret",
)
