"""reconciliation/services/findings.py: a finding acknowledged or resolved by a person, across runs."""

import pytest

from delivery.models import ReceiverTask
from delivery.services import task_create_idempotent
from reconciliation.errors import InvalidFindingTransition, NoteRequired
from reconciliation.models import Finding, FindingKind, FindingStatus
from reconciliation.services.findings import finding_acknowledge, finding_resolve
from reconciliation.services.runs import reconciliation_run
from tests.builders import deliver, record
from tests.factories import ONBOARDING_PAYLOAD

pytestmark = pytest.mark.django_db(databases=["default", "delivery"])
K = FindingKind


def test_finding_stays_acknowledged_across_runs_and_is_resolved_when_repaired(world):
    handoff = deliver(record(42))
    task = ReceiverTask.objects.using("delivery").get(action_key=handoff.action_key)
    task_values = {
        "task_id": task.task_id,
        "payload": task.payload,
        "payload_hash": task.payload_hash,
    }
    task.delete()
    first = reconciliation_run()
    finding = Finding.objects.get()
    finding_acknowledge(finding_id=finding.pk, actor=world["olga"], note="asked the receiving team")
    second = reconciliation_run()
    finding.refresh_from_db()
    assert (finding.status, finding.first_run_id, finding.last_run_id) == (
        "acknowledged",
        first.pk,
        second.pk,
    )
    assert second.new_findings == 0
    ReceiverTask.objects.using("delivery").create(action_key=handoff.action_key, **task_values)
    third = reconciliation_run()
    finding.refresh_from_db()
    assert finding.status == FindingStatus.RESOLVED and third.resolved_findings == 1
    event = finding.events.order_by("-at", "-id").first()
    assert (event.action, event.actor_label) == ("auto_resolved", f"reconciliation run {third.pk}")


def test_acknowledging_a_finding_writes_the_event(world):
    task_create_idempotent(action_key="onboarding:7:99:1", payload=dict(ONBOARDING_PAYLOAD))
    reconciliation_run()
    finding = Finding.objects.get()
    finding_acknowledge(
        finding_id=finding.pk, actor=world["olga"], note="checking with the receiver"
    )
    finding.refresh_from_db()
    assert finding.status == "acknowledged" and finding.acknowledged_by == world["olga"]
    event = finding.events.get(action="acknowledged")
    assert (event.actor, event.from_status, event.to_status, event.note) == (
        world["olga"],
        "open",
        "acknowledged",
        "checking with the receiver",
    )
    with pytest.raises(InvalidFindingTransition):
        finding_acknowledge(finding_id=finding.pk, actor=world["olga"])


def test_resolving_a_finding_needs_a_note_and_records_who(world):
    task_create_idempotent(action_key="onboarding:7:99:1", payload=dict(ONBOARDING_PAYLOAD))
    reconciliation_run()
    finding = Finding.objects.get()
    with pytest.raises(NoteRequired):
        finding_resolve(finding_id=finding.pk, actor=world["olga"], note=" ")
    finding_resolve(
        finding_id=finding.pk, actor=world["olga"], note="receiver closed the test task"
    )
    finding.refresh_from_db()
    assert (finding.status, finding.resolved_by, finding.note) == (
        "resolved",
        world["olga"],
        "receiver closed the test task",
    )
    assert finding.events.filter(action="resolved", actor=world["olga"]).count() == 1
    # Still there at the next run: a new finding, not the resolved one reopened.
    reconciliation_run()
    assert Finding.objects.filter(kind=K.ORPHAN_AT_RECEIVER).count() == 2
