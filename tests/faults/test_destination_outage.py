"""A receiver outage of a minute, with approvals going on: the destination is paused (one page), no handoff
spends its retry budget or goes to a person, and everything is delivered once it is back."""

import time
from collections import Counter

import pytest
from django.db.models import Count

from delivery.models import ReceiverTask
from incidents.channels.delivery import NOTIFICATION_WORKFLOW
from incidents.models import Incident, IncidentKind, IncidentState
from incidents.sweep import alerts_send_due
from outbox.models import (
    DestinationEvent,
    DestinationHealth,
    DestinationState,
    Handoff,
    HandoffState,
)
from outbox.services import handoff_record
from tests.faults.conftest import START_DEADLINE_SECONDS
from tests.faults.test_dispatch_faults import wait_until

pytestmark = [
    pytest.mark.postgres,
    pytest.mark.faults,
    pytest.mark.long,
    pytest.mark.django_db(databases=["default", "delivery"], transaction=True),
]
S = HandoffState
OUTAGE_SECONDS = 60


def approve(n: int) -> None:
    payload = {"client_name": f"Client {n}", "plan": "standard"}
    handoff_record(
        workflow="onboarding",
        workspace_id=7,
        source_ref=f"request {n} revision 1",
        source_id=n,
        action_key=f"onboarding:7:{n}:1",
        payload=payload,
    )


def approvals_for(
    seconds: float, start: int, *, every: float = 0.5, sweep_alerts: bool = False
) -> int:
    """Approve one handoff every `every` seconds for `seconds` (and send alerts as their schedule would)."""
    n, until = start, time.monotonic() + seconds
    while time.monotonic() < until:
        approve(n)
        n += 1
        if sweep_alerts and n % 10 == 0:
            alerts_send_due()
        time.sleep(every)
    return n


def test_a_minute_long_receiver_outage_pauses_once_and_ends_with_everything_delivered(
    processes, settings, mailbox
):
    settings.ALERT_EMAILS = ["oncall@example.com"]
    processes.start_receiver()
    overrides = {
        "HANDOFF_MAX_ATTEMPTS": "",
        "RECEIVER_CONNECT_TIMEOUT": "0.5",
        "RECEIVER_READ_TIMEOUT": "2",
        "HANDOFF_BREAKER_PROBE_BASE": "1",
        "HANDOFF_BREAKER_PROBE_CAP": "5",
    }
    dispatchers = [processes.start_dispatcher(f"d{n}", **overrides) for n in (1, 2)]
    n = approvals_for(5, 1)
    # The outage begins once the dispatchers deliver (a loaded machine may take longer than the approvals
    # to start them), and ends once they have paused the destination: waits on conditions, not on speed.
    wait_until(
        lambda: Handoff.objects.filter(state=S.DELIVERED).exists(),
        timeout=START_DEADLINE_SECONDS,
        what="the dispatchers to deliver before the outage",
        procs=dispatchers,
    )
    port = processes.stop_receiver()
    n = approvals_for(OUTAGE_SECONDS, n, sweep_alerts=True)
    wait_until(
        lambda: DestinationHealth.objects.get(name="receiver").state == DestinationState.PAUSED,
        timeout=START_DEADLINE_SECONDS,
        what="the destination to pause during the outage",
        procs=dispatchers,
    )
    processes.start_receiver(port=port)
    n = approvals_for(5, n)
    onboarding = Handoff.objects.filter(workflow="onboarding")
    wait_until(
        lambda: not onboarding.exclude(state__in=(S.DELIVERED, S.NEEDS_ATTENTION)).exists(),
        timeout=240,
        what="every handoff to be delivered after the outage",
        procs=dispatchers,
    )
    alerts_send_due()
    # The incident's e-mail rides the same engine (a handoff to the channel's smtp destination, delivered to
    # the mail server here): sent or withdrawn, never left pending.
    wait_until(
        lambda: (
            not Handoff.objects.filter(workflow=NOTIFICATION_WORKFLOW)
            .exclude(state__in=(S.DELIVERED, S.CANCELLED))
            .exists()
        ),
        timeout=120,
        what="the incident's notifications to be sent or withdrawn",
        procs=dispatchers,
    )

    states = Counter(onboarding.values_list("state", flat=True))
    assert states == {S.DELIVERED: n - 1}, states
    assert all(proc.poll() is None for proc in dispatchers), "no dispatcher exited"
    assert (
        not ReceiverTask.objects.values("action_key")
        .annotate(c=Count("id"))
        .filter(c__gt=1)
        .exists()
    )
    assert ReceiverTask.objects.count() == n - 1
    assert DestinationHealth.objects.get(name="receiver").state == DestinationState.ACTIVE
    assert DestinationEvent.objects.filter(to_state=DestinationState.PAUSED).count() == 1
    [incident] = Incident.objects.filter(kind=IncidentKind.DESTINATION)
    assert incident.state == IncidentState.RESOLVED, "resolved when the destination resumed"
