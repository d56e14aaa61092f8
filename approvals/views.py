"""Console views of requests: home, the approvals queue, a request revision and its decision.

Thin: parse, authorize (workspace scope and role), call one service, render. A request of another
workspace is a 404; deciding needs the approver role (403 with a message otherwise).
"""

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpResponse, HttpResponseBadRequest
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_POST
from django_htmx.http import push_url

from approvals import selectors, services
from approvals.errors import ApprovalDenied, ApprovalsError, InvalidPayload, StaleRevision
from approvals.models import Request, RequestState, Role
from approvals.querystring import BadQueryValue, parse_id, parse_keyset_cursor
from outbox.redaction import redact
from outbox.selectors import handoffs_in, keyset_page

PAGE_SIZE = 50


@require_GET
@login_required
def home(request) -> HttpResponse:
    visible = selectors.workspace_ids_for(request.user)
    attention = (handoffs_in(visible).filter(state__in=("needs_attention", "uncertain"))
                 .order_by("created_at", "id")[:20])
    return render(
        request,
        "approvals/home.html",
        {
            "nav": selectors.console_nav(request.user),
            "awaiting": selectors.requests_awaiting_decision(request.user)[:10],
            "handoffs": attention,
        },
    )


@require_GET
@login_required
def queue(request) -> HttpResponse:
    try:
        workspace = parse_id(request.GET.get("workspace", ""), name="workspace")
        after = parse_keyset_cursor(request.GET.get("after", ""), name="after")
    except BadQueryValue as exc:
        return HttpResponseBadRequest(f"Bad request: {exc}.", content_type="text/plain; charset=utf-8")
    awaiting = selectors.requests_awaiting_decision(request.user)
    if workspace is not None:
        awaiting = awaiting.filter(workspace_id=workspace)
    rows, more = keyset_page(awaiting, after=after, size=PAGE_SIZE, newest_first=False)
    next_after = f"{rows[-1].created_at.isoformat()}_{rows[-1].pk}" if more else ""
    return render(request, "approvals/queue.html", {
        "requests": rows, "next_after": next_after, "workspace": workspace or "",
        "nav": selectors.console_nav(request.user),
    })


@require_GET
@login_required
def role_changes(request) -> HttpResponse:
    """Who was given or lost which role, in the workspaces where the user is an operator."""
    return render(request, "approvals/role_changes.html", {
        "changes": selectors.role_changes_visible_to(request.user),
        "is_operator": bool(selectors.workspace_ids_for(request.user, Role.OPERATOR)),
        "nav": selectors.console_nav(request.user),
    })


def _visible_revision(request, workspace_id: int, number: int, revision: int) -> Request:
    if workspace_id not in selectors.workspace_ids_for(request.user):
        raise Http404("no such request")
    obj = (Request.objects.select_related("workspace", "requested_by")
           .filter(workspace_id=workspace_id, number=number, revision=revision).first())
    if obj is None:
        raise Http404("no such request")
    return obj


def _detail_context(request, obj: Request, result: dict | None = None) -> dict:
    newest = selectors.current_revision(workspace_id=obj.workspace_id, number=obj.number, workflow=obj.workflow)
    is_approver = selectors.user_has_role(request.user, obj.workspace_id, Role.APPROVER)
    handoff = handoffs_in([obj.workspace_id]).filter(source_id=obj.pk).first()
    return {
        "req": obj,
        "payload": redact(obj.payload),
        "newest": newest,
        "evidence": selectors.request_evidence(obj),
        "events": obj.events.select_related("actor").order_by("at", "id"),
        "decisions": obj.decisions.select_related("decided_by"),
        "handoff": handoff,
        "is_approver": is_approver,
        "can_decide": is_approver and obj.requested_by_id != request.user.pk
        and obj.state == RequestState.AWAITING_APPROVAL,
        "result": result,
    }


def _detail_url(obj: Request) -> str:
    return reverse("approvals:detail", args=(obj.workspace_id, obj.number, obj.revision))


@require_GET
@login_required
def detail(request, workspace_id: int, number: int, revision: int) -> HttpResponse:
    obj = _visible_revision(request, workspace_id, number, revision)
    return render(request, "approvals/detail.html",
                  {**_detail_context(request, obj), "nav": selectors.console_nav(request.user)})


@require_POST
@login_required
def decide(request, workspace_id: int, number: int, revision: int) -> HttpResponse:
    obj = _visible_revision(request, workspace_id, number, revision)
    decision = request.POST.get("decision")
    shown_hash = request.POST.get("payload_hash", "")
    reason = request.POST.get("reason", "").strip()
    status = 200
    shown = obj
    if not selectors.user_has_role(request.user, workspace_id, Role.APPROVER):
        result = {"level": "error", "text": f"Not allowed: deciding needs the approver role in workspace "
                  f"{workspace_id}. Nothing was decided."}
        status = 403
    elif decision not in ("approve", "reject"):
        result = {"level": "error", "text": "Choose approve or reject."}
        status = 422
    else:
        try:
            if decision == "approve":
                handoff = services.request_approve(workspace_id=workspace_id, number=number, revision=revision,
                                                   actor=request.user, payload_hash=shown_hash, reason=reason)
                where = ("recorded in observe-only mode: it will not be sent" if handoff.state == "observed"
                         else "recorded and queued for delivery")
                result = {"level": "success", "text": f"Approved. Handoff {handoff.action_key} is {where}.",
                          "link": reverse("outbox:detail", args=(handoff.pk,)),
                          "link_text": "the handoff"}
            else:
                services.request_reject(workspace_id=workspace_id, number=number, revision=revision,
                                        actor=request.user, payload_hash=shown_hash, reason=reason)
                result = {"level": "success", "text": f"Rejected request {number} revision {revision}."}
        except StaleRevision as exc:
            # Show the current version instead of deciding: the approver must see what they approve.
            shown = selectors.current_revision(workspace_id=workspace_id, number=number,
                                               workflow=obj.workflow) or obj
            result = {"level": "warning", "text": f"Not decided: the request changed since you saw it ({exc}). "
                      f"Here is the current version, revision {shown.revision}. Review it before deciding."}
            status = 409
        except ApprovalDenied as exc:
            result = {"level": "error", "text": f"Not allowed: {exc}. Nothing was decided."}
            status = 403
        except InvalidPayload as exc:
            result = {"level": "error", "text": "Not decided: " + "; ".join(exc.reasons)}
            status = 422
        except ApprovalsError as exc:
            result = {"level": "error", "text": f"Not decided: {exc}."}
            status = 409
    shown = Request.objects.select_related("workspace", "requested_by").get(pk=shown.pk)
    if request.htmx:
        response = render(request, "approvals/detail.html#request-detail",
                          _detail_context(request, shown, result), status=status)
        return push_url(response, _detail_url(shown)) if shown.pk != obj.pk else response
    level = {"success": messages.SUCCESS, "warning": messages.WARNING}.get(result["level"], messages.ERROR)
    messages.add_message(request, level, result["text"])
    if status == 403:
        return render(request, "approvals/detail.html",
                      {**_detail_context(request, shown), "nav": selectors.console_nav(request.user)}, status=403)
    return redirect(_detail_url(shown))
