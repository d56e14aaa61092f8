"""Traces of a handoff's way from its approval to its receipt: the spans the apps open, and the W3C
`traceparent` sent to destinations (docs/observability.md).

One handoff is one trace. Its trace id and the id of its root span (the approval) are derived from the
action key, so that every process that works on the handoff later (the dispatcher's claim, call and record,
settlement, an operator's reconcile) joins the same trace without the approval's context being stored
anywhere: the outbox row has no column for it, and none is needed. Spans written after the approval are
children of that root (a remote parent made from the key).

Off by default: with no exporter configured (`HANDOFF_TRACING_SETUP` empty, the default) no SDK is set up,
every span call returns a shared no-op context manager and no header is added. `install` turns tracing on
(by `config.telemetry.configure` on the first span of a process, or by a test) and off again.
"""

import hashlib
import threading
import traceback
from collections.abc import Iterable
from contextlib import contextmanager, nullcontext
from contextvars import ContextVar
from functools import lru_cache
from time import time_ns

from django.conf import settings
from django.utils.module_loading import import_string
from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace import Link, NonRecordingSpan, SpanContext, SpanKind, TraceFlags
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator
from opentelemetry.trace.status import Status, StatusCode

TRACER_NAME = "handoff-console"
# The attribute every span of a handoff carries: search a tracing tool by it.
KEY_ATTRIBUTE = "handoff.action_key"

# The ids the next root span takes (trace id, span id): set only while the approval's span is started, read
# by the id generator `config.telemetry` installs (`KeyedIds`).
FORCED_IDS: ContextVar[tuple[int, int] | None] = ContextVar("handoff_forced_ids", default=None)

_OFF = nullcontext()
_PROPAGATOR = TraceContextTextMapPropagator()
_state: dict = {"tracer": None, "configured": False, "finished_span": None}
_setup_lock = threading.Lock()


def install(provider) -> None:
    """Spans from here on go to `provider` (an SDK TracerProvider); None turns tracing off."""
    _state["tracer"] = provider.get_tracer(TRACER_NAME) if provider is not None else None
    _state["finished_span"] = _finished_span_class(_state["tracer"])
    _state["configured"] = True


def _finished_span_class(tracer):
    """The SDK's ReadableSpan when `tracer` is the SDK's (`_past_span`), else None. Imported here, not at the
    top: a process with tracing off never loads the SDK (7 ms of every start)."""
    if tracer is None or not type(tracer).__module__.startswith("opentelemetry.sdk."):
        return None
    from opentelemetry.sdk.trace import ReadableSpan, Tracer

    return ReadableSpan if isinstance(tracer, Tracer) else None


def _tracer():
    if not _state["configured"]:
        _configure_once()
    return _state["tracer"]


def _configure_once() -> None:
    # The dispatcher's worker threads may all start their first span at once: one provider per process.
    with _setup_lock:
        if _state["configured"]:
            return
        setup = getattr(settings, "HANDOFF_TRACING_SETUP", "")
        if setup:
            import_string(setup)()
        _state["configured"] = True


def enabled() -> bool:
    return _tracer() is not None


@lru_cache(maxsize=4096)
def handoff_ids(action_key: str) -> tuple[int, int]:
    """The trace id and the root span's id of the handoff with this key (never zero, as W3C requires)."""
    digest = hashlib.sha256(action_key.encode()).digest()
    return int.from_bytes(digest[:16]) or 1, int.from_bytes(digest[16:24]) or 1


def _handoff_root(action_key: str) -> otel_context.Context:
    """A context whose current span is the handoff's root (the approval), whichever process wrote it."""
    root = _root_context(action_key)
    return trace.set_span_in_context(NonRecordingSpan(root), otel_context.Context())


def _parent(action_key: str) -> otel_context.Context | None:
    """The current span when it is already in this handoff's trace (a call inside the dispatch of the same
    handoff), else the handoff's root."""
    current = trace.get_current_span().get_span_context()
    return None if current.trace_id == handoff_ids(action_key)[0] else _handoff_root(action_key)


def handoff_span(name: str, action_key: str, *, kind: SpanKind = SpanKind.INTERNAL, **attributes):
    """A context manager: the span `name` in the handoff's trace, current while the block runs (so that a log
    line written inside carries its trace id)."""
    tracer = _tracer()
    if tracer is None:
        return _OFF
    return tracer.start_as_current_span(
        name,
        context=_parent(action_key),
        kind=kind,
        attributes={KEY_ATTRIBUTE: action_key, **attributes},
    )


def each_in_trace(claims: list) -> Iterable:
    """The claims (anything with an `action_key`) one by one, each with its handoff's trace current while
    the loop's body works on it: a log line written there carries the trace id, and a span opened there (the
    destination's call) joins the trace. The current span is the handoff's root, not a span of its own: a
    context switch per handoff, where a span each would cost the SDK's work and an export (bench/tracing_bench.py).
    The last one's context is left when the loop ends (or breaks: the generator is closed with it)."""
    if _tracer() is None:
        return claims
    return _each_in_trace(claims)


def _each_in_trace(claims: list):
    for claim in claims:
        token = otel_context.attach(_handoff_root(claim.action_key))
        try:
            yield claim
        finally:
            otel_context.detach(token)


def _child_context(tracer, trace_id: int, sampled) -> SpanContext:
    """A new span's context in `trace_id`, as the SDK's tracer makes it: a fresh span id, the sampler's
    decision (`sampled`, a `SamplingResult`) as its flags and trace state."""
    flags = TraceFlags.SAMPLED if sampled.decision.is_sampled() else TraceFlags.DEFAULT
    return SpanContext(
        trace_id,
        tracer.id_generator.generate_span_id(),
        is_remote=False,
        trace_flags=TraceFlags(flags),
        trace_state=sampled.trace_state,
    )


def call_span(destination: str, action_key: str):
    """The span of one call to a destination (kind CLIENT): `trace_headers` inside it names it as parent.
    With the SDK's tracer it is an `_OpenSpan`, handed to the span processors finished when the block ends,
    as the past spans are: the SDK's own live span (locked, bounded attributes, started, copied at its end)
    cost 2 to 3 times the CPU of this one (one process, 2026-12-07; docs/observability.md, "The cost")."""
    tracer = _tracer()
    if tracer is None:
        return _OFF
    attributes = {KEY_ATTRIBUTE: action_key, "handoff.destination": destination}
    if _state["finished_span"] is None:
        return tracer.start_as_current_span(
            "destination.call",
            context=_parent(action_key),
            kind=SpanKind.CLIENT,
            attributes=attributes,
        )
    return _open_call(tracer, action_key, attributes)


class _OpenSpan(NonRecordingSpan):
    """A span under way that only collects what is noted on it (attributes, events, a status) for the
    finished span written at its end; it reaches no processor's `on_start`."""

    def __init__(self, context: SpanContext, attributes: dict):
        super().__init__(context)
        self.attributes, self.events, self.status = attributes, [], Status(StatusCode.UNSET)

    def is_recording(self) -> bool:
        return True

    def set_attributes(self, attributes) -> None:
        self.attributes.update(attributes)

    def set_attribute(self, key: str, value) -> None:
        self.attributes[key] = value

    def add_event(self, name: str, attributes=None, timestamp: int | None = None) -> None:
        from opentelemetry.sdk.trace import Event

        self.events.append(Event(name, attributes or {}, timestamp or time_ns()))

    def set_status(self, status, description: str | None = None) -> None:
        if self.status.status_code is not StatusCode.OK:  # OK is final, as the SDK's span keeps it
            self.status = status if isinstance(status, Status) else Status(status, description)

    def record_exception(self, exception, attributes=None, timestamp=None, escaped=False) -> None:
        kind = type(exception)
        module = kind.__module__
        self.add_event(
            "exception",
            {
                "exception.type": f"{module}.{kind.__qualname__}"
                if module and module != "builtins"
                else kind.__qualname__,
                "exception.message": str(exception),
                "exception.stacktrace": "".join(traceback.format_exception(exception)),
                "exception.escaped": str(escaped),
                **(attributes or {}),
            },
            timestamp,
        )


@contextmanager
def _open_call(tracer, action_key: str, attributes: dict):
    """`destination.call` current while the block runs, as the SDK's `start_as_current_span` makes it (the
    sampler asked, an exception recorded with an ERROR status), written finished at the end."""
    parent_context = _parent(action_key)
    if parent_context is None:
        parent_context = otel_context.get_current()
    parent = trace.get_current_span(parent_context).get_span_context()
    sampled = tracer.sampler.should_sample(
        parent_context, parent.trace_id, "destination.call", SpanKind.CLIENT, attributes, ()
    )
    context = _child_context(tracer, parent.trace_id, sampled)
    recording = sampled.decision.is_recording()
    span = (
        _OpenSpan(context, {**attributes, **(sampled.attributes or {})})
        if recording
        else NonRecordingSpan(context)
    )
    started = time_ns()
    try:
        with trace.use_span(span):
            yield span
    finally:
        if recording:
            tracer.span_processor.on_end(
                _state["finished_span"](
                    "destination.call",
                    context,
                    parent=parent,
                    resource=tracer.resource,
                    attributes=span.attributes,
                    events=span.events,
                    kind=SpanKind.CLIENT,
                    status=span.status,
                    start_time=started,
                    end_time=time_ns(),
                    instrumentation_scope=tracer._instrumentation_scope,
                )
            )


@contextmanager
def batch_call_span(destination: str, action_keys: list[str]):
    """Around one call that carries many handoffs (`POST /tasks/batch`): the call's own CLIENT span, current
    while the block runs so that `trace_headers` sends its `traceparent`, linked to each handoff's trace; on
    the way out each handoff's trace gets its `destination.call` span for the same interval, linked back to the
    batch's span, so that a handoff's trace reads approval, claim, call, record whether its call was single or
    batched, and the receiver's trace of the request finds every handoff it carried."""
    tracer = _tracer()
    if tracer is None:
        yield
        return
    started = time_ns()
    attributes = {"handoff.destination": destination, "handoff.batch_size": len(action_keys)}
    with tracer.start_as_current_span(
        "destination.call_batch",
        context=otel_context.Context(),
        kind=SpanKind.CLIENT,
        links=[Link(_root_context(key)) for key in action_keys],
        attributes=attributes,
    ) as batch:
        yield
    ended, link = time_ns(), (Link(batch.get_span_context()),)
    for key in action_keys:
        _past_span(
            tracer,
            "destination.call",
            key,
            (started, ended),
            {"handoff.destination": destination},
            kind=SpanKind.CLIENT,
            links=link,
        )


def _root_context(action_key: str) -> SpanContext:
    trace_id, span_id = handoff_ids(action_key)
    return SpanContext(
        trace_id, span_id, is_remote=True, trace_flags=TraceFlags(TraceFlags.SAMPLED)
    )


def note(**attributes) -> None:
    """Attributes of the outcome on the current span (the answer's status, the state after)."""
    if _state["tracer"] is None:
        return
    span = trace.get_current_span()
    if span.is_recording():
        span.set_attributes({f"handoff.{name}": value for name, value in attributes.items()})


def trace_headers(headers: dict[str, str]) -> dict[str, str]:
    """`headers` with the current span's `traceparent` (and `tracestate`) added when tracing is on."""
    if _tracer() is not None:
        _PROPAGATOR.inject(headers)
    return headers


def past_spans(name: str, started_ns: int, items: Iterable[tuple[str, dict]]) -> None:
    """One span per (action key, attributes) from `started_ns` to now: the work of a batch (claim, record) is
    one statement for many handoffs, each of which gets its own span in its own trace."""
    tracer = _tracer()
    if tracer is None:
        return
    interval = (started_ns, time_ns())
    for action_key, attributes in items:
        _past_span(tracer, name, action_key, interval, attributes)


def _past_span(
    tracer,
    name: str,
    action_key: str,
    interval: tuple[int, int],
    attributes: dict,
    *,
    kind: SpanKind = SpanKind.INTERNAL,
    links: tuple = (),
) -> None:
    """A span of the handoff's trace over `interval` (start and end, ns), over already: the SDK's sampler
    decides as for any span, and a span it records goes to the span processors' `on_end` as the finished
    span it is. The SDK's own way (`start_span`, then `end`) builds a live, locked span with bounded
    attributes, starts it and copies it at its end: four times the CPU (bench/tracing_bench.py; 2 of the 3
    spans of a handoff are past ones). Processors get no `on_start` for it (the batch processor does nothing
    there), and its few attributes are not cut to the SDK's limits. A tracer that is not the SDK's gets
    `start_span` and `end`."""
    root = _root_context(action_key)
    attributes = {KEY_ATTRIBUTE: action_key, **attributes}
    finished_span = _state["finished_span"]
    if finished_span is None:
        _started_and_ended(tracer, name, action_key, interval, attributes, kind=kind, links=links)
        return
    parent = trace.set_span_in_context(NonRecordingSpan(root), otel_context.Context())
    sampled = tracer.sampler.should_sample(parent, root.trace_id, name, kind, attributes, links)
    if not sampled.decision.is_recording():
        return
    context = _child_context(tracer, root.trace_id, sampled)
    tracer.span_processor.on_end(
        finished_span(
            name,
            context,
            parent=root,
            resource=tracer.resource,
            attributes={**attributes, **(sampled.attributes or {})},
            links=links,
            kind=kind,
            start_time=interval[0],
            end_time=interval[1],
            instrumentation_scope=tracer._instrumentation_scope,
        )
    )


@contextmanager
def approval_trace():
    """Around an approval: yields `traced(handoff)`, which names the handoff it recorded and returns it.
    On the way out the approval's span is written as the root of that handoff's trace (the ids its key
    gives), from the start of the block; a trace the caller was in is linked."""
    tracer = _tracer()
    if tracer is None:
        yield _same
        return
    started, recorded = time_ns(), []
    caller = trace.get_current_span().get_span_context()

    def traced(handoff):
        recorded.append(handoff.action_key)
        return handoff

    yield traced
    for action_key in recorded:
        token = FORCED_IDS.set(handoff_ids(action_key))
        try:
            span = tracer.start_span(
                "approval.approve",
                context=otel_context.Context(),
                start_time=started,
                links=[Link(caller)] if caller.is_valid else (),
                attributes={KEY_ATTRIBUTE: action_key},
            )
        finally:
            FORCED_IDS.reset(token)
        span.end()


def _same(handoff):
    return handoff


def _started_and_ended(tracer, name, action_key, interval, attributes, *, kind, links) -> None:
    span = tracer.start_span(
        name,
        context=_handoff_root(action_key),
        kind=kind,
        start_time=interval[0],
        links=links,
        attributes=attributes,
    )
    span.end(end_time=interval[1])
