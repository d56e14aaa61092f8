"""Status events from the receiver, over the source's signed endpoint: a deleted task is a finding the
moment the event arrives and the handoff page stops saying the task exists; failed work likewise; a
"Reconcile now" that finds no task says so at once, repaired or not; and a receiver that sends no event is
caught by the scheduled reconciliation at its configured cadence. Runs on SQLite and on PostgreSQL."""

import json

import pytest
from django.conf import settings
from django.core.management import call_command
from django.test import override_settings
from django.utils import timezone
from django_q.models import Schedule
from standardwebhooks.webhooks import Webhook

from delivery.models import ReceiverTask, TaskEvent
from delivery.services import task_delete, task_status_set
from delivery.status_events import event_document
from outbox.models import Handoff
from reconciliation import tasks
from reconciliation.models import Finding, FindingKind
from reconciliation.services import handoff_reconcile_now, manual_repair_record
from tests.builders import deliver, record
from tests.console.clients import client_for

pytestmark = pytest.mark.django_db(databases=["default", "delivery"])
K = FindingKind
URL = "/reconciliation/api/destinations/receiver/status-events"


def post_event(client, document: dict, *, webhook_id: str = "evt_1", secret: str | None = None):
    body = json.dumps(document)
    now = timezone.now()
    signer = Webhook(secret or settings.RECEIVER_EVENTS_SIGNING_SECRET)
    return client.post(
        URL,
        body,
        content_type="application/json",
        headers={
            "webhook-id": webhook_id,
            "webhook-timestamp": str(int(now.timestamp())),
            "webhook-signature": signer.sign(webhook_id, now, body),
        },
    )


def send_last_event(client):
    """What the receiver's sender posts for its newest event (its webhook-id is the event's own)."""
    event = TaskEvent.objects.using("delivery").latest("id")
    return post_event(client, event_document(event), webhook_id=f"evt_{event.event_id.hex}")


@pytest.fixture
def delivered(world) -> Handoff:
    return deliver(record(42))


def handoff_page(world, handoff: Handoff) -> str:
    page = client_for(world["olga"]).get(f"/handoffs/{handoff.pk}/")
    assert page.status_code == 200
    return page.content.decode()


def test_a_deleted_task_is_a_finding_as_the_event_arrives_and_the_page_stops_saying_it_exists(
    world, delivered, client
):
    assert "Delivered. Nothing to do here." in handoff_page(world, delivered)
    task_delete(action_key=delivered.action_key)
    answer = send_last_event(client)
    assert answer.status_code == 200, answer.content
    assert answer.json() == {
        "result": "applied",
        "repeated": False,
        "findings": ["missing at the receiver"],
    }
    finding = Finding.objects.live().get(action_key=delivered.action_key)
    assert finding.kind == K.MISSING_AT_RECEIVER
    page = handoff_page(world, delivered)
    assert "Delivered. Nothing to do here." not in page and "proves the task exists" not in page
    assert 'data-answer="no"' in page and "status event from receiver" in page
    # The same event again (a resend) is answered as a repeat and opens nothing more.
    assert send_last_event(client).json()["repeated"] is True
    assert Finding.objects.filter(action_key=delivered.action_key).count() == 1


def test_failed_work_is_a_finding_as_the_event_arrives(world, delivered, client):
    task_status_set(action_key=delivered.action_key, status="failed")
    assert send_last_event(client).json()["findings"] == ["work failed at the receiver"]
    assert Handoff.objects.get(pk=delivered.pk).work_status == "failed"


def test_work_done_is_recorded_with_the_receivers_time(world, delivered, client):
    task_status_set(action_key=delivered.action_key, status="done")
    answer = send_last_event(client).json()
    assert answer == {"result": "applied", "repeated": False, "findings": []}
    handoff = Handoff.objects.get(pk=delivered.pk)
    task = ReceiverTask.objects.using("delivery").get(action_key=delivered.action_key)
    assert handoff.work_status == "done"
    assert handoff.work_reported_at == TaskEvent.objects.using("delivery").latest("id").occurred_at
    assert task.status_changed_at is not None
    page = handoff_page(world, delivered)
    assert 'data-answer="yes"' in page and "by the receiver's clock" in page


def test_reconcile_now_finding_no_task_opens_the_finding_and_says_so_after_a_repair(
    world, delivered
):
    ReceiverTask.objects.using("delivery").filter(action_key=delivered.action_key).delete()
    check = handoff_reconcile_now(handoff_id=delivered.pk, actor=world["olga"])
    assert check.problems == ("missing at the receiver",)
    assert Finding.objects.live().filter(action_key=delivered.action_key).exists()
    page = handoff_page(world, delivered)
    assert 'data-answer="no"' in page and "reconcile now by olga" in page
    finding = Finding.objects.live().get(action_key=delivered.action_key)
    manual_repair_record(
        finding_id=finding.pk, actor=world["olga"], what_was_done="the client withdrew; told sales"
    )
    again = handoff_reconcile_now(handoff_id=delivered.pk, actor=world["olga"])
    assert "agree" not in again.summary() and "a manual repair accounts for that" in again.summary()
    page = handoff_page(world, delivered)
    assert "Delivered, but the receiver has no task for this key now." in page
    assert "Delivered. Nothing to do here." not in page and 'data-answer="no"' in page


@override_settings(RECONCILIATION_EVERY_MINUTES=3)
def test_a_receiver_that_sends_no_event_is_caught_by_the_scheduled_run_at_its_cadence(
    world, delivered
):
    call_command("schedule_reconciliation")
    schedule = Schedule.objects.get(name="reconciliation")
    assert (schedule.func, schedule.minutes) == ("reconciliation.tasks.reconcile", 3)
    # Deleted behind the receiver's API: no event is written, nothing is told.
    ReceiverTask.objects.using("delivery").filter(action_key=delivered.action_key).delete()
    assert "Delivered. Nothing to do here." in handoff_page(world, delivered)
    tasks.reconcile()  # what the django-q2 cluster runs on that schedule
    assert Finding.objects.live().get(action_key=delivered.action_key).kind == K.MISSING_AT_RECEIVER
    assert Handoff.objects.get(pk=delivered.pk).task_seen is False
    page = handoff_page(world, delivered)
    assert "Delivered. Nothing to do here." not in page and 'data-answer="no"' in page
    assert "every 3 min" in page
