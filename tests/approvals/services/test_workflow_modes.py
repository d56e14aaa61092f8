"""approvals/services/workflow_modes.py: changing a workflow's mode, audited."""

import pytest

from approvals import services
from approvals.errors import (
    ApprovalDenied,
    InvalidPayload,
    WorkspaceNotFound,
)
from approvals.models import (
    Mode,
    RequestState,
    WorkflowMode,
    WorkflowModeChange,
)
from tests.approvals.services.calls import (
    mode_admin,
)

pytestmark = pytest.mark.django_db(databases=["default", "delivery"])

R = RequestState


# --- workflow_mode_set -------------------------------------------------------------------------


def test_first_mode_change_is_audited_from_the_default_mode(world, settings):
    actor = mode_admin()
    mode = services.workflow_mode_set(
        workflow="onboarding",
        mode=Mode.LIMITED,
        actor=actor,
        reason="pilot",
        allowed_workspace_ids=[8, 7, 7],
    )
    assert (mode.mode, mode.updated_by) == (Mode.LIMITED, actor)
    assert sorted(mode.allowed_workspaces.values_list("id", flat=True)) == [7, 8]
    change = WorkflowModeChange.objects.get()
    assert (change.from_mode, change.to_mode, change.from_allowed, change.to_allowed) == (
        settings.WORKFLOW_DEFAULT_MODE,
        Mode.LIMITED,
        [],
        [7, 8],
    )
    assert (change.changed_by, change.reason) == (actor, "pilot")


def test_mode_change_without_a_list_keeps_the_allowed_workspaces(world):
    actor = mode_admin()
    services.workflow_mode_set(
        workflow="onboarding",
        mode=Mode.LIMITED,
        actor=actor,
        reason="pilot",
        allowed_workspace_ids=[7],
    )
    mode = services.workflow_mode_set(
        workflow="onboarding", mode=Mode.OBSERVE, actor=actor, reason="watch again"
    )
    assert list(mode.allowed_workspaces.values_list("id", flat=True)) == [7]
    last = WorkflowModeChange.objects.order_by("-id").first()
    assert (last.from_mode, last.to_mode, last.from_allowed, last.to_allowed) == (
        Mode.LIMITED,
        Mode.OBSERVE,
        [7],
        [7],
    )
    assert WorkflowMode.objects.count() == 1


@pytest.mark.parametrize(
    ("mode", "reason", "error"),
    [
        ("sometimes", "why", InvalidPayload),
        (Mode.LIVE, "  ", InvalidPayload),
    ],
)
def test_mode_change_with_unknown_mode_or_no_reason_is_refused(world, mode, reason, error):
    with pytest.raises(error):
        services.workflow_mode_set(
            workflow="onboarding", mode=mode, actor=mode_admin(), reason=reason
        )
    assert not WorkflowModeChange.objects.exists()


def test_mode_change_without_the_permission_is_denied(world):
    with pytest.raises(ApprovalDenied):
        services.workflow_mode_set(
            workflow="onboarding", mode=Mode.OBSERVE, actor=world["olga"], reason="why"
        )
    assert not WorkflowMode.objects.exists()


def test_mode_change_allowing_an_unknown_workspace_is_refused_and_changes_nothing(world):
    with pytest.raises(WorkspaceNotFound, match="99"):
        services.workflow_mode_set(
            workflow="onboarding",
            mode=Mode.LIMITED,
            actor=mode_admin(),
            reason="pilot",
            allowed_workspace_ids=[7, 99],
        )
    assert not WorkflowMode.objects.exists()
    assert not WorkflowModeChange.objects.exists()
