"""How a settler's answers are written (`handoffs_record_settlements`): the answers that found their task with the
same payload hash, for claims that record nothing else, are one statement on PostgreSQL, still under the claim's
fencing token (a taken-over claim writes nothing, found or not); the other answers, and claims whose delivery
records a next step, take the locked path with the same meaning. Both backends unless marked."""

import json

import pytest
from django.db import connection

from delivery import services as receiver
from outbox.clock import db_now_plus
from outbox.destinations import InProcessDestination
from outbox.models import FailureClass, Handoff, HandoffEvent, HandoffState
from outbox.services.lookup_limits import LimitedLookups
from outbox.settlement.claims import (
    SettlementAnswer,
    handoff_claim_uncertain,
    handoffs_record_settlements,
)

pytestmark = pytest.mark.django_db(databases=["default", "delivery"])
S = HandoffState


@pytest.fixture
def destination():
    return LimitedLookups(InProcessDestination(), worker="test")


def lost_answer(make_handoff, n: int, **fields) -> Handoff:
    """Uncertain at the source while the receiver holds its task with the same payload."""
    handoff = make_handoff(n, state=S.UNCERTAIN, **fields)
    receiver.task_create_idempotent(action_key=handoff.action_key, payload=handoff.payload)
    return handoff


def answers_for(claims, destination) -> list[SettlementAnswer]:
    return [SettlementAnswer(c, destination.lookup(c.action_key)) for c in claims]


def test_a_found_answer_under_a_claim_taken_over_writes_nothing(make_handoff, destination):
    handoff = lost_answer(make_handoff, 1)
    [late] = handoff_claim_uncertain(destination_name="receiver", worker="late", limit=1)
    Handoff.objects.filter(pk=handoff.pk).update(lease_expires_at=db_now_plus(-1))
    [taker] = handoff_claim_uncertain(destination_name="receiver", worker="taker", limit=1)
    # The receiver holds the task with the same payload: only the token says the late answer is refused.
    assert handoffs_record_settlements(
        answers=answers_for([late], destination), destination=destination
    ) == [None]
    handoff.refresh_from_db()
    assert (handoff.state, handoff.lease_owner, handoff.fencing_epoch) == (
        S.UNCERTAIN,
        "taker",
        taker.epoch,
    )
    assert not HandoffEvent.objects.filter(handoff=handoff).exists()


def assert_settled_by_lookup(handoff: Handoff) -> None:
    handoff.refresh_from_db()
    task = receiver.task_find_many(action_keys=[handoff.action_key])[0]
    assert (handoff.state, handoff.destination_id) == (S.DELIVERED, str(task["task_id"]))
    receipt = handoff.receipt
    assert (receipt["found_by"], receipt["payload_hash"]) == ("lookup", handoff.payload_hash)
    assert (handoff.lease_owner, handoff.lease_expires_at, handoff.sla_due_at) == ("", None, None)
    assert handoff.delivered_at is not None
    assert (handoff.failure_class, handoff.reason_code, handoff.last_error) == (
        "",
        "settled_by_lookup",
        "",
    )
    [event] = HandoffEvent.objects.filter(handoff=handoff)
    assert (event.from_state, event.to_state, event.actor_label) == (
        S.UNCERTAIN,
        S.DELIVERED,
        "settlement",
    )
    assert event.reason.endswith("for this key with the same payload")


def test_found_answers_settle_delivered_with_the_receipt_and_one_event_each(
    make_handoff, destination
):
    handoffs = [lost_answer(make_handoff, n) for n in range(1, 6)]
    claims = handoff_claim_uncertain(destination_name="receiver", worker="a", limit=5)
    assert [bool(c.payload_hash) and not c.follow_up for c in claims] == [True] * 5
    states = handoffs_record_settlements(
        answers=answers_for(claims, destination), destination=destination
    )
    assert states == [S.DELIVERED] * 5
    for handoff in handoffs:
        assert_settled_by_lookup(handoff)


@pytest.mark.postgres
def test_a_requests_found_answers_are_one_statement_on_postgresql(
    make_handoff, destination, django_assert_num_queries
):
    for n in range(1, 21):
        lost_answer(make_handoff, n)
    claims = handoff_claim_uncertain(destination_name="receiver", worker="a", limit=20)
    answers = answers_for(claims, destination)
    with django_assert_num_queries(1):
        states = handoffs_record_settlements(answers=answers, destination=destination)
    assert states == [S.DELIVERED] * 20
    assert HandoffEvent.objects.filter(to_state=S.DELIVERED).count() == 20


@pytest.mark.postgres
def test_a_requests_found_answers_travel_as_one_json_parameter_not_an_array_per_field(
    make_handoff, destination
):
    """An array per field was quoted element by element in Python (psycopg binds client-side) after each value
    was prepared by its model field: the settler's largest CPU cost per key. One JSON text, encoded in C."""
    for n in range(1, 21):
        lost_answer(make_handoff, n)
    claims = handoff_claim_uncertain(destination_name="receiver", worker="a", limit=20)
    answers = answers_for(claims, destination)
    sent: list[tuple[str, list]] = []

    def observe(execute, sql, params, many, context):
        sent.append((sql, list(params or [])))
        return execute(sql, params, many, context)

    with connection.execute_wrapper(observe):
        states = handoffs_record_settlements(answers=answers, destination=destination)
    assert states == [S.DELIVERED] * 20
    [(_sql, params)] = sent
    assert not [p for p in params if isinstance(p, (list, tuple))], params
    [records] = [json.loads(p) for p in params if isinstance(p, str) and p.startswith("[")]
    assert sorted(record["id"] for record in records) == sorted(c.handoff_id for c in claims)
    for handoff in Handoff.objects.filter(pk__in=[c.handoff_id for c in claims]):
        assert_settled_by_lookup(handoff)


def test_other_answers_in_the_same_request_take_the_locked_path(make_handoff, destination):
    found = lost_answer(make_handoff, 1)
    other = make_handoff(2, state=S.UNCERTAIN)
    receiver.task_create_idempotent(
        action_key=other.action_key, payload={**other.payload, "plan": "premium"}
    )
    missing = make_handoff(3, state=S.UNCERTAIN)
    step = {"key": f"{found.action_key}:next", "operation": "provision_account"}
    chained = lost_answer(
        make_handoff, 4, plan=[{**step, "step": "provision_account", "index": 1, "kind": "action"}]
    )
    claims = handoff_claim_uncertain(destination_name="receiver", worker="a", limit=4)
    assert [c.follow_up for c in claims] == [False, False, False, True]
    states = handoffs_record_settlements(
        answers=answers_for(claims, destination), destination=destination
    )
    assert states == [S.DELIVERED, S.NEEDS_ATTENTION, S.PENDING, S.DELIVERED]
    assert Handoff.objects.get(pk=other.pk).failure_class == FailureClass.CONFLICT
    assert Handoff.objects.get(pk=missing.pk).next_attempt_at is not None
    # The chained one's next step was recorded in the transaction that settled it.
    assert Handoff.objects.get(action_key=step["key"]).state == S.PENDING
    assert Handoff.objects.get(pk=chained.pk).state == S.DELIVERED
