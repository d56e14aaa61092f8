"""Escalation on a scale of seconds, against real HTTP servers on 127.0.0.1 that record what they get: a page
not acknowledged within the policy's delay goes to the next level (PagerDuty Events v2 here); an
acknowledgement from the console stops it (PagerDuty is told, with the same dedup_key); repeats are
bounded. Passes are driven explicitly; due times are on the database clock, polled with a deadline."""

import time
from datetime import timedelta

import pytest
from django.contrib.auth.models import Permission
from django.test import Client

from incidents.channels.delivery import notifications_deliver_now
from incidents.models import AlertChannel, ChannelKind, EscalationPolicy, Incident
from incidents.services.incidents import incidents_sync
from incidents.services.notifications import incidents_escalate
from outbox.clock import DbNow
from reconciliation.models import SecurityEvent
from tests.incidents.alert_receiver import AlertReceiver
from tests.incidents.test_incidents import SECRET

pytestmark = pytest.mark.django_db(databases=["default", "delivery"], transaction=True)
ROUTING_KEY = "R0UTINGKEY0000000000000000000000"


@pytest.fixture(autouse=True)
def _settings(settings, monkeypatch):
    settings.ALERT_SECURITY_THRESHOLD = 2
    settings.ALERT_NOTIFICATION_RETRY_BASE_SECONDS = 0
    settings.CONSOLE_BASE_URL = "https://console.example"
    monkeypatch.setenv("INCIDENT_WEBHOOK_SECRET", SECRET)
    monkeypatch.setenv("PAGERDUTY_ROUTING_KEY", ROUTING_KEY)


def db_clock():
    """The database's time now (the clock the due times are written and compared on)."""
    return Incident.objects.annotate(t=DbNow()).values_list("t", flat=True)[:1][0]


def wait_for(condition, *, timeout: float, what: str):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def channels(first: AlertReceiver, second: AlertReceiver) -> None:
    AlertChannel.objects.create(
        name="primary",
        kind=ChannelKind.WEBHOOK,
        target=first.url,
        secret_env="INCIDENT_WEBHOOK_SECRET",
        level=0,
    )
    AlertChannel.objects.create(
        name="secondary",
        kind=ChannelKind.PAGERDUTY,
        target=second.url,
        secret_env="PAGERDUTY_ROUTING_KEY",
        level=1,
    )


def security_incident() -> Incident:
    SecurityEvent.objects.create(kind="replay", source="receiver")
    SecurityEvent.objects.create(kind="replay", source="receiver")
    incidents_sync()
    notifications_deliver_now()
    return Incident.objects.get()


def escalation_pass() -> None:
    incidents_escalate()
    notifications_deliver_now()


def test_an_unacknowledged_page_reaches_the_second_recipient_and_acknowledging_stops_it(world):
    EscalationPolicy.objects.create(workspace_id=None, ack_timeout_seconds=2, max_pages=5)
    with AlertReceiver() as first, AlertReceiver() as second:
        channels(first, second)
        incident = security_incident()
        assert [d["id"] for d in first.documents()] == [f"incident-{incident.pk}-1"]
        assert second.received == []

        def second_paged():
            escalation_pass()
            return bool(second.received)

        wait_for(second_paged, timeout=120, what="the page to reach the second recipient")
        [page] = second.documents()
        assert page["event_action"] == "trigger" and page["routing_key"] == ROUTING_KEY
        assert page["dedup_key"] == f"handoff-incident-{incident.pk}"
        events = {e.action: e.at for e in incident.events.all()}
        assert events["escalated"] - events["paged"] >= timedelta(seconds=2)
        assert len(first.received) == 1

        # A security incident belongs to no workspace: holders of the named permission see it.
        world["olga"].user_permissions.add(
            Permission.objects.get(codename="view_security_incident")
        )
        client = Client()
        client.force_login(world["olga"])
        assert client.post(f"/incidents/{incident.pk}/acknowledge").status_code == 302
        notifications_deliver_now()
        acknowledged = [d for d in second.documents() if d["event_action"] == "acknowledge"]
        assert acknowledged and acknowledged[0]["dedup_key"] == page["dedup_key"]
        quiet_from = db_clock()
        wait_for(
            lambda: db_clock() - quiet_from > timedelta(seconds=3),
            timeout=10,
            what="the database clock to pass the escalation delay",
        )
        escalation_pass()
        triggers = [d for d in second.documents() if d.get("event_action") == "trigger"]
        assert len(triggers) == 1 and len(first.received) == 2


def test_escalation_repeats_are_bounded(world):
    EscalationPolicy.objects.create(workspace_id=None, ack_timeout_seconds=0, max_pages=3)
    with AlertReceiver() as first, AlertReceiver() as second:
        channels(first, second)
        incident = security_incident()
        for _ in range(6):
            escalation_pass()
        incident.refresh_from_db()
        assert incident.pages_sent == 3 and incident.next_escalation_at is None
        assert len(first.received) == 1
        # Past the last level, the last level again: pages 2 and 3 both went to the second recipient.
        assert [d["event_action"] for d in second.documents()] == ["trigger", "trigger"]
