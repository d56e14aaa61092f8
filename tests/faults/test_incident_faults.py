"""200 handoffs fail for one cause (the receiver process is down): one incident and one page at a real HTTP
receiver of alerts, not 200; the page's first answer is lost, so the page arrives twice, with the same
notification id both times; once the receiver is back and every handoff is delivered, the incident resolves
by itself. Real processes: the receiver (gunicorn) and a dispatcher, against PostgreSQL."""

import pytest

from incidents.models import (
    AlertChannel,
    ChannelKind,
    Incident,
    IncidentKind,
    IncidentSeverity,
    IncidentState,
    Notification,
    NotificationState,
)
from outbox.models import (
    DestinationEvent,
    DestinationHealth,
    DestinationState,
    Handoff,
    HandoffState,
)
from outbox.services import handoff_record
from tests.faults.test_dispatch_faults import wait_until
from tests.incidents.alert_receiver import AlertReceiver
from tests.incidents.engine import alerts_send_due
from tests.incidents.test_incidents import SECRET

pytestmark = [
    pytest.mark.postgres,
    pytest.mark.faults,
    pytest.mark.django_db(databases=["default", "delivery"], transaction=True),
]
HANDOFFS = 200


def approve(n: int) -> None:
    handoff_record(
        workflow="onboarding",
        workspace_id=7,
        source_ref=f"request {n} revision 1",
        source_id=n,
        action_key=f"onboarding:7:{n}:1",
        payload={"client_name": f"Client {n}", "plan": "standard"},
    )


def pages(receiver: AlertReceiver) -> list[dict]:
    return [d for d in receiver.documents() if d["type"] == "handoff.incident.trigger"]


def test_two_hundred_handoffs_failing_for_one_cause_page_once_and_resolve_by_themselves(
    processes, settings, monkeypatch
):
    settings.ALERT_EMAILS = []
    settings.ALERT_NOTIFICATION_RETRY_BASE_SECONDS = 0
    # The channel's destination is served by the dispatcher too: a call (connect and read, 4 s each) within its
    # lease (10 s). 4 s, not 2: a page answered late on a loaded machine would be sent twice.
    settings.ALERT_NOTIFICATION_TIMEOUT_SECONDS = 4
    monkeypatch.setenv("INCIDENT_WEBHOOK_SECRET", SECRET)
    processes.start_receiver()
    port = processes.stop_receiver()
    for n in range(1, HANDOFFS + 1):
        approve(n)
    # The dispatcher delivers the page too: it reads the channel's secret.
    dispatcher = processes.start_dispatcher(
        "d1",
        HANDOFF_MAX_ATTEMPTS="",
        RECEIVER_CONNECT_TIMEOUT="0.5",
        INCIDENT_WEBHOOK_SECRET=SECRET,
    )
    wait_until(
        lambda: DestinationHealth.objects.filter(
            name="receiver", state=DestinationState.PAUSED
        ).exists(),
        timeout=60,
        what="the receiver destination to be paused",
        procs=[dispatcher],
    )
    with AlertReceiver(lose_first=1) as receiver:
        AlertChannel.objects.create(
            name="on-call",
            kind=ChannelKind.WEBHOOK,
            target=receiver.url,
            secret_env="INCIDENT_WEBHOOK_SECRET",
        )

        def page_sent() -> bool:
            alerts_send_due()
            sent = Notification.objects.with_delivery().filter(
                delivery_state=NotificationState.SENT
            )
            return sent.exists()

        wait_until(page_sent, timeout=120, what="the page to be sent")
        for _ in range(3):
            alerts_send_due()
        [incident] = Incident.objects.filter(severity=IncidentSeverity.PAGE)
        assert incident.kind == IncidentKind.DESTINATION
        assert incident.member_count == HANDOFFS
        assert len(pages(receiver)) == 2, "the first answer was lost: the page came twice"
        ids = {r.headers["webhook-id"] for r in receiver.received}
        assert ids == {f"incident-{incident.pk}-1"}, "the same notification both times"

        processes.start_receiver(port=port)
        wait_until(
            lambda: (
                Handoff.objects.filter(workflow="onboarding", state=HandoffState.DELIVERED).count()
                == HANDOFFS
            ),
            timeout=240,
            what="every handoff to be delivered after the receiver is back",
            procs=[dispatcher],
        )

        def resolved() -> bool:
            alerts_send_due()
            return Incident.objects.filter(pk=incident.pk, state=IncidentState.RESOLVED).exists()

        wait_until(resolved, timeout=120, what="the incident to resolve by itself")
        incident.refresh_from_db()
        assert incident.resolved_by is None and incident.settled_count == HANDOFFS
        assert {
            r.headers["webhook-id"]
            for r in receiver.received
            if r.document["type"] == ("handoff.incident.trigger")
        } == {f"incident-{incident.pk}-1"}, (
            list(Incident.objects.values_list("pk", "cause", "title", "member_count")),
            list(DestinationEvent.objects.values_list("pk", "from_state", "to_state", "reason")),
        )
        # The resolve is a handoff too (the outbox's engine delivers it): waited for, not read at once.
        wait_until(
            lambda: receiver.documents()[-1]["type"] == "handoff.incident.resolve",
            timeout=60,
            what="the resolve to reach the channel",
            procs=[dispatcher],
        )
