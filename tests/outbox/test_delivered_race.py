"""The one-statement record of deliveries (`outbox/delivered.py`) against a lease taken over while it waits.

Another session takes the handoff over (new owner, next fencing epoch) and holds its row lock; the record
of the old claim's delivery waits for that lock. Once the other session commits, PostgreSQL re-reads the row
under READ COMMITTED, and the record must see the new token and write nothing: no delivered state, no task
id, no event, the attempt left as it was."""

import pytest
from django.db import connections
from django.db.models import F

from outbox.destinations import InProcessDestination
from outbox.failures import DeliveryResult
from outbox.models import Attempt, AttemptOutcome, Handoff, HandoffState
from outbox.services import handoff_claim_due, handoff_record_outcomes
from tests.factories import HandoffFactory
from tests.locks import held_by_another_session

S = HandoffState


@pytest.mark.postgres
@pytest.mark.django_db(databases=["default", "delivery"], transaction=True)
def test_a_lease_taken_over_while_the_record_waits_for_the_row_is_refused():
    if connections["default"].vendor != "postgresql":
        pytest.fail(
            "needs PostgreSQL (row locks re-checked under READ COMMITTED); `make test` runs it there"
        )
    handoff = HandoffFactory(number=1, workspace_id=7)
    [claim] = handoff_claim_due(worker="w1")

    def take_over():
        Handoff.objects.filter(pk=handoff.pk).update(
            lease_owner="w2", fencing_epoch=F("fencing_epoch") + 1
        )

    with held_by_another_session("default", take_over) as seen:
        recorded = handoff_record_outcomes(
            outcomes=[(claim, DeliveryResult.ok(task_id="late", created=True))],
            destination=InProcessDestination(),
        )
    assert seen.get("waiting"), "the record did not wait for the row: the race was not run"
    assert recorded.states == [None]
    handoff.refresh_from_db()
    assert (handoff.state, handoff.lease_owner, handoff.fencing_epoch, handoff.destination_id) == (
        S.IN_FLIGHT,
        "w2",
        claim.epoch + 1,
        "",
    )
    assert not handoff.events.filter(to_state=S.DELIVERED).exists()
    assert Attempt.objects.get(pk=claim.attempt_id).outcome == AttemptOutcome.IN_PROGRESS
