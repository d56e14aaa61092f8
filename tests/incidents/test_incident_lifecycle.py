"""An incident pages again when its acknowledgement lapses while the cause holds, and a destination whose
queue grows older while nothing fails opens a backlog incident that pages and resolves (a resolve sent)
once the backlog is gone. Real HTTP servers on 127.0.0.1 record what they receive; due times are on the
database clock, polled with a deadline."""

import time

import pytest

from incidents.models import AlertChannel, ChannelKind, Incident, IncidentKind, IncidentState
from incidents.services.operator import incident_acknowledge
from outbox.clock import DbNow
from outbox.destinations import InProcessDestination
from outbox.dispatch.dispatcher import handoff_deliver
from outbox.models import Handoff, HandoffState
from outbox.services import handoff_record
from reconciliation.models import SecurityEvent
from tests.factories import make_user
from tests.incidents.alert_receiver import AlertReceiver
from tests.incidents.engine import alerts_send_due
from tests.incidents.test_incidents import SECRET

pytestmark = pytest.mark.django_db(databases=["default", "delivery"], transaction=True)


@pytest.fixture(autouse=True)
def _settings(settings, monkeypatch):
    settings.ALERT_EMAILS = []
    settings.ALERT_WEBHOOK_URL = ""
    settings.ALERT_PAGE_WEBHOOK_URL = ""
    settings.ALERT_SECURITY_THRESHOLD = 2
    settings.ALERT_NOTIFICATION_RETRY_BASE_SECONDS = 0
    monkeypatch.setenv("INCIDENT_WEBHOOK_SECRET", SECRET)


def channel(receiver: AlertReceiver) -> None:
    AlertChannel.objects.create(
        name="on-call",
        kind=ChannelKind.WEBHOOK,
        target=receiver.url,
        secret_env="INCIDENT_WEBHOOK_SECRET",
    )


def triggers(receiver: AlertReceiver) -> list[dict]:
    return [d for d in receiver.documents() if d["type"] == "handoff.incident.trigger"]


def sweep_until(condition, *, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        alerts_send_due()
        if condition():
            return
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


def test_an_acknowledgement_that_lapses_while_the_cause_holds_pages_again(settings):
    """Fails on the old code: an acknowledged incident never paged again, however long the cause held."""
    settings.ALERT_ACK_LAPSE_SECONDS = 1
    olga = make_user("olga")
    with AlertReceiver() as receiver:
        channel(receiver)
        SecurityEvent.objects.create(kind="replay", source="receiver")
        SecurityEvent.objects.create(kind="replay", source="receiver")
        alerts_send_due()
        [incident] = Incident.objects.all()
        assert [d["id"] for d in triggers(receiver)] == [f"incident-{incident.pk}-1"]
        incident_acknowledge(incident_id=incident.pk, actor=olga)
        sweep_until(
            lambda: len(triggers(receiver)) == 2, timeout=60, what="the page after the lapse"
        )
        incident.refresh_from_db()
        assert incident.state == IncidentState.OPEN
        assert incident.events.filter(action="acknowledgement_lapsed").count() == 1
        assert [d["type"] for d in receiver.documents()] == [
            "handoff.incident.trigger",
            "handoff.incident.acknowledge",
            "handoff.incident.trigger",
        ]


def test_a_queue_growing_older_while_nothing_fails_is_a_backlog_incident_that_resolves(
    settings, world, client
):
    """Fails on the old code: handoffs waiting an hour with no dispatcher serving them told nobody."""
    settings.ALERT_BACKLOG_AGE_SECONDS = 600
    handoff_record(
        workflow="onboarding",
        workspace_id=7,
        source_ref="request 1 revision 1",
        source_id=1,
        action_key="onboarding:7:1:1",
        payload={"client_name": "Client 1", "plan": "standard"},
    )
    with AlertReceiver() as receiver:
        channel(receiver)
        alerts_send_due()
        assert not Incident.objects.exists(), "due for a moment only: no backlog"
        Handoff.objects.update(next_attempt_at=DbNow(-3600.0))
        alerts_send_due()
        [incident] = Incident.objects.all()
        assert (incident.kind, incident.destination) == (IncidentKind.BACKLOG, "receiver")
        [page] = triggers(receiver)
        assert page["subject"].startswith(f"[handoff] PAGE: incident {incident.pk}: ")
        assert "while no call fails" in page["incident"]["first_evidence"]

        handoff = Handoff.objects.get(workflow="onboarding")
        handoff_deliver(handoff_id=handoff.pk, destination=InProcessDestination())
        assert Handoff.objects.get(workflow="onboarding").state == HandoffState.DELIVERED
        alerts_send_due()
        incident.refresh_from_db()
        assert incident.state == IncidentState.RESOLVED
        assert [d["type"] for d in receiver.documents()] == [
            "handoff.incident.trigger",
            "handoff.incident.resolve",
        ]
        assert "while no call fails" in incident.evidence_first
        # Its page still says what the cause was, its owner and how it ended.
        client.force_login(world["olga"])
        page = client.get(f"/incidents/{incident.pk}/").content.decode()
        assert incident.evidence_first in page
        assert "by itself (the condition ended)" in page
        assert "owner olga" in page
