"""A failing alert channel never pages about itself (issue 36, "one cause, one incident"): a channel that
answers 500 to every call exhausts its notification's retries and its destination's breaker, and yet opens
no second incident and is sent no notification about the notification; Health names the channel failing."""

import time

import pytest
from django.urls import reverse

from incidents.channels.delivery import channel_destination_name
from incidents.models import Incident, IncidentSeverity, Notification, NotificationState
from outbox.models import DestinationHealth, DestinationState
from tests.console.clients import row_of
from tests.incidents.alert_receiver import AlertReceiver
from tests.incidents.engine import alerts_send_due
from tests.incidents.test_incidents import SECRET, fail, webhook_channel

pytestmark = pytest.mark.django_db(databases=["default", "delivery"], transaction=True)
DEADLINE_SECONDS = 120


@pytest.fixture(autouse=True)
def _alert_settings(settings, monkeypatch):
    settings.ALERT_EMAILS = []
    settings.ALERT_WEBHOOK_URL = ""
    settings.ALERT_PAGE_WEBHOOK_URL = ""
    settings.CONSOLE_BASE_URL = "https://console.example"
    settings.ALERT_NOTIFICATION_RETRY_BASE_SECONDS = 0
    settings.ALERT_NOTIFICATION_RETRY_CAP_SECONDS = 0
    settings.ALERT_NOTIFICATION_MAX_ATTEMPTS = 2
    settings.HANDOFF_BREAKER_THRESHOLD = 2
    monkeypatch.setenv("INCIDENT_WEBHOOK_SECRET", SECRET)


def _channel_failing(channel) -> bool:
    """Its destination paused by the breaker, or its notification failed (retries exhausted)."""
    paused = DestinationHealth.objects.filter(
        name=channel_destination_name(channel), state=DestinationState.PAUSED
    ).exists()
    failed = Notification.objects.with_delivery().filter(delivery_state=NotificationState.FAILED)
    return paused or failed.exists()


def test_a_channel_answering_500_opens_no_incident_of_its_own_and_is_shown_failing(world, client):
    with AlertReceiver(status=500) as receiver:
        channel = webhook_channel(receiver, severity=IncidentSeverity.QUEUE)
        fail(1000)
        deadline = time.monotonic() + DEADLINE_SECONDS
        alerts_send_due()
        while not _channel_failing(channel):
            assert time.monotonic() < deadline, "the channel never paused nor failed"
            alerts_send_due()
        # The sweeps after it: a failing channel's own trouble must open nothing and send nothing.
        for _ in range(3):
            alerts_send_due()
        received = {document["id"] for document in receiver.documents()}

    [incident] = Incident.objects.all()
    [notification] = Notification.objects.all()
    assert notification.incident_id == incident.pk
    assert received == {notification.message_id}, "only the first incident's notification was sent"

    client.force_login(world["olga"])
    page = client.get(reverse("reconciliation:health")).content.decode()
    row = row_of(page, f"channel-{channel_destination_name(channel)}")
    assert 'class="failing"' in row and f"{channel.name} (" in row
    assert "opens no incident of its own" in page
