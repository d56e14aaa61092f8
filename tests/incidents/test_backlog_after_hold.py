"""A hold x the backlog page (found by helper c9): handoffs that fell due during an operator's pause, a
maintenance window or a Retry-After wait are already older than the backlog's age limit when the hold ends;
the destination catching up is not "falling behind". The age counts from the hold's end, so only catching up
that itself lasts longer than the limit pages. The breaker's hold is no one's intent: a backlog after it pages
by its due time as before. Driven by the real alert sweep, a real HTTP alert receiver on 127.0.0.1, times on
the database clock. Both backends."""

import pytest

from incidents.models import AlertChannel, ChannelKind, Incident, IncidentKind
from outbox.clock import DbNow
from outbox.models import DestinationHold, Handoff, HoldKind
from outbox.services import handoff_record
from tests.incidents.alert_receiver import AlertReceiver
from tests.incidents.engine import alerts_send_due
from tests.incidents.test_incidents import SECRET

pytestmark = pytest.mark.django_db(databases=["default", "delivery"], transaction=True)

LIMIT = 600  # ALERT_BACKLOG_AGE_SECONDS in these tests


@pytest.fixture(autouse=True)
def _settings(settings, monkeypatch):
    settings.ALERT_EMAILS = []
    settings.ALERT_WEBHOOK_URL = ""
    settings.ALERT_PAGE_WEBHOOK_URL = ""
    settings.ALERT_NOTIFICATION_RETRY_BASE_SECONDS = 0
    settings.ALERT_BACKLOG_AGE_SECONDS = LIMIT
    monkeypatch.setenv("INCIDENT_WEBHOOK_SECRET", SECRET)


def due_two_hours_ago() -> None:
    handoff_record(
        workflow="onboarding",
        workspace_id=7,
        source_ref="request 1 revision 1",
        source_id=1,
        action_key="onboarding:7:1:1",
        payload={"client_name": "Client 1", "plan": "standard"},
    )
    Handoff.objects.update(next_attempt_at=DbNow(-7200.0))


def hold(kind: str, *, ended_ago: float) -> DestinationHold:
    """A hold of the destination from two hours ago that ended `ended_ago` seconds ago: a pause resumed by
    its operator (`ended_at`), a window or a Retry-After wait whose end passed (`ends_at`, and `ended_at` as
    the sweep of expired holds writes it), the breaker's pause ended by a probe."""
    ends_at = None if kind == HoldKind.OPERATOR_PAUSE else DbNow(-ended_ago)
    return DestinationHold.objects.create(
        destination="receiver",
        kind=kind,
        reason="test",
        starts_at=DbNow(-7200.0),
        ends_at=ends_at,
        until_probe=kind == HoldKind.BREAKER,
        ended_at=DbNow(-ended_ago),
    )


def pages(receiver: AlertReceiver) -> list[dict]:
    return [d for d in receiver.documents() if d["type"] == "handoff.incident.trigger"]


def channel(receiver: AlertReceiver) -> None:
    AlertChannel.objects.create(
        name="on-call",
        kind=ChannelKind.WEBHOOK,
        target=receiver.url,
        secret_env="INCIDENT_WEBHOOK_SECRET",
    )


@pytest.mark.parametrize("kind", [HoldKind.OPERATOR_PAUSE, HoldKind.WINDOW, HoldKind.RETRY_AFTER])
def test_catching_up_after_an_intended_hold_pages_only_once_it_lasts_past_the_limit(world, kind):
    """Fails on the code before: the handoff due two hours ago paged "falling behind" a minute after the
    hold ended, though the destination was only catching up as its operator (or its Retry-After) meant."""
    due_two_hours_ago()
    row = hold(kind, ended_ago=60)
    with AlertReceiver() as receiver:
        channel(receiver)
        alerts_send_due()
        assert not Incident.objects.exists(), "a minute of catching up after the hold is no backlog"
        assert receiver.received == []

        # Still waiting longer than the limit after the hold's end: a backlog, paged.
        DestinationHold.objects.filter(pk=row.pk).update(
            ended_at=DbNow(-2.0 * LIMIT),
            ends_at=None if kind == HoldKind.OPERATOR_PAUSE else DbNow(-2.0 * LIMIT),
        )
        alerts_send_due()
        [incident] = Incident.objects.all()
        assert (incident.kind, incident.destination) == (IncidentKind.BACKLOG, "receiver")
        [page] = pages(receiver)
        assert "held until" in page["incident"]["first_evidence"]


def test_a_backlog_after_the_breakers_pause_pages_by_its_due_time(world):
    """The breaker's hold is no one's intent: its outage was paged as the pause, and what waited behind it
    still counts from its due time (this passes before and after the change: it pins the decision)."""
    due_two_hours_ago()
    hold(HoldKind.BREAKER, ended_ago=60)
    with AlertReceiver() as receiver:
        channel(receiver)
        alerts_send_due()
        [incident] = Incident.objects.all()
        assert (incident.kind, incident.destination) == (IncidentKind.BACKLOG, "receiver")
        assert len(pages(receiver)) == 1


@pytest.mark.parametrize("kind", [HoldKind.OPERATOR_PAUSE, HoldKind.WINDOW])
def test_an_sla_that_passed_under_an_intended_hold_pages_only_once_catching_up_lasts_past_the_limit(
    world, kind
):
    """Fails on the code before: after a long maintenance window (or pause) the handoff whose SLA passed
    during it paged "past its SLA" the first sweep after the window ended, though its operator had meant it
    to wait and the destination was catching up. An SLA passed since the hold ended still pages at once."""
    due_two_hours_ago()
    Handoff.objects.update(sla_due_at=DbNow(-3600.0))
    hold(kind, ended_ago=60)
    with AlertReceiver() as receiver:
        channel(receiver)
        alerts_send_due()
        assert not Incident.objects.exists(), "an SLA passed under the window is the window's"
        assert receiver.received == []

        # Its SLA passed after the hold ended: late, paged at once.
        Handoff.objects.update(sla_due_at=DbNow(-30.0))
        alerts_send_due()
        [incident] = Incident.objects.all()
        assert (incident.kind, incident.destination) == (IncidentKind.BACKLOG, "receiver")
        assert "1 past their SLA" in pages(receiver)[0]["incident"]["first_evidence"]
