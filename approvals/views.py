from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET, require_POST
from django_htmx.http import HttpResponseClientRedirect

from approvals import selectors, services
from approvals.errors import ApprovalDenied, ApprovalsError, InvalidPayload, StaleRevision
from approvals.models import Request, Role
from outbox.redaction import redact
from outbox.selectors import handoffs_in


@require_GET
@login_required
def home(request: HttpRequest) -> HttpResponse:
    return render(
        request,
        "approvals/home.html",
        {
            "workspaces": selectors.workspaces_for(request.user),
            "requests": selectors.requests_visible_to(request.user).order_by("-created_at", "-id")[:50],
            "handoffs": handoffs_in(selectors.workspace_ids_for(request.user)).order_by("-created_at", "-id")[:50],
        },
    )


@require_GET
@login_required
def queue(request: HttpRequest) -> HttpResponse:
    awaiting = selectors.requests_awaiting_decision(request.user)[:200]
    return render(request, "approvals/queue.html", {"requests": awaiting})


def _visible_revision(request: HttpRequest, workspace_id: int, number: int, revision: int) -> Request:
    if workspace_id not in selectors.workspace_ids_for(request.user):
        raise Http404("no such request")
    obj = (Request.objects.select_related("workspace", "requested_by")
           .filter(workspace_id=workspace_id, number=number, revision=revision).first())
    if obj is None:
        raise Http404("no such request")
    return obj


@require_GET
@login_required
def detail(request: HttpRequest, workspace_id: int, number: int, revision: int) -> HttpResponse:
    obj = _visible_revision(request, workspace_id, number, revision)
    newest = selectors.current_revision(workspace_id=workspace_id, number=number, workflow=obj.workflow)
    return render(
        request,
        "approvals/detail.html",
        {
            "req": obj,
            "payload": redact(obj.payload),
            "newest": newest,
            "events": obj.events.select_related("actor").order_by("at", "id"),
            "decisions": obj.decisions.select_related("decided_by"),
            "can_decide": selectors.user_has_role(request.user, workspace_id, Role.APPROVER)
            and obj.requested_by_id != request.user.pk,
        },
    )


@require_POST
@login_required
def decide(request: HttpRequest, workspace_id: int, number: int, revision: int) -> HttpResponse:
    obj = _visible_revision(request, workspace_id, number, revision)
    decision = request.POST.get("decision")
    shown_hash = request.POST.get("payload_hash", "")
    reason = request.POST.get("reason", "")
    try:
        if decision == "approve":
            handoff = services.request_approve(workspace_id=workspace_id, number=number, revision=revision,
                                               actor=request.user, payload_hash=shown_hash, reason=reason)
            messages.success(request, f"Approved. Handoff {handoff.action_key} is pending delivery.")
        elif decision == "reject":
            services.request_reject(workspace_id=workspace_id, number=number, revision=revision,
                                    actor=request.user, payload_hash=shown_hash, reason=reason)
            messages.success(request, f"Rejected request {number} revision {revision}.")
        else:
            messages.error(request, "Choose approve or reject.")
    except StaleRevision as exc:
        messages.warning(request, f"Not decided: {exc}. Review the current version below.")
        newest = selectors.current_revision(workspace_id=workspace_id, number=number, workflow=obj.workflow)
        target = newest or obj
        url = f"/approvals/{target.workspace_id}/{target.number}/{target.revision}/"
        return HttpResponseClientRedirect(url) if request.htmx else redirect(url)
    except ApprovalDenied as exc:
        messages.error(request, f"Not allowed: {exc}.")
    except InvalidPayload as exc:
        messages.error(request, "; ".join(exc.reasons))
    except ApprovalsError as exc:
        messages.error(request, str(exc))
    url = f"/approvals/{workspace_id}/{number}/{revision}/"
    return HttpResponseClientRedirect(url) if request.htmx else redirect(url)
