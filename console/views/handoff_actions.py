"""The operators' actions on one handoff, each in the frame of `handoffs.handoff_action`."""

from django.urls import reverse

from approvals import services as approval_services
from approvals.selectors import (
    user_by_id,
)
from console import handoff_action_words as action_words
from console.views.handoffs import handoff_action
from lib.htmx import HtmxHttpRequest
from lib.querystring import id_or_none
from outbox import services
from outbox.errors import (
    AssigneeNotOperator,
    CompensationBlocked,
)
from outbox.models import Handoff
from outbox.services.case_holds import hold_end_from_text
from reconciliation import services as reconciliation_services
from reconciliation.errors import FindingNotOnHandoff
from reconciliation.selectors import live_findings_of


@handoff_action
def handoff_retry(request: HtmxHttpRequest, handoff: Handoff) -> dict:
    return action_words.retry(
        request.user,
        handoff,
        reason=request.POST.get("reason", "").strip(),
        confirm_risk=request.POST.get("confirm_risk") == "yes",
    )


@handoff_action
def handoff_reconcile(request: HtmxHttpRequest, handoff: Handoff) -> dict:
    return action_words.reconcile(
        request.user, handoff, reason=request.POST.get("reason", "").strip()
    )


@handoff_action
def handoff_cancel(request: HtmxHttpRequest, handoff: Handoff) -> dict:
    return action_words.cancel(request.user, handoff, reason=request.POST.get("reason", "").strip())


@handoff_action
def handoff_assign(request: HtmxHttpRequest, handoff: Handoff) -> dict:
    raw = request.POST.get("owner", "")
    owner = user_by_id(raw) if raw else None
    if raw and owner is None:
        raise AssigneeNotOperator("the new owner must be an operator of this workspace")
    return action_words.assign(
        request.user, handoff, owner=owner, reason=request.POST.get("reason", "").strip()
    )


@handoff_action
def handoff_acknowledge(request: HtmxHttpRequest, handoff: Handoff) -> dict:
    return action_words.acknowledge(
        request.user, handoff, reason=request.POST.get("reason", "").strip()
    )


@handoff_action
def handoff_hold(request: HtmxHttpRequest, handoff: Handoff) -> dict:
    return action_words.hold(
        request.user,
        handoff,
        reason=request.POST.get("reason", ""),
        until=hold_end_from_text(request.POST.get("until", "")),
        whole_case=request.POST.get("whole_case") == "yes",
    )


@handoff_action
def handoff_resume(request: HtmxHttpRequest, handoff: Handoff) -> dict:
    return action_words.resume(request.user, handoff, reason=request.POST.get("reason", ""))


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
