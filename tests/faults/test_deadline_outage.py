"""A business deadline passes during an outage (issue 39, "Business deadlines"): a real `manage.py dispatch`
and the receiver under gunicorn, stopped. The step whose must-finish-by passes while its destination is down
goes to a person with `deadline_passed`, and when the receiver is back nothing of it is sent (every attempt
started before its deadline, none reached the receiver), while a step without a deadline is delivered once.
PostgreSQL."""

from datetime import timedelta

import pytest

from delivery.models import ReceiverTask
from outbox.clock import db_time
from outbox.models import Attempt, Handoff, HandoffState
from outbox.services.deadlines import DEADLINE_PASSED
from tests.factories import HandoffFactory
from tests.faults.test_dispatch_faults import wait_until

pytestmark = [
    pytest.mark.postgres,
    pytest.mark.faults,
    pytest.mark.django_db(databases=["default", "delivery"], transaction=True),
]
S = HandoffState
DEADLINE_SECONDS = 120


def test_a_deadline_passing_during_an_outage_goes_to_a_person_and_nothing_is_sent_late(processes):
    processes.start_receiver()
    port = processes.stop_receiver()  # the outage: connections refused on its port
    dispatcher = processes.start_dispatcher("d1")
    late = HandoffFactory(
        number=4000, destination="receiver", finish_by=db_time() + timedelta(seconds=4)
    )
    other = HandoffFactory(number=4001, destination="receiver")

    wait_until(
        lambda: Handoff.objects.filter(
            pk=late.pk, state=S.NEEDS_ATTENTION, reason_code=DEADLINE_PASSED
        ).exists(),
        timeout=DEADLINE_SECONDS,
        what="the step past its deadline handed to a person",
        procs=[dispatcher],
    )
    processes.start_receiver(port=port)
    wait_until(
        lambda: Handoff.objects.filter(pk=other.pk, state=S.DELIVERED).exists(),
        timeout=DEADLINE_SECONDS,
        what="the step without a deadline delivered once the receiver is back",
        procs=[dispatcher],
    )
    late.refresh_from_db()
    assert (late.state, late.reason_code) == (S.NEEDS_ATTENTION, DEADLINE_PASSED)
    assert ReceiverTask.objects.filter(action_key=late.action_key).count() == 0
    assert ReceiverTask.objects.filter(action_key=other.action_key).count() == 1
    assert all(a.started_at < late.finish_by for a in Attempt.objects.filter(handoff=late))
    processes.stop_all()
