"""A settlement pass at a destination that answers one key a request (`outbox/settling.py`): each key is asked
once, and the answers are recorded RECORD_AT_ONCE at a time instead of one write per key; answers waiting are
recorded before a lease renewal, so none waits past the leases it was asked under. Both backends."""

import pytest

from delivery import services as receiver
from outbox import settling
from outbox.destinations import InProcessDestination
from outbox.models import Handoff, HandoffEvent, HandoffState
from outbox.services.lookup_limits import LimitedLookups

pytestmark = pytest.mark.django_db(databases=["default", "delivery"])
S = HandoffState
BACKLOG = settling.RECORD_AT_ONCE + 5


class CountingLookups(LimitedLookups):
    """The in-process destination under its limits, counting what it was asked (one key a request)."""

    def __init__(self):
        super().__init__(InProcessDestination(), worker="a")
        self.asked: list[str] = []

    def lookup(self, action_key):
        self.asked.append(action_key)
        return super().lookup(action_key)


@pytest.fixture
def recorded(monkeypatch):
    """The size of every write of answers the pass makes (the real writes, observed)."""
    sizes: list[int] = []
    real = settling.handoffs_record_settlements

    def observed(*, answers, destination):
        sizes.append(len(answers))
        return real(answers=answers, destination=destination)

    monkeypatch.setattr(settling, "handoffs_record_settlements", observed)
    return sizes


def lost_answers(make_handoff, count: int) -> list[Handoff]:
    handoffs = [make_handoff(n, state=S.UNCERTAIN) for n in range(1, count + 1)]
    for handoff in handoffs:
        receiver.task_create_idempotent(action_key=handoff.action_key, payload=handoff.payload)
    return handoffs


def test_one_key_requests_are_asked_once_each_and_recorded_together(make_handoff, recorded):
    handoffs = lost_answers(make_handoff, BACKLOG)
    destination = CountingLookups()
    settled = settling.settle_pass(destination=destination, worker="a", limit=BACKLOG)
    assert settled.outcomes == {S.DELIVERED: BACKLOG}
    assert sorted(destination.asked) == sorted(h.action_key for h in handoffs)
    assert recorded == [settling.RECORD_AT_ONCE, BACKLOG - settling.RECORD_AT_ONCE]
    assert HandoffEvent.objects.filter(to_state=S.DELIVERED).count() == BACKLOG
    assert not Handoff.objects.exclude(lease_owner="").exists()


def test_answers_waiting_are_recorded_before_the_leases_are_renewed(
    make_handoff, recorded, settings, monkeypatch
):
    # Every request could outlast the lease: the leases are renewed before each, the answers waiting recorded.
    settings.HANDOFF_LEASE_SECONDS = 0.5
    renewals: list[int] = []
    real_renew = settling.handoff_renew_settlement_claims

    def renew(*, claims, lease_seconds):
        waiting = Handoff.objects.filter(state=S.UNCERTAIN).count()
        renewals.append(waiting)
        return real_renew(claims=claims, lease_seconds=lease_seconds)

    monkeypatch.setattr(settling, "handoff_renew_settlement_claims", renew)
    lost_answers(make_handoff, 3)
    settled = settling.settle_pass(destination=CountingLookups(), worker="a", limit=3)
    assert settled.outcomes == {S.DELIVERED: 3}
    assert recorded == [1, 1, 1]
    # At each renewal only the keys not asked yet are uncertain: every answer before it was recorded.
    assert renewals == [3, 2, 1]
