"""A failure an operator holds (issue 40, where two features meet: a case hold x incidents): the owner is
acting on it, so its failure neither opens an incident nor escalates a page meanwhile; a hold never hides it
for ever: `ALERT_HOLD_QUIET_HOURS` from the hold's start (or once it ends) it pages again. Real alert sweeps,
a real HTTP receiver of alerts, the real hold service; the hold's age moved on the database clock."""

from datetime import timedelta

import pytest

from incidents.models import EscalationPolicy, Incident
from outbox.models import CaseHold
from outbox.services.case_holds import case_hold
from tests.incidents.alert_receiver import AlertReceiver
from tests.incidents.engine import alerts_send_due
from tests.incidents.test_incidents import SECRET, fail, triggers_of, webhook_channel

pytestmark = pytest.mark.django_db(databases=["default", "delivery"], transaction=True)


@pytest.fixture(autouse=True)
def _alert_settings(settings, monkeypatch):
    settings.ALERT_EMAILS = []
    settings.ALERT_WEBHOOK_URL = ""
    settings.ALERT_PAGE_WEBHOOK_URL = ""
    settings.CONSOLE_BASE_URL = "https://console.example"
    settings.ALERT_NOTIFICATION_RETRY_BASE_SECONDS = 0
    settings.ALERT_WIDESPREAD_THRESHOLD = 1  # one failure pages
    settings.ALERT_HOLD_QUIET_HOURS = 8
    monkeypatch.setenv("INCIDENT_WEBHOOK_SECRET", SECRET)


def _hold(world, handoff) -> None:
    case_hold(handoff_id=handoff.pk, actor=world["olga"], reason="calling ACME", whole_case=False)


def test_a_held_failure_does_not_page_or_escalate_until_its_hold_has_lasted_too_long(world):
    EscalationPolicy.objects.create(workspace_id=None, ack_timeout_seconds=0, max_pages=5)
    with AlertReceiver() as receiver:
        webhook_channel(receiver)
        # A failure held at once opens nothing.
        quiet = fail(1400)
        _hold(world, quiet)
        alerts_send_due()
        alerts_send_due()
        assert not Incident.objects.exists() and triggers_of(receiver) == []

        # A failure paged, then held: its unacknowledged page does not escalate while it is held.
        paged = fail(1401)
        alerts_send_due()
        [incident] = Incident.objects.all()
        told = len(triggers_of(receiver))  # paged, and escalated at once (no time to acknowledge)
        assert told >= 1
        escalated = incident.events.filter(action="escalated").count()
        _hold(world, paged)
        for _ in range(3):
            alerts_send_due()
        assert len(triggers_of(receiver)) == told
        assert incident.events.filter(action="escalated").count() == escalated

        # Held longer than ALERT_HOLD_QUIET_HOURS: both are failures again, and the page escalates.
        for hold in CaseHold.objects.all():
            CaseHold.objects.filter(pk=hold.pk).update(
                created_at=hold.created_at - timedelta(hours=9)
            )
        alerts_send_due()
        alerts_send_due()
        assert len(triggers_of(receiver)) > told
        incident.refresh_from_db()
        assert set(incident.members.values_list("handoff_id", flat=True)) == {quiet.pk, paged.pk}
