"""Acknowledging from the page itself: every channel's notification carries the link to the incident's console
page; the page's Acknowledge is a POST with its CSRF token, allowed to the workspace's operators only (as the
console's acknowledge), on the timeline with who did it, and it stops the escalation: the next level's
recorder (a real HTTP server on 127.0.0.1) receives nothing more, on a database clock scale of seconds."""

import json
import re
from datetime import timedelta
from urllib.parse import urlsplit

import pytest
from django.test import Client

from incidents.channels.delivery import notifications_deliver_now
from incidents.channels.payloads import payload_for
from incidents.models import (
    AlertChannel,
    ChannelKind,
    EscalationPolicy,
    Incident,
    IncidentState,
    Notification,
)
from incidents.services.incidents import incidents_sync
from incidents.text import incident_summary
from outbox.destinations import InProcessDestination
from outbox.dispatch.dispatcher import handoff_deliver
from tests.builders import record
from tests.incidents.alert_receiver import AlertReceiver
from tests.incidents.test_escalation import db_clock, escalation_pass, wait_for
from tests.incidents.test_incidents import REJECTED, SECRET

pytestmark = pytest.mark.django_db(databases=["default", "delivery"], transaction=True)
ROUTING_KEY = "R0UTINGKEY0000000000000000000000"


@pytest.fixture(autouse=True)
def _settings(settings, monkeypatch):
    settings.ALERT_EMAILS = []
    settings.ALERT_PAGE_WEBHOOK_URL = ""
    settings.ALERT_WIDESPREAD_THRESHOLD = 3
    settings.ALERT_NOTIFICATION_RETRY_BASE_SECONDS = 0
    settings.CONSOLE_BASE_URL = "https://console.example"
    monkeypatch.setenv("INCIDENT_WEBHOOK_SECRET", SECRET)
    monkeypatch.setenv("PAGERDUTY_ROUTING_KEY", ROUTING_KEY)


def _failing_incident() -> Incident:
    for n in range(300, 303):
        handoff_deliver(
            handoff_id=record(n, payload=REJECTED).pk, destination=InProcessDestination()
        )
    incidents_sync()
    return Incident.objects.get()


def _csrf_token(page: str) -> str:
    return re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page).group(1)


def _outsiders_cannot_acknowledge(world, path: str) -> None:
    """Not an operator of workspace 7: neither the page nor its Acknowledge."""
    for name in ("mallory", "bob"):
        outsider = Client()
        outsider.force_login(world[name])
        assert outsider.get(path).status_code in (403, 404), name
        assert outsider.post(f"{path}acknowledge").status_code in (403, 404), name


def _acknowledge_on_the_page(user, path: str) -> None:
    """The page as the person's browser gets it, then its Acknowledge form posted with the page's token."""
    client = Client(enforce_csrf_checks=True)
    client.force_login(user)
    shown = client.get(path)
    assert shown.status_code == 200
    body = shown.content.decode()
    assert 'id="acknowledge"' in body
    assert client.post(f"{path}acknowledge").status_code == 403, "no CSRF token, no move"
    acknowledged = client.post(f"{path}acknowledge", {"csrfmiddlewaretoken": _csrf_token(body)})
    assert acknowledged.status_code == 302


def test_every_channel_carries_the_incident_page_link(world):
    incident = _failing_incident()
    link = f"https://console.example/incidents/{incident.pk}/"
    summary = incident_summary(incident, workspace_id=7)
    for kind, secret_env in (
        (ChannelKind.WEBHOOK, "INCIDENT_WEBHOOK_SECRET"),
        (ChannelKind.SLACK, ""),
        (ChannelKind.PAGERDUTY, "PAGERDUTY_ROUTING_KEY"),
    ):
        channel = AlertChannel.objects.create(
            workspace_id=7,
            name=kind,
            kind=kind,
            target="http://127.0.0.1:9/",
            secret_env=secret_env,
        )
        notification = Notification(
            incident=incident, channel=channel, number=1, event="trigger", message_id="incident-1-1"
        )
        assert link in json.dumps(payload_for(notification, summary)), kind
    mail = AlertChannel.objects.create(
        workspace_id=7, name="mail", kind=ChannelKind.EMAIL, target="oncall@example.com"
    )
    notification = Notification(
        incident=incident, channel=mail, number=1, event="trigger", message_id="incident-1-1"
    )
    assert link in payload_for(notification, summary)["body"]


def test_acknowledging_on_the_page_from_the_notification_link_stops_the_escalation(world):
    EscalationPolicy.objects.create(workspace_id=7, ack_timeout_seconds=2, max_pages=5)
    with AlertReceiver() as first, AlertReceiver() as second:
        AlertChannel.objects.create(
            workspace_id=7,
            name="primary",
            kind=ChannelKind.WEBHOOK,
            target=first.url,
            secret_env="INCIDENT_WEBHOOK_SECRET",
        )
        AlertChannel.objects.create(
            workspace_id=7,
            name="next on call",
            kind=ChannelKind.PAGERDUTY,
            target=second.url,
            secret_env="PAGERDUTY_ROUTING_KEY",
            level=1,
        )
        incident = _failing_incident()
        notifications_deliver_now()
        [page] = first.documents()
        path = urlsplit(page["incident"]["link"]).path
        assert path == f"/incidents/{incident.pk}/"

        _outsiders_cannot_acknowledge(world, path)
        _acknowledge_on_the_page(world["olga"], path)
        incident.refresh_from_db()
        assert incident.state == IncidentState.ACKNOWLEDGED
        assert incident.acknowledged_by == world["olga"] and incident.next_escalation_at is None
        assert incident.events.filter(action="acknowledged", actor=world["olga"]).exists()

        quiet_from = db_clock()
        wait_for(
            lambda: db_clock() - quiet_from > timedelta(seconds=3),
            timeout=10,
            what="the database clock to pass the escalation delay",
        )
        escalation_pass()
        escalation_pass()
        assert second.received == [], "the next level was never paged"
        assert [d["type"] for d in first.documents()] == [
            "handoff.incident.trigger",
            "handoff.incident.acknowledge",
        ]


def test_without_an_acknowledgement_the_next_level_is_paged(world):
    """The same set-up, nobody acknowledges: the check above would fail if escalation never happened."""
    EscalationPolicy.objects.create(workspace_id=7, ack_timeout_seconds=1, max_pages=5)
    with AlertReceiver() as first, AlertReceiver() as second:
        AlertChannel.objects.create(
            workspace_id=7,
            name="primary",
            kind=ChannelKind.WEBHOOK,
            target=first.url,
            secret_env="INCIDENT_WEBHOOK_SECRET",
        )
        AlertChannel.objects.create(
            workspace_id=7,
            name="next on call",
            kind=ChannelKind.PAGERDUTY,
            target=second.url,
            secret_env="PAGERDUTY_ROUTING_KEY",
            level=1,
        )
        incident = _failing_incident()
        notifications_deliver_now()

        def second_paged():
            escalation_pass()
            return bool(second.received)

        wait_for(second_paged, timeout=120, what="the page to reach the next level")
        [escalated] = second.documents()
        assert escalated["links"][0]["href"] == f"https://console.example/incidents/{incident.pk}/"
