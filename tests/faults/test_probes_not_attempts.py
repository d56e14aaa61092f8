"""Probes are the destination's, never a handoff's attempt (issue 36, item 8: "Attempts 6" for one delivery).
A real dispatcher meets a receiver that is down: the handoff's own calls pause the destination, the breaker
probes it with the handoff's call again and again while it stays down, and the receiver comes back. The
handoff's attempts, as its page says them, are its calls before the pause and the one that delivered it; the
failed probes are on its attempt list as the destination's probes, not counted. A probe time already past
reads as "probing now". PostgreSQL."""

import pytest
from django.db import transaction

from delivery.models import ReceiverTask
from outbox.hold_lines import destination_holds_now
from outbox.models import Attempt, DestinationHealth, DestinationState, Handoff, HandoffState
from tests.factories import HandoffFactory
from tests.faults.test_dispatch_faults import wait_until

pytestmark = [
    pytest.mark.postgres,
    pytest.mark.faults,
    pytest.mark.django_db(databases=["default", "delivery"], transaction=True),
]
NAME = "receiver"
THRESHOLD = 2
DEADLINE_SECONDS = 120


def _failed_probes(handoff: Handoff) -> int:
    return Attempt.objects.filter(
        handoff=handoff, detail__startswith=f"probe of destination {NAME}, not counted"
    ).count()


def test_failed_probes_add_no_attempt_to_the_handoff_they_were_made_with(processes):
    handoff = HandoffFactory(number=7000, destination=NAME)
    processes.start_receiver()
    port = processes.stop_receiver()
    dispatcher = processes.start_dispatcher(
        "d1",
        HANDOFF_BREAKER_THRESHOLD=str(THRESHOLD),
        HANDOFF_BREAKER_PROBE_BASE="0.2",
        HANDOFF_BREAKER_PROBE_CAP="0.5",
        HANDOFF_BREAKER_QUICK_PROBE_CAP="0.5",
    )
    wait_until(
        lambda: _failed_probes(handoff) >= 3,
        timeout=DEADLINE_SECONDS,
        what="the paused destination probed three times, still down",
        procs=[dispatcher],
    )
    health = DestinationHealth.objects.get(name=NAME)
    assert health.state == DestinationState.PAUSED
    handoff.refresh_from_db()
    assert handoff.state == HandoffState.PENDING
    assert handoff.attempts_made == THRESHOLD
    # Its destination's hold in words: a probe time already past is "probing now", never a past time.
    # Read under the row's lock: the running dispatcher schedules its next probe into the future between an
    # update and a read otherwise (seen under load), and this is about the words for a past probe time.
    with transaction.atomic():
        DestinationHealth.objects.select_for_update().filter(name=NAME).update(
            next_probe_at=health.paused_at
        )
        [line] = destination_holds_now(NAME).live
    assert line.until == "a probe succeeds (probing now)"

    processes.start_receiver(port=port)
    wait_until(
        lambda: Handoff.objects.filter(pk=handoff.pk, state=HandoffState.DELIVERED).exists(),
        timeout=DEADLINE_SECONDS,
        what="the handoff delivered once the receiver is back",
        procs=[dispatcher],
    )
    handoff.refresh_from_db()
    probes = _failed_probes(handoff)
    # Its own calls: the ones before the pause, and after it only those that did not find the
    # destination down (the one that delivered it; a probe whose answer was lost while the receiver
    # started stays the handoff's, its outcome unknown, settled by a lookup). Every failed probe is
    # beside them, not counted.
    own = Attempt.objects.filter(handoff=handoff, number__gt=THRESHOLD).exclude(
        detail__startswith=f"probe of destination {NAME}"
    )
    assert own.exists()
    assert handoff.attempts_made == THRESHOLD + own.count()
    assert handoff.attempts == handoff.attempts_made + probes
    assert ReceiverTask.objects.filter(action_key=handoff.action_key).count() == 1
    processes.stop_all()
