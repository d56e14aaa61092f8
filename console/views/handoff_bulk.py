"""Bulk actions over every handoff a filter matches: preview, confirm, and background jobs."""

from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET, require_POST

from approvals.models import Role
from approvals.selectors import (
    user_by_id,
    workspace_ids_for,
)
from console.filters import HandoffFilter
from console.views.handoff_list import filter_data, list_context
from lib.htmx import HtmxHttpRequest
from lib.querystring import id_or_none
from outbox.errors import AssigneeNotFound, InvalidActionInput
from outbox.guidance import BULK_ELIGIBLE_STATES
from outbox.models import BulkJob, Handoff
from outbox.selectors import (
    handoffs_in,
)
from outbox.services import bulk as bulk_services
from outbox.services.call_limits import calls_limited


@require_POST
@login_required
@calls_limited("bulk action")
def handoff_bulk(request: HtmxHttpRequest) -> HttpResponse:
    """Bulk retry / reconcile / assign / cancel / acknowledge over every handoff matching the posted filter
    (not only the page).

    First post: show how many match and ask to confirm. Second post (with `bulk_confirm`): apply to the same
    filter, bounded by the highest id seen at preview so rows created since are left alone; more than
    `BULK_INLINE_LIMIT` matches run as a background job whose progress the panel shows.
    """
    data = filter_data(request.POST)
    action = request.POST.get("bulk_action", "")
    operator_ws = workspace_ids_for(request.user, Role.OPERATOR)
    bulk, status = _bulk_refusal(request, action, data, operator_ws)
    if status == 200:
        matching = HandoffFilter(
            data or None,
            queryset=handoffs_in(operator_ws),
            request=request,
            workspace_ids=operator_ws,
        ).qs
        bulk = (_bulk_confirm if request.POST.get("bulk_confirm") else _bulk_preview)(
            request, action, matching
        )
    context = {**list_context(request, data), "bulk": bulk}
    if request.htmx:
        return render(request, "outbox/list.html#results", context, status=status)
    return render(request, "outbox/list.html", context, status=status)


def _bulk_refusal(
    request, action: str, data: dict[str, str], operator_ws: list[int]
) -> tuple[dict, int]:
    """Why a bulk action cannot be considered as posted ({…}, 4xx), or ({"action"}, 200) to go on."""
    bulk = {"action": action}
    if not operator_ws:
        return {
            **bulk,
            "level": "error",
            "text": "Bulk actions need the operator role in a workspace; you have none.",
        }, 403
    if action not in BULK_ELIGIBLE_STATES:
        return {
            **bulk,
            "level": "error",
            "text": "Choose retry, reconcile, assign, cancel or acknowledge.",
        }, 422
    if problems := _filter_problems(request, data, operator_ws):
        # A filter value that is not allowed must never be dropped silently: the action would then
        # apply to more handoffs than the operator asked for.
        return {
            **bulk,
            "level": "error",
            "text": "Nothing was done: " + "; ".join(problems) + ".",
        }, 422
    return bulk, 200


def _bulk_preview(request, action: str, matching) -> dict:
    owner_raw, reason = (
        request.POST.get("bulk_owner", ""),
        request.POST.get("bulk_reason", "").strip(),
    )
    preview = bulk_services.handoffs_bulk_preview(action=action, matching=matching)
    if preview.too_many:
        return {
            "action": action,
            "level": "warning",
            "text": f"More than {bulk_services.BULK_JOB_LIMIT} handoffs match. Narrow "
            "the filter first: a bulk action applies to every match or to none.",
        }
    if not preview.count:
        return {
            "action": action,
            "level": "info",
            "text": f"No handoff matching this filter can be {_verb(action)}.",
        }
    return {
        "action": action,
        "confirm": True,
        "count": preview.count,
        "upto": preview.upto,
        "owner": owner_raw,
        "reason": reason,
        "owner_name": _owner_name(owner_raw),
        "background": preview.background,
    }


def _bulk_confirm(request, action: str, matching) -> dict:
    owner_raw = request.POST.get("bulk_owner", "")
    owner = user_by_id(owner_raw) if owner_raw else None
    try:
        confirmed = bulk_services.handoffs_bulk_confirm(
            action=action,
            matching=matching,
            upto=id_or_none(request.POST.get("bulk_upto", "")),
            actor=request.user,
            owner=owner,
            reason=request.POST.get("bulk_reason", "").strip(),
            owner_missing=bool(owner_raw) and owner is None,
        )
    except AssigneeNotFound:
        return {"action": action, "level": "error", "text": "Choose an operator to assign to."}
    except InvalidActionInput as exc:
        return {"action": action, "level": "error", "text": f"Nothing was done: {exc}."}
    if confirmed.job is not None:
        return {
            "action": action,
            "job": confirmed.job,
            "level": "info",
            "text": f"{confirmed.total} handoffs: running in the background; the progress shows below.",
        }
    return {"action": action, **_applied(action, confirmed.result)}


@require_GET
@login_required
def bulk_job_progress(request: HtmxHttpRequest, pk: int) -> HttpResponse:
    """The progress of one of the user's own bulk jobs (polled by the panel until it is done)."""
    job = BulkJob.objects.filter(pk=pk, actor=request.user).first()
    if job is None:
        raise Http404("no such bulk job")
    return render(request, "outbox/list.html#bulk-job", {"job": job})


def _filter_problems(
    request: HtmxHttpRequest, data: dict[str, str], workspace_ids: list[int]
) -> list[str]:
    """Why the posted filter cannot be used as given: each refused value with its field, else nothing."""
    handoff_filter = HandoffFilter(
        data, queryset=Handoff.objects.none(), request=request, workspace_ids=workspace_ids
    )
    if handoff_filter.is_valid():
        return []
    return [
        f"{field} {data.get(field, '')!r}: {' '.join(errors)}"
        for field, errors in sorted(handoff_filter.errors.items())
    ]


def _verb(action: str) -> str:
    return {"retry": "retried", "reconcile": "reconciled", "assign": "assigned"}.get(action, action)


def _owner_name(owner_raw: str) -> str:
    if not owner_raw:
        return "nobody"
    user = user_by_id(owner_raw)
    return user.get_username() if user else "unknown user"


def _applied(action: str, result) -> dict:
    text = f"{_verb(action).capitalize()} {result.done} of {result.total} matching handoffs."
    if action == "retry" and result.done:
        text += " The dispatcher sends them with their same action keys."
    return {
        "level": "warning" if result.skipped else "success",
        "text": text,
        "skipped": sorted(result.skipped.items()),
    }
