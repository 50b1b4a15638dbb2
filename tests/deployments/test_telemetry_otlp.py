"""A deploy as a trace: the baked server over HTTP, with the OpenTelemetry SDK set up the way
`opentelemetry-instrument` sets it up (an OTLP/HTTP exporter for spans and metrics, its endpoint
from `OTEL_EXPORTER_OTLP_ENDPOINT`), exporting to an OTLP receiver these tests run. A client
completes `deploy_to_aws` (role, then the yes) as a task against moto, then the test reads what
arrived: the span tree with its links, and the `mcp.server.operation.duration` series. Run with
``-rA`` to see them.
"""

from __future__ import annotations

import os
import secrets
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from bakery import DEFAULT_PACKAGE, DEFAULT_SLUG, Installed, run
from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import (
    ExportMetricsServiceRequest,
)
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from peers.aws_moto import moto_server, stack_status
from test_http_replicas import start_replica
from test_oauth_resource_server import answers_to, call, free_port

pytestmark = pytest.mark.baked_checks

#: What `opentelemetry-instrument` does before the program runs, written out: the SDK, its
#: OTLP/HTTP exporters (endpoint and protocol from the standard OTEL_* variables), then the
#: server's own entry point. The server's code is the same as without it.
INSTRUMENTED = """
import sys
from opentelemetry import metrics, trace
from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import PeriodicExportingMetricReader
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor

resource = Resource.create()  # OTEL_SERVICE_NAME
provider = TracerProvider(resource=resource)
provider.add_span_processor(SimpleSpanProcessor(OTLPSpanExporter()))
trace.set_tracer_provider(provider)
reader = PeriodicExportingMetricReader(OTLPMetricExporter(), export_interval_millis=300)
metrics.set_meter_provider(MeterProvider(resource=resource, metric_readers=[reader]))
from {package}.app import main
sys.argv = ["{slug}", *sys.argv[1:]]
main()
"""


@dataclass
class Receiver:
    """An OTLP/HTTP receiver: what the server exported, decoded."""

    traces: list[ExportTraceServiceRequest] = field(default_factory=list)
    metrics: list[ExportMetricsServiceRequest] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def spans(self) -> list[Any]:
        with self.lock:
            return [
                span
                for request in self.traces
                for resource in request.resource_spans
                for scope in resource.scope_spans
                for span in scope.spans
            ]

    def duration_points(self) -> list[tuple[dict[str, str], int]]:
        """The last exported count of each series of mcp.server.operation.duration."""
        series: dict[tuple[tuple[str, str], ...], int] = {}
        with self.lock:
            for request in self.metrics:
                for resource in request.resource_metrics:
                    for scope in resource.scope_metrics:
                        for metric in scope.metrics:
                            if metric.name != "mcp.server.operation.duration":
                                continue
                            for point in metric.histogram.data_points:
                                key = tuple(sorted(attributes(point.attributes).items()))
                                series[key] = point.count
        return [(dict(key), count) for key, count in sorted(series.items())]


def attributes(pairs: Any) -> dict[str, str]:
    found = {}
    for pair in pairs:
        value = pair.value
        found[pair.key] = value.string_value or str(value.int_value or value.bool_value)
    return found


@pytest.fixture
def receiver() -> Iterator[tuple[Receiver, str]]:
    received = Receiver()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
            with received.lock:
                if self.path == "/v1/traces":
                    received.traces.append(ExportTraceServiceRequest.FromString(body))
                elif self.path == "/v1/metrics":
                    received.metrics.append(ExportMetricsServiceRequest.FromString(body))
            self.send_response(200)
            self.send_header("Content-Type", "application/x-protobuf")
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield received, f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture(scope="module")
def project(installed: Any) -> Installed:
    found: Installed = installed("aws")
    return found


def test_a_deploy_is_one_linked_trace_and_a_duration_series(
    project: Installed, receiver: tuple[Receiver, str], tmp_path: Path
) -> None:
    received, endpoint = receiver
    script = tmp_path / "instrumented.py"
    script.write_text(
        INSTRUMENTED.format(package=DEFAULT_PACKAGE, slug=DEFAULT_SLUG), encoding="utf-8"
    )
    key_file = tmp_path / "secrets" / "mrtr-signing-key"
    run([project.tool(DEFAULT_SLUG), "keygen", "--path", key_file], cwd=tmp_path)
    port = free_port()
    with moto_server() as aws_env:
        env = {
            "PATH": os.environ.get("PATH", os.defpath),
            "HOME": str(tmp_path),
            "MRTR_SIGNING_KEY_FILE": str(key_file),
            "MRTR_TASK_STORE": f"sqlite:///{tmp_path / 'tasks.db'}",
            "OTEL_SERVICE_NAME": "mrtr-server",
            "OTEL_EXPORTER_OTLP_ENDPOINT": endpoint,
            **aws_env,
            "AWS_CONFIG_FILE": str(tmp_path / "no-aws-config"),
            "AWS_SHARED_CREDENTIALS_FILE": str(tmp_path / "no-aws-credentials"),
        }
        command = [str(project.python), str(script), "http", "--host", "127.0.0.1"]
        server = start_replica("otel", [*command, "--port", str(port)], env, tmp_path)
        try:
            name = f"otel-{secrets.token_hex(3)}"
            params: dict[str, Any] = {"name": "deploy_to_aws", "arguments": {"stack": name}}
            result = call(server.url, None, "tools/call", params).result
            while result["resultType"] == "input_required":
                retry = {
                    **params,
                    "inputResponses": answers_to(result),
                    "requestState": result["requestState"],
                }
                result = call(server.url, None, "tools/call", retry).result
            task_id = result["taskId"]
            for _ in range(300):
                status = call(server.url, None, "tasks/get", {"taskId": task_id}).result
                if status["status"] in ("completed", "failed", "cancelled"):
                    break
                time.sleep(0.1)
            assert status["status"] == "completed", status
            assert stack_status(aws_env, name, role_arn=None) == "CREATE_COMPLETE"
            time.sleep(1.0)  # a metric export or three
        finally:
            server.stop()

    spans = received.spans()
    by_id = {span.span_id: span for span in spans}
    rounds = [span for span in spans if span.name == "tools/call deploy_to_aws"]
    (work,) = [span for span in spans if span.name == "tools/call deploy_to_aws (task)"]
    polls = [span for span in spans if span.name == "tasks/get"]
    lines = []
    for span in sorted([*rounds, work, *polls[:2]], key=lambda s: s.start_time_unix_nano):
        shown = attributes(span.attributes)
        links = [
            f"{attributes(link.attributes).get('mcp.link')} -> {by_id[link.span_id].name}"
            for link in span.links
            if link.span_id in by_id
        ]
        keys = ("mcp.mrtr.round", "mcp.mrtr.next_round", "mcp.task.id", "error.type")
        facts = ", ".join(f"{key}={shown[key]}" for key in keys if key in shown)
        lines.append(f"{span.name} [{'SERVER' if span.kind == 2 else 'INTERNAL'}] {facts}")
        lines.extend(f"    link: {link}" for link in links)
    if len(polls) > 2:
        lines.append(f"... {len(polls) - 2} more tasks/get, each linked to the task's work")
    lines.append("mcp.server.operation.duration (count per series):")
    lines.extend(f"    {series}: {count}" for series, count in received.duration_points())
    print("\na deploy as a trace (OTLP/HTTP, as received)")  # noqa: T201
    for line in lines:
        print(f"  {line}")  # noqa: T201

    # Three rounds (role, yes, deploy), each linked to the round before it.
    assert len(rounds) == 3
    first, second, third = sorted(rounds, key=lambda s: s.start_time_unix_nano)
    assert [link.span_id for link in second.links] == [first.span_id]
    assert [link.span_id for link in third.links] == [second.span_id]
    assert attributes(third.attributes)["mcp.task.id"] == task_id
    # The task's work: a trace of its own, linked to the round that created it.
    assert [link.span_id for link in work.links] == [third.span_id]
    assert work.trace_id != third.trace_id
    assert polls and all([link.span_id for link in poll.links] == [work.span_id] for poll in polls)
    series = received.duration_points()
    tools = {s.get("gen_ai.tool.name") for s, _ in series if s["mcp.method.name"] == "tools/call"}
    assert "deploy_to_aws" in tools
    assert any(s["mcp.method.name"] == "tasks/get" for s, _ in series)
