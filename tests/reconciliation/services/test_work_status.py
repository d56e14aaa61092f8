"""The business outcome read back by reconciliation: the receiver task's status recorded on the handoff,
work past its deadline and failed work as findings with an owner, closed when the work is done."""

from datetime import timedelta

import pytest
from django.db import connections
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from approvals.models import Role
from delivery.models import ReceiverTask
from delivery.services import task_create_idempotent, task_status_set
from outbox.destinations import HttpDestination
from outbox.models import Handoff, HandoffKind
from outbox.services import handoff_record
from reconciliation.models import Finding, FindingEvent, FindingKind, FindingStatus, RunStatus
from reconciliation.selectors.needing_person import needing_person
from reconciliation.selectors.work_outcome import work_outcome
from reconciliation.services.key_check import handoff_reconcile_now
from reconciliation.services.runs import reconciliation_run
from tests.builders import deliver, record
from tests.factories import ONBOARDING_PAYLOAD, make_user

pytestmark = pytest.mark.django_db(databases=["default", "delivery"])
K = FindingKind


def delivered(number: int, *, workspace_id: int = 7, hours_ago: float = 0, owner=None) -> Handoff:
    handoff = deliver(record(number, workspace_id=workspace_id, owner=owner))
    if hours_ago:
        Handoff.objects.filter(pk=handoff.pk).update(
            delivered_at=timezone.now() - timedelta(hours=hours_ago)
        )
    return Handoff.objects.get(pk=handoff.pk)


def report(handoff: Handoff, *statuses: str) -> None:
    for status in statuses:
        task_status_set(action_key=handoff.action_key, status=status)


def work_status(handoff: Handoff) -> str:
    return Handoff.objects.get(pk=handoff.pk).work_status


def completed(run):
    assert run.status == RunStatus.COMPLETED, run.error
    return run


def test_run_records_the_work_status_the_receiver_reports(world):
    started, done, failed, untouched = (delivered(n) for n in (42, 43, 44, 45))
    report(started, "in_progress")
    report(done, "in_progress", "done")
    report(failed, "failed")
    run = completed(reconciliation_run(batch_size=2))
    assert [work_status(h) for h in (started, done, failed, untouched)] == [
        "in_progress",
        "done",
        "failed",
        "open",
    ]
    assert run.work_statuses_recorded == 3
    assert Handoff.objects.get(pk=done.pk).work_checked_at is not None
    assert Handoff.objects.get(pk=done.pk).state == "delivered"


def test_work_statuses_are_written_one_page_at_a_time(world):
    handoffs = [delivered(n) for n in range(42, 47)]
    for handoff in handoffs:
        report(handoff, "done")
    with CaptureQueriesContext(connections["default"]) as queries:
        run = completed(reconciliation_run(batch_size=2))
    writes = [
        q["sql"]
        for q in queries.captured_queries
        if q["sql"].startswith('UPDATE "outbox_handoff"') and "work_status" in q["sql"]
    ]
    assert len(writes) == 3  # pages of 2, 2 and 1 changed statuses: never all of them at once
    assert run.work_statuses_recorded == 5
    assert {work_status(h) for h in handoffs} == {"done"}


def test_workspace_run_records_work_status_of_its_workspace_only(world):
    ours, theirs = delivered(42), delivered(50, workspace_id=8)
    report(ours, "done")
    report(theirs, "done")
    run = completed(reconciliation_run(workspace_id=7))
    assert (work_status(ours), work_status(theirs)) == ("done", "open")
    assert run.work_statuses_recorded == 1


def test_reconcile_now_records_the_work_status_of_its_handoff(world):
    handoff = delivered(42)
    report(handoff, "in_progress")
    check = handoff_reconcile_now(handoff_id=handoff.pk, actor=world["olga"])
    assert check.run.work_statuses_recorded == 1
    assert work_status(handoff) == "in_progress"


def test_work_open_past_the_deadline_is_a_work_not_done_finding_owned_by_on_call(world):
    handoff = delivered(42, hours_ago=73)
    completed(reconciliation_run())
    finding = Finding.objects.get(kind=K.WORK_NOT_DONE)
    assert (finding.action_key, finding.handoff_id, finding.workspace_id) == (
        handoff.action_key,
        handoff.pk,
        7,
    )
    assert finding.owner == world["olga"]  # no handoff owner: the workspace's on-call operator
    assert finding.receiver_evidence["status"] == "open"
    assert "73 h after delivery" in finding.source_evidence["why"]
    assert "Do not resend" in finding.next_action
    assert finding.outcome_validation is False
    assert list(needing_person(Handoff.objects.all())) == [Handoff.objects.get(pk=handoff.pk)]


def test_work_in_progress_within_the_deadline_is_not_a_finding(world):
    report(delivered(42, hours_ago=71), "in_progress")
    run = completed(reconciliation_run())
    assert run.findings_by_kind == {}
    assert not Finding.objects.exists()


def test_work_deadline_is_configurable(world, settings):
    settings.HANDOFF_WORK_DEADLINE_HOURS = 2
    report(delivered(42, hours_ago=3), "in_progress")
    run = completed(reconciliation_run())
    assert run.findings_by_kind == {K.WORK_NOT_DONE: 1}
    assert "deadline 2 h" in Finding.objects.get().source_evidence["why"]


def test_work_not_done_finding_closes_when_the_work_is_done(world):
    handoff = delivered(42, hours_ago=100)
    report(handoff, "in_progress")
    completed(reconciliation_run())
    finding = Finding.objects.get(kind=K.WORK_NOT_DONE)
    report(handoff, "done")
    run = completed(reconciliation_run())
    finding.refresh_from_db()
    assert finding.status == FindingStatus.RESOLVED
    assert run.resolved_findings == 1 and run.findings_by_kind == {}
    assert FindingEvent.objects.filter(finding=finding, action="auto_resolved").exists()
    assert work_status(handoff) == "done"
    assert work_outcome(Handoff.objects.get(pk=handoff.pk)).complete


def test_failed_work_is_a_work_failed_finding_before_any_deadline_owned_by_the_handoffs_owner(
    world,
):
    owner = make_user("oscar", workspace=world["w7"], roles=(Role.OPERATOR,))
    handoff = delivered(42, owner=owner)
    report(handoff, "failed")
    run = completed(reconciliation_run())
    assert run.findings_by_kind == {K.WORK_FAILED: 1}
    finding = Finding.objects.get()
    assert (finding.kind, finding.owner) == (K.WORK_FAILED, owner)
    assert finding.receiver_evidence["status"] == "failed"
    assert "failed" in finding.next_action
    assert work_status(handoff) == "failed"


def test_reconcile_now_opens_and_closes_the_work_finding_of_its_handoff(world):
    handoff = delivered(42, hours_ago=80)
    first = handoff_reconcile_now(handoff_id=handoff.pk, actor=world["olga"])
    assert first.problems == ("work not done by the deadline",)
    report(handoff, "done")
    second = handoff_reconcile_now(handoff_id=handoff.pk, actor=world["olga"])
    assert second.problems == () and second.run.resolved_findings == 1
    assert not Finding.objects.exclude(status=FindingStatus.RESOLVED).exists()


def test_status_of_a_task_with_other_content_is_not_recorded_as_the_handoffs_work(world):
    handoff = delivered(42)
    ReceiverTask.objects.using("delivery").filter(action_key=handoff.action_key).update(
        payload_hash="0" * 64, status="done"
    )
    run = completed(reconciliation_run())
    assert run.findings_by_kind == {K.PAYLOAD_MISMATCH: 1}
    assert work_status(handoff) == "open"


def _record_key(action_key: str, *, step: str = "", kind: str = HandoffKind.ACTION) -> Handoff:
    instance = "onboarding:7:42:1"
    handoff = handoff_record(
        workflow="onboarding",
        workspace_id=7,
        source_ref="request 42 revision 1",
        source_id=42,
        action_key=action_key,
        payload=dict(ONBOARDING_PAYLOAD),
        rule_version="onboarding-v2",
    )
    Handoff.objects.filter(pk=handoff.pk).update(instance_key=instance, step=step, kind=kind)
    return handoff


@pytest.mark.parametrize("workspace_id", [None, 7], ids=["full run", "workspace run"])
def test_step_and_compensation_keys_are_compared_like_any_other_key(world, workspace_id):
    create = deliver(_record_key("onboarding:7:42:1:create_client", step="create_client"))
    provision = deliver(
        _record_key("onboarding:7:42:1:provision_account", step="provision_account")
    )
    undo = deliver(
        _record_key(
            "onboarding:7:42:1:provision_account:compensate",
            step="provision_account",
            kind=HandoffKind.COMPENSATION,
        )
    )
    # Neighbours in key order: the instance key itself and one that sorts between the steps' keys.
    deliver(record(42))
    deliver(record(420))
    ReceiverTask.objects.using("delivery").filter(action_key=provision.action_key).delete()
    task_create_idempotent(
        action_key="onboarding:7:42:1:send_welcome_pack", payload=dict(ONBOARDING_PAYLOAD)
    )
    report(undo, "failed")
    report(create, "done")
    run = completed(reconciliation_run(batch_size=2, workspace_id=workspace_id))
    found = {(f.kind, f.action_key) for f in Finding.objects.all()}
    assert found == {
        (K.MISSING_AT_RECEIVER, "onboarding:7:42:1:provision_account"),
        (K.ORPHAN_AT_RECEIVER, "onboarding:7:42:1:send_welcome_pack"),
        (K.WORK_FAILED, "onboarding:7:42:1:provision_account:compensate"),
    }
    assert run.keys_compared == 6
    assert (work_status(create), work_status(undo)) == ("done", "failed")


@pytest.mark.django_db(databases=["default", "delivery"], transaction=True)
def test_work_status_is_read_back_over_the_signed_http_api(world, live_server):
    handoff = delivered(42, hours_ago=80)
    report(handoff, "in_progress")
    destination = HttpDestination(
        url=f"{live_server.url}/delivery/api", read_timeout=5, connect_timeout=1
    )
    try:
        run = completed(reconciliation_run(destination=destination))
        assert run.findings_by_kind == {K.WORK_NOT_DONE: 1}
        assert work_status(handoff) == "in_progress"
        report(handoff, "done")
        check = handoff_reconcile_now(
            handoff_id=handoff.pk, actor=world["olga"], destination=destination
        )
    finally:
        destination.close()
    assert check.problems == () and work_status(handoff) == "done"
