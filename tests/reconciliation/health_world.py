"""Handoffs in every state, with known times, and the health figures of workspace 7 worked out by hand."""

from datetime import timedelta

from django.utils import timezone

from delivery.models import ReceiverTask
from delivery.services import task_create_idempotent
from outbox.clock import db_now_plus, db_time
from outbox.destinations import InProcessDestination
from outbox.dispatch.dispatcher import handoff_deliver
from outbox.models import CaseHold, Handoff
from outbox.services import handoff_acknowledge, handoff_assign
from outbox.services.case_holds import case_hold, case_holds_expire
from outbox.services.status_events import (
    STATUS_CHANGED,
    ReceiverStatement,
    handoff_record_status_event,
)
from reconciliation.services.runs import reconciliation_run
from tests.builders import deliver, record
from tests.factories import ONBOARDING_PAYLOAD


def build_health_world(world) -> dict:
    """Handoffs in every state in workspace 7 (olga operates it) and a few in workspace 8, with known times.

    Hand-computed figures for workspace 7 are in HEALTH_7 below.
    """
    now = timezone.now()
    h = {}
    h["delivered"] = deliver(record(1))
    # The receiver already has the task (a lost acknowledgement earlier): the attempt returns it.
    task_create_idempotent(action_key="onboarding:7:2:1", payload=dict(ONBOARDING_PAYLOAD))
    h["duplicate"] = deliver(record(2))
    h["pending_old"], h["pending_new"] = record(3), record(4)
    Handoff.objects.filter(pk=h["pending_old"].pk).update(created_at=now - timedelta(minutes=30))
    Handoff.objects.filter(pk=h["pending_new"].pk).update(created_at=now - timedelta(minutes=10))
    h["in_flight"], h["uncertain"] = record(5), record(6)
    Handoff.objects.filter(pk=h["in_flight"].pk).update(
        state="in_flight", updated_at=now - timedelta(minutes=5)
    )
    Handoff.objects.filter(pk=h["uncertain"].pk).update(
        state="uncertain", failure_class="uncertain", reason_code="read_timeout"
    )
    h["rejected"] = record(7, payload={"client_name": " "})

    assert (
        handoff_deliver(handoff_id=h["rejected"].pk, destination=InProcessDestination())
        == "needs_attention"
    )
    handoff_acknowledge(handoff_id=h["rejected"].pk, actor=world["olga"])
    handoff_assign(handoff_id=h["rejected"].pk, actor=world["olga"], owner=world["olga"])
    # Failure -> acknowledgement: 60 s, 300 s, 180 s; one not acknowledged.
    for name, number, minutes_ago, ack_after, failure, reason in (
        ("rejected", None, 60, 60, None, None),
        ("exhausted", 8, 120, 300, "transient", "retries_exhausted"),
        ("credential", 9, 180, 180, "credential", "credential_rejected"),
        ("unacknowledged", 10, 30, None, "conflict", "key_conflict"),
    ):
        if number is not None:
            h[name] = record(number)
        since = now - timedelta(minutes=minutes_ago)
        changes = {
            "state": "needs_attention",
            "attention_since": since,
            "sla_due_at": now + timedelta(hours=1),
            "acknowledged_at": since + timedelta(seconds=ack_after) if ack_after else None,
        }
        if failure:
            changes.update(failure_class=failure, reason_code=reason)
        Handoff.objects.filter(pk=h[name].pk).update(**changes)
    # Workspace 8: must never show in workspace 7's figures.
    deliver(record(1, workspace_id=8))
    other = record(2, workspace_id=8)
    Handoff.objects.filter(pk=other.pk).update(
        state="needs_attention",
        failure_class="permanent",
        reason_code="retries_exhausted",
        attention_since=now,
    )
    # An outcome validation failure: a delivered handoff's task deleted at the receiver.
    ReceiverTask.objects.using("delivery").filter(action_key=h["delivered"].action_key).delete()
    run = reconciliation_run()
    return {"now": now, "handoffs": h, "run": run, **world}


HEALTH_7 = {
    "completed": 2,
    "pending": 2,
    "in_flight": 1,
    "uncertain": 1,
    "needs_attention": 4,
    "retry_exhausted": 1,
    "duplicate_preventions": 1,
    "outcome_validation_failures": 1,
    # handoff_acknowledge (action "acknowledge") and handoff_assign (action "assign") on the rejected one.
    "manual_interventions": 2,
    "ack_median_seconds": 180.0,
    "ack_worst_seconds": 300.0,
    "unacknowledged": 1,
}


def events_of_no_person_and_of_one(world) -> Handoff:
    """A receiver's status event and a sweep's end of a hold (actions, no person), and olga's hold: the handoff
    she held."""
    delivered = deliver(record(42))
    handoff_record_status_event(
        destination="receiver",
        webhook_id="evt_1",
        statement=ReceiverStatement(
            kind=STATUS_CHANGED,
            action_key=delivered.action_key,
            task_id=delivered.destination_id,
            status="done",
            sequence=1,
            occurred_at=db_time(),
        ),
    )
    held = record(43)
    hold = case_hold(
        handoff_id=held.pk,
        actor=world["olga"],
        reason="calling ACME",
        until=db_time() + timedelta(hours=1),
        whole_case=False,
    )
    CaseHold.objects.filter(pk=hold.pk).update(ends_at=db_now_plus(-1))
    assert case_holds_expire() == 1
    return held
