"""FastMCP 4.x with `fastmcp-tasks` serving the tasks section's tool (`bench/tasks_bench.py`).

Runs in its own virtual environment (`.cache/bench/fastmcp-tasks`: `fastmcp==4.1.4` and
`fastmcp-tasks==4.1.4`, the newest pair that installs together; see `envs.py`). The tool is the
same as `task_job` in `bench_task_tools.py`:

- `task_job(seconds)` runs as a task when the client declares `io.modelcontextprotocol/tasks`
  (`task="optional"` on our side, `TaskConfig(mode="optional")` here), sleeps `seconds` (none
  for 0) and returns `done after <seconds> s`.

The task engine is `TasksExtension`, configured the way its docs say, from the environment:
`FASTMCP_DOCKET_URL` (`memory://` or `redis://host:port/db`; its `DocketSettings`), everything
else at its defaults (worker concurrency 10, the worker's 50 ms check interval). The one setting
given here is the tool's poll interval, 1 s instead of FastMCP's 5 s default: that is the
`pollIntervalMs` our runtime advertises by default, so the figures polled at `pollIntervalMs`
compare the engines at one cadence, not two defaults.

Nothing else is tuned: this is what a user of FastMCP's tasks writes.
"""

from __future__ import annotations

import asyncio
from datetime import timedelta

from fastmcp import FastMCP
from fastmcp.utilities.tasks import TaskConfig
from fastmcp_tasks import TasksExtension

server = FastMCP("fastmcp-tasks-bench", version="0")
server.add_extension(TasksExtension())

POLL_INTERVAL = timedelta(seconds=1)  # our runtime's default pollIntervalMs (1000)


@server.tool(task=TaskConfig(mode="optional", poll_interval=POLL_INTERVAL))
async def task_job(seconds: float = 0.0) -> str:
    """Sleep `seconds` (none for 0), then say so: the tasks section's job."""
    if seconds > 0:
        await asyncio.sleep(seconds)
    return f"done after {seconds} s"


if __name__ == "__main__":
    server.run("stdio")
