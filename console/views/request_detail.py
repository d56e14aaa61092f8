"""One request revision's page and the approver's decision on it."""

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_POST
from django_htmx.http import push_url

from approvals import selectors, services
from approvals.errors import ApprovalDenied, ApprovalsError, InvalidPayload, StaleRevision
from approvals.models import Request, RequestState
from approvals.route_requests import RoutesShown, routes_shown
from approvals.rules import rules_for
from console.correction_forms import CorrectionForm
from console.own_fields import payload_shown_to
from console.request_evidence import statuses_of
from outbox.errors import ActionKeyExists
from outbox.models import Handoff, HandoffState
from outbox.selectors import handoffs_in, instance_handoffs, instance_status


def visible_revision(request, workspace_id: int, number: int, revision: int) -> Request:
    if workspace_id not in selectors.workspace_ids_for(
        request.user
    ) and not selectors.may_decide_in(request.user, workspace_id):
        raise Http404("no such request")
    obj = (
        Request.objects.select_related("workspace", "requested_by", "corrected_by")
        .filter(workspace_id=workspace_id, number=number, revision=revision)
        .first()
    )
    if obj is None:
        raise Http404("no such request")
    return obj


def _previous_revision(obj: Request) -> Request | None:
    if obj.revision > 1 and obj.state == RequestState.AWAITING_APPROVAL:
        # What changed since the revision before: an approver decides on the difference too.
        return Request.objects.filter(
            workspace_id=obj.workspace_id,
            workflow=obj.workflow,
            number=obj.number,
            revision=obj.revision - 1,
        ).first()
    return None


def _decider_refusal(user, obj: Request, is_approver: bool) -> str:
    # The service's own rule: an Approve button is offered only where approving would be accepted.
    if not is_approver or obj.state != RequestState.AWAITING_APPROVAL:
        return ""
    return selectors.decider_refusal(user.pk, obj)


def _what_the_user_may_do(user, obj: Request, newest: Request | None, is_approver: bool) -> dict:
    is_newest = newest is not None and newest.pk == obj.pk
    awaiting = obj.state == RequestState.AWAITING_APPROVAL
    own = obj.requested_by_id == user.pk
    refusal = _decider_refusal(user, obj, is_approver)
    return {
        "can_decide": is_approver and awaiting and not refusal,
        "can_correct": is_approver and awaiting and not own,
        "decider_refusal": refusal,
        "can_revise": own and is_newest and obj.state in selectors.REQUESTER_REVISABLE_STATES,
        "can_cancel": is_newest and selectors.may_cancel(user, obj),
    }


def _steps_of(obj: Request) -> dict:
    """The handoffs of an approved request's workflow instance, as a timeline, and where it stands."""
    if obj.state != RequestState.APPROVED:
        return {"steps": [], "instance_status": ""}
    steps = instance_handoffs(obj.action_key)
    return {"steps": steps, "instance_status": instance_status(steps) if steps else ""}


def _correction(obj: Request) -> CorrectionForm:
    """The approver's correction form: the offered fields, labelled and typed by the rules' schema."""
    return CorrectionForm(
        schema=rules_for(obj.workflow).schema, offered=selectors.approver_correctable(obj.payload)
    )


def _routes(obj: Request) -> RoutesShown | None:
    """What each routed step will send if approved, while the revision awaits a decision."""
    if obj.state != RequestState.AWAITING_APPROVAL:
        return None
    return routes_shown(obj.payload, rules_for(obj.workflow).steps)


def detail_context(
    request, obj: Request, result: dict | None = None, replaced: Request | None = None
) -> dict:
    """`replaced`: the revision the approver had on screen when this one replaced it (its diff is shown)."""
    newest = selectors.current_revision(
        workspace_id=obj.workspace_id, number=obj.number, workflow=obj.workflow
    )
    replaced = replaced or _previous_revision(obj)
    is_approver = selectors.may_decide_in(request.user, obj.workspace_id)
    # The requester reads back what they typed (their own e-mail); secrets and others' values stay hidden.
    shown = payload_shown_to(request.user, obj)
    return {
        "req": obj,
        "payload": shown,
        "newest": newest,
        "evidence": selectors.request_evidence(obj),
        "events": obj.events.select_related("actor").order_by("at", "id"),
        "decisions": obj.decisions.select_related("decided_by"),
        "handoff": handoffs_in([obj.workspace_id]).filter(source_id=obj.pk).first(),
        **_steps_of(obj),
        "is_approver": is_approver,
        **_what_the_user_may_do(request.user, obj, newest, is_approver),
        "result": result,
        "correction": _correction(obj),
        "routes": _routes(obj),
        "status": statuses_of([obj])[obj.pk],
        "replaced": replaced,
        "changes": selectors.revision_changes(replaced, obj) if replaced is not None else [],
        "newer_changes": selectors.revision_changes(obj, newest)
        if newest and newest.pk != obj.pk
        else [],
    }


def detail_url(obj: Request) -> str:
    return reverse("approvals:detail", args=(obj.workspace_id, obj.number, obj.revision))


@require_GET
@login_required
def detail(request, workspace_id: int, number: int, revision: int) -> HttpResponse:
    obj = visible_revision(request, workspace_id, number, revision)
    return render(
        request,
        "approvals/detail.html",
        detail_context(request, obj),
    )


def _decision_refused(
    request, obj: Request, decision: str | None, reason: str
) -> tuple[dict, int] | None:
    """Why the decision cannot be taken as posted (the result and status), or None to go on."""
    if not selectors.may_decide_in(request.user, obj.workspace_id):
        return {
            "level": "error",
            "text": f"Not allowed: deciding needs the approver role in workspace "
            f"{obj.workspace_id}. Nothing was decided.",
        }, 403
    if decision not in ("approve", "reject"):
        return {"level": "error", "text": "Choose approve or reject."}, 422
    if decision == "reject" and not request.POST.get("confirm"):
        # Rejecting ends the request: ask once more, naming what is rejected and why.
        if not reason:
            return {
                "level": "error",
                "text": "Not decided: a reason is required to reject a request.",
            }, 422
        return {
            "level": "warning",
            "confirm_reject": True,
            "reason": reason,
            "text": f"Reject request {obj.number} revision {obj.revision}? The requester sees your reason.",
        }, 200
    return None


def _approved(handoff: Handoff) -> dict:
    where = (
        "recorded in observe-only mode: it will not be sent"
        if handoff.state == HandoffState.OBSERVED
        else "recorded and queued for delivery"
    )
    return {
        "level": "success",
        "text": f"Approved. Handoff {handoff.action_key} is {where}.",
        "link": reverse("outbox:detail", args=(handoff.pk,)),
        "link_text": "the handoff",
    }


def _stale(obj: Request, exc: StaleRevision) -> tuple[dict, int, Request]:
    """Show the current version instead of deciding: the approver must see what they approve."""
    shown = (
        selectors.current_revision(
            workspace_id=obj.workspace_id, number=obj.number, workflow=obj.workflow
        )
        or obj
    )
    return (
        {
            "level": "warning",
            "text": f"Not decided: the request changed since you saw it ({exc}). "
            f"Here is the current version, revision {shown.revision}. Review it before deciding.",
        },
        409,
        shown,
    )


def _take_decision(request, obj: Request, decision: str, reason: str) -> tuple[dict, int, Request]:
    """Approve or reject through the service: the result, its status and the revision to show after."""
    shown_hash = request.POST.get("payload_hash", "")
    ids = {"workspace_id": obj.workspace_id, "number": obj.number, "revision": obj.revision}
    try:
        if decision == "approve":
            handoff = services.request_approve(
                **ids,
                actor=request.user,
                payload_hash=shown_hash,
                reason=reason,
                # The page posts the hash of the requests it showed. A form without it (a page opened
                # before the rules mapped any step) binds only where nothing is mapped: with mapped steps
                # it is stale, and the approver is shown what each destination will receive.
                requests_hash=request.POST.get("requests_hash", ""),
            )
            return _approved(handoff), 200, obj
        services.request_reject(**ids, actor=request.user, payload_hash=shown_hash, reason=reason)
        rejected = f"Rejected request {obj.number} revision {obj.revision}."
        return {"level": "success", "text": rejected}, 200, obj
    except StaleRevision as exc:
        return _stale(obj, exc)
    except ApprovalDenied as exc:
        return {"level": "error", "text": f"Not allowed: {exc}. Nothing was decided."}, 403, obj
    except InvalidPayload as exc:
        return {"level": "error", "text": "Not decided: " + "; ".join(exc.reasons)}, 422, obj
    except ApprovalsError as exc:
        return {"level": "error", "text": f"Not decided: {exc}."}, 409, obj
    except ActionKeyExists as exc:
        # Its handoff is still in the outbox or was archived: a second one would be a second effect.
        text = f"Not decided: action key {exc} was recorded before; nothing was written."
        return {"level": "error", "text": text}, 409, obj


@require_POST
@login_required
def decide(request, workspace_id: int, number: int, revision: int) -> HttpResponse:
    obj = visible_revision(request, workspace_id, number, revision)
    decision, reason = request.POST.get("decision"), request.POST.get("reason", "").strip()
    refused = _decision_refused(request, obj, decision, reason)
    result, status, shown = (
        (*refused, obj) if refused else _take_decision(request, obj, decision, reason)
    )
    return _decision_response(request, obj, shown, result, status)


def _decision_response(
    request, obj: Request, shown: Request, result: dict, status: int
) -> HttpResponse:
    shown = Request.objects.select_related("workspace", "requested_by", "corrected_by").get(
        pk=shown.pk
    )
    replaced = obj if shown.pk != obj.pk else None
    if request.htmx or result.get("confirm_reject") or replaced is not None:
        context = detail_context(request, shown, result, replaced=replaced)
        if request.htmx:
            response = render(
                request, "approvals/detail.html#request-detail", context, status=status
            )
            return push_url(response, detail_url(shown)) if replaced is not None else response
        # Without htmx: the confirmation, or the current revision with its differences, as a whole page.
        return render(
            request,
            "approvals/detail.html",
            context,
            status=status,
        )
    level = {"success": messages.SUCCESS, "warning": messages.WARNING}.get(
        result["level"], messages.ERROR
    )
    messages.add_message(request, level, result["text"])
    if status == 403:
        return render(
            request,
            "approvals/detail.html",
            detail_context(request, shown),
            status=403,
        )
    return redirect(detail_url(shown))


# --- Requesters: submit, follow and revise their requests ------------------------------------------
