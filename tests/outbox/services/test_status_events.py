"""A destination's status event recorded on its handoff: deduplicated by webhook-id, the newest kept by the
receiver's sequence whatever order events arrive in, and never overwritten by an older read of a run."""

from datetime import UTC, datetime

import pytest

from outbox.models import Handoff, HandoffEvent, StatusEvent, StatusEventResult
from outbox.services.status_events import (
    STATUS_CHANGED,
    TASK_DELETED,
    ReceiverStatement,
    handoff_record_status_event,
)
from outbox.services.work_status import handoffs_record_work_status
from tests.builders import deliver, record

pytestmark = pytest.mark.django_db(databases=["default", "delivery"])
R = StatusEventResult


def said(handoff: Handoff, sequence: int, status: str = "done", kind: str = STATUS_CHANGED):
    return ReceiverStatement(
        kind=kind,
        action_key=handoff.action_key,
        task_id=handoff.destination_id,
        status=status if kind == STATUS_CHANGED else "",
        sequence=sequence,
        occurred_at=datetime(2026, 12, 1, 16, 25, sequence, tzinfo=UTC),
    )


def tell(handoff: Handoff, statement: ReceiverStatement, webhook_id: str = ""):
    return handoff_record_status_event(
        destination="receiver",
        webhook_id=webhook_id or f"evt_{statement.sequence}",
        statement=statement,
    )


@pytest.fixture
def delivered(db) -> Handoff:
    return deliver(record(42))


def test_a_status_event_records_what_the_receiver_said_when_and_through_what(delivered):
    outcome = tell(delivered, said(delivered, 3, "done"))
    handoff = Handoff.objects.get(pk=delivered.pk)
    assert outcome.event.result == R.APPLIED and not outcome.repeated
    assert handoff.work_status == "done" and handoff.state == "delivered"
    assert handoff.work_reported_at == datetime(2026, 12, 1, 16, 25, 3, tzinfo=UTC)
    assert handoff.task_seen is True and handoff.task_checked_at is not None
    assert handoff.task_checked_by == "status event from receiver"
    history = HandoffEvent.objects.filter(handoff=delivered, action="receiver_event").get()
    assert history.actor_label == "receiver receiver"
    assert "reports the work done" in history.reason and "16:25:03" in history.reason


def test_the_same_webhook_id_again_changes_nothing(delivered):
    tell(delivered, said(delivered, 3, "in_progress"), webhook_id="evt_a")
    again = tell(delivered, said(delivered, 4, "done"), webhook_id="evt_a")
    assert again.repeated and again.event.status == "in_progress"
    assert StatusEvent.objects.count() == 1
    assert Handoff.objects.get(pk=delivered.pk).work_status == "in_progress"
    assert HandoffEvent.objects.filter(handoff=delivered, action="receiver_event").count() == 1


def test_an_older_event_arriving_late_never_overwrites_a_newer_one(delivered):
    tell(delivered, said(delivered, 5, "done"))
    late = tell(delivered, said(delivered, 4, "in_progress"))
    handoff = Handoff.objects.get(pk=delivered.pk)
    assert late.event.result == R.STALE and not late.repeated
    assert handoff.work_status == "done" and handoff.receiver_event_sequence == 5
    assert handoff.work_reported_at.second == 5


def test_a_deletion_says_the_receiver_has_no_task(delivered):
    tell(delivered, said(delivered, 2, "in_progress"))
    tell(delivered, said(delivered, 3, kind=TASK_DELETED))
    handoff = Handoff.objects.get(pk=delivered.pk)
    assert handoff.task_seen is False and handoff.work_status == "in_progress"


def test_an_event_of_a_key_no_handoff_has_is_kept_and_changes_nothing(db):
    handoff = Handoff(action_key="onboarding:7:999:1", destination_id="t-1")
    outcome = tell(handoff, said(handoff, 1))
    assert outcome.event.result == R.UNKNOWN_KEY and outcome.handoff_id is None


def test_a_run_that_read_an_earlier_status_never_overwrites_an_event(delivered):
    tell(delivered, said(delivered, 3, "done"))
    # The run read the task (in progress) before the event arrived and writes afterwards.
    assert handoffs_record_work_status(statuses={delivered.action_key: "in_progress"}) == 0
    assert Handoff.objects.get(pk=delivered.pk).work_status == "done"


def test_an_event_with_an_earlier_status_than_a_run_stored_keeps_the_later_one(delivered):
    assert handoffs_record_work_status(statuses={delivered.action_key: "done"}) == 1
    tell(delivered, said(delivered, 2, "in_progress"))
    handoff = Handoff.objects.get(pk=delivered.pk)
    assert handoff.work_status == "done" and handoff.work_reported_at is None
