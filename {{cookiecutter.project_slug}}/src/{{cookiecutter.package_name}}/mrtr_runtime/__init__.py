"""mrtr_runtime: a small MCP server runtime with multi round-trip requests (SEP-2322).

Vendored from the mrtr-server cookiecutter template, version 0.14.0 (`__version__` below; the
template's CHANGELOG.md says what each version changed). It is part of this project now: change
it if you must, but a tool needs only what this page exports, and `cruft update` brings the
template's fixes (README.md, "Updating from the template").

Three faces, one per audience; everything else (`_name` modules) is private:

- `mrtr_runtime`: what a tool module imports (this page); its `content` sub-face builds
  content blocks (`content.image(...)`, `content.resource_link(...)`).
- `mrtr_runtime.server`: what `app.py` needs to build and run the server (`Project`).
- `mrtr_runtime.testing`: clients that drive a server in tests and scripts.

Serves MCP 2026-07-28 (stateless, per-request `_meta`) and, in the same process, 2025-11-25
(`initialize`) over stdio; both also over Streamable HTTP in a project generated with the HTTP
wing (`server.serve_http`, which needs uvicorn, the project's `http` extra). Depends on anyio and
pydantic only.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from ._context import Context, RequestCancelled
from ._errors import MrtrError
from ._inputs import InputRequest, choice_titles, elicit_form, elicit_url, list_roots, sample
from ._redact import redact_secrets, treat_as_secret
from ._registry import Registry, ToolAnnotations
from ._removed import FACE_NAMES
from ._results import InputRequired, ToolError, ToolResult

if TYPE_CHECKING:
    from . import content
    from ._answers import Accepted, Cancelled, Declined, RootsResult, SamplingResult

__version__ = "0.14.0"

# Imported on first use (PEP 562), which is when the tools load: the first answer a server
# sends must not wait for them. The answer models are pydantic models, which come with the
# tools; the content builders are only ever called by tools.
_LAZY = {
    "Accepted": "._answers",
    "Cancelled": "._answers",
    "Declined": "._answers",
    "RootsResult": "._answers",
    "SamplingResult": "._answers",
}


if not TYPE_CHECKING:
    # Hidden from type checkers, which would otherwise take every name as found here (Any):
    # the lazy names are imported for them above, and a removed one must stay an error.
    def __getattr__(name: str) -> Any:
        # `content`: `mrtr_runtime.content.text(...)` after a plain `import mrtr_runtime`.
        if name == "content":
            value = importlib.import_module(".content", __name__)
        else:
            module = _LAZY.get(name)
            if module is None:
                # A name the face lost (_removed.py) says what replaced it; the tools' loader
                # puts the sentence back where `from ... import name` drops it.
                missing = f"module {__name__!r} has no attribute {name!r}"
                raise AttributeError(FACE_NAMES.get(name, missing))
            value = getattr(importlib.import_module(module, __name__), name)
        globals()[name] = value
        return value


__all__ = (
    "Accepted",
    "Cancelled",
    "Context",
    "Declined",
    "InputRequest",
    "InputRequired",
    "MrtrError",
    "Registry",
    "RequestCancelled",
    "RootsResult",
    "SamplingResult",
    "ToolAnnotations",
    "ToolError",
    "ToolResult",
    "choice_titles",
    "content",
    "elicit_form",
    "elicit_url",
    "list_roots",
    "redact_secrets",
    "sample",
    "treat_as_secret",
)
