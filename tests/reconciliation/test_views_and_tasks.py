"""Findings screens, operator actions over HTTP, and the django-q2 entry points."""

import pytest
from django.core.management import call_command
from django.urls import reverse
from django_q.models import Schedule

from delivery.services import task_create_idempotent
from outbox.destinations import get_destination
from outbox.services.destination_windows import (
    destination_pause_by_operator,
    destination_resume_by_operator,
)
from reconciliation import tasks
from reconciliation.models import Finding, FindingEvent, ReconciliationRun
from reconciliation.services import runs
from reconciliation.services.runs import reconciliation_run
from tests.factories import ONBOARDING_PAYLOAD, retry_after_hold

pytestmark = pytest.mark.django_db(databases=["default", "delivery"])


@pytest.fixture
def orphans(world):
    task_create_idempotent(action_key="onboarding:7:99:1", payload=dict(ONBOARDING_PAYLOAD))
    task_create_idempotent(action_key="onboarding:8:99:1", payload=dict(ONBOARDING_PAYLOAD))
    reconciliation_run()
    return {
        key.split(":")[1]: Finding.objects.get(action_key=key)
        for key in ("onboarding:7:99:1", "onboarding:8:99:1")
    }


def test_findings_list_shows_only_the_operators_workspaces(client, world, orphans):
    client.force_login(world["olga"])
    html = client.get(reverse("reconciliation:findings")).content.decode()
    assert "onboarding:7:99:1" in html and "onboarding:8:99:1" not in html
    assert "No source handoff has this key" in html


def test_acknowledge_over_htmx_rerenders_the_row_and_writes_the_event(client, world, orphans):
    client.force_login(world["olga"])
    finding = orphans["7"]
    response = client.post(
        reverse("reconciliation:finding_acknowledge", args=[finding.pk]),
        {"note": "asking the receiver"},
        HTTP_HX_REQUEST="true",
    )
    assert response.status_code == 200
    html = response.content.decode()
    assert (
        html.lstrip().startswith(f'<tr id="finding-{finding.pk}">')
        and "acknowledged by olga" in html
    )
    event = FindingEvent.objects.get(finding=finding, action="acknowledged")
    assert (event.actor, event.note) == (world["olga"], "asking the receiver")


def test_finding_of_another_workspace_is_a_404(client, world, orphans):
    client.force_login(world["olga"])
    response = client.post(reverse("reconciliation:finding_acknowledge", args=[orphans["8"].pk]))
    assert response.status_code == 404
    assert not FindingEvent.objects.filter(finding=orphans["8"], action="acknowledged").exists()


def test_resolve_without_a_note_is_refused(client, world, orphans):
    client.force_login(world["olga"])
    response = client.post(
        reverse("reconciliation:finding_resolve", args=[orphans["7"].pk]), {"note": ""}
    )
    assert response.status_code == 400
    assert Finding.objects.get(pk=orphans["7"].pk).status == "open"


def test_run_pages_show_the_run_and_its_findings(client, world, orphans):
    client.force_login(world["olga"])
    run = ReconciliationRun.objects.get()
    assert f"#{run.pk}" in client.get(reverse("reconciliation:runs")).content.decode()
    html = client.get(reverse("reconciliation:run", args=[run.pk])).content.decode()
    assert "onboarding:7:99:1" in html and "onboarding:8:99:1" not in html


def test_scheduled_task_runs_reconciliation(world):
    task_create_idempotent(action_key="onboarding:7:99:1", payload=dict(ONBOARDING_PAYLOAD))
    result = tasks.reconcile()
    assert result["status"] == "completed" and result["findings"] == {"orphan_at_receiver": 1}
    assert ReconciliationRun.objects.get(pk=result["run"]).trigger == "schedule"


def test_a_scheduled_run_during_an_operators_pause_is_deferred_not_failed(world, monkeypatch):
    """A pause and reconciliation (issue 40): the scheduled run waited for a permit the pause never gives
    and was stored as failed, so Prometheus opened HandoffReconciliationFailed for a planned hold. Now
    the schedule starts no run while an operator's hold lasts, and the first one after it compares."""
    monkeypatch.setattr(runs, "RUN_LIMITS_WAIT_SECONDS", 0.5)  # the old code's wait, kept short
    name = get_destination().name
    task_create_idempotent(action_key="onboarding:7:99:1", payload=dict(ONBOARDING_PAYLOAD))
    destination_pause_by_operator(name=name, actor=world["olga"], reason="receiver upgrade")
    result = tasks.reconcile()
    assert result["status"] == "deferred" and result["run"] is None
    assert (
        f"destination {name} is held (Paused by an operator: receiver upgrade)" in result["error"]
    )
    assert not ReconciliationRun.objects.exists()

    destination_resume_by_operator(name=name, actor=world["olga"], reason="upgrade done")
    result = tasks.reconcile()
    assert result["status"] == "completed" and result["findings"] == {"orphan_at_receiver": 1}


def test_a_scheduled_run_during_a_retry_after_longer_than_its_wait_is_deferred_not_failed(
    world, monkeypatch
):
    """A Retry-After hold and reconciliation: the wait the destination asked for is meant, as an operator's
    pause is; a run that would wait out less than it for a permit is deferred, not stored as failed."""
    monkeypatch.setattr(runs, "RUN_LIMITS_WAIT_SECONDS", 0.5)  # the old code's wait, kept short
    name = get_destination().name
    retry_after_hold(name, 300, "HTTP 429 with Retry-After 300 s")
    result = tasks.reconcile()
    assert result["status"] == "deferred" and result["run"] is None
    assert (
        f"destination {name} is held (Retry-After hold: HTTP 429 with Retry-After 300 s)"
        in result["error"]
    )
    assert not ReconciliationRun.objects.exists()


def test_schedule_command_creates_both_schedules_once(capsys):
    call_command("schedule_reconciliation")
    call_command("schedule_reconciliation")
    schedules = dict(Schedule.objects.values_list("name", "func"))
    assert schedules == {
        "reconciliation": "reconciliation.tasks.reconcile",
        "send-alerts": "incidents.tasks.alerts_send_due",
    }
