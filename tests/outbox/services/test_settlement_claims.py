"""Settlement claims like delivery claims: a batch of uncertain handoffs leased to one settler with a new fencing
epoch; another settler skips them while the lease lasts; an answer is written only under the claim's token, so
a settler whose lease ran out and was taken over writes nothing. Both backends."""

import threading

import pytest
from django.db import connection

from delivery import services as receiver
from outbox.clock import db_now_plus
from outbox.destinations import InProcessDestination
from outbox.dispatch.dispatcher import settle_uncertain_pass
from outbox.dispatch.serving import Schedule, Turn
from outbox.models import Handoff, HandoffEvent, HandoffState
from outbox.services.lookup_limits import LimitedLookups
from outbox.settlement.claims import (
    SettlementAnswer,
    _claim_sql,
    handoff_claim_uncertain,
    handoff_release_settlement_claims,
    handoffs_record_settlements,
)

pytestmark = pytest.mark.django_db(databases=["default", "delivery"])
S = HandoffState


def delivered_at_receiver(make_handoff, n: int) -> Handoff:
    """Uncertain at the source, while the receiver holds its task: the answer to the call was lost."""
    handoff = make_handoff(n, state=S.UNCERTAIN)
    receiver.task_create_idempotent(action_key=handoff.action_key, payload=handoff.payload)
    return handoff


def test_a_claimed_batch_is_not_claimed_by_another_settler_while_its_lease_lasts(make_handoff):
    for n in range(1, 6):
        make_handoff(n, state=S.UNCERTAIN)
    first = handoff_claim_uncertain(destination_name="receiver", worker="a", limit=3)
    second = handoff_claim_uncertain(destination_name="receiver", worker="b", limit=5)
    assert len(first) == 3 and len(second) == 2
    assert not {c.handoff_id for c in first} & {c.handoff_id for c in second}
    # Still uncertain while claimed (nothing is known yet), each under a new fencing epoch.
    assert set(Handoff.objects.values_list("state", flat=True)) == {S.UNCERTAIN}
    assert all(claim.epoch == 1 for claim in first + second)
    assert handoff_claim_uncertain(destination_name="receiver", worker="c", limit=5) == []


def test_a_settler_whose_lease_ran_out_and_was_taken_over_writes_nothing(make_handoff):
    handoff = delivered_at_receiver(make_handoff, 1)
    destination = LimitedLookups(InProcessDestination(), worker="test")
    [late] = handoff_claim_uncertain(destination_name="receiver", worker="late", limit=1)
    Handoff.objects.filter(pk=handoff.pk).update(lease_expires_at=db_now_plus(-1))
    [taker] = handoff_claim_uncertain(destination_name="receiver", worker="taker", limit=1)
    assert taker.epoch == late.epoch + 1
    # The late settler's answer (whatever it says) is refused: the row carries the taker's token.
    assert handoffs_record_settlements(
        answers=[SettlementAnswer(late, None)], destination=destination
    ) == [None]
    handoff.refresh_from_db()
    assert (handoff.state, handoff.lease_owner) == (S.UNCERTAIN, "taker")
    assert not HandoffEvent.objects.filter(handoff=handoff).exists()
    remote = destination.lookup(handoff.action_key)
    assert handoffs_record_settlements(
        answers=[SettlementAnswer(taker, remote)], destination=destination
    ) == [S.DELIVERED]
    handoff.refresh_from_db()
    assert (handoff.state, handoff.lease_owner, handoff.lease_expires_at) == (S.DELIVERED, "", None)


def test_claims_given_back_unasked_are_free_for_the_next_settler_at_once(make_handoff):
    for n in range(1, 4):
        make_handoff(n, state=S.UNCERTAIN)
    claims = handoff_claim_uncertain(destination_name="receiver", worker="a", limit=3)
    assert handoff_release_settlement_claims(claims=claims) == 3
    again = handoff_claim_uncertain(destination_name="receiver", worker="b", limit=3)
    assert sorted(c.handoff_id for c in again) == sorted(c.handoff_id for c in claims)


def test_a_pass_settles_only_its_own_destinations_uncertain_outcomes(make_handoff):
    ours = delivered_at_receiver(make_handoff, 1)
    theirs = make_handoff(2, state=S.UNCERTAIN, destination="crm")
    settled = settle_uncertain_pass(destination=InProcessDestination(), limit=10, worker="a")
    assert (settled.outcomes, settled.claimed, settled.backlog) == ({S.DELIVERED: 1}, 1, False)
    assert Handoff.objects.get(pk=ours.pk).state == S.DELIVERED
    assert Handoff.objects.get(pk=theirs.pk).lease_owner == ""


def test_a_pass_that_claims_a_whole_batch_says_more_are_waiting(make_handoff):
    for n in range(1, 6):
        delivered_at_receiver(make_handoff, n)
    first = settle_uncertain_pass(destination=InProcessDestination(), limit=3, worker="a")
    second = settle_uncertain_pass(destination=InProcessDestination(), limit=3, worker="a")
    assert (first.claimed, first.backlog) == (3, True)
    assert (second.claimed, second.backlog) == (2, False)
    assert Handoff.objects.filter(state=S.DELIVERED).count() == 5


def test_a_maintenance_turn_that_found_a_backlog_comes_again_at_once():
    plan = Schedule(idle_sleep=3600.0, maintain_every=0.0, stop=threading.Event())
    plan.serve(["crm"])
    plan.maintain_every = 3600.0
    assert plan.take() == ("crm", Turn.MAINTAIN)
    plan.done("crm", Turn.MAINTAIN, backlog=True)
    assert plan.take() == ("crm", Turn.DELIVER)
    plan.done("crm", Turn.DELIVER, claimed=1)
    assert plan.take() == ("crm", Turn.MAINTAIN)
    plan.done("crm", Turn.MAINTAIN)
    assert plan.due_now() == ["crm"]  # its delivery turn; maintenance again only in maintain_every
    assert plan.take() == ("crm", Turn.DELIVER)


def test_every_claim_carries_its_lease_end_read_once_from_the_claim(make_handoff):
    """One lease end for the whole claim (the statement's time), as the rows hold it; on PostgreSQL the statement
    returns it in one row only: a time with its zone is loaded in Python, and 200 of them a claim were two
    thirds of the claim's CPU."""
    for n in range(1, 6):
        make_handoff(n, state=S.UNCERTAIN)
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute(_claim_sql(), ["receiver", S.UNCERTAIN, 3, "a", 30.0])
            returned = [row[5] for row in cursor.fetchall()]
        assert len(returned) == 3
        assert sum(until is not None for until in returned) == 1
    claims = handoff_claim_uncertain(destination_name="receiver", worker="b", limit=5)
    leases = dict(Handoff.objects.filter(lease_owner="b").values_list("pk", "lease_expires_at"))
    assert len(claims) == (2 if connection.vendor == "postgresql" else 5)
    assert {claim.handoff_id: claim.leased_until for claim in claims} == leases
    assert None not in leases.values()
