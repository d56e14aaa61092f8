"""A dispatcher on a host whose clock is five minutes off (libfaketime, a real process) keeps delivering: its
calls' signatures state the database's time (`outbox/clock.py` `calls_now`), not the host's, so the receiver,
which refuses a Standard Webhooks timestamp 5 minutes off its own clock, refuses none of them."""

import pytest

from delivery.models import ReceiverTask
from outbox.models import Attempt, FailureClass, Handoff, HandoffState
from tests.faults.test_dispatch_faults import make_handoffs, wait_until
from tests.faults.test_skewed_hosts import skewed

pytestmark = [
    pytest.mark.postgres,
    pytest.mark.faults,
    pytest.mark.django_db(databases=["default", "delivery"], transaction=True),
]
S = HandoffState
COUNT = 60


def refused_or_all_delivered() -> bool:
    refused = Attempt.objects.filter(failure_class=FailureClass.CREDENTIAL).exists()
    return refused or not Handoff.objects.exclude(state=S.DELIVERED).exists()


@pytest.mark.parametrize("offset", [-300, 300])
def test_dispatcher_host_five_minutes_off_keeps_delivering_with_no_call_refused(processes, offset):
    keys = make_handoffs(COUNT)
    processes.start_receiver()
    dispatcher = processes.start_dispatcher("off", **skewed(offset))
    wait_until(
        refused_or_all_delivered,
        timeout=180,
        what="every handoff delivered (or a call refused)",
        procs=[dispatcher],
    )
    processes.stop_all()

    refused = Attempt.objects.filter(failure_class=FailureClass.CREDENTIAL)
    assert not refused.exists(), [a.detail for a in refused[:3]]
    assert Handoff.objects.filter(state=S.DELIVERED, action_key__in=keys).count() == COUNT
    assert ReceiverTask.objects.filter(action_key__in=keys).count() == COUNT
    assert not Attempt.objects.exclude(worker="off").exists(), (
        "all delivered by the host that is off"
    )
