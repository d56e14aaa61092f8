"""Screens that never say "fine" when it isn't: open findings on the handoff page and in every
needs-a-person figure, Reconcile now (one handoff, one workspace), and the manual-repair record."""

import pytest
from django.test import override_settings

from delivery.models import ReceiverTask
from delivery.services import task_create_idempotent
from outbox.dispatch.dispatcher import handoff_deliver
from outbox.models import FailureClass, Handoff, HandoffEvent, HandoffState
from reconciliation.models import (
    Finding,
    FindingKind,
    FindingStatus,
    ManualRepair,
    ReconciliationRun,
)
from reconciliation.services import reconciliation_run
from tests.builders import approve
from tests.console.clients import HTMX, client_for

pytestmark = pytest.mark.django_db(databases=["default", "delivery"])
S = HandoffState
METRICS_TOKEN = "test-metrics-token"


@pytest.fixture
def delivered(world) -> Handoff:
    handoff = approve(world)
    assert handoff_deliver(handoff_id=handoff.pk) == S.DELIVERED
    handoff.refresh_from_db()
    return handoff


def delete_receiver_task(handoff: Handoff) -> None:
    assert (
        ReceiverTask.objects.using("delivery").filter(action_key=handoff.action_key).delete()[0]
        == 1
    )


def header_count(client, workspace: int = 7) -> str:
    page = client.get("/handoffs/").content.decode()
    marker = f'href="/handoffs/?workspace={workspace}&amp;state=attention">'
    return page.split(marker, 1)[1].split(" need attention", 1)[0]


def metric(client, name: str, workspace: str = "7") -> float:
    with override_settings(METRICS_TOKEN=METRICS_TOKEN):
        body = client.get("/metrics", HTTP_AUTHORIZATION=f"Bearer {METRICS_TOKEN}").content.decode()
    for line in body.splitlines():
        if line.startswith(name + "{") and f'workspace="{workspace}"' in line:
            return float(line.rsplit(" ", 1)[1])
    return 0.0


def test_deleted_receiver_task_reconcile_now_shows_finding_and_repair_keeps_it_closed(
    world, delivered
):
    """The done-when scenario, through the console views end to end."""
    olga = client_for(world["olga"])
    delete_receiver_task(delivered)
    assert header_count(olga) == "0"

    response = olga.post(f"/handoffs/{delivered.pk}/reconcile-now", **HTMX)
    assert response.status_code == 200
    body = response.content.decode()
    assert (
        "Reconciled now: the receiver has no task for this key; open: missing at the receiver."
        in body
    )
    assert 'id="handoff-findings"' in body and "Nothing to do" not in body
    assert "Reconciliation found a problem: missing at the receiver." in body
    finding = Finding.objects.get(action_key=delivered.action_key, status=FindingStatus.OPEN)
    assert finding.kind == FindingKind.MISSING_AT_RECEIVER
    assert HandoffEvent.objects.filter(
        handoff=delivered, action="reconcile_now", actor=world["olga"]
    ).exists()

    page = olga.get(f"/handoffs/{delivered.pk}/").content.decode()
    assert "Missing at the receiver" in page and "Delivered. Nothing to do here." not in page
    assert header_count(olga) == "1"
    listed = olga.get("/handoffs/", {"state": "attention", "workspace": 7}).content.decode()
    assert delivered.action_key in listed

    response = olga.post(
        f"/handoffs/{delivered.pk}/repair",
        {
            "finding": finding.pk,
            "what_was_done": "receiving team confirmed the client withdrew; no task needed",
            "evidence": "ticket RCV-7",
        },
        **HTMX,
    )
    assert response.status_code == 200
    assert (
        "Manual repair recorded; the handoff is delivered. The finding is closed."
        in response.content.decode()
    )
    finding.refresh_from_db()
    assert finding.status == FindingStatus.RESOLVED
    repair = ManualRepair.objects.get(finding=finding)
    assert (repair.actor, repair.evidence, repair.workspace_id) == (
        world["olga"],
        "ticket RCV-7",
        7,
    )
    assert HandoffEvent.objects.filter(
        handoff=delivered, action="manual_repair", actor=world["olga"]
    ).exists()
    assert header_count(olga) == "0"

    run = reconciliation_run()
    assert run.covered_by_repairs == 1 and run.findings_by_kind == {}
    assert (
        not Finding.objects.filter(action_key=delivered.action_key)
        .exclude(status=FindingStatus.RESOLVED)
        .exists()
    )
    page = olga.get(f"/handoffs/{delivered.pk}/").content.decode()
    assert 'id="handoff-findings"' not in page and "ticket RCV-7" in page


def test_repair_with_recreated_task_records_the_new_destination_id(world, delivered):
    delete_receiver_task(delivered)
    reconciliation_run()
    finding = Finding.objects.get(action_key=delivered.action_key)
    outcome = task_create_idempotent(action_key=delivered.action_key, payload=delivered.payload)
    new_id = str(outcome.task.task_id)
    response = client_for(world["olga"]).post(
        f"/handoffs/{delivered.pk}/repair",
        {
            "finding": finding.pk,
            "what_was_done": "receiving team re-created the task",
            "receiver_task_id": new_id,
        },
        **HTMX,
    )
    assert response.status_code == 200
    delivered.refresh_from_db()
    assert delivered.destination_id == new_id
    run = reconciliation_run()
    assert run.findings_by_kind == {} and run.covered_by_repairs == 0


def test_repair_naming_a_task_the_receiver_does_not_hold_is_refused(world, delivered):
    delete_receiver_task(delivered)
    reconciliation_run()
    finding = Finding.objects.get(action_key=delivered.action_key)
    response = client_for(world["olga"]).post(
        f"/handoffs/{delivered.pk}/repair",
        {
            "finding": finding.pk,
            "what_was_done": "re-created",
            "receiver_task_id": "no-such-task",
        },
        **HTMX,
    )
    assert response.status_code == 422
    assert "the receiver holds no task" in response.content.decode()
    finding.refresh_from_db()
    assert finding.status == FindingStatus.OPEN and not ManualRepair.objects.exists()


def test_a_new_discrepancy_after_a_repair_opens_a_new_finding(world, delivered):
    delete_receiver_task(delivered)
    reconciliation_run()
    finding = Finding.objects.get(action_key=delivered.action_key)
    client_for(world["olga"]).post(
        f"/handoffs/{delivered.pk}/repair",
        {"finding": finding.pk, "what_was_done": "left as is"},
        **HTMX,
    )
    # Someone creates a task with other content under the key: not what the repair accounted for.
    task_create_idempotent(
        action_key=delivered.action_key, payload={**delivered.payload, "plan": "premium"}
    )
    run = reconciliation_run()
    assert run.findings_by_kind == {FindingKind.PAYLOAD_MISMATCH: 1}
    assert (
        Finding.objects.filter(action_key=delivered.action_key, status=FindingStatus.OPEN).count()
        == 1
    )


def test_repair_without_what_was_done_is_a_422_and_writes_nothing(world, delivered):
    delete_receiver_task(delivered)
    reconciliation_run()
    finding = Finding.objects.get(action_key=delivered.action_key)
    response = client_for(world["olga"]).post(
        f"/handoffs/{delivered.pk}/repair", {"finding": finding.pk, "what_was_done": "  "}, **HTMX
    )
    assert response.status_code == 422
    assert "say what was done outside the system" in response.content.decode()
    assert not ManualRepair.objects.exists()
    assert Finding.objects.get(pk=finding.pk).status == FindingStatus.OPEN


def unknown_outcome(world) -> Handoff:
    """Needs attention because the destination cannot be asked about a key (lookup_unsupported)."""
    handoff = approve(world)
    Handoff.objects.filter(pk=handoff.pk).update(
        state=S.NEEDS_ATTENTION,
        failure_class=FailureClass.UNCERTAIN,
        reason_code="lookup_unsupported",
        attempts=1,
    )
    return Handoff.objects.get(pk=handoff.pk)


def test_manual_settle_naming_a_task_a_lookup_capable_receiver_lacks_is_refused(world):
    handoff = unknown_outcome(world)
    page = client_for(world["olga"]).get(f"/handoffs/{handoff.pk}/").content.decode()
    assert "Record a manual repair" in page
    response = client_for(world["olga"]).post(
        f"/handoffs/{handoff.pk}/repair",
        {
            "what_was_done": "checked the receiver's admin screen",
            "receiver_task_id": "T-77",
            "evidence": "screenshot in RCV-9",
        },
        **HTMX,
    )
    assert response.status_code == 422
    handoff.refresh_from_db()
    # The in-process receiver can be asked: it holds no T-77, so a lookup-capable destination refuses it.
    assert handoff.state == S.NEEDS_ATTENTION
    assert "the receiver holds no task" in response.content.decode()


def test_manual_settle_both_ways_where_the_destination_cannot_be_asked(world):
    from outbox.destinations import InProcessDestination
    from reconciliation.services import manual_repair_record

    found = unknown_outcome(world)
    repair = manual_repair_record(
        actor=world["olga"],
        handoff_id=found.pk,
        what_was_done="receiver has it",
        receiver_task_id="T-77",
        destination=InProcessDestination(supports_lookup=False),
    )
    found.refresh_from_db()
    assert (found.state, found.destination_id, repair.resulting_state) == (
        S.DELIVERED,
        "T-77",
        S.DELIVERED,
    )

    nothing = approve(world, number=43)
    Handoff.objects.filter(pk=nothing.pk).update(
        state=S.NEEDS_ATTENTION,
        failure_class=FailureClass.UNCERTAIN,
        reason_code="uncertain_not_idempotent",
    )
    response = client_for(world["olga"]).post(
        f"/handoffs/{nothing.pk}/repair",
        {"what_was_done": "receiver has nothing for this key"},
        **HTMX,
    )
    assert response.status_code == 200
    nothing.refresh_from_db()
    assert (
        nothing.state == S.PENDING
        and nothing.action_key == "onboarding:7:43:1"
        and nothing.failure_class == ""
    )
    assert ManualRepair.objects.get(handoff_id=nothing.pk).resulting_state == S.PENDING


def test_manual_settle_of_a_handoff_whose_outcome_is_known_is_refused(world, rejected):
    response = client_for(world["olga"]).post(
        f"/handoffs/{rejected.pk}/repair", {"what_was_done": "receiver has nothing"}, **HTMX
    )
    assert response.status_code == 409
    assert (
        "a manual settle applies to a delivered handoff or to one whose outcome is unknown"
        in response.content.decode()
    )
    rejected.refresh_from_db()
    assert rejected.state == S.NEEDS_ATTENTION and not ManualRepair.objects.exists()


def test_reconcile_now_closes_a_finding_the_receiver_no_longer_shows(world, delivered):
    delete_receiver_task(delivered)
    reconciliation_run()
    task = task_create_idempotent(action_key=delivered.action_key, payload=delivered.payload).task
    Handoff.objects.filter(pk=delivered.pk).update(destination_id=str(task.task_id))
    response = client_for(world["olga"]).post(f"/handoffs/{delivered.pk}/reconcile-now", **HTMX)
    assert "source and receiver agree" in response.content.decode()
    assert (
        not Finding.objects.filter(action_key=delivered.action_key)
        .exclude(status=FindingStatus.RESOLVED)
        .exists()
    )


def test_needs_a_person_agrees_on_header_list_health_and_metrics(world, delivered, rejected):
    olga = client_for(world["olga"])
    delete_receiver_task(delivered)
    reconciliation_run()
    # rejected (needs attention) + delivered with an open finding.
    assert header_count(olga) == "2"
    listed = olga.get("/handoffs/", {"state": "attention"}).context["handoffs"]
    assert {h.pk for h in listed} == {delivered.pk, rejected.pk}
    health = olga.get("/health/", {"workspace": 7}).context["figures"]
    assert health["needing_person"]["value"] == 2
    assert metric(olga, "handoff_needing_person") == 2.0


def test_workspace_reconcile_now_runs_one_workspace_and_says_what_it_found(
    world, delivered, foreign
):
    handoff_deliver(handoff_id=foreign.pk)
    delete_receiver_task(delivered)
    delete_receiver_task(Handoff.objects.get(pk=foreign.pk))
    response = client_for(world["olga"]).post(
        "/reconciliation/runs/workspace", {"workspace": 7}, **HTMX
    )
    assert response.status_code == 200
    body = response.content.decode()
    run = ReconciliationRun.objects.get(workspace_id=7)
    assert run.started_by == world["olga"] and run.trigger == "console"
    assert (
        f'Run <a href="/reconciliation/runs/{run.pk}/">#{run.pk}</a> of workspace 7: 1 keys compared, 1 problem'
        in body
    )
    # Workspace 8's deleted task is not workspace 7's business: no finding for it.
    assert list(Finding.objects.values_list("action_key", flat=True)) == [delivered.action_key]


def test_workspace_reconcile_without_javascript_redirects_to_the_run(world, delivered):
    response = client_for(world["olga"]).post("/reconciliation/runs/workspace", {"workspace": 7})
    run = ReconciliationRun.objects.get(workspace_id=7)
    assert response.status_code == 302 and response["Location"] == f"/reconciliation/runs/{run.pk}/"


def test_workspace_reconcile_of_another_workspace_is_404_and_needs_operator_role(world):
    assert (
        client_for(world["olga"])
        .post("/reconciliation/runs/workspace", {"workspace": 8})
        .status_code
        == 404
    )
    assert (
        client_for(world["olga"])
        .post("/reconciliation/runs/workspace", {"workspace": "x"})
        .status_code
        == 404
    )
    assert (
        client_for(world["alice"])
        .post("/reconciliation/runs/workspace", {"workspace": 7})
        .status_code
        == 403
    )
    assert not ReconciliationRun.objects.exists()


def test_reconcile_now_and_repair_of_another_workspace_are_404(world, foreign):
    olga = client_for(world["olga"])
    assert olga.post(f"/handoffs/{foreign.pk}/reconcile-now").status_code == 404
    assert olga.post(f"/handoffs/{foreign.pk}/repair", {"what_was_done": "x"}).status_code == 404
    assert not ReconciliationRun.objects.exists() and not ManualRepair.objects.exists()


def test_reconcile_now_and_repair_need_the_operator_role(world, delivered):
    alice = client_for(world["alice"])
    assert alice.post(f"/handoffs/{delivered.pk}/reconcile-now", **HTMX).status_code == 403
    assert (
        alice.post(f"/handoffs/{delivered.pk}/repair", {"what_was_done": "x"}, **HTMX).status_code
        == 403
    )
    assert not ReconciliationRun.objects.exists() and not ManualRepair.objects.exists()


def test_repair_of_a_finding_of_another_key_is_refused(world, delivered, rejected):
    delete_receiver_task(delivered)
    reconciliation_run()
    finding = Finding.objects.get(action_key=delivered.action_key)
    response = client_for(world["olga"]).post(
        f"/handoffs/{rejected.pk}/repair", {"finding": finding.pk, "what_was_done": "x"}, **HTMX
    )
    assert response.status_code == 422
    assert Finding.objects.get(pk=finding.pk).status == FindingStatus.OPEN


def test_actions_refuse_posts_without_csrf(world, delivered):
    from django.test import Client

    client = Client(enforce_csrf_checks=True)
    client.force_login(world["olga"])
    assert client.post(f"/handoffs/{delivered.pk}/reconcile-now").status_code == 403
    assert client.post("/reconciliation/runs/workspace", {"workspace": 7}).status_code == 403
    assert not ReconciliationRun.objects.exists()


def test_detail_with_findings_query_count_is_pinned(
    world, delivered, django_assert_max_num_queries
):
    delete_receiver_task(delivered)
    reconciliation_run()
    olga = client_for(world["olga"])
    # 18: the handoff's destination is read from its row (destinations are data) to describe its contract;
    # 19: the last full reconciliation run, for what the receiver has said and when.
    with django_assert_max_num_queries(19):
        page = olga.get(f"/handoffs/{delivered.pk}/")
    assert page.status_code == 200 and b"handoff-findings" in page.content


def test_same_kind_with_other_facts_after_a_repair_opens_a_new_finding(world, delivered):
    def recreate_task() -> None:
        delete_receiver_task(delivered)
        task_create_idempotent(action_key=delivered.action_key, payload=delivered.payload)

    recreate_task()  # the receiver's task id is no longer the one the handoff recorded
    assert reconciliation_run().findings_by_kind == {FindingKind.DESTINATION_MISMATCH: 1}
    finding = Finding.objects.get(action_key=delivered.action_key)
    client_for(world["olga"]).post(
        f"/handoffs/{delivered.pk}/repair",
        {"finding": finding.pk, "what_was_done": "receiver keeps its copy"},
        **HTMX,
    )
    assert reconciliation_run().covered_by_repairs == 1
    recreate_task()  # yet another task id: not the facts the repair accounted for
    run = reconciliation_run()
    assert (
        run.findings_by_kind == {FindingKind.DESTINATION_MISMATCH: 1}
        and run.covered_by_repairs == 0
    )
    assert (
        Finding.objects.filter(action_key=delivered.action_key, status=FindingStatus.OPEN).count()
        == 1
    )
