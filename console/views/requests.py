"""Console views of requests: home, the approvals queue, a request revision and its decision.

Thin: parse, authorize (workspace scope and role), call one service, render. A request of another
workspace is a 404; deciding needs the approver role (403 with a message otherwise).
"""

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpResponse, HttpResponseBadRequest
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_http_methods, require_POST
from django_htmx.http import push_url

from approvals import selectors, services
from approvals.errors import ApprovalDenied, ApprovalsError, InvalidPayload, StaleRevision
from approvals.models import Request, RequestState, Role
from approvals.rules import rules_for
from console import selectors as console_selectors
from console.forms import RequestForm
from lib.paging import keyset_page
from lib.querystring import BadQueryValue, parse_id, parse_keyset_cursor
from outbox.errors import OutboxError
from outbox.redaction import redact
from outbox.selectors import handoffs_in, instance_handoffs, instance_status
from reconciliation.selectors import needing_person

PAGE_SIZE = 50


@require_GET
@login_required
def home(request) -> HttpResponse:
    visible = selectors.workspace_ids_for(request.user)
    # The one "needs a person" rule: needs attention, uncertain, or with an open reconciliation finding.
    attention = needing_person(handoffs_in(visible)).order_by("created_at", "id")[:20]
    return render(
        request,
        "approvals/home.html",
        {
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
        return HttpResponseBadRequest(
            f"Bad request: {exc}.", content_type="text/plain; charset=utf-8"
        )
    awaiting = selectors.requests_awaiting_decision(request.user)
    if workspace is not None:
        awaiting = awaiting.filter(workspace_id=workspace)
    rows, more = keyset_page(awaiting, after=after, size=PAGE_SIZE, newest_first=False)
    next_after = f"{rows[-1].created_at.isoformat()}_{rows[-1].pk}" if more else ""
    return render(
        request,
        "approvals/queue.html",
        {
            "requests": rows,
            "next_after": next_after,
            "workspace": workspace or "",
        },
    )


@require_GET
@login_required
def role_changes(request) -> HttpResponse:
    """Who was given or lost which role, in the workspaces where the user is an operator."""
    return render(
        request,
        "approvals/role_changes.html",
        {
            "changes": selectors.role_changes_visible_to(request.user),
            "is_operator": bool(selectors.workspace_ids_for(request.user, Role.OPERATOR)),
        },
    )


def _visible_revision(request, workspace_id: int, number: int, revision: int) -> Request:
    if workspace_id not in selectors.workspace_ids_for(request.user):
        raise Http404("no such request")
    obj = (
        Request.objects.select_related("workspace", "requested_by")
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


def _what_the_user_may_do(user, obj: Request, newest: Request | None, is_approver: bool) -> dict:
    is_newest = newest is not None and newest.pk == obj.pk
    awaiting = obj.state == RequestState.AWAITING_APPROVAL
    own = obj.requested_by_id == user.pk
    return {
        "can_decide": is_approver and not own and awaiting,
        "can_revise": own and is_newest and obj.state in selectors.REQUESTER_REVISABLE_STATES,
        "can_cancel": is_newest and selectors.may_cancel(user, obj),
    }


def _steps_of(obj: Request) -> dict:
    """The handoffs of an approved request's workflow instance, as a timeline, and where it stands."""
    if obj.state != RequestState.APPROVED:
        return {"steps": [], "instance_status": ""}
    steps = instance_handoffs(obj.action_key)
    return {"steps": steps, "instance_status": instance_status(steps) if steps else ""}


def _detail_context(
    request, obj: Request, result: dict | None = None, replaced: Request | None = None
) -> dict:
    """`replaced`: the revision the approver had on screen when this one replaced it (its diff is shown)."""
    newest = selectors.current_revision(
        workspace_id=obj.workspace_id, number=obj.number, workflow=obj.workflow
    )
    replaced = replaced or _previous_revision(obj)
    is_approver = selectors.user_has_role(request.user, obj.workspace_id, Role.APPROVER)
    shown = redact(obj.payload)
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
        "correctable": list(selectors.approver_correctable(obj.payload).items()),
        "replaced": replaced,
        "changes": selectors.revision_changes(replaced, obj) if replaced is not None else [],
        "newer_changes": selectors.revision_changes(obj, newest)
        if newest and newest.pk != obj.pk
        else [],
    }


def _detail_url(obj: Request) -> str:
    return reverse("approvals:detail", args=(obj.workspace_id, obj.number, obj.revision))


@require_GET
@login_required
def detail(request, workspace_id: int, number: int, revision: int) -> HttpResponse:
    obj = _visible_revision(request, workspace_id, number, revision)
    return render(
        request,
        "approvals/detail.html",
        _detail_context(request, obj),
    )


def _decision_refused(
    request, obj: Request, decision: str | None, reason: str
) -> tuple[dict, int] | None:
    """Why the decision cannot be taken as posted (the result and status), or None to go on."""
    if not selectors.user_has_role(request.user, obj.workspace_id, Role.APPROVER):
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


def _take_decision(request, obj: Request, decision: str, reason: str) -> tuple[dict, int, Request]:
    """Approve or reject through the service: the result, its status and the revision to show after."""
    shown_hash = request.POST.get("payload_hash", "")
    ids = {"workspace_id": obj.workspace_id, "number": obj.number, "revision": obj.revision}
    try:
        if decision == "approve":
            handoff = services.request_approve(
                **ids, actor=request.user, payload_hash=shown_hash, reason=reason
            )
            where = (
                "recorded in observe-only mode: it will not be sent"
                if handoff.state == "observed"
                else "recorded and queued for delivery"
            )
            return (
                {
                    "level": "success",
                    "text": f"Approved. Handoff {handoff.action_key} is {where}.",
                    "link": reverse("outbox:detail", args=(handoff.pk,)),
                    "link_text": "the handoff",
                },
                200,
                obj,
            )
        services.request_reject(**ids, actor=request.user, payload_hash=shown_hash, reason=reason)
        return (
            {"level": "success", "text": f"Rejected request {obj.number} revision {obj.revision}."},
            200,
            obj,
        )
    except StaleRevision as exc:
        # Show the current version instead of deciding: the approver must see what they approve.
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
    except ApprovalDenied as exc:
        return {"level": "error", "text": f"Not allowed: {exc}. Nothing was decided."}, 403, obj
    except InvalidPayload as exc:
        return {"level": "error", "text": "Not decided: " + "; ".join(exc.reasons)}, 422, obj
    except ApprovalsError as exc:
        return {"level": "error", "text": f"Not decided: {exc}."}, 409, obj


@require_POST
@login_required
def decide(request, workspace_id: int, number: int, revision: int) -> HttpResponse:
    obj = _visible_revision(request, workspace_id, number, revision)
    decision, reason = request.POST.get("decision"), request.POST.get("reason", "").strip()
    refused = _decision_refused(request, obj, decision, reason)
    result, status, shown = (
        (*refused, obj) if refused else _take_decision(request, obj, decision, reason)
    )
    return _decision_response(request, obj, shown, result, status)


def _decision_response(
    request, obj: Request, shown: Request, result: dict, status: int
) -> HttpResponse:
    shown = Request.objects.select_related("workspace", "requested_by").get(pk=shown.pk)
    replaced = obj if shown.pk != obj.pk else None
    if request.htmx or result.get("confirm_reject") or replaced is not None:
        context = _detail_context(request, shown, result, replaced=replaced)
        if request.htmx:
            response = render(
                request, "approvals/detail.html#request-detail", context, status=status
            )
            return push_url(response, _detail_url(shown)) if replaced is not None else response
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
            _detail_context(request, shown),
            status=403,
        )
    return redirect(_detail_url(shown))


# --- Requesters: submit, follow and revise their requests ------------------------------------------


def _requester_workspaces_or_403(request, page: str) -> list[tuple[int, str]]:
    workspaces = selectors.requester_workspaces(request.user)
    if not workspaces:
        raise PermissionDenied(
            f"{page} is for requesters: you are not a requester in any workspace"
        )
    return workspaces


def _form_context(request, form: RequestForm, **extra) -> dict:
    return {"form": form, **extra}


@require_http_methods(["GET", "POST"])
@login_required
def request_new(request) -> HttpResponse:
    """A new request, its form generated from the rules in force; the rules' reasons shown at their fields."""
    workspaces = _requester_workspaces_or_403(request, "New request")
    rules = rules_for("onboarding")
    form = RequestForm(request.POST or None, schema=rules.schema, workspaces=workspaces)
    status = 200
    if request.method == "POST":
        if form.is_valid():
            try:
                created = services.request_submit(
                    workspace_id=form.cleaned_data["workspace"],
                    payload=form.payload(),
                    requested_by=request.user,
                )
            except InvalidPayload as exc:
                form.add_reasons(exc.reasons)
            except ApprovalsError as exc:
                form.add_error(None, f"Not submitted: {exc}.")
            else:
                messages.success(
                    request, f"Submitted request {created.number}: it awaits an approver."
                )
                return redirect(_detail_url(created))
        status = 422
    return render(
        request,
        "approvals/request_form.html",
        _form_context(request, form, rules=rules, title="New request"),
        status=status,
    )


@require_GET
@login_required
def my_requests(request) -> HttpResponse:
    _requester_workspaces_or_403(request, "My requests")
    return render(
        request,
        "approvals/mine.html",
        {
            "requests": console_selectors.requests_of(request.user),
        },
    )


def _revision_initial(current: Request) -> tuple[dict, list[str]]:
    """The form's starting values: the current payload, redacted; hidden fields start blank and are kept."""
    shown = redact(current.payload)
    hidden = [k for k, v in current.payload.items() if shown.get(k) != v]
    return {k: ("" if k in hidden else v) for k, v in shown.items()}, hidden


@require_http_methods(["GET", "POST"])
@login_required
def request_revise(request, workspace_id: int, number: int) -> HttpResponse:
    """The requester's new revision of their request (it needs a new approval)."""
    current = selectors.current_revision(workspace_id=workspace_id, number=number)
    if current is None or workspace_id not in selectors.workspace_ids_for(request.user):
        raise Http404("no such request")
    if current.requested_by_id != request.user.pk:
        raise PermissionDenied(f"Revise request {number}: only its requester revises it")
    rules = rules_for(current.workflow)
    initial, hidden = _revision_initial(current)
    form = RequestForm(request.POST or None, schema=rules.schema, initial=initial, with_reason=True)
    status = 200
    if request.method == "POST":
        if form.is_valid():
            try:
                revised = services.request_revise_by_requester(
                    workspace_id=workspace_id,
                    number=number,
                    payload=form.payload(),
                    actor=request.user,
                    reason=form.cleaned_data.get("reason", ""),
                    keep_if_missing=hidden,
                    workflow=current.workflow,
                )
            except InvalidPayload as exc:
                form.add_reasons(exc.reasons)
            except ApprovalsError as exc:
                form.add_error(None, f"Not revised: {exc}.")
            else:
                messages.success(
                    request, f"Revision {revised.revision} of request {number} awaits an approver."
                )
                return redirect(_detail_url(revised))
        status = 422
    return render(
        request,
        "approvals/request_form.html",
        _form_context(
            request,
            form,
            rules=rules,
            current=current,
            hidden=hidden,
            title=f"Revise request {number}",
        ),
        status=status,
    )


# --- Correct (approvers) and cancel ---------------------------------------------------------------------


@require_POST
@login_required
def request_correct(request, workspace_id: int, number: int, revision: int) -> HttpResponse:
    obj = _visible_revision(request, workspace_id, number, revision)
    edits = {
        key.removeprefix("field_"): value
        for key, value in request.POST.items()
        if key.startswith("field_")
    }
    try:
        corrected = services.request_correct_by_approver(
            workspace_id=workspace_id,
            number=number,
            revision=revision,
            actor=request.user,
            edits=edits,
            payload_hash=request.POST.get("payload_hash", ""),
            reason=request.POST.get("reason", ""),
        )
    except ApprovalsError as exc:
        return _refused(request, obj, exc)
    messages.success(
        request, f"Sent back as revision {corrected.revision}: another approver decides it."
    )
    return redirect(_detail_url(corrected))


@require_POST
@login_required
def request_cancel(request, workspace_id: int, number: int) -> HttpResponse:
    obj = selectors.current_revision(
        workspace_id=workspace_id, number=number, workflow="onboarding"
    )
    if obj is None or workspace_id not in selectors.workspace_ids_for(request.user):
        raise Http404("no such request")
    try:
        services.request_cancel(
            workspace_id=workspace_id,
            number=number,
            actor=request.user,
            reason=request.POST.get("reason", ""),
        )
    except (ApprovalsError, OutboxError) as exc:
        return _refused(request, obj, exc)
    messages.success(request, f"Request {number} cancelled.")
    return redirect(_detail_url(obj))


def _refused(request, obj: Request, exc: Exception) -> HttpResponse:
    """The request page again, saying why nothing was done (403, 409 or 422)."""
    status = (
        403 if isinstance(exc, ApprovalDenied) else 422 if isinstance(exc, InvalidPayload) else 409
    )
    text = "; ".join(exc.reasons) if isinstance(exc, InvalidPayload) else str(exc)
    context = _detail_context(request, obj, {"level": "error", "text": f"Not done: {text}."})
    return render(
        request,
        "approvals/detail.html",
        context,
        status=status,
    )
