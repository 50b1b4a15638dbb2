"""The tools (and prompts and resources) this server offers.

To add a tool, create a module in this package (any name not starting with ``_``) and decorate an
async function with ``registry.tool()``::

    from ..mrtr_runtime import Context, ToolAnnotations
    from . import registry


    @registry.tool(annotations=ToolAnnotations(read_only=True))
    async def greet(name: str, *, ctx: Context) -> str:
        '''Say hello to someone.'''
        return f"Hello, {name}!"

Every public module here is imported when the server starts, sorted by name, so there is nothing
to register by hand. The input schema comes from the annotated parameters (or from one pydantic
model parameter), the description from the docstring. To ask the user something mid-call, return
``ctx.request_input(...)``; the README's "Writing a tool" section shows the multi-round pattern.
Import only from ``..mrtr_runtime`` (its ``__init__``), never from its ``_private`` modules.
"""

from __future__ import annotations

from ..mrtr_runtime import Registry

__all__ = ("registry",)

#: Every tool, prompt and resource of this server; the server loads this package at start.
registry = Registry()
