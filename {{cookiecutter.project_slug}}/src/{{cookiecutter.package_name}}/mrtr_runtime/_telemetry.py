"""OpenTelemetry traces and metrics, by the MCP semantic conventions of OpenTelemetry, on both
transports: one SERVER span per request, the `mcp.server.operation.duration` histogram, the
trace context a client puts in `params._meta` (`traceparent`, `tracestate`: SEP-414).

It uses the OpenTelemetry API only (the project's `otel` extra), and only where it is
installed: without it `Telemetry.from_installed()` is None and nothing here runs. With it,
spans and metrics go wherever the application configured the SDK: `opentelemetry-instrument`
with the standard `OTEL_*` variables, or an SDK set up in code. There is no switch of our own.
Until a provider is set, a request makes no span at all (`Telemetry.active`). Over stdio nothing can
reach the wire: the transport has moved fd 1 to stderr before anything runs.

What a trace shows beyond one request:

- the rounds of one MRTR call: a round that answers a `requestState` links to the span of the
  round that minted it (kept in this process: the last MAX_REMEMBERED rounds), and every round
  carries `mcp.mrtr.round` (the 16 hex digits of the sha256 of the requestState it answers)
  and `mcp.mrtr.next_round` (of the one it mints), so that rounds served by different replicas
  still join by attribute;
- a task: its work span (INTERNAL, `mcp.task.id`) links to the request that created it, and
  every `tasks/*` request's span links to the work span.
"""

from __future__ import annotations

import collections
import contextlib
import hashlib
import re
import time
from collections.abc import Iterator, Mapping
from typing import Any, Final

from ._jsonrpc import Request

__all__ = ("MAX_REMEMBERED", "Telemetry")

#: Rounds and tasks whose span contexts are kept for links (this process, most recent).
MAX_REMEMBERED: Final = 4096
INSTRUMENTATION: Final = "mrtr_runtime"
#: The longest tool name, URI or task id put in a span (they come from clients).
MAX_NAME_CHARS: Final = 256
DURATION_METRIC: Final = "mcp.server.operation.duration"
#: The OpenTelemetry semantic conventions' buckets for GenAI/MCP operation durations (s).
_BUCKETS: Final = (0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10, 30, 60, 120, 300)
#: The API's own providers, before an application sets one (by their class names: the metrics
#: one is private to the API). Anything else counts as configured.
_PLACEHOLDERS: Final = frozenset(
    {"ProxyTracerProvider", "NoOpTracerProvider", "_ProxyMeterProvider", "NoOpMeterProvider"}
)
#: What a method name and a protocol version look like (anything else is a client's text).
_METHOD: Final = re.compile(r"[a-z][a-zA-Z/_]{0,63}")
_VERSION: Final = re.compile(r"\d{4}-\d{2}-\d{2}")
_NAMED_BY: Final = {"tools/call": "name", "prompts/get": "name", "resources/read": "uri"}


def _round_of(request_state: str) -> str:
    return hashlib.sha256(request_state.encode("utf-8")).hexdigest()[:16]


class _Remembered:
    """Span contexts by key, the most recent MAX_REMEMBERED."""

    def __init__(self) -> None:
        self._items: collections.OrderedDict[str, Any] = collections.OrderedDict()

    def put(self, key: str, value: Any) -> None:
        self._items[key] = value
        self._items.move_to_end(key)
        if len(self._items) > MAX_REMEMBERED:
            self._items.popitem(last=False)

    def get(self, key: str) -> Any:
        return self._items.get(key)


class Observed:
    """The span of one request, told what came of it (`result`)."""

    def __init__(self, span: Any, telemetry: Telemetry) -> None:
        self.span = span
        self.telemetry = telemetry
        self.error_type: str | None = None

    def result(self, message: Mapping[str, Any]) -> None:
        from opentelemetry.trace import Status, StatusCode

        error = message.get("error")
        if isinstance(error, Mapping):
            self.error_type = str(error.get("code"))
            self.span.set_attribute("error.type", self.error_type)
            self.span.set_attribute("rpc.response.status_code", self.error_type)
            self.span.set_status(Status(StatusCode.ERROR, str(error.get("message"))[:200]))
            return
        result = message.get("result")
        if not isinstance(result, Mapping):
            return
        if result.get("isError") is True:
            # A failed tool answers a successful JSON-RPC response: counted apart, so that a
            # server whose deploys fail does not look healthy.
            self.error_type = "tool_error"
            self.span.set_attribute("error.type", "tool_error")
            self.span.set_status(Status(StatusCode.ERROR, "the tool reported an error"))
        state = result.get("requestState")
        if result.get("resultType") == "input_required" and isinstance(state, str):
            next_round = _round_of(state)
            self.span.set_attribute("mcp.mrtr.next_round", next_round)
            self.telemetry.rounds.put(next_round, self.span.get_span_context())
        task_id = result.get("taskId")
        if result.get("resultType") == "task" and isinstance(task_id, str):
            self.span.set_attribute("mcp.task.id", task_id)


class Telemetry:
    """The tracer and the duration histogram, and the span contexts kept for links."""

    def __init__(self, tracer: Any, histogram: Any, version: str) -> None:
        self.tracer = tracer
        self.histogram = histogram
        self.version = version
        self.rounds = _Remembered()
        self.tasks = _Remembered()
        self._configured = False

    @classmethod
    def from_installed(cls, version: str) -> Telemetry | None:
        """The telemetry of this process, or None when `opentelemetry-api` is not installed."""
        try:
            from opentelemetry import metrics, trace
        except ImportError:
            return None
        tracer = trace.get_tracer(INSTRUMENTATION, version)
        cls._trace, cls._metrics = trace, metrics
        meter = metrics.get_meter(INSTRUMENTATION, version)
        histogram = meter.create_histogram(
            DURATION_METRIC,
            unit="s",
            description="Duration of the MCP request or notification as observed on the server",
            explicit_bucket_boundaries_advisory=list(_BUCKETS),
        )
        return cls(tracer, histogram, version)

    _trace: Any = None
    _metrics: Any = None

    def active(self) -> bool:
        """Whether an SDK (or any provider) is set for traces or metrics. With the API's own
        placeholders only, a request pays for this check and nothing more (no no-op span:
        about 12 us a request otherwise)."""
        if self._configured:
            return True  # a provider, once set, is not unset
        tracing = type(self._trace.get_tracer_provider()).__name__
        measuring = type(self._metrics.get_meter_provider()).__name__
        self._configured = tracing not in _PLACEHOLDERS or measuring not in _PLACEHOLDERS
        return self._configured

    @contextlib.contextmanager
    def request(self, request: Request, principal: str | None) -> Iterator[Observed]:
        """The SERVER span of one request, its parent the trace context in `_meta`, its name
        `{mcp.method.name} {target}`; the duration recorded when it ends."""
        from opentelemetry import propagate
        from opentelemetry.trace import Link, SpanKind

        params = request.params
        meta = params.get("_meta")
        meta = meta if isinstance(meta, Mapping) else {}
        # SEP-414: W3C trace context in _meta; only strings are handed to the propagator,
        # whatever else a client puts there (it is client input, read by nothing else here).
        carrier = {
            key: value
            for key in ("traceparent", "tracestate")
            if isinstance(value := meta.get(key), str) and len(value) <= 512
        }
        parent = propagate.extract(carrier) if carrier else None
        # Everything a client sends is bounded before it is kept (spans wait in exporters'
        # queues, metric series in the SDK): names to MAX_NAME_CHARS, methods that are not
        # method names to "_OTHER".
        method = request.method if _METHOD.fullmatch(request.method) else "_OTHER"
        attributes: dict[str, Any] = {
            "mcp.method.name": method,
            "jsonrpc.request.id": str(request.id)[:MAX_NAME_CHARS],
            "rpc.system": "jsonrpc",
        }
        version = meta.get("io.modelcontextprotocol/protocolVersion")
        if isinstance(version, str) and _VERSION.fullmatch(version):
            attributes["mcp.protocol.version"] = version
        target = params.get(_NAMED_BY.get(request.method, ""))
        name: str = method
        if isinstance(target, str):
            target = target[:MAX_NAME_CHARS]  # a client's text: bounded in every span
            name = f"{method} {target}"
            if request.method == "tools/call":
                attributes["gen_ai.tool.name"] = target
                attributes["gen_ai.operation.name"] = "execute_tool"
            elif request.method == "prompts/get":
                attributes["gen_ai.prompt.name"] = target
            else:
                attributes["mcp.resource.uri"] = target
        links = []
        state = params.get("requestState")
        if isinstance(state, str):
            answered = _round_of(state)
            attributes["mcp.mrtr.round"] = answered
            earlier = self.rounds.get(answered)
            if earlier is not None:
                links.append(Link(earlier, {"mcp.link": "previous_round"}))
        task_id = params.get("taskId")
        if request.method.startswith("tasks/") and isinstance(task_id, str):
            task_id = task_id[:MAX_NAME_CHARS]
            attributes["mcp.task.id"] = task_id
            work = self.tasks.get(task_id)
            if work is not None:
                links.append(Link(work, {"mcp.link": "task_work"}))
        started = time.perf_counter()
        observed: Observed | None = None
        with self.tracer.start_as_current_span(
            name,
            context=parent,
            kind=SpanKind.SERVER,
            attributes=attributes,
            links=links,
            record_exception=False,
        ) as span:
            observed = Observed(span, self)
            try:
                yield observed
            finally:
                measured: dict[str, Any] = {
                    key: attributes[key]
                    for key in ("mcp.method.name", "gen_ai.tool.name", "mcp.protocol.version")
                    if key in attributes
                }
                if observed.error_type is not None:
                    measured["error.type"] = observed.error_type
                self.histogram.record(time.perf_counter() - started, measured)

    def current(self) -> Any:
        """The span context of the span running now (a request's), to link to later."""
        from opentelemetry import trace

        return trace.get_current_span().get_span_context()

    @contextlib.contextmanager
    def task_work(self, task_id: str, tool: str, creator: Any) -> Iterator[None]:
        """The INTERNAL span of a task's work: a trace of its own, linked to the request that
        created it (`creator`, when this process saw it); `tasks/*` spans link to it."""
        from opentelemetry import context
        from opentelemetry.trace import Link, SpanKind

        links = []
        if creator is not None and creator.is_valid:
            links.append(Link(creator, {"mcp.link": "created_by"}))
        with self.tracer.start_as_current_span(
            f"tools/call {tool} (task)",
            context=context.Context(),
            kind=SpanKind.INTERNAL,
            attributes={
                "mcp.method.name": "tools/call",
                "gen_ai.tool.name": tool,
                "gen_ai.operation.name": "execute_tool",
                "mcp.task.id": task_id,
            },
            links=links,
        ) as span:
            self.tasks.put(task_id, span.get_span_context())
            yield
