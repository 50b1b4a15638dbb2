"""The tasks section's tool, dropped into a baked project's `tools/` package by `bench/run.py`
beside `bench_tools.py` when the baked runtime has tasks (`Context.start_task`).

Written only against the public tool API, like any project tool. The same tool is
`fastmcp_tasks_server.py`'s `task_job` on FastMCP with `fastmcp-tasks`:

- `task_job(seconds)`: runs as a task for a client that declares `io.modelcontextprotocol/tasks`
  (`task="optional"`: inline for any other), sleeps `seconds` (none for 0) and returns
  `done after <seconds> s`. `ctx.start_task()` comes first: there is nothing to ask.
"""

from __future__ import annotations

import asyncio

from ..mrtr_runtime import Context
from . import registry


@registry.tool(task="optional")
async def task_job(seconds: float = 0.0, *, ctx: Context) -> str:
    """Sleep `seconds` (none for 0), then say so: the benchmark's task."""
    ctx.start_task()
    if seconds > 0:
        await asyncio.sleep(seconds)
    return f"done after {seconds} s"
