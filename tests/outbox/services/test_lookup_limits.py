"""Lookups and key listings are requests to the receiver too: settlement, reconciliation and a person's reconcile
each take a permit under the destination's limits, and say so when the limits (or a Retry-After hold) refuse."""

import pytest

from outbox.clock import db_now, db_now_plus
from outbox.dispatch.dispatcher import settle_uncertain
from outbox.models import (
    DestinationSlot,
    Handoff,
    HandoffEvent,
    HandoffState,
    SlotKind,
)
from outbox.services import handoff_settle, limits
from outbox.services.limits import destination_set_limits
from reconciliation.services import reconciliation_run
from tests.factories import make_user, retry_after_hold
from tests.outbox.scripted_destination import ScriptedDestination

pytestmark = pytest.mark.django_db(databases=["default", "delivery"])
S = HandoffState


class CountingReceiver(ScriptedDestination):
    """The in-process receiver, counting the requests a real one would receive."""

    def __init__(self):
        super().__init__()
        self.lookups = self.listings = 0

    def lookup(self, action_key):
        self.lookups += 1
        return super().lookup(action_key)

    def list_keys(self, *, after="", limit=500):
        self.listings += 1
        return super().list_keys(after=after, limit=limit)


def set_limits(*, concurrency=None, rate=None):
    destination_set_limits(
        name="receiver",
        max_concurrency=concurrency,
        max_requests_per_second=rate,
        actor=make_user("olga"),
        reason="receiver team asked",
    )


def rate_slots_used() -> int:
    return DestinationSlot.objects.filter(
        destination="receiver", kind=SlotKind.RATE, free_at__gt=db_now()
    ).count()


@pytest.fixture
def no_wait(monkeypatch):
    """Settlement gives up at the first refusal (it waits a second for a slot in production)."""
    from outbox.dispatch import dispatcher

    monkeypatch.setattr(dispatcher, "SETTLEMENT_WAIT_SECONDS", 0.0)


def test_settlement_asks_no_more_than_the_requests_per_second_and_leaves_the_rest_for_the_next_pass(
    make_handoff, no_wait, monkeypatch
):
    # A used rate slot is free a window after its answer: a loaded machine that took a second between the
    # pass's first permit and its next (or before the count below) let more keys be asked, or counted none.
    # A window longer than any pass keeps "within one second" true of the whole test.
    monkeypatch.setattr(limits, "RATE_WINDOW_SECONDS", 3600.0)
    set_limits(rate=2)
    for n in range(1, 6):
        make_handoff(n, state=S.UNCERTAIN)
    receiver = CountingReceiver()
    settled = settle_uncertain(destination=receiver)
    # Nothing at the receiver for those keys: each one asked is safe to send again.
    assert settled == {S.PENDING: 2}
    assert receiver.lookups == 2 and rate_slots_used() == 2
    assert Handoff.objects.filter(state=S.UNCERTAIN).count() == 3


def test_settlement_asks_nothing_while_every_call_slot_is_taken_by_another_worker(
    make_handoff, no_wait
):
    set_limits(concurrency=1)
    make_handoff(1, state=S.UNCERTAIN)
    DestinationSlot.objects.filter(kind=SlotKind.CONCURRENCY).update(
        holder="others", free_at=db_now_plus(30)
    )
    receiver = CountingReceiver()
    assert settle_uncertain(destination=receiver) == {}
    assert receiver.lookups == 0
    assert Handoff.objects.get().state == S.UNCERTAIN


def test_settlement_waits_for_a_call_slot_another_worker_gives_back(make_handoff, monkeypatch):
    from outbox.dispatch import dispatcher

    monkeypatch.setattr(dispatcher, "SETTLEMENT_WAIT_SECONDS", 30.0)  # a deadline, not a pause
    set_limits(concurrency=1)
    make_handoff(1, state=S.UNCERTAIN)
    # The other worker's call ends a moment from now (database clock): its slot is free again then.
    DestinationSlot.objects.filter(kind=SlotKind.CONCURRENCY).update(
        holder="others", free_at=db_now_plus(0.2)
    )
    receiver = CountingReceiver()
    assert settle_uncertain(destination=receiver) == {S.PENDING: 1}
    assert receiver.lookups == 1


def test_a_reconciliation_run_lists_keys_one_permit_per_page(make_handoff, monkeypatch):
    # A used rate slot is free again a window after its use, and the next permit may take it: on a loaded
    # machine the run outlasted the 1 s window, so slots were reused and fewer counted than permits taken.
    # A window longer than any run keeps every slot the run used counted.
    monkeypatch.setattr(limits, "RATE_WINDOW_SECONDS", 3600.0)
    set_limits(rate=10)
    for n in range(1, 4):
        make_handoff(n, state=S.DELIVERED)
    receiver = CountingReceiver()
    run = reconciliation_run(destination=receiver, batch_size=2)
    assert run.status == "completed", run.error
    assert receiver.listings >= 1 and rate_slots_used() == receiver.listings + receiver.lookups


def test_a_reconciliation_run_refused_by_a_hold_fails_with_the_reason_and_asks_nothing(
    make_handoff, monkeypatch
):
    from reconciliation.services import runs

    monkeypatch.setattr(runs, "RUN_LIMITS_WAIT_SECONDS", 0.0)
    make_handoff(1, state=S.DELIVERED)
    retry_after_hold("receiver", 30)
    receiver = CountingReceiver()
    run = reconciliation_run(destination=receiver)
    assert run.status == "failed"
    assert "not asked: destination receiver is held (Retry-After hold)" in run.error
    assert receiver.listings == receiver.lookups == 0


def test_a_persons_reconcile_on_a_held_destination_says_the_receiver_was_not_asked(
    make_handoff, monkeypatch
):
    from outbox.settlement import asked as settlement

    monkeypatch.setattr(settlement, "PERSON_LOOKUP_WAIT_SECONDS", 0.0)
    handoff = make_handoff(1, state=S.NEEDS_ATTENTION)
    retry_after_hold("receiver", 30)
    assert handoff_settle(handoff_id=handoff.pk, actor=make_user("olga")) == S.NEEDS_ATTENTION
    event = HandoffEvent.objects.filter(handoff=handoff).latest("id")
    assert (
        "could not ask the receiver: not asked: destination receiver is held (Retry-After hold)"
        in event.reason
    )


def test_settlement_with_a_destination_given_asks_it_under_its_limits_too(
    make_handoff, monkeypatch
):
    from outbox.settlement import asked as settlement

    monkeypatch.setattr(settlement, "PERSON_LOOKUP_WAIT_SECONDS", 0.0)
    handoff = make_handoff(1, state=S.UNCERTAIN)
    retry_after_hold("receiver", 30)
    receiver = CountingReceiver()
    assert handoff_settle(handoff_id=handoff.pk, destination=receiver) == S.UNCERTAIN
    assert receiver.lookups == 0
