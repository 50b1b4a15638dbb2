"""OpenTelemetry (`_telemetry`): a SERVER span per request named and attributed by the MCP
semantic conventions, the `mcp.server.operation.duration` histogram, trace context from `_meta`,
tool errors counted apart, MRTR rounds and tasks linked; exported here by the SDK in process,
and over stdio never a byte on stdout."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from opentelemetry import metrics, trace
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

import support
from mrtr_runtime._jsonrpc import Request
from mrtr_runtime._telemetry import DURATION_METRIC, Telemetry
from mrtr_runtime.testing import MemoryClient
from support import BOTH_ANSWERS, DEPLOY, META_VERSION, make_server, meta, rpc_error
from task_tools import Flags, build

pytestmark = pytest.mark.anyio

SPANS = InMemorySpanExporter()
READER = InMemoryMetricReader()


@pytest.fixture(scope="module", autouse=True)
def sdk() -> Iterator[None]:
    """The SDK, as an application (or `opentelemetry-instrument`) would set it up: once."""
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(SPANS))
    trace.set_tracer_provider(provider)
    metrics.set_meter_provider(MeterProvider(metric_readers=[READER]))
    yield


@pytest.fixture(autouse=True)
def fresh() -> None:
    SPANS.clear()


def named(name: str) -> list[ReadableSpan]:
    return [span for span in SPANS.get_finished_spans() if span.name == name]


def durations() -> list[Any]:
    points = []
    data = READER.get_metrics_data()
    for resource in data.resource_metrics if data else ():
        for scope in resource.scope_metrics:
            for metric in scope.metrics:
                if metric.name == DURATION_METRIC:
                    assert metric.unit == "s"
                    points.extend(metric.data.data_points)
    return points


async def test_a_tool_call_is_one_server_span_named_and_attributed_by_the_conventions() -> None:
    client = MemoryClient(make_server())
    await client.call_tool("echo", {"text": "hi"})
    (span,) = named("tools/call echo")
    assert span.kind is SpanKind.SERVER
    attributes = dict(span.attributes or {})
    assert attributes["mcp.method.name"] == "tools/call"
    assert attributes["gen_ai.tool.name"] == "echo"
    assert attributes["gen_ai.operation.name"] == "execute_tool"
    assert attributes["mcp.protocol.version"] == "2026-07-28"
    assert attributes["jsonrpc.request.id"]
    assert span.status.status_code is StatusCode.UNSET
    points = [p for p in durations() if p.attributes.get("gen_ai.tool.name") == "echo"]
    assert points and points[0].count >= 1
    assert "error.type" not in points[0].attributes


async def test_the_trace_context_in_meta_is_the_span_s_parent() -> None:
    client = MemoryClient(make_server())
    trace_id = "4bf92f3577b34da6a3ce929d0e0e4736"
    parent = "00f067aa0ba902b7"
    params = {
        "name": "echo",
        "arguments": {"text": "hi"},
        "_meta": meta(traceparent=f"00-{trace_id}-{parent}-01"),
    }
    await client.request("tools/call", params)
    (span,) = named("tools/call echo")
    assert f"{span.context.trace_id:032x}" == trace_id
    assert span.parent is not None and f"{span.parent.span_id:016x}" == parent


async def test_a_tool_error_and_a_protocol_error_are_counted_apart() -> None:
    client = MemoryClient(make_server())
    failed = await client.call_tool("refuse", {"reason": "the stack is locked"})
    assert failed.is_error
    (span,) = named("tools/call refuse")
    assert span.attributes["error.type"] == "tool_error"
    assert span.status.status_code is StatusCode.ERROR
    await rpc_error(
        client, "tools/call", {"name": "no_such_tool", "arguments": {}, "_meta": meta()}
    )
    (unknown,) = named("tools/call no_such_tool")
    assert unknown.attributes["error.type"] == unknown.attributes["rpc.response.status_code"]
    assert unknown.attributes["error.type"].lstrip("-").isdigit()
    kinds = {p.attributes.get("error.type") for p in durations()}
    assert "tool_error" in kinds and unknown.attributes["error.type"] in kinds


async def test_the_rounds_of_one_mrtr_call_are_linked() -> None:
    client = MemoryClient(make_server())
    first = await client.request("tools/call", {**DEPLOY, "_meta": meta()})
    retry = {
        **DEPLOY,
        "inputResponses": BOTH_ANSWERS,
        "requestState": first["requestState"],
        "_meta": meta(),
    }
    await client.request("tools/call", retry)
    one, two = named("tools/call deploy_stack")
    assert one.attributes["mcp.mrtr.next_round"] == two.attributes["mcp.mrtr.round"]
    (link,) = two.links
    assert link.context.span_id == one.context.span_id
    assert link.attributes["mcp.link"] == "previous_round"
    # Two requests of one call, not one request: each a trace of its own client's making.
    assert one.context.span_id != two.context.span_id


async def test_a_task_s_work_links_to_its_creator_and_its_polls_link_to_the_work() -> None:
    flags = Flags()
    client = MemoryClient(make_server(registry=build(flags)), tasks=True)
    await client.call_tool("required_job", {})
    (created,) = named("tools/call required_job")
    (work,) = named("tools/call required_job (task)")
    assert work.kind is SpanKind.INTERNAL
    task_id = work.attributes["mcp.task.id"]
    assert created.attributes["mcp.task.id"] == task_id
    assert [link.context.span_id for link in work.links] == [created.context.span_id]
    # Its own trace: a task outlives the request that created it.
    assert work.context.trace_id != created.context.trace_id
    polls = [span for span in SPANS.get_finished_spans() if span.name == "tasks/get"]
    assert polls
    assert all(poll.attributes["mcp.task.id"] == task_id for poll in polls)
    assert all(
        [link.context.span_id for link in poll.links] == [work.context.span_id] for poll in polls
    )


@pytest.mark.parametrize(
    "traceparent", [["00-x"], 5, "garbage", "00-" + "f" * 10_000, {"a": 1}, "00-" + "0" * 51]
)
async def test_any_trace_context_a_client_sends_is_served_and_ignored_if_unusable(
    traceparent: object,
) -> None:
    client = MemoryClient(make_server())
    params = {"name": "echo", "arguments": {"text": "hi"}, "_meta": meta(traceparent=traceparent)}
    result = await client.request("tools/call", params)
    assert result["content"][0]["text"] == "hi"
    (span,) = named("tools/call echo")
    assert span.parent is None


def test_with_the_api_s_placeholders_only_nothing_is_recorded(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # No SDK set (this module's fixture aside): a request skips the span entirely.
    fresh_telemetry = Telemetry.from_installed("1")
    assert fresh_telemetry is not None
    monkeypatch.setattr(trace, "get_tracer_provider", trace.ProxyTracerProvider)
    monkeypatch.setattr(metrics, "get_meter_provider", metrics.NoOpMeterProvider)
    assert not fresh_telemetry.active()
    monkeypatch.undo()
    assert fresh_telemetry.active()


def test_a_client_s_long_or_odd_names_are_bounded_in_spans_and_metrics() -> None:
    telemetry = Telemetry.from_installed("1")
    assert telemetry is not None
    odd = Request("i" * 100_000, "x" * 5000, {"_meta": {META_VERSION: "v" * 10_000}})
    with telemetry.request(odd, None) as observed:
        observed.result({"jsonrpc": "2.0", "id": 1, "result": {}})
    (span,) = named("_OTHER")
    assert span.attributes["mcp.method.name"] == "_OTHER"
    assert len(span.attributes["jsonrpc.request.id"]) == 256
    assert "mcp.protocol.version" not in span.attributes
    assert all(len(p.attributes.get("mcp.method.name", "")) <= 64 for p in durations())


def test_without_the_api_there_is_no_telemetry(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "opentelemetry", None)
    assert Telemetry.from_installed("1") is None


CONSOLE_SERVER = """
import sys
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import ConsoleSpanExporter, SimpleSpanProcessor

# As `opentelemetry-instrument` with OTEL_TRACES_EXPORTER=console does: spans to sys.stdout.
provider = TracerProvider()
provider.add_span_processor(SimpleSpanProcessor(ConsoleSpanExporter(out=sys.stdout)))
trace.set_tracer_provider(provider)
from {package}.app import main
sys.argv[0] = "server"
main()
"""


def test_over_stdio_a_console_exporter_writes_to_stderr_never_to_the_wire(
    tmp_path: Path,
) -> None:
    script = tmp_path / "console_server.py"
    script.write_text(CONSOLE_SERVER.format(package=support.PACKAGE), encoding="utf-8")
    requests = [
        support.request(
            1,
            "tools/call",
            {
                "name": "plan_release",
                "arguments": {
                    "project": "Demo",
                    "previous_version": "1.2.0",
                    "changes": ["feat: x"],
                },
            },
        ),
        support.request(2, "tools/list"),
    ]
    stdin = "".join(json.dumps(message) + "\n" for message in requests)
    done = subprocess.run(
        [sys.executable, str(script)],
        input=stdin,
        capture_output=True,
        text=True,
        env=support.server_env(),
        timeout=60,
        check=False,
    )
    lines = done.stdout.splitlines()
    assert [json.loads(line)["id"] for line in lines] == [1, 2], done.stdout
    assert all(json.loads(line)["jsonrpc"] == "2.0" for line in lines)
    assert '"name": "tools/call plan_release"' in done.stderr
