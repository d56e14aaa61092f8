"""A compensation's claim reads the step it reverses (its key and receipt) in the claim's own statement: a
batch holding a follow-up (every step of a workflow but its last, every compensation) made a query of its own
after the claim, a round trip before the send that only compensations needed."""

import threading

import pytest
from django.conf import settings
from django.db import connection
from django.test.utils import CaptureQueriesContext

from outbox.dispatch import runner
from outbox.dispatch.claims import handoff_claim_due, handoff_claim_turn
from outbox.dispatch.runner import _serve_turn
from outbox.dispatch.serving import Turn
from outbox.failures import UndoTarget
from outbox.models import DestinationConfig, DestinationHealth, HandoffKind, HandoffState

pytestmark = pytest.mark.django_db(databases=["default", "delivery"])
S = HandoffState


def _step_and_compensation(make_handoff, destination: str = "receiver"):
    """A delivered step (its receipt `task-9`), its pending compensation, and a pending workflow step with
    more steps planned after it: two follow-ups, one of them a compensation."""
    step = make_handoff(1, state=S.DELIVERED, destination=destination, destination_id="task-9")
    compensation = make_handoff(
        2,
        destination=destination,
        kind=HandoffKind.COMPENSATION,
        compensates=step,
        action_key=f"{step.action_key}:undo",
    )
    planned = make_handoff(
        3,
        destination=destination,
        plan=[{"step": "welcome", "operation": "create", "compensation": ""}],
    )
    return step, compensation, planned


def test_a_claims_compensation_carries_its_step_with_no_query_of_its_own(make_handoff):
    step, compensation, planned = _step_and_compensation(make_handoff)
    with CaptureQueriesContext(connection) as statements:
        claims = {c.handoff_id: c for c in handoff_claim_due(worker="w1", limit=5)}
    assert claims[compensation.pk].undo == UndoTarget(
        action_key=step.action_key, receipt_id="task-9"
    )
    assert claims[compensation.pk].outgoing.undo == claims[compensation.pk].undo
    assert claims[planned.pk].undo is None
    assert claims[planned.pk].follow_up and claims[compensation.pk].follow_up
    if connection.vendor == "postgresql":
        assert len(statements) == 1, [q["sql"][:80] for q in statements]


def test_a_step_without_a_receipt_is_reversed_by_its_key_alone(make_handoff):
    step = make_handoff(1, state=S.DELIVERED, destination_id="")
    compensation = make_handoff(
        2, kind=HandoffKind.COMPENSATION, compensates=step, action_key=f"{step.action_key}:undo"
    )
    [claim] = handoff_claim_due(worker="w1", limit=5)
    assert (claim.handoff_id, claim.undo) == (
        compensation.pk,
        UndoTarget(action_key=step.action_key, receipt_id=""),
    )


@pytest.mark.postgres  # the turn's claim is PostgreSQL's
def test_a_turns_claim_of_follow_ups_is_one_statement_with_the_compensations_step(make_handoff):
    runner._built_from.clear()
    DestinationConfig.objects.create(name="system", kind="in_process", config={})
    DestinationHealth.objects.create(name="system")
    make_handoff(9, destination="system")
    # The destination's first turn builds it from its row; the next turn's statement claims on that row.
    assert _serve_turn("system", Turn.DELIVER, "w1", threading.Event()).delivered == 1
    step, compensation, planned = _step_and_compensation(make_handoff, destination="system")
    fingerprint, call_started = runner._built_from["system"]
    with CaptureQueriesContext(connection) as statements:
        turn = handoff_claim_turn(
            name="system",
            worker="w1",
            limit=settings.HANDOFF_CLAIM_BATCH,
            lease_seconds=settings.HANDOFF_LEASE_SECONDS,
            fingerprint=fingerprint,
            call_started=call_started,
        )
    assert turn.went
    claims = {c.handoff_id: c for c in turn.claims}
    assert set(claims) == {compensation.pk, planned.pk}
    assert claims[compensation.pk].undo == UndoTarget(
        action_key=step.action_key, receipt_id="task-9"
    )
    assert claims[planned.pk].undo is None
    assert claims[planned.pk].follow_up and claims[compensation.pk].follow_up
    assert all(c.attempt_id is not None and c.epoch == 1 for c in turn.claims)
    assert len(statements) == 1, [q["sql"][:80] for q in statements]
