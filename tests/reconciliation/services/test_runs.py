"""Each finding kind, produced by a real inconsistency between the two databases."""

import uuid
from datetime import timedelta

import pytest
from django.core.management import call_command
from django.utils import timezone

from approvals.models import RequestState
from approvals.services import request_approve
from delivery.models import ReceiverTask
from delivery.services import payload_hash as receiver_hash
from delivery.services import task_create_idempotent
from outbox.destinations import InProcessDestination
from outbox.dispatch.dispatcher import handoff_deliver
from outbox.models import Handoff, HandoffState
from outbox.services import handoff_cancel
from reconciliation.models import Finding, FindingEvent, FindingKind, RunStatus
from reconciliation.services.runs import reconciliation_run
from tests.builders import deliver, record
from tests.factories import ONBOARDING_PAYLOAD, make_request

pytestmark = pytest.mark.django_db(databases=["default", "delivery"])
K = FindingKind


def only_finding(run, kind):
    assert run.status == RunStatus.COMPLETED, run.error
    assert run.findings_by_kind == {kind: 1}
    return Finding.objects.get(kind=kind)


def test_clean_state_gives_no_findings(world):
    handoff = request_approve(
        workspace_id=7,
        number=42,
        revision=1,
        actor=world["alice"],
        payload_hash=world["request"].payload_hash,
    )
    deliver(handoff)
    deliver(record(43))
    record(44)  # pending, just recorded: not stuck, not at the receiver yet
    run = reconciliation_run(batch_size=2)
    assert run.status == RunStatus.COMPLETED
    assert run.findings_by_kind == {}
    assert Finding.objects.count() == 0
    assert (run.source_keys, run.receiver_keys, run.keys_compared) == (3, 2, 3)
    assert run.approved_requests_checked == 1


def test_receiver_task_deleted_by_hand_is_missing_at_receiver(world):
    handoff = deliver(record(42))
    ReceiverTask.objects.using("delivery").filter(action_key=handoff.action_key).delete()
    finding = only_finding(reconciliation_run(), K.MISSING_AT_RECEIVER)
    assert finding.action_key == "onboarding:7:42:1"
    assert finding.handoff_id == handoff.pk and finding.workspace_id == 7
    assert finding.outcome_validation is True
    assert finding.source_evidence["state"] == "delivered"
    assert finding.source_evidence["destination_id"] == handoff.destination_id
    assert finding.receiver_evidence == {"found": False}
    assert "Do not resend" in finding.next_action
    assert FindingEvent.objects.get(finding=finding).action == "opened"


def test_receiver_task_with_no_source_handoff_is_orphan(world):
    task_create_idempotent(action_key="onboarding:7:99:1", payload=dict(ONBOARDING_PAYLOAD))
    finding = only_finding(reconciliation_run(), K.ORPHAN_AT_RECEIVER)
    assert finding.action_key == "onboarding:7:99:1"
    assert finding.handoff_id is None and finding.workspace_id == 7
    assert finding.receiver_evidence["found"] is True
    assert finding.source_evidence == {"found": False}


def test_receiver_task_of_a_cancelled_handoff_is_orphan(world):
    handoff = record(42)
    handoff_cancel(handoff_id=handoff.pk, actor=world["olga"], reason="client withdrew")
    task_create_idempotent(action_key=handoff.action_key, payload=dict(ONBOARDING_PAYLOAD))
    finding = only_finding(reconciliation_run(), K.ORPHAN_AT_RECEIVER)
    assert finding.source_evidence["state"] == "cancelled"
    assert "cancelled" in finding.next_action


def test_receiver_payload_altered_is_payload_mismatch(world):
    handoff = deliver(record(42))
    other = {**ONBOARDING_PAYLOAD, "plan": "enterprise"}
    ReceiverTask.objects.using("delivery").filter(action_key=handoff.action_key).update(
        payload=other, payload_hash=receiver_hash(other)
    )
    finding = only_finding(reconciliation_run(), K.PAYLOAD_MISMATCH)
    assert finding.source_evidence["payload_hash"] == handoff.payload_hash
    assert finding.receiver_evidence["payload_hash"] == receiver_hash(other)
    assert finding.outcome_validation is True
    assert "Never overwrite" in finding.next_action


def test_receiver_task_id_differs_from_stored_destination_id(world):
    handoff = deliver(record(42))
    new_id = uuid.uuid4()
    ReceiverTask.objects.using("delivery").filter(action_key=handoff.action_key).update(
        task_id=new_id
    )
    finding = only_finding(reconciliation_run(), K.DESTINATION_MISMATCH)
    assert finding.source_evidence["destination_id"] == handoff.destination_id
    assert finding.receiver_evidence["task_id"] == str(new_id)
    assert finding.outcome_validation is True


def test_pending_handoff_due_long_ago_is_stuck(world, settings):
    settings.HANDOFF_STUCK_MINUTES = 15
    stuck, fresh = record(42), record(43)
    Handoff.objects.filter(pk=stuck.pk).update(
        next_attempt_at=timezone.now() - timedelta(minutes=16)
    )
    Handoff.objects.filter(pk=fresh.pk).update(
        next_attempt_at=timezone.now() - timedelta(minutes=14)
    )
    finding = only_finding(reconciliation_run(), K.STUCK)
    assert finding.action_key == stuck.action_key
    assert "without being claimed" in finding.source_evidence["why"]
    assert "django-q2" in finding.next_action


def test_uncertain_handoff_left_unsettled_is_stuck(world):
    handoff = record(42)
    handoff_state = Handoff.objects.filter(pk=handoff.pk)
    # A lost acknowledgement, never settled: the receiver has the task, the source does not know.
    handoff_deliver(
        handoff_id=handoff.pk, destination=InProcessDestination(lose_ack_for={handoff.action_key})
    )
    assert handoff_state.get().state == HandoffState.UNCERTAIN
    handoff_state.update(updated_at=timezone.now() - timedelta(hours=1))
    finding = only_finding(reconciliation_run(), K.STUCK)
    assert finding.source_evidence["state"] == "uncertain"
    assert finding.receiver_evidence["found"] is True  # the evidence a person needs to settle it
    assert "reconcile it" in finding.next_action


def test_needs_attention_past_its_sla_is_stuck(world):
    handoff = record(42, payload={"client_name": " "})  # the receiver rejects it: permanent failure
    assert (
        handoff_deliver(handoff_id=handoff.pk, destination=InProcessDestination())
        == "needs_attention"
    )
    Handoff.objects.filter(pk=handoff.pk).update(sla_due_at=timezone.now() - timedelta(minutes=1))
    finding = only_finding(reconciliation_run(), K.STUCK)
    assert "past its SLA" in finding.source_evidence["why"]
    assert "The receiver rejected the content: correct it." in finding.next_action


def test_approved_request_without_outbox_row_is_not_handed_off(world):
    approved = make_request(world["w7"], 50, world["bob"], state=RequestState.APPROVED)
    finding = only_finding(reconciliation_run(), K.NOT_HANDED_OFF)
    assert finding.action_key == "onboarding:7:50:1"
    assert finding.source_evidence["request_id"] == approved.pk
    assert finding.source_evidence["outbox_row"] is None


def test_listing_read_before_a_delivery_does_not_report_a_false_missing(world):
    """The receiver listing is read at another moment than the source: findings are confirmed by lookup."""
    handoff = deliver(record(42))

    class StaleListing(InProcessDestination):
        def list_keys(self, *, after="", limit=500):
            return [
                t
                for t in super().list_keys(after=after, limit=limit)
                if t.action_key != handoff.action_key
            ]

    run = reconciliation_run(destination=StaleListing())
    assert run.findings_by_kind == {}
    assert Finding.objects.count() == 0


def test_receiver_listing_out_of_key_order_fails_the_run(world):
    deliver(record(42))
    deliver(record(43))

    class Unordered(InProcessDestination):
        def list_keys(self, *, after="", limit=500):
            return list(reversed(super().list_keys(after=after, limit=limit)))

    run = reconciliation_run(destination=Unordered())
    assert run.status == RunStatus.FAILED
    assert "code-point order" in run.error
    assert Finding.objects.count() == 0


def test_reconcile_command_prints_a_clean_summary_then_reports_the_deleted_task(world, capsys):
    handoff = deliver(record(42))
    call_command("reconcile", "--batch-size", "10")
    out = capsys.readouterr().out
    assert "clean: source and receiver agree" in out
    assert "keys compared 1" in out
    ReceiverTask.objects.using("delivery").filter(action_key=handoff.action_key).delete()
    call_command("reconcile")
    out = capsys.readouterr().out
    assert "missing_at_receiver: 1" in out
    assert "missing_at_receiver onboarding:7:42:1" in out
