"""A settlement pass at a destination that answers one key a request (`outbox/settlement/passes.py`): each key is asked
once, and the answers are recorded RECORD_AT_ONCE at a time instead of one write per key; answers waiting are
recorded before a lease renewal, so none waits past the leases it was asked under. Both backends."""

import time

import pytest

from delivery import services as receiver
from outbox.destinations import InProcessDestination, LookupFailed
from outbox.limit_rules import DestinationLimited
from outbox.models import Handoff, HandoffEvent, HandoffState
from outbox.services import limits, lookup_limits
from outbox.services.limits import destination_set_limits
from outbox.services.lookup_limits import LimitedLookups
from outbox.settlement import passes as settling
from tests.factories import make_user, retry_after_hold

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


@pytest.fixture
def permits(monkeypatch) -> list:
    """Every permit settlement's lookups took (the real ones, observed): the requests each asked for, and the
    permit itself, as it was given back."""
    taken: list = []
    real_acquire, real_release = (
        lookup_limits.destination_acquire,
        lookup_limits.destination_release,
    )

    def acquire(**kwargs):
        permit = real_acquire(**kwargs)
        taken.append((kwargs["requests"], permit))
        return permit

    def release(*, permit):
        assert any(permit is each for _, each in taken), "a permit given back that was never taken"
        return real_release(permit=permit)

    def refused(**kwargs):
        try:
            return acquire(**kwargs)
        except DestinationLimited:
            taken.append((kwargs["requests"], None))
            raise

    monkeypatch.setattr(lookup_limits, "destination_acquire", refused)
    monkeypatch.setattr(lookup_limits, "destination_release", release)
    return taken


def test_one_key_requests_share_a_permit_and_keep_the_rate_limit(
    make_handoff, permits, monkeypatch
):
    """A permit per key cost a dispatcher more than its lookup: the keys of a chunk are asked under one permit,
    one rate slot a request. With 10 requests a second allowed, a pass of 25 claims asks 10 keys under its one
    permit and gives the other 15 back, unasked and uncertain, with no lease and no event."""
    # A used rate slot is free a window after its answer: a loaded machine that took a second between the two
    # permits let the second one in. A window longer than any pass keeps the pass within one window.
    monkeypatch.setattr(limits, "RATE_WINDOW_SECONDS", 3600.0)
    destination_set_limits(
        name="receiver",
        max_concurrency=None,
        max_requests_per_second=10,
        actor=make_user("olga"),
        reason="receiver team asked",
    )
    handoffs = lost_answers(make_handoff, settling.RECORD_AT_ONCE)
    destination = CountingLookups()  # waits for no permit: what one permit covers is what is asked
    settled = settling.settle_pass(destination=destination, worker="a", limit=len(handoffs))
    assert len(destination.asked) == 10 and settled.outcomes == {S.DELIVERED: 10}
    # One permit for the chunk, 10 rate slots, all used; a second one refused (every slot is taken).
    [(asked_for, permit), (asked_again, refused)] = permits
    assert (asked_for, len(permit.rate_ids), permit.requests_made) == (
        settling.RECORD_AT_ONCE,
        10,
        10,
    )
    assert (asked_again, refused) == (settling.RECORD_AT_ONCE - 10, None)
    unasked = Handoff.objects.filter(state=S.UNCERTAIN)
    assert {h.action_key for h in unasked} == {h.action_key for h in handoffs} - set(
        destination.asked
    )
    assert not unasked.exclude(lease_owner="").exists()
    assert not HandoffEvent.objects.filter(handoff__in=unasked).exists()


def test_a_failed_lookup_stops_the_chunk_and_the_keys_after_it_are_asked_under_a_new_permit(
    make_handoff, permits
):
    """The third key's lookup fails: asking stops there under that permit, the key freed for the next pass
    without an event; the two keys after it are asked under a new permit in the same pass."""
    handoffs = lost_answers(make_handoff, 5)
    failing = handoffs[2].action_key
    destination = CountingLookups(failing=frozenset({failing}))
    settled = settling.settle_pass(destination=destination, worker="a", limit=5)
    assert settled.outcomes == {S.DELIVERED: 4, S.UNCERTAIN: 1}
    assert destination.asked == [h.action_key for h in handoffs]
    assert [(requested, p.requests_made) for requested, p in permits] == [(5, 3), (2, 2)]
    failed = Handoff.objects.get(action_key=failing)
    assert (failed.state, failed.lease_owner) == (S.UNCERTAIN, "")
    assert not HandoffEvent.objects.filter(handoff=failed).exists()


class HoldingDestination(CountingDestination):
    """Answers, and while answering the second key another worker's call gets a Retry-After: 30 s hold."""

    def lookup(self, action_key):
        answer = super().lookup(action_key)
        if len(self.asked) == 2:
            retry_after_hold(self.name, 30)
        return answer


def test_a_hold_that_begins_during_a_chunk_stops_it(make_handoff, permits, monkeypatch):
    """A hold written by another worker after the permit was given stops the run of lookups at the next check,
    as it stops a claim batch's calls: the keys not asked stay uncertain, with no lease and no event."""
    monkeypatch.setattr(LimitedLookups, "HOLD_CHECK_SECONDS", 0.0)  # checked before every request
    handoffs = lost_answers(make_handoff, 10)
    destination = LimitedLookups(HoldingDestination(), worker="a")
    settled = settling.settle_pass(destination=destination, worker="a", limit=10)
    assert destination.destination.asked == [h.action_key for h in handoffs[:2]]
    assert settled.outcomes == {S.DELIVERED: 2}
    assert "held" in destination.refused
    unasked = Handoff.objects.filter(state=S.UNCERTAIN)
    assert unasked.count() == 8 and not unasked.exclude(lease_owner="").exists()
    assert not HandoffEvent.objects.filter(handoff__in=unasked).exists()


class SteppingDestination(CountingDestination):
    """The counting receiver on a host whose clocks step back five minutes during the first lookup (an NTP
    step, libfaketime's jump: the monotonic clock goes back with the wall clock)."""

    def __init__(self, monkeypatch):
        super().__init__()
        self.monkeypatch = monkeypatch

    def lookup(self, action_key):
        if not self.asked:
            real = time.monotonic
            self.monkeypatch.setattr(time, "monotonic", lambda: real() - 300.0)
        return super().lookup(action_key)


def test_a_pass_whose_host_clock_steps_back_renews_its_leases_before_the_next_request(
    make_handoff, monkeypatch
):
    """After a step back the time since the leases were renewed reads negative: how long they have left is
    unknown, so they are renewed before the next request, as the dispatcher's are (the pass used to read the
    step as time in hand and went on asking under leases that may have run out)."""
    renewals: list[set[int]] = []
    real_renew = settling.handoff_renew_settlement_claims

    def renew(*, claims, lease_seconds):
        renewed = real_renew(claims=claims, lease_seconds=lease_seconds)
        renewals.append(renewed.kept)
        return renewed

    monkeypatch.setattr(settling, "handoff_renew_settlement_claims", renew)
    handoffs = lost_answers(make_handoff, BACKLOG)
    destination = LimitedLookups(SteppingDestination(monkeypatch), worker="a")
    settled = settling.settle_pass(destination=destination, worker="a", limit=BACKLOG)
    assert settled.outcomes == {S.DELIVERED: BACKLOG}
    # The first request's keys were asked before the step; the rest were renewed, all still held, first.
    [kept] = renewals
    assert kept == {h.pk for h in handoffs[settling.RECORD_AT_ONCE :]}
    assert not Handoff.objects.exclude(lease_owner="").exists()
