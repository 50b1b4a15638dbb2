"""Task tools for the tasks tests (`test_tasks.py`, and the stdio server those tests spawn):
each pins one behaviour of the tasks extension, and reports what it saw in a `Flags`."""

from __future__ import annotations

import asyncio
import threading
import time
from collections import Counter

import support
from mrtr_runtime import (
    Context,
    InputRequired,
    Registry,
    ToolAnnotations,
    ToolError,
    ToolResult,
    elicit_form,
)
from mrtr_runtime._jsonrpc import RpcError
from mrtr_runtime._tasks import MAX_RESULT_BYTES

SERVER_SCRIPT = """\
import os

from support import make_server
from task_tools import Flags, build

from mrtr_runtime.server import codec_from_environment, serve_stdio

server = make_server(
    registry=build(Flags()), codec=codec_from_environment(os.environ, default_key_file=None)
)
server.tasks.poll_interval_ms = 20
serve_stdio(server)
"""


class Flags:
    """What the tools saw, for the tests to check: runs, cancellations, concurrency."""

    def __init__(self) -> None:
        self.runs: Counter[str] = Counter()
        self.cancelled_at: float | None = None
        self.running = 0
        self.most_running = 0
        self.release = asyncio.Event()
        self.thread_stopped = threading.Event()
        self.thread_committed = threading.Event()
        self.thread_go = threading.Event()


def build(flags: Flags) -> Registry:
    registry = Registry()

    @registry.tool(task="optional")
    async def slow(seconds: float, *, ctx: Context) -> str:
        """Sleeps, then says so."""
        ctx.start_task("Starting")
        flags.runs["slow"] += 1
        flags.running += 1
        flags.most_running = max(flags.most_running, flags.running)
        try:
            await asyncio.sleep(seconds)
        except asyncio.CancelledError:
            flags.cancelled_at = time.monotonic()
            raise
        finally:
            flags.running -= 1
        return f"slept {seconds}"

    @registry.tool(task="required")
    async def required_job(*, ctx: Context) -> str:
        flags.runs["required_job"] += 1
        ctx.start_task()
        return "done"

    @registry.tool(task="optional", task_ttl_seconds=60)
    async def delete_file(filename: str, *, ctx: Context) -> str | InputRequired:
        """Asks first (rounds of the request), then runs as a task."""
        flags.runs["delete_file.asks"] += 1
        if ctx.form_answer("confirm", support.Confirm) is None:
            return ctx.request_input(
                {"confirm": elicit_form(f"Delete {filename}?", support.Confirm)}
            )
        ctx.start_task()
        flags.runs["delete_file"] += 1
        return f"deleted {filename}"

    @registry.tool(task="optional", task_ttl_seconds=60)
    async def short_lived(*, ctx: Context) -> str:
        ctx.start_task()
        return "brief"

    @registry.tool(task="optional")
    async def confirm_slow(seconds: float, *, ctx: Context) -> str | InputRequired:
        """Asks first, then runs long as a task: counts its runs past the question."""
        if ctx.form_answer("confirm", support.Confirm) is None:
            return ctx.request_input({"confirm": elicit_form("Go?", support.Confirm)})
        ctx.start_task()
        flags.runs["confirm_slow"] += 1
        await asyncio.sleep(seconds)
        return f"went for {seconds}"

    @registry.tool(task="optional")
    async def two_questions(*, ctx: Context) -> str | InputRequired:
        """Starts the task first, then asks two questions at once (the task's own)."""
        ctx.start_task()
        name = ctx.form_answer("name", support.Name)
        ok = ctx.form_answer("confirm", support.Confirm)
        missing = {}
        if name is None:
            missing["name"] = elicit_form("Your name?", support.Name)
        if ok is None:
            missing["confirm"] = elicit_form("Sure?", support.Confirm)
        if missing:
            return ctx.request_input(missing)
        return f"{name} {ok}"

    @registry.tool(task="optional")
    async def protocol_error(*, ctx: Context) -> str:
        ctx.start_task()
        raise RpcError(-32000, "the backend refused")

    @registry.tool(task="optional")
    async def crashes(*, ctx: Context) -> str:
        ctx.start_task()
        raise KeyError("x")

    @registry.tool(task="optional")
    async def raises_tool_error(*, ctx: Context) -> str:
        ctx.start_task()
        raise ToolError("the disk is full")

    @registry.tool(task="optional")
    async def tool_error(*, ctx: Context) -> ToolResult:
        ctx.start_task()
        return ToolResult.error("that did not work")

    @registry.tool(task="optional")
    async def swallows(*, ctx: Context) -> str:
        try:
            ctx.start_task()
        except Exception:
            return "swallowed"
        return "in task" if ctx.in_task else "inline"

    @registry.tool(task="optional")
    async def cleans_up(*, ctx: Context) -> str:
        """A `finally` around `start_task`: it runs where the request becomes a task, too."""
        flags.runs["cleans_up:started"] += 1
        try:
            ctx.start_task()
            return "in task" if ctx.in_task else "inline"
        finally:
            flags.runs["cleans_up:in task" if ctx.in_task else "cleans_up:request"] += 1

    @registry.tool(task="optional")
    async def huge(*, ctx: Context) -> str:
        ctx.start_task()
        return "x" * (10 * MAX_RESULT_BYTES)

    @registry.tool(task="optional")
    async def progress(*, ctx: Context) -> str:
        ctx.start_task()
        await ctx.report_progress(1, 2, message="halfway there")
        await flags.release.wait()
        return "finished"

    @registry.tool(task="optional")
    async def chatty(*, ctx: Context) -> str:
        """Reports progress far faster than the store is written to; says a secret first."""
        ctx.start_task("using AKIAIOSFODNN7EXAMPLE")
        for step in range(100):
            await ctx.report_progress(step, 100, message=f"step {step}")
        return "chatted"

    @registry.tool(task="optional")
    async def committed_job(*, ctx: Context) -> str:
        """Passes its point of no return, then waits: a cancel must not cut it short."""
        ctx.start_task()
        ctx.point_of_no_return()
        flags.runs["committed_job"] += 1
        await flags.release.wait()
        return "carried out"

    @registry.tool(task="optional", annotations=ToolAnnotations(idempotent=True))
    async def idempotent_job(*, ctx: Context) -> str:
        """As committed_job, but declared idempotent: safe to run again past its mark."""
        ctx.start_task()
        ctx.point_of_no_return()
        flags.runs["idempotent_job"] += 1
        await flags.release.wait()
        return "carried out again"

    @registry.tool(task="optional")
    def thread_commit(*, ctx: Context) -> str:
        """Passes its point of no return in a worker thread, then waits to be let go."""
        ctx.start_task()
        ctx.point_of_no_return()
        flags.thread_committed.set()
        flags.thread_go.wait(10)
        return "thread done"

    @registry.tool(task="optional")
    async def confirm_then_ask(seconds: float = 0.0, *, ctx: Context) -> str | InputRequired:
        """Asks first (a round), starts the task, then asks again (the task's own question)."""
        if ctx.form_answer("confirm", support.Confirm) is None:
            return ctx.request_input({"confirm": elicit_form("Go?", support.Confirm)})
        ctx.start_task()
        await asyncio.sleep(seconds)
        name = ctx.form_answer("name", support.Name)
        if name is None:
            return ctx.request_input({"name": elicit_form("Your name?", support.Name)})
        return "named"

    @registry.tool(task="optional")
    def threaded(*, ctx: Context) -> str:
        ctx.start_task()
        while not ctx.cancelled:
            time.sleep(0.01)
        flags.thread_stopped.set()
        return "stopped"

    @registry.tool
    async def plain(*, ctx: Context) -> str:
        ctx.start_task()
        return "never"

    return registry
