"""The one-statement record of deliveries (`outbox/delivered.py`) against a lease taken over while it waits.

Another session takes the handoff over (new owner, next fencing epoch) and holds its row lock; the record
of the old claim's delivery waits for that lock. Once the other session commits, PostgreSQL re-reads the row
under READ COMMITTED, and the record must see the new token and write nothing: no delivered state, no task
id, no event, the attempt left as it was."""

import threading

import pytest
from django.db import connections
from django.db.models import F

from outbox.destinations import InProcessDestination
from outbox.failures import DeliveryResult
from outbox.models import Attempt, AttemptOutcome, Handoff, HandoffState
from outbox.services import handoff_claim_due, handoff_record_outcomes
from tests.factories import HandoffFactory
from tests.locks import release_once_another_waits, write_and_hold

S = HandoffState


@pytest.mark.postgres
@pytest.mark.django_db(databases=["default", "delivery"], transaction=True)
def test_a_lease_taken_over_while_the_record_waits_for_the_row_is_refused():
    if connections["default"].vendor != "postgresql":
        pytest.fail("needs PostgreSQL (row locks re-checked under READ COMMITTED); `make test` runs it there")
    handoff = HandoffFactory(number=1, workspace_id=7)
    [claim] = handoff_claim_due(worker="w1")
    held, release, seen = threading.Event(), threading.Event(), {}
    def take_over():
        Handoff.objects.filter(pk=handoff.pk).update(lease_owner="w2", fencing_epoch=F("fencing_epoch") + 1)

    holder = threading.Thread(target=write_and_hold, args=("default", take_over, held, release))
    holder.start()
    assert held.wait(30)
    releaser = threading.Thread(target=release_once_another_waits, args=("default", release, seen))
    releaser.start()
    try:
        recorded = handoff_record_outcomes(outcomes=[(claim, DeliveryResult.ok(task_id="late", created=True))],
                                           destination=InProcessDestination())
    finally:
        release.set()
        holder.join(30)
        releaser.join(30)
    assert seen.get("waiting"), "the record did not wait for the row: the race was not run"
    assert recorded.states == [None]
    handoff.refresh_from_db()
    assert (handoff.state, handoff.lease_owner, handoff.fencing_epoch, handoff.destination_id) == (
        S.IN_FLIGHT, "w2", claim.epoch + 1, "")
    assert not handoff.events.filter(to_state=S.DELIVERED).exists()
    assert Attempt.objects.get(pk=claim.attempt_id).outcome == AttemptOutcome.IN_PROGRESS
