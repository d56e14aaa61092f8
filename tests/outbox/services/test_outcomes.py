"""The fenced record of outcomes (`outbox/services/outcomes.py`): a claim whose lease was taken over is
refused, the others are written; a workflow step's delivery records its next step."""

from datetime import timedelta

import pytest
from django.db import connection
from django.db.models import F
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from outbox.dispatch.claims import handoff_claim_due
from outbox.dispatch.leases import handoff_expire_leases
from outbox.errors import LeaseLost
from outbox.failures import DeliveryResult
from outbox.models import (
    Attempt,
    AttemptOutcome,
    Handoff,
    HandoffState,
)
from outbox.services.outcomes import handoff_record_outcome, handoff_record_outcomes
from outbox.services.recording import handoff_record
from outbox.settlement.asked import handoff_settle
from tests.outbox.scripted_destination import ScriptedDestination

pytestmark = pytest.mark.django_db(databases=["default", "delivery"])
S = HandoffState


def test_recording_a_batch_refuses_only_the_claim_whose_lease_was_taken_over(make_handoff):
    kept, taken = make_handoff(1), make_handoff(2)
    claims = {claim.handoff_id: claim for claim in handoff_claim_due(worker="w1")}
    # Claimed again since, by the same worker name (a restarted worker on a fixed name): only the epoch differs.
    Handoff.objects.filter(pk=taken.pk).update(fencing_epoch=F("fencing_epoch") + 1)
    destination = ScriptedDestination()
    with CaptureQueriesContext(connection) as statements:
        recorded = handoff_record_outcomes(
            outcomes=[  # not in id order: the answer follows the order given
                (claims[taken.pk], DeliveryResult.ok(task_id="t-taken", created=True)),
                (claims[kept.pk], DeliveryResult.ok(task_id="t-kept", created=True)),
            ],
            destination=destination,
        )
    if connection.vendor == "postgresql":
        assert len(statements) == 1, "plain deliveries take the one-statement path"
    assert recorded.states == [None, S.DELIVERED]
    kept.refresh_from_db(), taken.refresh_from_db()
    assert (kept.state, kept.destination_id) == (S.DELIVERED, "t-kept")
    assert (taken.state, taken.fencing_epoch, taken.destination_id) == (
        S.IN_FLIGHT,
        claims[taken.pk].epoch + 1,
        "",
    )
    assert not taken.events.filter(to_state=S.DELIVERED).exists()
    assert Attempt.objects.get(pk=claims[taken.pk].attempt_id).outcome == AttemptOutcome.IN_PROGRESS


def test_a_workflow_step_in_a_batch_of_plain_handoffs_still_records_its_next_step(make_handoff):
    plain = make_handoff(1)
    first = handoff_record(
        workflow="onboarding",
        workspace_id=7,
        source_ref="request 2",
        source_id=2,
        action_key="onboarding:7:2:1",
        payload={"client_name": "Two", "plan": "standard"},
        steps=[{"name": "create_client"}, {"name": "provision_account"}],
    )
    claims = handoff_claim_due(worker="w1")
    if connection.vendor == "postgresql":
        assert {claim.handoff_id: claim.follow_up for claim in claims} == {
            plain.pk: False,
            first.pk: True,
        }
    outcomes = [
        (claim, DeliveryResult.ok(task_id=f"t{claim.handoff_id}", created=True)) for claim in claims
    ]
    assert (
        handoff_record_outcomes(outcomes=outcomes, destination=ScriptedDestination()).states
        == [S.DELIVERED] * 2
    )
    assert Handoff.objects.filter(
        action_key="onboarding:7:2:1:provision_account", state=S.PENDING
    ).exists()
    assert Handoff.objects.get(pk=plain.pk).state == S.DELIVERED


def test_recording_no_outcomes_writes_nothing():
    assert handoff_record_outcomes(outcomes=[], destination=ScriptedDestination()).states == []


def test_outcome_from_a_worker_whose_lease_was_taken_over_is_refused(make_handoff):
    handoff = make_handoff()
    [stale_claim] = handoff_claim_due(worker="w1", lease_seconds=1)
    Handoff.objects.filter(pk=handoff.pk).update(
        lease_expires_at=timezone.now() - timedelta(seconds=5)
    )
    assert handoff_expire_leases() == 1
    handoff.refresh_from_db()
    assert handoff.state == S.UNCERTAIN and handoff.reason_code == "lease_expired"
    assert Attempt.objects.get(handoff=handoff).outcome == AttemptOutcome.ABANDONED
    with pytest.raises(LeaseLost):
        handoff_record_outcome(
            claim=stale_claim,
            result=DeliveryResult.ok(task_id="t", created=True),
            destination=ScriptedDestination(),
        )
    handoff.refresh_from_db()
    assert handoff.state == S.UNCERTAIN and handoff.destination_id == ""


def test_stale_worker_cannot_record_over_the_worker_that_took_the_handoff_over(make_handoff):
    """w1's lease expires mid-call; settlement finds nothing at the receiver and w2 claims the handoff
    again. w1's late answer must be refused: only the current lease holder (epoch 2) may record."""
    handoff = make_handoff()
    [stale] = handoff_claim_due(worker="w1")
    Handoff.objects.filter(pk=handoff.pk).update(
        lease_expires_at=timezone.now() - timedelta(seconds=1)
    )
    handoff_expire_leases()
    destination = ScriptedDestination()
    assert handoff_settle(handoff_id=handoff.pk, destination=destination) == S.PENDING
    [current] = handoff_claim_due(worker="w2")
    assert (current.epoch, stale.epoch) == (2, 1)

    with pytest.raises(LeaseLost):
        handoff_record_outcome(
            claim=stale,
            result=DeliveryResult.ok(task_id="from-w1", created=True),
            destination=destination,
        )
    handoff.refresh_from_db()
    assert (handoff.state, handoff.lease_owner, handoff.destination_id) == (S.IN_FLIGHT, "w2", "")

    handoff_record_outcome(
        claim=current,
        result=DeliveryResult.ok(task_id="from-w2", created=True),
        destination=destination,
    )
    handoff.refresh_from_db()
    assert (handoff.state, handoff.destination_id) == (S.DELIVERED, "from-w2")
