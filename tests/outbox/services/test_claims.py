"""The claim (`outbox/dispatch/claims.py`): due rows leased to one worker, an attempt and the claim event
written with each, on both backends."""

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from outbox.dispatch.claims import handoff_claim_due
from outbox.models import (
    Attempt,
    AttemptOutcome,
    Handoff,
    HandoffState,
)

pytestmark = pytest.mark.django_db(databases=["default", "delivery"])
S = HandoffState


def test_a_claim_leases_opens_the_attempt_and_writes_the_event_together(make_handoff):
    first, second = make_handoff(1), make_handoff(2)
    with CaptureQueriesContext(connection) as statements:
        claims = handoff_claim_due(worker="w1", limit=5)
    if connection.vendor == "postgresql":
        # One statement: one round trip on the dispatcher's critical path, all of it or none of it.
        assert len(statements) == 1, [q["sql"][:80] for q in statements]
    assert sorted(claim.handoff_id for claim in claims) == [first.pk, second.pk]
    for claim in claims:
        handoff = Handoff.objects.get(pk=claim.handoff_id)
        assert (handoff.state, handoff.lease_owner, handoff.attempts) == (S.IN_FLIGHT, "w1", 1)
        assert (claim.epoch, claim.attempt_number, claim.payload) == (
            handoff.fencing_epoch,
            1,
            handoff.payload,
        )
        attempt = Attempt.objects.get(pk=claim.attempt_id)
        assert (attempt.handoff_id, attempt.number, attempt.worker, attempt.outcome) == (
            handoff.pk,
            1,
            "w1",
            AttemptOutcome.IN_PROGRESS,
        )
        assert attempt.fencing_epoch == handoff.fencing_epoch and attempt.started_at is not None
        assert list(
            handoff.events.values_list("from_state", "to_state", "actor_label", "reason")
        ) == [("pending", "in_flight", "w1", "claimed for attempt 1 at receiver")]


def test_claim_gives_each_row_to_one_worker(make_handoff):
    for n in range(1, 6):
        make_handoff(n)
    first = handoff_claim_due(worker="w1", limit=3)
    second = handoff_claim_due(worker="w2", limit=10)
    third = handoff_claim_due(worker="w3", limit=10)
    assert len(first) == 3 and len(second) == 2 and third == []
    assert not {c.handoff_id for c in first} & {c.handoff_id for c in second}
    assert all(c.epoch == 1 and c.attempt_number == 1 for c in first + second)
    assert Attempt.objects.filter(outcome=AttemptOutcome.IN_PROGRESS).count() == 5


def test_claim_uses_skip_locked_on_postgresql_and_row_count_on_sqlite(make_handoff):
    make_handoff()

    with CaptureQueriesContext(connection) as queries:
        handoff_claim_due(worker="w1")
    sql = " ".join(q["sql"] for q in queries.captured_queries).upper()
    if connection.vendor == "postgresql":
        assert "FOR NO KEY UPDATE SKIP LOCKED" in sql
    else:
        assert "FOR UPDATE" not in sql
        assert 'WHERE ("OUTBOX_HANDOFF"."STATE" = \'PENDING\' AND "OUTBOX_HANDOFF"."ID" = ' in sql
