"""Changes to a request after it was submitted: the requester's revision, the approver's correction, a
cancellation."""

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_http_methods, require_POST

from approvals import selectors, services
from approvals.errors import ApprovalDenied, ApprovalsError, InvalidPayload
from approvals.models import Request
from approvals.rules import rules_for
from console.forms import RequestForm
from console.own_fields import payload_shown_to
from console.views.request_detail import detail_context, detail_url, visible_revision
from console.views.requests import form_context
from outbox.errors import OutboxError


def _revision_initial(user, current: Request) -> tuple[dict, list[str]]:
    """The form's starting values: the current payload as the requester may see it (what they typed
    themselves, secrets masked); hidden fields start blank and are kept."""
    shown = payload_shown_to(user, current)
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
    initial, hidden = _revision_initial(request.user, current)
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
                return redirect(detail_url(revised))
        status = 422
    return render(
        request,
        "approvals/request_form.html",
        form_context(
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
    obj = visible_revision(request, workspace_id, number, revision)
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
    return redirect(detail_url(corrected))


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
    return redirect(detail_url(obj))


def _refused(request, obj: Request, exc: Exception) -> HttpResponse:
    """The request page again, saying why nothing was done (403, 409 or 422)."""
    status = (
        403 if isinstance(exc, ApprovalDenied) else 422 if isinstance(exc, InvalidPayload) else 409
    )
    text = "; ".join(exc.reasons) if isinstance(exc, InvalidPayload) else str(exc)
    context = detail_context(request, obj, {"level": "error", "text": f"Not done: {text}."})
    return render(
        request,
        "approvals/detail.html",
        context,
        status=status,
    )
