"""Workflow modes: how far a workflow acts (observe, limited, live), every change audited.

Going live is not a mode change like the others: only the workflow's owner switches it, by typing its name,
once every disagreement is explained (`approvals/services/go_live.py`). This service refuses any switch to
live from another mode, so no path (admin included) goes around the owner."""

from django.conf import settings
from django.db import transaction

from approvals.errors import ApprovalDenied, InvalidPayload, WorkspaceNotFound
from approvals.models import Mode, WorkflowMode, WorkflowModeChange, Workspace
from approvals.services.go_live import GoLiveRefused
from lib.databases import DB


def _allowed_after(before: list[int], allowed_workspace_ids: list[int] | None) -> list[int]:
    """The allow-list the change leaves (None keeps `before`); WorkspaceNotFound names any unknown one."""
    after = before if allowed_workspace_ids is None else sorted(set(allowed_workspace_ids))
    missing = set(after) - set(Workspace.objects.filter(id__in=after).values_list("id", flat=True))
    if missing:
        raise WorkspaceNotFound(", ".join(str(w) for w in sorted(missing)))
    return after


def workflow_mode_set(
    *, workflow: str, mode: str, actor, reason: str, allowed_workspace_ids: list[int] | None = None
) -> WorkflowMode:
    """Change how far a workflow acts, and audit the change (who, when, from, to, why).

    `allowed_workspace_ids` is the allow-list of limited mode; it is kept as given for the other modes
    (None keeps the current list)."""
    if mode not in Mode.values:
        raise InvalidPayload([f"unknown mode {mode!r}; one of {', '.join(Mode.values)}"])
    if not reason.strip():
        raise InvalidPayload(["a reason is required to change a mode"])
    if not actor.has_perm("approvals.change_workflowmode"):
        raise ApprovalDenied(f"{actor} may not change delivery modes")
    with transaction.atomic(using=DB):
        current = (
            WorkflowMode.objects.select_for_update(no_key=True).filter(workflow=workflow).first()
        )
        before = sorted(current.allowed_workspaces.values_list("id", flat=True)) if current else []
        after = _allowed_after(before, allowed_workspace_ids)
        from_mode = current.mode if current else settings.WORKFLOW_DEFAULT_MODE
        if mode == Mode.LIVE and from_mode != Mode.LIVE:
            raise GoLiveRefused(
                f"{workflow} is {from_mode}: only its owner switches it to live, by typing its name "
                "(the go-live page, or the owner's confirmation in admin)"
            )
        if current is None:
            current = WorkflowMode.objects.create(workflow=workflow, mode=mode, updated_by=actor)
        else:
            current.mode = mode
            current.updated_by = actor
            current.save(update_fields=["mode", "updated_by", "updated_at"])
        current.allowed_workspaces.set(after)
        WorkflowModeChange.objects.create(
            workflow=workflow,
            from_mode=from_mode,
            to_mode=mode,
            from_allowed=before,
            to_allowed=after,
            changed_by=actor,
            reason=reason,
        )
    return current
