"""A failure an operator holds (issue 40, where two features meet: a case hold x incidents): the owner is
acting on it, so its failure neither opens an incident nor escalates a page meanwhile; a hold never hides it
for ever: `ALERT_HOLD_QUIET_HOURS` from the hold's start (or once it ends) it pages again. Real alert sweeps,
a real HTTP receiver of alerts, the real hold service; the hold's age moved on the database clock."""

from datetime import timedelta

import pytest
from prometheus_client.parser import text_string_to_metric_families

from incidents.channels.delivery import notifications_deliver_now
from incidents.models import EscalationPolicy, Incident
from incidents.sweep import alerts_send_due as alerts_sweep
from outbox.clock import DbNow, db_time
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


def test_a_page_due_while_its_failure_is_held_is_withdrawn_saying_who_holds_it_until_when(
    world, client
):
    """A page queued, then its failure held before it went out: it was withdrawn as "the cause had ended
    before it went out", which was not true; the timeline, the withdrawal and the notification's state on
    the incident's page say who holds it, until when."""
    with AlertReceiver() as receiver:
        webhook_channel(receiver)
        held = fail(1402)
        alerts_sweep()  # the page is queued, not yet sent
        _hold(world, held)
        notifications_deliver_now()
        assert triggers_of(receiver) == []
        [incident] = Incident.objects.all()
        [withdrawn] = incident.events.filter(action="page_withdrawn")
        hold = CaseHold.objects.get()
        until = hold.created_at + timedelta(hours=8)
        assert f"the failure is held by its owner (olga until {until:%Y-%m-%d %H:%M} UTC)" in (
            withdrawn.note
        )
        assert "the cause had ended" not in withdrawn.note
        client.force_login(world["olga"])
        page = client.get(f"/incidents/{incident.pk}/").content.decode()
        assert "the cause had ended" not in page
        assert (
            "Withdrawn before it went out: the failure is held by its owner "
            f"(olga until {until:%Y-%m-%d %H:%M} UTC)"
        ) in page


def test_a_failure_pages_once_its_holds_end_time_passes_though_no_sweep_has_ended_the_hold(world):
    """Where a case hold's end time meets the alert sweep: the hold is marked ended by a dispatcher's sweep
    (`case_holds_expire`), which does not run while no dispatcher does. A hold "until 10:00" kept its failure
    quiet past 10:00, up to `ALERT_HOLD_QUIET_HOURS` from its start; its end passed, it pages at once."""
    with AlertReceiver() as receiver:
        webhook_channel(receiver)
        held = fail(1403)
        case_hold(
            handoff_id=held.pk,
            actor=world["olga"],
            reason="calling ACME",
            until=db_time() + timedelta(hours=1),
            whole_case=False,
        )
        alerts_send_due()
        assert not Incident.objects.exists() and triggers_of(receiver) == []

        # Its end passed; no dispatcher ran to mark it ended.
        CaseHold.objects.update(ends_at=DbNow(-60.0))
        assert CaseHold.objects.live().count() == 1
        alerts_send_due()
        [incident] = Incident.objects.all()
        assert list(incident.members.values_list("handoff_id", flat=True)) == [held.pk]
        assert len(triggers_of(receiver)) == 1


def _metrics(client) -> dict[tuple[str, tuple], float]:
    response = client.get("/metrics", HTTP_AUTHORIZATION="Bearer metrics-test-token")
    assert response.status_code == 200
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(response.content.decode())
        for sample in family.samples
    }


def _alerting(samples: dict, name: str) -> float:
    return sum(value for (metric, _), value in samples.items() if metric == name)


def test_the_ticket_rules_figures_leave_out_a_held_failure_as_its_incident_does(world, client):
    """Two alert paths (issue 40): the Prometheus ticket rules read `handoff_needs_attention_unheld` and
    `handoff_needing_person_unheld`; a held failure is quiet there as on the incident path for
    `ALERT_HOLD_QUIET_HOURS`, and counts again on both once the hold has lasted longer."""
    held, loud = fail(1403), fail(1404)
    _hold(world, held)
    alerts_send_due()
    [incident] = Incident.objects.all()
    assert set(incident.members.values_list("handoff_id", flat=True)) == {loud.pk}
    samples = _metrics(client)
    assert _alerting(samples, "handoff_needs_attention") == 2
    assert _alerting(samples, "handoff_needs_attention_unheld") == 1
    assert _alerting(samples, "handoff_needing_person_unheld") == 1
    assert _alerting(samples, "handoff_needing_person") == 2

    CaseHold.objects.update(created_at=DbNow(-9 * 3600.0))
    alerts_send_due()
    incident.refresh_from_db()
    assert set(incident.members.values_list("handoff_id", flat=True)) == {held.pk, loud.pk}
    samples = _metrics(client)
    assert _alerting(samples, "handoff_needs_attention_unheld") == 2
    assert _alerting(samples, "handoff_needing_person_unheld") == 2
