"""The dispatcher's state machine against the real receiver (in process): every outcome ends somewhere
a person can see, nothing is recorded by a worker that lost its lease, uncertain is settled by lookup."""

from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from delivery.models import ReceiverTask
from delivery.services import task_create_idempotent
from incidents.models import IncidentMember
from incidents.sweep import alerts_send_due
from outbox.clock import db_now_plus
from outbox.dispatch.dispatcher import dispatch_batch, handoff_deliver, sweep
from outbox.errors import InvalidTransition, RiskNotConfirmed
from outbox.failures import DeliveryResult
from outbox.models import (
    Attempt,
    AttemptOutcome,
    DestinationHealth,
    FailureClass,
    Handoff,
    HandoffEvent,
    HandoffState,
)
from outbox.retry import RetryPolicy
from outbox.services import (
    handoff_claim_due,
    handoff_release_claims,
    handoff_retry,
    handoff_settle,
    handoff_settle_manually,
)
from tests.factories import make_user
from tests.outbox.scripted_destination import ScriptedDestination

pytestmark = pytest.mark.django_db(databases=["default", "delivery"])
S = HandoffState


def transient(code="http_503", status_code=503, **kw):
    return DeliveryResult.failed(
        FailureClass.TRANSIENT, code, "try later", status_code=status_code, **kw
    )


def test_delivery_records_task_id_attempt_and_events(make_handoff):
    handoff = make_handoff()
    assert handoff_deliver(handoff_id=handoff.pk, destination=ScriptedDestination()) == S.DELIVERED
    handoff.refresh_from_db()
    task = ReceiverTask.objects.get(action_key=handoff.action_key)
    assert handoff.destination_id == str(task.task_id)
    assert handoff.lease_owner == "" and handoff.lease_expires_at is None
    attempt = Attempt.objects.get(handoff=handoff)
    assert attempt.outcome == AttemptOutcome.CREATED and attempt.finished_at is not None
    assert list(handoff.events.order_by("id").values_list("from_state", "to_state")) == [
        ("pending", "in_flight"),
        ("in_flight", "delivered"),
    ]


def test_a_claim_batch_reads_the_destinations_limits_and_breaker_in_one_query(make_handoff):
    DestinationHealth.objects.create(name="receiver")  # as after the destination's first batch
    make_handoff(1), make_handoff(2)
    with CaptureQueriesContext(connection) as statements:
        assert dispatch_batch(destination=ScriptedDestination(), worker="w1").delivered == 2
    sql = [q["sql"] for q in statements]
    claim = next(i for i, text in enumerate(sql) if "outbox_attempt" in text or "UPDATE" in text)
    before_claim = [text for text in sql[:claim] if "outbox_destinationhealth" in text]
    assert len(before_claim) == 1, before_claim


def test_a_healthy_batch_of_deliveries_costs_three_statements_and_records_everything(make_handoff):
    """The limits' read, the claim, and the outcomes in one statement (which also answers the breaker's
    "nothing to reset"): each outcome moves its handoff, writes its event and finishes its attempt."""
    DestinationHealth.objects.create(name="receiver")
    handoffs = [make_handoff(n) for n in (1, 2, 3)]
    ReceiverTask.objects.create(
        action_key=handoffs[2].action_key,
        payload=handoffs[2].payload,
        payload_hash=handoffs[2].payload_hash,
    )
    with CaptureQueriesContext(connection) as statements:
        stats = dispatch_batch(destination=ScriptedDestination(), worker="w1")
    assert (stats.delivered, stats.duplicates) == (3, 1)
    if connection.vendor == "postgresql":
        assert len(statements) == 3, [q["sql"][:80] for q in statements]
    for handoff in handoffs:
        handoff.refresh_from_db()
        task = ReceiverTask.objects.get(action_key=handoff.action_key)
        assert (
            handoff.state,
            handoff.destination_id,
            handoff.lease_owner,
            handoff.lease_expires_at,
        ) == (S.DELIVERED, str(task.task_id), "", None)
        assert handoff.receipt["task_id"] == str(task.task_id) and handoff.delivered_at is not None
        assert (
            handoff.updated_at >= handoff.delivered_at
        )  # written by the outcome, not left from the claim
        attempt = Attempt.objects.get(handoff=handoff)
        assert attempt.finished_at is not None and attempt.detail == ""
        assert list(
            handoff.events.order_by("id").values_list("from_state", "to_state", "actor_label")
        ) == [("pending", "in_flight", "w1"), ("in_flight", "delivered", "w1")]
    outcomes = [
        Attempt.objects.values_list("outcome", "status_code").get(handoff=h) for h in handoffs
    ]
    assert outcomes == [
        (AttemptOutcome.CREATED, 201),
        (AttemptOutcome.CREATED, 201),
        (AttemptOutcome.DUPLICATE, 200),
    ]
    assert handoffs[2].events.get(to_state=S.DELIVERED).reason.endswith("(duplicate prevented)")


def test_a_delivery_after_failures_clears_what_the_failures_left(make_handoff):
    handoff = make_handoff(
        1,
        failure_class=FailureClass.TRANSIENT,
        reason_code="http_503",
        last_error="boom",
        sla_due_at=timezone.now(),
    )
    assert dispatch_batch(destination=ScriptedDestination(), worker="w1").delivered == 1
    handoff.refresh_from_db()
    assert (handoff.failure_class, handoff.reason_code, handoff.last_error, handoff.sla_due_at) == (
        "",
        "created",
        "",
        None,
    )
    assert handoff.work_status == ReceiverTask.objects.get(action_key=handoff.action_key).status


def test_a_delivered_batch_resets_the_destinations_failure_streak(make_handoff):
    DestinationHealth.objects.create(
        name="receiver",
        consecutive_failures=2,
        failing_since=timezone.now(),
        last_error="connect_failed: refused",
    )
    make_handoff(1)
    assert dispatch_batch(destination=ScriptedDestination(), worker="w1").delivered == 1
    health = DestinationHealth.objects.get(name="receiver")
    assert (health.state, health.consecutive_failures, health.failing_since, health.last_error) == (
        "active",
        0,
        None,
        "",
    )


def test_transient_failure_backs_off_then_succeeds_with_same_key(make_handoff):
    handoff = make_handoff()
    destination = ScriptedDestination(transient())
    assert handoff_deliver(handoff_id=handoff.pk, destination=destination) == S.PENDING
    handoff.refresh_from_db()
    assert handoff.failure_class == FailureClass.TRANSIENT and handoff.next_attempt_at is not None
    assert handoff_deliver(handoff_id=handoff.pk, destination=destination) == S.DELIVERED
    assert ReceiverTask.objects.filter(action_key=handoff.action_key).count() == 1


def test_backoff_keeps_the_handoff_out_of_claims_until_due(make_handoff):
    handoff = make_handoff()
    destination = ScriptedDestination(
        transient(),
        policy=RetryPolicy(max_attempts=5, base_delay=600, max_delay=600, max_retry_after=600),
    )
    # Full jitter may pick a tiny delay; Retry-After pins a floor so the row is certainly not yet due.
    destination.script = [transient(retry_after=300)]
    handoff_deliver(handoff_id=handoff.pk, destination=destination)
    assert handoff_claim_due(worker="w2") == []
    handoff.refresh_from_db()
    # A minute's margin below the 300 s: a loaded machine can stall the test between the call and here.
    assert handoff.next_attempt_at > timezone.now() + timedelta(seconds=240)


def test_exhausted_retries_need_attention_with_reason_and_owner(make_handoff):
    owner = make_user("olga")
    handoff = make_handoff(owner=owner)
    # 429 is about this handoff's calls; a 503 (the destination's outage) would count only against the window.
    limited = [transient("rate_limited", status_code=429) for _ in range(3)]
    destination = ScriptedDestination(*limited)
    states = [handoff_deliver(handoff_id=handoff.pk, destination=destination) for _ in range(3)]
    assert states == [S.PENDING, S.PENDING, S.NEEDS_ATTENTION]
    handoff.refresh_from_db()
    assert handoff.reason_code == "retries_exhausted"
    assert handoff.failure_class == FailureClass.TRANSIENT
    assert (
        handoff.owner == owner
        and handoff.sla_due_at is not None
        and handoff.attention_since is not None
    )
    assert ReceiverTask.objects.count() == 0


@pytest.mark.parametrize(
    ("failure_class", "code"),
    [(FailureClass.PERMANENT, "payload_invalid"), (FailureClass.CONFLICT, "key_conflict")],
)
def test_non_retryable_failures_need_attention_after_one_attempt(make_handoff, failure_class, code):
    handoff = make_handoff()
    destination = ScriptedDestination(DeliveryResult.failed(failure_class, code, "no"))
    assert handoff_deliver(handoff_id=handoff.pk, destination=destination) == S.NEEDS_ATTENTION
    sweep(destination=destination)
    handoff.refresh_from_db()
    assert (handoff.failure_class, handoff.reason_code, handoff.attempts) == (
        failure_class,
        code,
        1,
    )
    assert destination.calls == 1, "never retried automatically"


def test_malformed_receipt_is_uncertain_never_delivered(make_handoff):
    handoff = make_handoff()
    destination = ScriptedDestination(
        DeliveryResult.failed(FailureClass.MALFORMED, "malformed_receipt", "200 {}")
    )
    assert handoff_deliver(handoff_id=handoff.pk, destination=destination) == S.UNCERTAIN
    handoff.refresh_from_db()
    assert handoff.destination_id == "" and handoff.delivered_at is None


def test_uncertain_with_no_task_at_receiver_goes_back_to_pending_with_same_key(make_handoff):
    handoff = make_handoff()
    destination = ScriptedDestination(
        DeliveryResult.failed(FailureClass.UNCERTAIN, "read_timeout", "timeout")
    )
    handoff_deliver(handoff_id=handoff.pk, destination=destination)
    assert handoff_settle(handoff_id=handoff.pk, destination=destination) == S.PENDING
    assert handoff_deliver(handoff_id=handoff.pk, destination=destination) == S.DELIVERED
    handoff.refresh_from_db()
    assert handoff.action_key == "onboarding:7:1:1"
    assert ReceiverTask.objects.count() == 1


def test_uncertain_with_other_payload_at_receiver_is_a_conflict(make_handoff):
    handoff = make_handoff()

    task_create_idempotent(action_key=handoff.action_key, payload={"client_name": "Someone else"})
    destination = ScriptedDestination(
        DeliveryResult.failed(FailureClass.UNCERTAIN, "connection_lost", "reset")
    )
    handoff_deliver(handoff_id=handoff.pk, destination=destination)
    assert handoff_settle(handoff_id=handoff.pk, destination=destination) == S.NEEDS_ATTENTION
    handoff.refresh_from_db()
    assert handoff.failure_class == FailureClass.CONFLICT
    assert ReceiverTask.objects.get().payload == {"client_name": "Someone else"}


def test_destination_without_lookup_sends_uncertain_to_a_person(make_handoff):
    handoff = make_handoff()
    destination = ScriptedDestination(
        DeliveryResult.failed(FailureClass.UNCERTAIN, "read_timeout", "t"), supports_lookup=False
    )
    handoff_deliver(handoff_id=handoff.pk, destination=destination)
    sweep(destination=destination)
    handoff.refresh_from_db()
    assert handoff.state == S.NEEDS_ATTENTION
    assert handoff.reason_code == "lookup_unsupported"
    assert destination.calls == 1


def test_destination_without_idempotency_or_lookup_hands_an_unknown_outcome_to_a_person(
    make_handoff,
):
    # Nothing to ask and nothing safe to send again (as smtp); one that can be searched for the key is asked
    # instead (tests/providers/test_postmark.py).
    handoff = make_handoff()
    destination = ScriptedDestination(
        DeliveryResult.failed(FailureClass.UNCERTAIN, "read_timeout", "t"),
        supports_idempotency=False,
        supports_lookup=False,
    )
    assert handoff_deliver(handoff_id=handoff.pk, destination=destination) == S.NEEDS_ATTENTION
    sweep(destination=destination)
    assert destination.calls == 1
    handoff.refresh_from_db()
    assert (handoff.state, handoff.reason_code) == (S.NEEDS_ATTENTION, "uncertain_not_idempotent")
    assert handoff.attention_since is not None and handoff.sla_due_at is not None
    assert handoff.action_key in handoff.last_error and "settle by hand" in handoff.last_error

    alerts_send_due()
    assert IncidentMember.objects.filter(handoff_id=handoff.pk).count() == 1


def test_a_person_who_found_nothing_at_the_receiver_lets_it_be_sent_once_more(make_handoff):
    handoff = make_handoff()
    destination = ScriptedDestination(
        DeliveryResult.failed(FailureClass.UNCERTAIN, "read_timeout", "t"),
        supports_idempotency=False,
        supports_lookup=False,
    )
    assert handoff_deliver(handoff_id=handoff.pk, destination=destination) == S.NEEDS_ATTENTION
    handoff_settle_manually(
        handoff_id=handoff.pk,
        actor=make_user("olga"),
        receiver_task_id="",
        reason="nothing at the receiver for this key",
    )
    assert handoff_deliver(handoff_id=handoff.pk, destination=destination) == S.DELIVERED
    assert destination.calls == 2
    assert ReceiverTask.objects.filter(action_key=handoff.action_key).count() == 1


def test_destination_without_idempotency_never_resends_after_a_lease_expired(make_handoff):
    handoff = make_handoff()
    destination = ScriptedDestination(supports_idempotency=False)
    handoff_claim_due(worker="dead", lease_seconds=1)
    Handoff.objects.filter(pk=handoff.pk).update(
        lease_expires_at=timezone.now() - timedelta(seconds=5)
    )
    sweep(destination=destination)
    assert destination.calls == 0
    handoff.refresh_from_db()
    assert (handoff.state, handoff.reason_code) == (S.NEEDS_ATTENTION, "uncertain_not_idempotent")


def test_delivered_handoff_is_never_sent_again(make_handoff):
    handoff = make_handoff()
    destination = ScriptedDestination()
    handoff_deliver(handoff_id=handoff.pk, destination=destination)
    olga = make_user("olga")

    with pytest.raises(InvalidTransition):
        handoff_retry(handoff_id=handoff.pk, actor=olga)
    sweep(destination=destination)
    assert destination.calls == 1


def test_retry_of_uncertain_needs_confirmation_of_the_risk(make_handoff):
    handoff = make_handoff()
    olga = make_user("olga")
    destination = ScriptedDestination(
        DeliveryResult.failed(FailureClass.UNCERTAIN, "read_timeout", "t")
    )
    handoff_deliver(handoff_id=handoff.pk, destination=destination)
    with pytest.raises(RiskNotConfirmed):
        handoff_retry(handoff_id=handoff.pk, actor=olga)
    handoff.refresh_from_db()
    assert handoff.state == S.UNCERTAIN
    handoff_retry(
        handoff_id=handoff.pk, actor=olga, confirm_risk=True, reason="receiver team confirmed"
    )
    handoff.refresh_from_db()
    assert handoff.state == S.PENDING and handoff.attempts_in_run == 0
    assert HandoffEvent.objects.filter(handoff=handoff, action="retry", actor=olga).exists()


def test_without_idempotency_a_claim_given_back_unsent_does_not_block_the_next_send(make_handoff):
    """An attempt that failed before anything was sent, then a claim given back unsent (its destination
    paused meanwhile): nothing may have reached the receiver, so the next attempt is sent."""

    handoff = make_handoff()
    destination = ScriptedDestination(transient(), supports_idempotency=False)
    assert handoff_deliver(handoff_id=handoff.pk, destination=destination) == S.PENDING
    Handoff.objects.filter(pk=handoff.pk).update(next_attempt_at=db_now_plus(-1))
    claims = handoff_claim_due(worker="w2", lease_seconds=30)
    assert handoff_release_claims(claims=claims, reason="not sent: destination paused") == 1
    assert handoff_deliver(handoff_id=handoff.pk, destination=destination) == S.DELIVERED
    assert destination.calls == 2
    assert ReceiverTask.objects.filter(action_key=handoff.action_key).count() == 1
