"""Administrators (superusers) change modes in Django admin and publish rules from a workflows file; both
go through the audited services. Support staff may only read these (tests/security/test_access_matrix.py)."""

import json
from io import StringIO

import pytest
from django.core.management import call_command

from approvals.models import RuleVersion, TriggerRecord, WorkflowMode, WorkflowModeChange
from approvals.rules import ONBOARDING_V1, rules_for
from tests.factories import make_user
from tests.intake.triggers import trigger_document

pytestmark = pytest.mark.django_db


@pytest.fixture
def root_client(client, world):
    client.force_login(make_user("root", is_staff=True, is_superuser=True))
    return client


def test_mode_set_in_admin_is_audited(root_client):
    response = root_client.post(
        "/admin/approvals/workflowmode/add/",
        {
            "workflow": "onboarding",
            "mode": "limited",
            "allowed_workspaces": ["7"],
            "reason": "pilot in 7",
        },
    )
    assert response.status_code == 302, response.content.decode()[:2000]
    mode = WorkflowMode.objects.get()
    assert (mode.mode, list(mode.allowed_workspaces.values_list("id", flat=True))) == (
        "limited",
        [7],
    )
    response = root_client.post(
        f"/admin/approvals/workflowmode/{mode.pk}/change/",
        {"mode": "observe", "allowed_workspaces": ["7", "8"], "reason": "watch all"},
    )
    assert response.status_code == 302
    assert list(
        WorkflowModeChange.objects.order_by("id").values_list(
            "from_mode", "to_mode", "to_allowed", "changed_by__username", "reason"
        )
    ) == [
        ("live", "limited", [7], "root", "pilot in 7"),
        ("limited", "observe", [7, 8], "root", "watch all"),
    ]


def test_admin_cannot_switch_to_live_without_the_owner(root_client):
    # Issue 37 item 10: a POST to the change page set the mode to live, no owner, no confirmation.
    mode = WorkflowMode.objects.create(workflow="onboarding", mode="observe")
    response = root_client.post(
        f"/admin/approvals/workflowmode/{mode.pk}/change/",
        {"mode": "live", "reason": "all in", "confirmation": "onboarding"},
    )
    assert response.status_code == 200
    assert "onboarding has no business owner" in response.content.decode()
    mode.refresh_from_db()
    assert mode.mode == "observe"
    assert not WorkflowModeChange.objects.exists()


def test_rules_are_published_from_a_workflows_file_not_in_admin(root_client, tmp_path):
    schema = {**ONBOARDING_V1.schema, "required": ["client_name"]}
    refused = root_client.post(
        "/admin/approvals/ruleversion/add/",
        {"workflow": "onboarding", "schema": json.dumps(schema), "notes": "looser"},
    )
    assert refused.status_code == 403
    path = tmp_path / "workflows.json"
    path.write_text(json.dumps({"workflows": [{"name": "onboarding", "schema": schema}]}))
    call_command("workflows", "apply", str(path), "--as", "root", stdout=StringIO())
    assert rules_for("onboarding").version == "onboarding-v2"
    assert RuleVersion.objects.get(version="onboarding-v2").created_by.username == "root"


def test_admin_lists_of_intake_records_load(root_client, send):
    send(trigger_document())
    record = TriggerRecord.objects.get()
    for url in (
        "/admin/approvals/triggerrecord/",
        f"/admin/approvals/triggerrecord/{record.pk}/change/",
        "/admin/approvals/requestreference/",
        "/admin/approvals/ruleversion/",
        "/admin/approvals/workflowmode/",
        "/admin/approvals/workflowmodechange/",
        "/admin/approvals/workspaceworkflow/",
    ):
        assert root_client.get(url).status_code == 200, url
    delete = root_client.post(
        f"/admin/approvals/triggerrecord/{record.pk}/delete/", {"post": "yes"}
    )
    assert delete.status_code == 403
