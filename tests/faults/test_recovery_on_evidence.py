"""Recovery without waiting, with real processes (issue 26): a receiver under gunicorn goes down, a real
dispatcher's breaker pauses its destination, the receiver comes back, and the destination resumes on the
first evidence that it is back (an answer to a reconciliation run's key listing, an operator's resume that
asks it at once), not at its next scheduled probe.

The scheduled probes are an hour away in these runs, so a resume before the test's deadline can only come
from the evidence. Every assertion is an order of events on the database clock, none a number of seconds."""

import pytest

from delivery.models import ReceiverTask
from outbox.models import DestinationEvent, DestinationHealth, DestinationState, Handoff
from outbox.models import HandoffState as S
from outbox.services.destination_windows import destination_resume_by_operator
from tests.factories import grant_destination_admin, make_user
from tests.faults.test_destination_outage import approve
from tests.faults.test_dispatch_faults import wait_until

pytestmark = [
    pytest.mark.postgres,
    pytest.mark.faults,
    pytest.mark.django_db(databases=["default", "delivery"], transaction=True),
]
D = DestinationState
HANDOFFS = 8
# No scheduled probe within the test: whatever resumes the destination is the evidence.
NO_SCHEDULED_PROBE = {
    "HANDOFF_BREAKER_THRESHOLD": "3",
    "HANDOFF_BREAKER_PROBE_BASE": "3600",
    "HANDOFF_BREAKER_PROBE_CAP": "3600",
    "HANDOFF_BREAKER_QUICK_PROBE_CAP": "3600",
    "HANDOFF_MAX_ATTEMPTS": "",
}


def paused_by_an_outage_then_back(processes):
    """Three handoffs delivered, the receiver stopped, five more approved until the breaker pauses the
    destination, the receiver started again on its port. Returns the dispatcher and the paused row."""
    processes.start_receiver()
    dispatcher = processes.start_dispatcher("d1", **NO_SCHEDULED_PROBE)
    for n in range(1, 4):
        approve(n)
    wait_until(
        lambda: Handoff.objects.filter(state=S.DELIVERED).count() == 3,
        timeout=60,
        what="the first handoffs to be delivered",
        procs=[dispatcher],
    )
    port = processes.stop_receiver()
    for n in range(4, HANDOFFS + 1):
        approve(n)
    wait_until(
        lambda: DestinationHealth.objects.filter(name="receiver", state=D.PAUSED).exists(),
        timeout=60,
        what="the breaker to pause the destination",
        procs=[dispatcher],
    )
    processes.start_receiver(port=port)
    return dispatcher, DestinationHealth.objects.get(name="receiver")


def assert_resumed_on_evidence_and_delivered_once(
    paused: DestinationHealth, dispatcher, how: str | None
) -> DestinationEvent:
    """The resume came before the scheduled probe (by `how`, with no probe made, when given), and every
    handoff was delivered, once each. Returns the resume event."""
    wait_until(
        lambda: Handoff.objects.filter(state=S.DELIVERED).count() == HANDOFFS,
        timeout=90,
        what="every handoff to be delivered after the resume",
        procs=[dispatcher],
    )
    events = list(DestinationEvent.objects.filter(destination="receiver").order_by("at", "id"))
    [pause] = [e for e in events if e.to_state == D.PAUSED and e.from_state == D.ACTIVE]
    [resume] = [e for e in events if e.to_state == D.ACTIVE]
    assert pause.at < resume.at < paused.next_probe_at, "resumed before its scheduled probe"
    assert how is None or (how in resume.reason and "after 0 probe(s)" in resume.reason), (
        resume.reason
    )
    assert ReceiverTask.objects.count() == HANDOFFS
    assert DestinationHealth.objects.get(name="receiver").state == D.ACTIVE
    return resume


def sent_after(event: DestinationEvent) -> bool:
    """Whether what waited through the outage was delivered after the event."""
    return all(h.delivered_at > event.at for h in Handoff.objects.filter(source_id__gt=3))


def test_a_reconciliation_runs_key_listing_resumes_a_paused_destination_at_once(processes):
    dispatcher, paused = paused_by_an_outage_then_back(processes)
    processes.manage("reconcile", "--no-progress", **NO_SCHEDULED_PROBE)
    resume = assert_resumed_on_evidence_and_delivered_once(paused, dispatcher, "a key listing")
    assert sent_after(resume)


def test_an_operators_resume_asks_the_receiver_at_once_and_the_backlog_drains(processes, settings):
    dispatcher, paused = paused_by_an_outage_then_back(processes)
    # This test process reaches the receiver as the dispatcher does: over its signed API.
    settings.HANDOFF_DESTINATION = {
        **settings.HANDOFF_DESTINATION,
        "kind": "http",
        "url": processes.receiver_url,
    }
    olga = grant_destination_admin(make_user("olga"))
    health = destination_resume_by_operator(name="receiver", actor=olga, reason="restarted it")
    # Active when the operator's resume returns: its own lookup answered (or the dispatcher's probe, which
    # the resume made due at once, succeeded first; both are this resume's doing).
    assert health.state == D.ACTIVE
    resume = assert_resumed_on_evidence_and_delivered_once(paused, dispatcher, None)
    [asked] = DestinationEvent.objects.filter(reason__contains="olga asked for a probe now")
    assert asked.at <= resume.at
    assert sent_after(asked)
