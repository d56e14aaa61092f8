"""A settlement pass at a destination that answers one key a request (`outbox/settling.py`): each key is asked
once, and the answers are recorded RECORD_AT_ONCE at a time instead of one write per key; answers waiting are
recorded before a lease renewal, so none waits past the leases it was asked under. Both backends."""

import pytest

from delivery import services as receiver
from outbox import settling
from outbox.clock import db_now
from outbox.destinations import InProcessDestination, LookupFailed
from outbox.models import DestinationSlot, Handoff, HandoffEvent, HandoffState, SlotKind
from outbox.services import lookup_limits
from outbox.services.limits import destination_set_limits
from outbox.services.lookup_limits import LimitedLookups
from tests.factories import make_user

pytestmark = pytest.mark.django_db(databases=["default", "delivery"])
S = HandoffState
BACKLOG = settling.RECORD_AT_ONCE + 5


class CountingDestination(InProcessDestination):
    """The in-process receiver, counting the keys it was asked about (one key a request), failing for some."""

    def __init__(self, failing: frozenset[str] = frozenset()):
        super().__init__()
        self.asked: list[str] = []
        self.failing = failing

    def lookup(self, action_key):
        self.asked.append(action_key)
        if action_key in self.failing:
            raise LookupFailed("the receiver did not answer")
        return super().lookup(action_key)


class CountingLookups(LimitedLookups):
    """The counting receiver under its limits (the real permits)."""

    def __init__(self, failing: frozenset[str] = frozenset()):
        super().__init__(CountingDestination(failing), worker="a")

    @property
    def asked(self) -> list[str]:
        return self.destination.asked


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


def test_one_key_requests_share_a_permit_and_keep_the_rate_limit(make_handoff, monkeypatch):
    """A permit per key cost a dispatcher more than its lookup: the keys of a chunk are asked under one permit,
    one rate slot a request. With 10 requests a second allowed, a pass of 25 claims asks 10 keys under its one
    permit and gives the other 15 back, unasked and uncertain, with no lease and no event."""
    destination_set_limits(
        name="receiver",
        max_concurrency=None,
        max_requests_per_second=10,
        actor=make_user("olga"),
        reason="receiver team asked",
    )
    permits: list[int] = []
    real_acquire = lookup_limits.destination_acquire

    def acquire(**kwargs):
        permits.append(kwargs["requests"])
        return real_acquire(**kwargs)

    monkeypatch.setattr(lookup_limits, "destination_acquire", acquire)
    handoffs = lost_answers(make_handoff, settling.RECORD_AT_ONCE)
    destination = CountingLookups()  # waits for no permit: what one permit covers is what is asked
    settled = settling.settle_pass(destination=destination, worker="a", limit=len(handoffs))
    assert len(destination.asked) == 10 and settled.outcomes == {S.DELIVERED: 10}
    # One permit for the chunk (a second one refused: every rate slot is taken for the next second).
    assert permits == [settling.RECORD_AT_ONCE, settling.RECORD_AT_ONCE - 10]
    used = DestinationSlot.objects.filter(kind=SlotKind.RATE, free_at__gt=db_now())
    assert used.count() == 10
    unasked = Handoff.objects.filter(state=S.UNCERTAIN)
    assert {h.action_key for h in unasked} == {h.action_key for h in handoffs} - set(
        destination.asked
    )
    assert not unasked.exclude(lease_owner="").exists()
    assert not HandoffEvent.objects.filter(handoff__in=unasked).exists()


def test_a_failed_lookup_stops_the_chunk_and_the_keys_after_it_are_asked_again(make_handoff):
    """The third key's lookup fails: asking stops there for that request's permit, the key freed for the next
    pass without an event; the keys after it are asked under a new permit in the same pass."""
    handoffs = lost_answers(make_handoff, 5)
    failing = handoffs[2].action_key
    destination = CountingLookups(failing=frozenset({failing}))
    settled = settling.settle_pass(destination=destination, worker="a", limit=5)
    assert settled.outcomes == {S.DELIVERED: 4, S.UNCERTAIN: 1}
    assert sorted(destination.asked) == sorted(h.action_key for h in handoffs)
    failed = Handoff.objects.get(action_key=failing)
    assert (failed.state, failed.lease_owner) == (S.UNCERTAIN, "")
    assert not HandoffEvent.objects.filter(handoff=failed).exists()
