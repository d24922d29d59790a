"""OpenTelemetry traces, with the OpenTelemetry SDK's own settings: set
`OTEL_EXPORTER_OTLP_ENDPOINT` (or `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`) and every run is a
trace sent over OTLP/HTTP; unset, nothing of OpenTelemetry is loaded and each hook here costs
one test of a constant.

The spans, in the GenAI semantic conventions where they name one:
- the HTTP request (the ASGI instrumentation), parent of what it starts;
- `invoke_agent <agent>`: the run (its runner, agent, conversation, status, token usage);
- `chat <model>`: each model call attempt (`gen_ai.*`: provider, request and response model,
  input and output tokens; the messages only with
  `OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true`);
- `execute_tool <tool>`: each tool call (its source, MCP server or plugin, and error);
- `host <action>`: each in-run API call of a plugin runner;
- `runner <id>` in a runtime worker: a run it streams for a web process, in the request's
  trace (its context travels in the run's start message over the Channels layer).

No credential leaves in a span: a token in a URL, an attachment link's token, a bearer token
or a JWT is scrubbed before export (`scrubbing.py`).

A run's span is found again by its id (`_runs`): what a plugin asks of the host for its run,
on the runtime link's task, belongs to the run's trace.
"""

import atexit
import contextlib
import json
import os

ENABLED = bool(os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT")
               or os.environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"))
CAPTURE_CONTENT = os.environ.get("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT",
                                 "").lower() == "true"

if ENABLED:
    from opentelemetry import context, propagate, trace
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.instrumentation.asgi import OpenTelemetryMiddleware
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter

    from runners.observability.scrubbing import scrubbed, scrubbed_value

    class ScrubbingExporter(SpanExporter):
        """OTLP export of spans scrubbed of credentials (`scrubbing.py`): their names, and
        their attributes' and events' texts."""

        def __init__(self, exporter):
            self.exporter = exporter

        def export(self, spans):
            return self.exporter.export([_scrubbed_span(span) for span in spans])

        def shutdown(self):
            return self.exporter.shutdown()

        def force_flush(self, timeout_millis: int = 30000):
            return self.exporter.force_flush(timeout_millis)

    def _scrubbed_attributes(attributes):
        return {name: scrubbed_value(value) for name, value in (attributes or {}).items()}

    def _scrubbed_span(span):
        events = [type(event)(event.name, _scrubbed_attributes(event.attributes),
                              event.timestamp) for event in span.events]
        return ReadableSpan(
            name=scrubbed(span.name), context=span.context, parent=span.parent,
            resource=span.resource, attributes=_scrubbed_attributes(span.attributes),
            events=events, links=span.links, kind=span.kind,
            status=type(span.status)(span.status.status_code,
                                     span.status.description and scrubbed(span.status.description)),
            start_time=span.start_time, end_time=span.end_time,
            instrumentation_scope=span.instrumentation_scope)

_tracer = None
# Run id → the span of the run, while it executes in this process (or is streamed by it).
_runs: dict = {}


def setup() -> None:
    """Send this process's spans to the OTLP endpoint (once; a no-op when it is unset)."""
    global _tracer
    if not ENABLED or _tracer is not None:
        return
    provider = TracerProvider(resource=Resource.create(
        {"service.name": os.environ.get("OTEL_SERVICE_NAME", "langhost")}))
    provider.add_span_processor(BatchSpanProcessor(ScrubbingExporter(OTLPSpanExporter())))
    trace.set_tracer_provider(provider)
    atexit.register(provider.shutdown)  # what is batched still goes out
    _tracer = trace.get_tracer("langhost")


def asgi(application):
    """`application` with a span for each HTTP request, when tracing is on."""
    # One span a request: not one more for each of its ASGI messages.
    return OpenTelemetryMiddleware(application, exclude_spans=["receive", "send"]) \
        if ENABLED else application


def _parent(run_id: str | None):
    span = _runs.get(run_id) if run_id else None
    return trace.set_span_in_context(span) if span is not None else None


def run_started(run_id: str, runner_id: str, agent: str, conversation_id: str | None):
    """Open the run's span, current from here on in this context; the token `run_ended`
    takes back."""
    if _tracer is None:
        return None
    span = _tracer.start_span(f"invoke_agent {agent}", attributes={
        "gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": agent,
        "gen_ai.conversation.id": conversation_id or "", "langhost.run.id": run_id,
        "langhost.runner.id": runner_id})
    _runs[run_id] = span
    return run_id, context.attach(trace.set_span_in_context(span))


def run_ended(token, outcome: dict | None) -> None:
    """Close the run's span with how the run ended (`outcome`: the ledger's)."""
    if token is None:
        return
    run_id, attached = token
    span = _runs.pop(run_id)
    if outcome:
        usage = outcome.get("usage") or {}
        span.set_attributes({
            "langhost.run.status": outcome.get("status") or "",
            "langhost.run.status_reason": (outcome.get("status_reason") or "")[:500],
            "gen_ai.usage.input_tokens": int(usage.get("prompt_tokens") or 0),
            "gen_ai.usage.output_tokens": int(usage.get("completion_tokens") or 0)})
        if outcome.get("status") in ("failed", "timeout"):
            span.set_status(trace.StatusCode.ERROR, outcome.get("status_reason") or "")
    span.end()
    with contextlib.suppress(ValueError):  # closed from another context: nothing to restore
        context.detach(attached)


def model_call(row: dict, system: str, began: float, messages=None) -> None:
    """The span of a model call attempt that began at `time.time()` `began` and just ended;
    `row`: its `ModelCall` fields."""
    if _tracer is None:
        return
    span = _tracer.start_span(
        f"chat {row['model_name']}", context=_parent(row.get("run_id")),
        start_time=int(began * 1e9), kind=trace.SpanKind.CLIENT, attributes={
            "gen_ai.operation.name": "chat", "gen_ai.system": system,
            "gen_ai.request.model": row["upstream_model"],
            "gen_ai.response.model": row["upstream_model"],
            "gen_ai.usage.input_tokens": row["input_tokens"],
            "gen_ai.usage.output_tokens": row["output_tokens"],
            "langhost.model.name": row["model_name"], "langhost.model.attempt": row["attempt"],
            "langhost.run.id": row.get("run_id") or ""})
    if CAPTURE_CONTENT and messages is not None:
        span.set_attribute("gen_ai.input.messages", json.dumps(messages, default=str))
    if row["status"] != "ok":
        span.set_attribute("error.type", row["status"])
        span.set_status(trace.StatusCode.ERROR, row.get("error") or row["status"])
    span.end()


@contextlib.contextmanager
def tool_call(tool: dict):
    """A span around calling the granted `tool`."""
    if _tracer is None:
        yield
        return
    with _tracer.start_as_current_span(f"execute_tool {tool.get('tool_name')}", attributes={
            "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": tool.get("tool_name", ""),
            "langhost.tool.source": tool.get("source", ""),
            "langhost.tool.source_id": str(tool.get("source_id", ""))}) as span:
        try:
            yield
        except Exception as exc:
            span.set_attribute("error.type", type(exc).__name__)
            raise


@contextlib.contextmanager
def host_action(action: str, run_id: str | None):
    """A span around the host answering a plugin's in-run API call for `run_id`."""
    if _tracer is None:
        yield
        return
    with _tracer.start_as_current_span(f"host {action}", context=_parent(run_id),
                                       attributes={"langhost.run.id": run_id or ""}):
        yield


def carrier(run_id: str) -> dict:
    """The run's trace context, to send along with its start to a runtime worker."""
    if _tracer is None or run_id not in _runs:
        return {}
    headers: dict = {}
    propagate.inject(headers, context=_parent(run_id))
    return headers


@contextlib.contextmanager
def streamed_elsewhere(run_id: str, runner_id: str, headers: dict | None):
    """In a runtime worker: a span for streaming a web process's run, in that run's trace;
    the host actions of the run answered here belong to it too."""
    if _tracer is None:
        yield
        return
    with _tracer.start_as_current_span(f"runner {runner_id}",
                                       context=propagate.extract(headers or {}),
                                       attributes={"langhost.run.id": run_id,
                                                   "langhost.runner.id": runner_id}) as span:
        _runs[run_id] = span
        try:
            yield
        finally:
            _runs.pop(run_id, None)
