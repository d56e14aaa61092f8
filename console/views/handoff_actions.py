"""The operators' actions on one handoff, each in the frame of `handoffs.handoff_action`."""

from django.urls import reverse

from approvals import services as approval_services
from approvals.selectors import (
    user_by_id,
)
from console.views.handoffs import handoff_action
from lib.htmx import HtmxHttpRequest
from lib.querystring import id_or_none
from outbox import services
from outbox.errors import (
    AssigneeNotOperator,
    CompensationBlocked,
)
from outbox.models import Handoff, HandoffState
from outbox.services.retry_now import handoff_retry_now
from reconciliation import services as reconciliation_services
from reconciliation.errors import FindingNotOnHandoff
from reconciliation.selectors import live_findings_of


def _after_send(handoff: Handoff, state: str) -> dict:
    """Say what actually happened when the handoff was sent again right away."""
    handoff.refresh_from_db()
    if state == HandoffState.DELIVERED:
        return {
            "level": "success",
            "text": f"Sent: delivered as receiver task {handoff.destination_id}.",
        }
    if state == HandoffState.PENDING and handoff.attempts and handoff.failure_class:
        return {
            "level": "warning",
            "text": f"Sent, and it failed again ({handoff.failure_class}: "
            f"{handoff.reason_code}). It will be retried automatically.",
        }
    if state == HandoffState.NEEDS_ATTENTION:
        return {
            "level": "error",
            "text": f"Sent, and it failed again ({handoff.failure_class}: "
            f"{handoff.reason_code}). It still needs attention.",
        }
    if state == HandoffState.UNCERTAIN:
        return {
            "level": "warning",
            "text": "Sent, but the outcome is unknown again. Reconcile before anything else.",
        }
    return {"level": "info", "text": "Queued with the same action key; a worker is sending it."}


@handoff_action
def handoff_retry(request: HtmxHttpRequest, handoff: Handoff) -> dict:
    # Sent at once, so that the operator sees the actual result instead of "queued".
    state = handoff_retry_now(
        handoff_id=handoff.pk,
        actor=request.user,
        reason=request.POST.get("reason", "").strip(),
        confirm_risk=request.POST.get("confirm_risk") == "yes",
    )
    return _after_send(handoff, state)


@handoff_action
def handoff_reconcile(request: HtmxHttpRequest, handoff: Handoff) -> dict:
    state = services.handoff_settle(
        handoff_id=handoff.pk, actor=request.user, reason=request.POST.get("reason", "").strip()
    )
    latest = handoff.events.order_by("-at", "-id").values_list("reason", flat=True).first() or ""
    if state == HandoffState.DELIVERED:
        return {"level": "success", "text": f"Reconciled: {latest}. Delivered."}
    if state == HandoffState.PENDING:
        return {"level": "info", "text": f"Reconciled: {latest}. Queued to send with the same key."}
    if state in (HandoffState.UNCERTAIN, HandoffState.NEEDS_ATTENTION):
        return {"level": "warning", "text": f"Reconciled: {latest}."}
    return {
        "level": "info",
        "text": f"Nothing to reconcile: the handoff is {state.replace('_', ' ')}.",
    }


@handoff_action
def handoff_cancel(request: HtmxHttpRequest, handoff: Handoff) -> dict:
    services.handoff_cancel(
        handoff_id=handoff.pk, actor=request.user, reason=request.POST.get("reason", "").strip()
    )
    return {"level": "success", "text": "Cancelled. It will never be sent."}


@handoff_action
def handoff_assign(request: HtmxHttpRequest, handoff: Handoff) -> dict:
    raw = request.POST.get("owner", "")
    owner = user_by_id(raw) if raw else None
    if raw and owner is None:
        raise AssigneeNotOperator("the new owner must be an operator of this workspace")
    services.handoff_assign(
        handoff_id=handoff.pk,
        actor=request.user,
        owner=owner,
        reason=request.POST.get("reason", "").strip(),
    )
    return {
        "level": "success",
        "text": f"Assigned to {owner.get_username() if owner else 'nobody'}.",
    }


@handoff_action
def handoff_acknowledge(request: HtmxHttpRequest, handoff: Handoff) -> dict:
    services.handoff_acknowledge(
        handoff_id=handoff.pk, actor=request.user, reason=request.POST.get("reason", "").strip()
    )
    return {"level": "success", "text": f"Acknowledged by {request.user.get_username()}."}


@handoff_action
def handoff_correct(request: HtmxHttpRequest, handoff: Handoff) -> dict:
    edits = {
        key.removeprefix("field_"): value
        for key, value in request.POST.items()
        if key.startswith("field_")
    }
    revision = approval_services.handoff_correct(
        handoff_id=handoff.pk,
        actor=request.user,
        edits=edits,
        reason=request.POST.get("reason", "").strip(),
    )
    url = reverse(
        "approvals:detail", args=(revision.workspace_id, revision.number, revision.revision)
    )
    return {
        "level": "success",
        "link": url,
        "link_text": f"revision {revision.revision}",
        "text": f"Corrected: request {revision.number} revision {revision.revision} awaits a new approval "
        "and will get a new action key. This handoff is superseded.",
    }


@handoff_action
def handoff_compensate(request: HtmxHttpRequest, handoff: Handoff) -> dict:
    if not handoff.step:
        raise CompensationBlocked("this handoff is not a step of a workflow")
    plan = services.instance_compensate(
        instance_key=handoff.instance_key,
        actor=request.user,
        reason=request.POST.get("reason", "").strip(),
    )
    reversed_steps = ", ".join(step.step for step in plan.reverse) or "none"
    residuals = "; ".join(plan.residual_lines)
    text = f"Compensating {handoff.instance_key}: reversing {reversed_steps}, latest first."
    if residuals:
        text += (
            f" Not undone, a person repairs by hand: {residuals}. Record a manual repair for each."
        )
    return {"level": "warning" if residuals else "success", "text": text}


@handoff_action
def handoff_reconcile_now(request: HtmxHttpRequest, handoff: Handoff) -> dict:
    check = reconciliation_services.handoff_reconcile_now(handoff_id=handoff.pk, actor=request.user)
    level = "warning" if check.problems or check.lookup_error else "success"
    return {"level": level, "text": f"Reconciled now: {check.summary()}."}


@handoff_action
def handoff_repair(request: HtmxHttpRequest, handoff: Handoff) -> dict:
    raw = request.POST.get("finding", "")
    finding_id = None
    if raw:
        # Only a live finding of this handoff's key: the handoff's scope check then covers the finding.
        finding_pk = id_or_none(raw)
        finding = (
            live_findings_of(handoff.action_key).filter(pk=finding_pk).first()
            if finding_pk
            else None
        )
        if finding is None:
            raise FindingNotOnHandoff("that finding is not open on this handoff")
        finding_id = finding.pk
    repair = reconciliation_services.manual_repair_record(
        actor=request.user,
        finding_id=finding_id,
        handoff_id=handoff.pk,
        what_was_done=request.POST.get("what_was_done", ""),
        evidence=request.POST.get("evidence", ""),
        receiver_task_id=request.POST.get("receiver_task_id", ""),
    )
    closed = " The finding is closed." if finding_id else ""
    state = repair.resulting_state.replace("_", " ")
    return {"level": "success", "text": f"Manual repair recorded; the handoff is {state}.{closed}"}
