"""The tools (and prompts and resources) this server offers.

To add a tool, create a module in this package (any name not starting with ``_``) and decorate an
async function with ``registry.tool()``::

    from ..mrtr_runtime import Context, ToolAnnotations
    from . import registry


    @registry.tool(annotations=ToolAnnotations(read_only=True))
    async def greet(name: str, *, ctx: Context) -> str:
        '''Say hello to someone.'''
        return f"Hello, {name}!"

Every module here whose name does not start with ``_`` is imported when the server starts,
sorted by name, so there is nothing to register by hand; ``_name`` modules are private helpers
of a tool (``_release_notes.py`` beside ``plan_release.py``). The input schema comes from the
annotated parameters (or from one pydantic model parameter), the description from the
docstring. To ask the user something mid-call, return ``ctx.request_input(...)`` and read the
answer with ``ctx.form_answer(key, Form)``: ``docs/multi-round-handlers.md`` has skeletons to
copy, and ``plan_release.py`` is a whole tool built that way. ``release_conventions.py``
declares resources and a completer. Import only from ``..mrtr_runtime`` (its ``__init__``),
never from its ``_private`` modules.

The lists of tools, prompts and resources tell clients they may change at any time (``ttlMs``
0), so a tool declared at runtime shows up in the next list. ``Registry(list_cache_ttl_seconds=
300)`` would let clients keep them for five minutes instead, and then refuses declarations
after start-up (docs/results-and-completions.md).
"""

from __future__ import annotations

from ..mrtr_runtime import Registry

__all__ = ("registry",)

#: Every tool, prompt and resource of this server; the server loads this package at start.
registry = Registry()
