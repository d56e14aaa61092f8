"""After a restore from a backup (`outbox/services/restore.py`): every pending handoff is asked about at its
destination before any new attempt; after a failover (a new timeline) too. Against real processes and a real
pg_dump: tests/faults/test_restore.py; a real failover: tests/faults/test_failover.py."""

import pytest

from delivery.models import ReceiverTask
from delivery.services import task_create_idempotent
from outbox.destinations import InProcessDestination
from outbox.dispatch.dispatcher import settle_uncertain
from outbox.models import Attempt, HandoffEvent, HandoffState
from outbox.services.restore import (
    FAILOVER_EPOCH_GAP,
    handoffs_mark_after_failover,
    handoffs_mark_restored,
)
from tests.builders import deliver, record

pytestmark = pytest.mark.django_db(databases=["default", "delivery"])
S = HandoffState


def test_pending_rows_become_uncertain_with_the_reason_and_others_stay():
    forgotten, never_sent, done = record(1), record(2), deliver(record(3))
    assert handoffs_mark_restored(backup_taken_at="2026-12-01T03:00Z", batch_size=1) == 2
    for handoff in (forgotten, never_sent):
        handoff.refresh_from_db()
        assert (handoff.state, handoff.reason_code) == (S.UNCERTAIN, "restored_from_backup")
        event = HandoffEvent.objects.filter(handoff=handoff).latest("id")
        assert (event.from_state, event.to_state, event.actor_label) == (
            S.PENDING,
            S.UNCERTAIN,
            "restore from backup",
        )
        assert "backup taken at 2026-12-01T03:00Z" in event.reason
    done.refresh_from_db()
    assert done.state == S.DELIVERED
    assert handoffs_mark_restored(backup_taken_at="again") == 0


def test_settlement_learns_the_task_back_without_a_call_and_sends_what_is_not_there():
    forgotten, never_sent = record(1), record(2)
    # Delivered after the backup: the receiver holds it, the restored copy does not know.
    task = task_create_idempotent(action_key=forgotten.action_key, payload=forgotten.payload).task
    handoffs_mark_restored(backup_taken_at="last night")

    settle_uncertain(destination=InProcessDestination())

    forgotten.refresh_from_db()
    assert (forgotten.state, forgotten.destination_id) == (S.DELIVERED, str(task.task_id))
    assert forgotten.receipt["found_by"] == "lookup"
    assert not Attempt.objects.filter(handoff=forgotten).exists(), "learnt back, not sent again"
    never_sent.refresh_from_db()
    assert never_sent.state == S.PENDING, "not at the receiver: sent as usual"
    assert ReceiverTask.objects.count() == 1


@pytest.mark.postgres
def test_the_outbox_is_analyzed_after_the_marking_so_claims_know_the_backlog():
    """`pg_restore` brings no planner statistics back, and the marking turns the backlog uncertain at once: a
    table planned without statistics had each settlement claim read and sort the whole backlog. Only an ANALYZE
    in this (uncommitted) transaction can see its uncertain rows."""
    from django.db import connection

    for n in range(1, 6):
        record(n)
    handoffs_mark_restored(backup_taken_at="last night")
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT most_common_vals::text::text[] FROM pg_stats "
            "WHERE tablename = 'outbox_handoff' AND attname = 'state'"
        )
        [(values,)] = cursor.fetchall()
    assert S.UNCERTAIN in values


def test_a_new_timeline_marks_pending_rows_once_and_skips_their_fencing_epochs():
    forgotten, done = record(1), deliver(record(2))
    assert handoffs_mark_after_failover(timeline=1) == 0, "the first timeline seen marks nothing"
    assert handoffs_mark_after_failover(timeline=1) == 0

    assert handoffs_mark_after_failover(timeline=2) == 1
    forgotten.refresh_from_db()
    assert (forgotten.state, forgotten.reason_code) == (S.UNCERTAIN, "failed_over")
    assert forgotten.fencing_epoch == FAILOVER_EPOCH_GAP
    event = HandoffEvent.objects.filter(handoff=forgotten).latest("id")
    assert (event.from_state, event.to_state, event.actor_label) == (
        S.PENDING,
        S.UNCERTAIN,
        "database failover",
    )
    assert "timeline 1 to 2" in event.reason
    done.refresh_from_db()
    assert done.state == S.DELIVERED

    record(3)
    assert handoffs_mark_after_failover(timeline=2) == 0, "one marking per timeline"
