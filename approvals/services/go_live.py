"""Switching a workflow from observe to live: only its owner, after seeing the observed results, and only
once every disagreement is explained (seed 001). Audited as every mode change is (`WorkflowModeChange`,
in the audit export). docs/observation.md."""

from django.conf import settings
from django.db import transaction

from approvals.agreement import Agreement, workflow_agreement
from approvals.errors import ApprovalsError
from approvals.models import Mode, PilotBrief, WorkflowMode, WorkflowModeChange
from lib.databases import DB


class GoLiveRefused(ApprovalsError):
    """The workflow may not go live now, or not by this person; the message says why."""


def _mode_of(workflow: str) -> WorkflowMode | None:
    return WorkflowMode.objects.select_for_update(no_key=True).filter(workflow=workflow).first()


def go_live_refusal(*, workflow: str, actor, results: Agreement) -> str:
    """Why the actor may not switch the workflow to live now; "" when they may."""
    brief = PilotBrief.objects.filter(workflow=workflow).first()
    if brief is None or brief.owner_id is None:
        return f"{workflow} has no business owner: name one before it goes live"
    if brief.owner_id != actor.pk:
        return f"only {workflow}'s owner, {brief.owner.get_username()}, confirms that it goes live"
    if results.recorded == 0:
        return "no observed case has a recorded outcome yet: nothing shows that the plan matches the current process"
    if results.unexplained:
        return (
            f"{results.unexplained} disagreement(s) are not explained yet: "
            "explain each before the workflow goes live"
        )
    return ""


def workflow_go_live(*, workflow: str, actor, confirmation: str, reason: str = "") -> WorkflowMode:
    """The owner confirms, by typing the workflow's name, that the workflow leaves observe (or limited) mode
    and sends. The only way to live: `workflow_mode_set` refuses it, so the admin's form comes here too.

    The mode change and its audit record (with the observed results it was confirmed on) are one transaction."""
    with transaction.atomic(using=DB):
        current = _mode_of(workflow)
        mode = current.mode if current else settings.WORKFLOW_DEFAULT_MODE
        if mode not in (Mode.OBSERVE, Mode.LIMITED):
            raise GoLiveRefused(f"{workflow} is {mode} already")
        results = workflow_agreement(workflow)
        refusal = go_live_refusal(workflow=workflow, actor=actor, results=results)
        if refusal:
            raise GoLiveRefused(refusal)
        if confirmation.strip() != workflow:
            raise GoLiveRefused(f"type the workflow's name, {workflow}, to confirm")
        if current is None:
            current = WorkflowMode.objects.create(
                workflow=workflow, mode=Mode.LIVE, updated_by=actor
            )
        else:
            current.mode = Mode.LIVE
            current.updated_by = actor
            current.save(update_fields=["mode", "updated_by", "updated_at"])
        allowed = sorted(current.allowed_workspaces.values_list("id", flat=True))
        WorkflowModeChange.objects.create(
            workflow=workflow,
            from_mode=mode,
            to_mode=Mode.LIVE,
            from_allowed=allowed,
            to_allowed=allowed,
            changed_by=actor,
            reason=_audit_reason(results, reason),
        )
    return current


def _audit_reason(results: Agreement, reason: str) -> str:
    said = f"; {reason.strip()}" if reason.strip() else ""
    return (
        f"the owner confirmed going live on the observed results: {results.observed} case(s) observed, "
        f"{results.recorded} compared, {results.agree} agree, {results.disagree} disagree "
        f"(all explained), {results.not_recorded} not compared{said}"
    )
