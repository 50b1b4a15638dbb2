"""A task's worker acts only while it holds the task: its point of no return is fenced.

A worker holds a lease on the task it runs (renewed every few seconds). A process that is paused
(SIGSTOP, a frozen VM, a laptop asleep with two servers on the per-user store) stops renewing,
its lease lapses, and another worker takes the task over and runs it. When the paused process
wakes, its handler must not go on to act as well: its point of no return refuses
(RequestCancelled) once the lease has lapsed here, and the mark is written under the lease
before the action, so the action happens once. Proven with real processes (SIGSTOP/SIGCONT)
on the SQLite store and on a real redis-server, for an async tool (`await
ctx.pass_point_of_no_return()`, and the plain `ctx.point_of_no_return()`), and a thread tool
(where `ctx.point_of_no_return()` blocks until the mark is written).
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest
import redis_server

import support
from mrtr_runtime import Context, Registry, ToolAnnotations
from mrtr_runtime._config import Settings
from mrtr_runtime._task_backends import task_backend
from mrtr_runtime.server import Server
from mrtr_runtime.testing import MemoryClient
from support import META_CAPABILITIES

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.skipif(sys.platform == "win32", reason="SIGSTOP is POSIX"),
]

#: The paused server's lease and renewal: short, so a takeover happens within the test.
LEASE_SECONDS = 0.6
RENEW_SECONDS = 0.15
WITH_TASKS = {**support.ALL_CAPABILITIES, "extensions": {"io.modelcontextprotocol/tasks": {}}}


def build(directory: Path) -> Registry:
    """Two tools that wait for `directory/go`, then act once each run: a line in `actions`."""
    registry = Registry()

    def act() -> str:
        with (directory / "actions").open("a", encoding="utf-8") as actions:
            actions.write(f"{os.getpid()}\n")
        return f"acted in {os.getpid()}"

    async def wait_for_go() -> None:
        """Say this process is running the task, then wait for the test to say go."""
        (directory / f"running-{os.getpid()}").touch()
        for _ in range(3000):  # the test says go within its own bound
            if (directory / "go").exists():
                return
            await asyncio.sleep(0.02)

    @registry.tool(task="required", annotations=ToolAnnotations(idempotent=False))
    async def act_async(*, ctx: Context) -> str:
        ctx.start_task("waiting for go")
        await wait_for_go()
        await ctx.pass_point_of_no_return()  # returns once the mark is written under the lease
        return act()

    @registry.tool(task="required", annotations=ToolAnnotations(idempotent=False))
    async def act_async_unawaited(*, ctx: Context) -> str:
        ctx.start_task("waiting for go")
        await wait_for_go()
        ctx.point_of_no_return()  # as 0.7 tools call it: the lease is checked all the same
        return act()

    @registry.tool(task="required", annotations=ToolAnnotations(idempotent=False))
    def act_thread(*, ctx: Context) -> str:
        ctx.start_task("waiting for go")
        (directory / f"running-{os.getpid()}").touch()
        for _ in range(3000):  # a `def` tool waits in its own thread, as such tools do
            if (directory / "go").exists():
                break
            time.sleep(0.02)
        ctx.point_of_no_return()
        return act()

    return registry


SERVER_SCRIPT = """\
import os
from pathlib import Path

import support
from support import META_CAPABILITIES
from test_fencing import LEASE_SECONDS, RENEW_SECONDS, build

from mrtr_runtime._config import Settings
from mrtr_runtime._task_backends import task_backend
from mrtr_runtime.server import Server, serve_stdio

backend = task_backend(Settings.from_environment(os.environ), None, namespace="fencing")
server = Server(
    name=support.SERVER_NAME,
    version="1",
    registry=build(Path(os.environ["FENCE_DIR"])),
    signing=support.make_codec(),
    task_store=backend.open,
)
server.tasks.lease_seconds = LEASE_SECONDS
server.tasks.renew_seconds = RENEW_SECONDS
server.tasks.sweep_seconds = 3600.0  # only the test's tasks/get takes the task over
serve_stdio(server)
"""


@pytest.fixture(scope="module")
def redis_url() -> Iterator[str]:
    try:
        binary = redis_server.find_redis_server()
        with redis_server.running_redis(binary) as running:
            yield running.url
    except redis_server.RedisUnavailableError as exc:
        pytest.fail(f"fencing on Redis cannot be tested: {exc}", pytrace=False)


@pytest.mark.parametrize("tool", ["act_async", "act_async_unawaited", "act_thread"])
@pytest.mark.parametrize("store", ["sqlite", "redis"])
async def test_a_worker_paused_past_its_lease_does_not_act_after_a_takeover(
    tmp_path: Path, request: pytest.FixtureRequest, store: str, tool: str
) -> None:
    if store == "sqlite":
        (tmp_path / "state").mkdir(mode=0o700)
        url = f"sqlite://{tmp_path / 'state' / 'tasks.db'}"
    else:
        url = request.getfixturevalue("redis_url")
    script = tmp_path / "serve_fencing.py"
    script.write_text(SERVER_SCRIPT, encoding="utf-8")
    env = support.server_env(MRTR_TASK_STORE=url, FENCE_DIR=str(tmp_path))
    call = support.request(1, "tools/call", {"name": tool, "arguments": {}})
    call["params"]["_meta"][META_CAPABILITIES] = WITH_TASKS
    with anyio.fail_after(support.BOUND):
        async with support.raw_server([sys.executable, str(script)], env) as paused:
            await support.send(paused, call)
            created = (await support.read_message(support.reader(paused)))["result"]
            assert created["resultType"] == "task", created
            for _ in range(1500):
                if (tmp_path / f"running-{paused.pid}").exists():
                    break
                await anyio.sleep(0.02)
            os.kill(paused.pid, signal.SIGSTOP)  # frozen before its point of no return
            try:
                await anyio.sleep(LEASE_SECONDS * 3)  # its lease lapses
                backend = task_backend(
                    Settings.from_environment({"MRTR_TASK_STORE": url}), None, namespace="fencing"
                )
                other = Server(
                    name=support.SERVER_NAME,
                    version="1",
                    registry=build(tmp_path),
                    signing=support.make_codec(),
                    task_store=backend.open,
                )
                client = MemoryClient(other, capabilities=WITH_TASKS, tasks=True)
                (tmp_path / "go").touch()
                for _ in range(1500):
                    task = await client.request("tasks/get", {"taskId": created["taskId"]})
                    if task["status"] != "working":
                        break
                    await anyio.sleep(0.02)
            finally:
                os.kill(paused.pid, signal.SIGCONT)  # it wakes, and reaches its mark
            await anyio.sleep(LEASE_SECONDS * 2)  # time for it to act, were it not fenced
            await (await other.tasks.store()).close()
    assert task["status"] == "completed", task
    assert task["result"]["content"][0]["text"] == f"acted in {os.getpid()}"
    actions = (tmp_path / "actions").read_text(encoding="utf-8").split()
    assert actions == [str(os.getpid())]  # the taker acted; the woken worker did not
