"""Tracing off by default (no SDK, no header, no span), switched on by the standard OTLP variables, and when
on the dispatcher's per-handoff work runs inside a current span of that handoff's trace (log lines written
there carry its trace id). Spans are read here from the SDK's in-memory exporter; the OTLP path across
processes is `test_telemetry_trace.py`."""

import json
import os
import subprocess
import sys

import pytest
from django.conf import settings
from opentelemetry import trace
from opentelemetry.sdk import resources
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from config.telemetry import KeyedIds, tracer_provider
from lib import telemetry
from outbox.destinations import InProcessDestination
from outbox.destinations.http.destination import HttpDestination
from outbox.dispatch.dispatcher import handoff_deliver
from tests.builders import approve
from tests.factories import onboarding_world
from tests.processes import ROOT

# The settings alone, as a process reads them at start: the values are the settings modules' own (no app sets
# them), so the child imports no app (0.5 s of CPU a child with `django.setup()`; docs/testing.md).
PRINT = (
    "from django.conf import settings; import json; "
    "print(json.dumps([settings.TRACING_OTLP_ENDPOINT, settings.HANDOFF_TRACING_SETUP, "
    "settings.TRACING_SERVICE_NAME]))"
)


def tracing_settings_with(**env) -> list[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    result = subprocess.run(
        [sys.executable, "-c", PRINT],
        cwd=ROOT,
        env={**clean, "DJANGO_SETTINGS_MODULE": "config.test_settings", **env},
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(result.stdout.strip().splitlines()[-1])


def test_tracing_is_off_unless_an_endpoint_is_named():
    assert tracing_settings_with() == ["", "", "handoff-console"]
    assert tracing_settings_with(OTEL_EXPORTER_OTLP_ENDPOINT="http://otel:4318/") == [
        "http://otel:4318/v1/traces",
        "config.telemetry.configure",
        "handoff-console",
    ]
    assert tracing_settings_with(
        OTEL_EXPORTER_OTLP_ENDPOINT="http://otel:4318",
        OTEL_EXPORTER_OTLP_TRACES_ENDPOINT="http://traces:4318/v1/traces",
        OTEL_SERVICE_NAME="dispatcher",
    ) == ["http://traces:4318/v1/traces", "config.telemetry.configure", "dispatcher"]
    assert tracing_settings_with(
        OTEL_EXPORTER_OTLP_ENDPOINT="http://otel:4318", OTEL_SDK_DISABLED="true"
    ) == ["", "", "handoff-console"]


@pytest.fixture
def spans():
    exporter = InMemorySpanExporter()
    provider = TracerProvider(id_generator=KeyedIds())
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    telemetry.install(provider)
    yield exporter
    telemetry.install(None)
    provider.shutdown()


@pytest.fixture
def tracing_off():
    telemetry.install(None)
    yield
    telemetry.install(None)


def test_off_no_span_and_no_traceparent_is_sent(tracing_off):
    assert settings.HANDOFF_TRACING_SETUP == ""
    assert not telemetry.enabled()
    with telemetry.handoff_span("handoff.settle", "onboarding:7:42:1"):
        assert not trace.get_current_span().get_span_context().is_valid
        headers = HttpDestination(
            url="http://127.0.0.1:9", signing_secret="whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
        )._signed("")
    assert "traceparent" not in headers and "webhook-signature" in headers
    claims = [object()]
    assert telemetry.each_in_trace(claims) is claims


class SeesItsSpan(InProcessDestination):
    """The in-process receiver, noting which span is current when it is called."""

    def deliver(self, outgoing):
        self.seen = trace.get_current_span().get_span_context()
        return super().deliver(outgoing)


@pytest.mark.django_db(databases=["default", "delivery"])
def test_on_the_dispatchers_work_on_a_handoff_is_in_a_current_span_of_its_trace(spans):
    handoff = approve(onboarding_world())
    destination = SeesItsSpan()
    assert handoff_deliver(handoff_id=handoff.pk, destination=destination) == "delivered"

    trace_id, root_id = telemetry.handoff_ids(handoff.action_key)
    finished = {s.name: s for s in spans.get_finished_spans()}
    assert set(finished) == {
        "approval.approve",
        "handoff.claim",
        "handoff.record",
    }
    assert {s.context.trace_id for s in finished.values()} == {trace_id}
    assert finished["approval.approve"].context.span_id == root_id
    assert finished["approval.approve"].parent is None
    # Inside the call the handoff's trace is current (its root): a log line written there carries its id.
    assert (destination.seen.trace_id, destination.seen.span_id) == (trace_id, root_id)
    assert finished["handoff.record"].attributes["handoff.state"] == "delivered"


@pytest.mark.django_db(databases=["default", "delivery"])
def test_on_an_http_call_sends_the_traceparent_of_its_own_span(spans):
    destination = HttpDestination(
        url="http://127.0.0.1:9", signing_secret="whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
    )
    with telemetry.call_span("receiver", "onboarding:7:42:1") as span:
        headers = destination._signed("")
    context = span.get_span_context()
    assert headers["traceparent"] == f"00-{context.trace_id:032x}-{context.span_id:016x}-01"
    assert context.trace_id == telemetry.handoff_ids("onboarding:7:42:1")[0]


def test_the_providers_resource_is_hashed_once_not_encoded_again_for_each_span(monkeypatch):
    provider = tracer_provider(endpoint="http://127.0.0.1:9/v1/traces", service_name="dispatcher")
    try:
        encoded = []
        monkeypatch.setattr(resources, "dumps", lambda *a, **k: encoded.append(a) or "")
        # The OTLP encoder hashes the resource of every span it groups: no JSON of its attributes each time.
        assert hash(provider.resource) == hash(provider.resource)
        assert encoded == []
        assert provider.resource == Resource.create({"service.name": "dispatcher"})
    finally:
        provider.shutdown()


class Starts(SimpleSpanProcessor):
    """Exports each finished span, and notes the name of each span a processor saw start."""

    def __init__(self, exporter):
        super().__init__(exporter)
        self.started = []

    def on_start(self, span, parent_context=None):
        self.started.append(span.name)


def test_a_call_span_is_written_finished_with_what_was_noted_and_an_escaping_error():
    """`destination.call` reaches the processors finished, as the past spans do (no `on_start`: the SDK's live
    span cost 2 to 3 times the CPU), current while the call runs, in the handoff's trace, with the answer
    noted on it; an exception leaving the call is recorded and sets an ERROR status, as the SDK does."""
    exporter = InMemorySpanExporter()
    processor = Starts(exporter)
    provider = TracerProvider(id_generator=KeyedIds())
    provider.add_span_processor(processor)
    telemetry.install(provider)
    key = "onboarding:7:42:1"
    trace_id, root_id = telemetry.handoff_ids(key)
    try:
        with telemetry.call_span("receiver", key) as span:
            assert trace.get_current_span() is span
            telemetry.note(status_code=201, failure_class="")
        with pytest.raises(ConnectionError), telemetry.call_span("receiver", key):
            raise ConnectionError("refused")
    finally:
        telemetry.install(None)
        provider.shutdown()

    assert processor.started == []
    answered, failed = exporter.get_finished_spans()
    assert answered.context.span_id == span.get_span_context().span_id
    assert (answered.name, answered.kind) == ("destination.call", trace.SpanKind.CLIENT)
    assert (answered.context.trace_id, answered.parent.span_id) == (trace_id, root_id)
    assert dict(answered.attributes) == {
        "handoff.action_key": key,
        "handoff.destination": "receiver",
        "handoff.status_code": 201,
        "handoff.failure_class": "",
    }
    assert answered.status.status_code is trace.StatusCode.UNSET and answered.events == ()
    assert answered.start_time <= answered.end_time
    assert failed.status.status_code is trace.StatusCode.ERROR
    assert failed.status.description == "ConnectionError: refused"
    (event,) = failed.events
    assert event.name == "exception"
    assert event.attributes["exception.type"] == "ConnectionError"
    assert event.attributes["exception.message"] == "refused"
