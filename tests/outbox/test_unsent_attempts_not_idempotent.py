"""A destination without idempotency (smtp): an attempt known never sent is no reason to stop and ask a
person. Found by the 30-minute soak of seed 1796513746 (docs/operations.md): e-mails handed to a person though
no call of theirs had begun, in two ways:

- the claim's attempts were marked "not called yet" by a statement of their own after the claim: a dispatcher
  stopped or cut off from the database between the two left them unmarked, so their expired lease read as
  "maybe sent". The claim now opens them marked;
- an earlier attempt skipped (its lease ran out before its call: never sent) blocked the next send as if it
  might have reached the receiver."""

from datetime import timedelta

import pytest
from django.utils import timezone

from delivery.models import ReceiverTask
from outbox.dispatch.claims import handoff_claim_due
from outbox.dispatch.dispatcher import handoff_deliver, sweep
from outbox.failures import DeliveryResult
from outbox.models import Attempt, FailureClass, Handoff, HandoffState
from tests.outbox.scripted_destination import ScriptedDestination

pytestmark = pytest.mark.django_db(databases=["default", "delivery"])
S = HandoffState


def _lease_runs_out(handoff) -> None:
    Handoff.objects.filter(pk=handoff.pk).update(
        lease_expires_at=timezone.now() - timedelta(seconds=5)
    )


def test_a_claim_at_a_destination_without_idempotency_opens_its_attempts_not_called(
    make_handoff,
):
    """Fails on the old code (no such claim: the mark came in a statement after it, which a dispatcher
    stopped right after its claim never ran; the e-mail went to a person)."""
    handoff = make_handoff()
    destination = ScriptedDestination(supports_idempotency=False, supports_lookup=False)
    [claim] = handoff_claim_due(worker="stopped-after-its-claim", mark_not_called=True)
    assert Attempt.objects.get(pk=claim.attempt_id).call_started is False
    _lease_runs_out(handoff)
    sweep(destination=destination)
    handoff.refresh_from_db()
    assert handoff.state == S.DELIVERED, handoff.last_error
    assert destination.calls == 1
    assert ReceiverTask.objects.filter(action_key=handoff.action_key).count() == 1


def test_an_attempt_never_sent_does_not_block_the_next_send(make_handoff):
    """Fails on the old code: the skipped attempt blocked the send (`not_idempotent_resend_blocked`) and the
    e-mail went to a person."""
    handoff = make_handoff()
    failed_before_data = DeliveryResult.failed(
        FailureClass.TRANSIENT, "connection_lost_before_data", "closed before DATA"
    )
    destination = ScriptedDestination(
        failed_before_data, supports_idempotency=False, supports_lookup=False
    )
    assert handoff_deliver(handoff_id=handoff.pk, destination=destination) == S.PENDING  # attempt 1
    Handoff.objects.filter(pk=handoff.pk).update(next_attempt_at=timezone.now())
    handoff_claim_due(worker="stopped-before-its-call", mark_not_called=True)  # attempt 2
    _lease_runs_out(handoff)
    sweep(destination=destination)  # attempt 2 skipped (never sent), attempt 3 sent
    handoff.refresh_from_db()
    outcomes = list(handoff.attempt_set.order_by("number").values_list("outcome", flat=True))
    assert outcomes == ["failed", "skipped", "created"]
    assert handoff.state == S.DELIVERED, handoff.last_error
    assert destination.calls == 2
    assert ReceiverTask.objects.filter(action_key=handoff.action_key).count() == 1
