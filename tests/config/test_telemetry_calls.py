"""Every kind of destination call is traced: an e-mail handed to an SMTP server opens the handoff's
`destination.call` span and the message carries its `traceparent`; a batch call (`POST /tasks/batch`) has a
span of its own whose `traceparent` the receiver gets, linked to each handoff's trace, and each handoff's
trace still reads approval, claim, call, record. Spans from the SDK's in-memory exporter; the servers are
real (aiosmtpd, and the bundled receiver under gunicorn behind a hop that records headers)."""

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind

from config.telemetry import KeyedIds
from delivery.models import ReceiverTask
from lib import telemetry
from outbox.destinations.http.destination import HttpDestination
from outbox.destinations.smtp.destination import SmtpDestination
from tests.config.otlp_servers import RecordingHop
from tests.faults.conftest import Processes
from tests.outbox.destinations.smtp_server import SmtpServer
from tests.outbox.destinations.test_smtp import KEY, config, outgoing


@pytest.fixture
def spans():
    exporter = InMemorySpanExporter()
    provider = TracerProvider(id_generator=KeyedIds())
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    telemetry.install(provider)
    yield exporter
    telemetry.install(None)
    provider.shutdown()


def traceparent_of(span) -> str:
    context = span.context
    return f"00-{context.trace_id:032x}-{context.span_id:016x}-{context.trace_flags:02x}"


def test_an_smtp_call_is_a_span_of_the_handoffs_trace_and_the_message_carries_it(tmp_path, spans):
    server = SmtpServer(tmp_path / "smtp")
    try:
        result = SmtpDestination.from_config(config(server.port)).deliver(outgoing())
        (message,) = server.messages()
    finally:
        server.stop()
    assert result.delivered
    (call,) = [s for s in spans.get_finished_spans() if s.name == "destination.call"]
    assert call.kind == SpanKind.CLIENT
    assert call.context.trace_id == telemetry.handoff_ids(KEY)[0]
    assert call.attributes["handoff.destination"] == "mail"
    assert call.attributes["handoff.smtp_code"] == 250
    assert message["traceparent"] == traceparent_of(call)


def test_off_an_smtp_message_carries_no_traceparent(tmp_path):
    telemetry.install(None)
    server = SmtpServer(tmp_path / "smtp")
    try:
        assert SmtpDestination.from_config(config(server.port)).deliver(outgoing()).delivered
        (message,) = server.messages()
    finally:
        server.stop()
    assert message["traceparent"] is None


@pytest.mark.postgres
@pytest.mark.django_db(databases=["default", "delivery"], transaction=True)
def test_a_batch_call_sends_its_own_traceparent_linked_to_every_handoff_it_carries(tmp_path, spans):
    processes = Processes(tmp_path)
    keys = [f"onboarding:7:{n}:1:provision_account" for n in (101, 102, 103)]
    try:
        receiver = processes.start_receiver()
        hop = RecordingHop(receiver.split("/delivery/", 1)[0])
        try:
            destination = HttpDestination(url=f"{hop.base_url}/delivery/api", supports_batch=True)
            results = destination.deliver_batch([outgoing(key) for key in keys])
        finally:
            hop.stop()
    finally:
        processes.stop_all()

    assert [r.delivered for r in results] == [True, True, True]
    assert ReceiverTask.objects.filter(action_key__in=keys).count() == 3
    (request,) = [r for r in hop.requests if r[1].endswith("/tasks/batch")]
    finished = spans.get_finished_spans()
    (batch,) = [s for s in finished if s.name == "destination.call_batch"]
    assert batch.kind == SpanKind.CLIENT and batch.attributes["handoff.batch_size"] == 3
    assert request[2]["traceparent"] == traceparent_of(batch)
    roots = {telemetry.handoff_ids(key) for key in keys}
    assert {(link.context.trace_id, link.context.span_id) for link in batch.links} == roots
    calls = [s for s in finished if s.name == "destination.call"]
    assert sorted(c.attributes[telemetry.KEY_ATTRIBUTE] for c in calls) == sorted(keys)
    for call in calls:
        key = call.attributes[telemetry.KEY_ATTRIBUTE]
        assert (call.context.trace_id, call.parent.span_id) == telemetry.handoff_ids(key)
        assert [link.context.span_id for link in call.links] == [batch.context.span_id]
