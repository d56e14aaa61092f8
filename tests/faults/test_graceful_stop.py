"""A dispatcher stopped (SIGTERM) in the middle of a batch of slow calls, as a real process: it starts no new
call, records the calls it made, gives the claims not sent back (pending, the attempt marked not sent) and exits 0;
the next dispatcher delivers them, one receiver task per key."""

import signal

import pytest

from delivery.models import ReceiverTask
from outbox.models import Attempt, AttemptOutcome, Handoff, HandoffEvent, HandoffState
from tests.faults.test_dispatch_faults import make_handoffs, wait_until

pytestmark = [pytest.mark.postgres, pytest.mark.faults]
S = HandoffState
COUNT = 10


@pytest.mark.django_db(databases=["default", "delivery"], transaction=True)
def test_sigterm_mid_batch_records_the_calls_made_gives_the_rest_back_and_exits_0(processes):
    keys = make_handoffs(COUNT)
    # Every call takes a second (answered within the client's 1.5 s): the batch of ten takes ten.
    processes.start_receiver(faults={"fraction": 1.0, "kinds": ["slow"], "slow_seconds": 1})
    dispatcher = processes.start_dispatcher("d1")
    wait_until(
        lambda: ReceiverTask.objects.exists(),
        timeout=60,
        what="the batch's first call to reach the receiver",
        procs=[dispatcher],
    )
    dispatcher.send_signal(signal.SIGTERM)
    assert dispatcher.wait(timeout=60) == 0, dispatcher.log_path.read_text()[-3000:]

    sent = set(ReceiverTask.objects.values_list("action_key", flat=True))
    assert 1 <= len(sent) < COUNT, "the stop ended the batch between two calls"
    states = dict(Handoff.objects.values_list("action_key", "state"))
    assert {key for key, state in states.items() if state == S.DELIVERED} == sent
    given_back = Handoff.objects.filter(state=S.PENDING)
    assert set(given_back.values_list("action_key", flat=True)) == set(keys) - sent
    assert set(given_back.values_list("attempts_in_run", flat=True)) == {0}, "no attempt spent"
    assert set(
        Attempt.objects.filter(handoff__in=given_back).values_list("outcome", flat=True)
    ) == {AttemptOutcome.SKIPPED}, "the claims given back were never sent"
    assert not Handoff.objects.filter(state=S.IN_FLIGHT).exists()
    assert HandoffEvent.objects.filter(
        reason="not sent: the dispatcher was stopping"
    ).count() == COUNT - len(sent)

    processes.dispatch_once("d2")
    assert set(Handoff.objects.values_list("state", flat=True)) == {S.DELIVERED}
    tasks = list(ReceiverTask.objects.values_list("action_key", flat=True))
    assert sorted(tasks) == sorted(keys), "one receiver task per key"
