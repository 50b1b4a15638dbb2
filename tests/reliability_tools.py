"""Tools for the reliability and load suite, dropped into a baked project's ``tools/`` package.

``tests/deployments/test_reliability_load.py`` copies this file to ``src/<package>/tools/`` of a
freshly baked project, so it uses only the runtime's public face, as any project tool must. Every
tool is named ``rel_*`` so it cannot collide with the project's own tools.
"""

from __future__ import annotations

import datetime as dt
import os
import sys
import time
from typing import Any

import anyio
from pydantic import BaseModel

from ..mrtr_runtime import Accepted, Context, InputRequired, ToolError, ToolResult, elicit_form
from . import registry


class NameForm(BaseModel):
    name: str


@registry.tool()
async def rel_fast(n: int = 0) -> str:
    """Answer at once."""
    return f"fast {n}"


@registry.tool()
async def rel_slow(seconds: float = 0.05, n: int = 0) -> str:
    """Sleep on the event loop, then answer."""
    await anyio.sleep(seconds)
    return f"slow {n}"


#: rel_held's gauge: how many run right now, and the most that ever ran at once.
_HELD = {"now": 0, "peak": 0}


@registry.tool()
async def rel_held(seconds: float = 0.2) -> str:
    """Sleep while counted, so the test can see how many requests run at once."""
    _HELD["now"] += 1
    _HELD["peak"] = max(_HELD["peak"], _HELD["now"])
    try:
        await anyio.sleep(seconds)
    finally:
        _HELD["now"] -= 1
    return "held"


@registry.tool()
async def rel_peak() -> dict[str, int]:
    """The most rel_held calls that ran at once since the last rel_peak (then reset)."""
    peak = _HELD["peak"]
    _HELD["peak"] = _HELD["now"]
    return {"peak": peak}


@registry.tool()
async def rel_mrtr(n: int = 0, *, ctx: Context) -> str | InputRequired:
    """Two rounds: ask for a name, then greet it."""
    answer = ctx.form_answer("name", NameForm)
    if answer is None:
        return ctx.request_input({"name": elicit_form("Your name?", NameForm)})
    name = answer.content.name if isinstance(answer, Accepted) else None
    return f"hello {name} {n}"


@registry.tool()
async def rel_failing(n: int = 0) -> str:
    """Always raise a plain exception (the server must turn it into an isError result)."""
    raise RuntimeError(f"boom {n}")


@registry.tool()
async def rel_tool_error(n: int = 0) -> str:
    """Always raise ToolError."""
    raise ToolError(f"refused {n}")


@registry.tool()
def rel_blocking(seconds: float = 0.05, n: int = 0) -> str:
    """A plain def that blocks its worker thread."""
    time.sleep(seconds)
    return f"blocked {n}"


@registry.tool()
async def rel_printing(n: int = 0) -> str:
    """Write to stdout three ways; none of it may reach the wire."""
    print(f"stray print {n}")  # noqa: T201 - the point of this tool: stdout is not the wire
    sys.stdout.flush()
    os.write(1, f"stray fd-1 write {n}\n".encode())
    return f"printed {n}"


@registry.tool()
async def rel_big(size: int = 1_000_000) -> str:
    """A response of about `size` bytes, bigger than a pipe buffer."""
    return "x" * size


@registry.tool()
async def rel_echo(value: Any = None) -> ToolResult:
    """Echo `value` back as structured content, as a tool that returns its input would."""
    return ToolResult.of("echo", structured={"value": value})


@registry.tool()
async def rel_add(a: float, b: float) -> dict[str, float]:
    """Add two numbers (structured result)."""
    return {"sum": a + b}


@registry.tool()
async def rel_bad_result(n: int = 0) -> ToolResult:
    """A tool bug: structured content that is not JSON (a datetime)."""
    return ToolResult.of("bad", structured={"when": dt.datetime(2026, 1, 1, tzinfo=dt.UTC)})


@registry.tool()
def rel_watch(seconds: float = 30.0, n: int = 0, *, ctx: Context) -> str:
    """A plain def that works in steps until told to stop: it polls `ctx.cancelled`."""
    sys.stderr.write(f"rel_watch {n} started\n")
    sys.stderr.flush()
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if ctx.cancelled:
            sys.stderr.write(f"rel_watch {n} saw the cancellation\n")
            sys.stderr.flush()
            return f"stopped {n}"
        time.sleep(0.01)
    return f"watched {n}"
