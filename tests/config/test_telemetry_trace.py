"""One approval-to-receipt path, traced across processes and read back from a real OTLP/HTTP collector.

The approval happens in this process (its SDK installed by hand, pointing at the collector); the delivery
in a `manage.py dispatch --once` process of its own, whose tracing is switched on the way an operator does
it, by OTEL_EXPORTER_OTLP_ENDPOINT; the receiver is the bundled one under gunicorn, behind a recording hop
that keeps the headers each request carried."""

import pytest

from config.telemetry import tracer_provider
from delivery.models import ReceiverTask
from lib import telemetry
from outbox.models import Handoff, HandoffState
from tests.config.otlp_servers import Collector, RecordingHop
from tests.faults.conftest import Processes
from tests.faults.test_django_q import approve_request_42

pytestmark = [
    pytest.mark.postgres,
    pytest.mark.faults,
    pytest.mark.django_db(databases=["default", "delivery"], transaction=True),
]

PATH = [
    "approval.approve",
    "handoff.claim",
    "destination.call",
    "handoff.record",
]


@pytest.fixture
def collector():
    server = Collector()
    yield server
    server.stop()


@pytest.fixture
def traced_here(collector):
    """This process's spans go to the collector while the test runs; tracing is off again afterwards."""
    provider = tracer_provider(
        endpoint=f"{collector.base_url}/v1/traces", service_name="handoff-console-web"
    )
    telemetry.install(provider)
    yield provider
    telemetry.install(None)
    provider.shutdown()


@pytest.fixture
def processes(transactional_db, tmp_path):
    procs = Processes(tmp_path)
    yield procs
    procs.stop_all()


def test_one_trace_from_approval_to_receipt_and_the_receiver_request_carries_it(
    processes, collector, traced_here
):
    receiver = processes.start_receiver()
    hop = RecordingHop(receiver.split("/delivery/", 1)[0])
    try:
        processes.receiver_url = f"{hop.base_url}/delivery/api"
        handoff = approve_request_42()
        traced_here.force_flush()
        processes.dispatch_once(
            "traced",
            OTEL_EXPORTER_OTLP_ENDPOINT=collector.base_url,
            OTEL_SERVICE_NAME="handoff-dispatcher",
        )
    finally:
        hop.stop()

    handoff.refresh_from_db()
    assert handoff.state == HandoffState.DELIVERED
    assert ReceiverTask.objects.filter(action_key=handoff.action_key).count() == 1
    # The dispatch process flushed its spans before it exited: all are in.
    spans = collector.of_key(handoff.action_key)
    assert [s.name for s in spans] == PATH, spans
    by_name = {s.name: s for s in spans}
    approval, call = by_name["approval.approve"], by_name["destination.call"]

    trace_id = f"{telemetry.handoff_ids(handoff.action_key)[0]:032x}"
    assert {s.trace_id for s in spans} == {trace_id}
    assert approval.parent_span_id == "" and approval.service == "handoff-console-web"
    for name in ("handoff.claim", "destination.call", "handoff.record"):
        assert by_name[name].parent_span_id == approval.span_id, name
        assert by_name[name].service == "handoff-dispatcher"
    assert by_name["handoff.record"].attributes["handoff.state"] == HandoffState.DELIVERED
    assert call.attributes["handoff.status_code"] == 201

    posts = [
        h for method, path, h in hop.requests if (method, path) == ("POST", "/delivery/api/tasks")
    ]
    assert len(posts) == 1
    assert posts[0]["traceparent"] == f"00-{trace_id}-{call.span_id}-01"
    assert Handoff.objects.get(pk=handoff.pk).destination_id
