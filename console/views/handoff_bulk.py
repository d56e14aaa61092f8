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
from console.views.handoff_list import _filter_data, _list_context
from lib.htmx import HtmxHttpRequest
from lib.querystring import id_or_none
from outbox import services
from outbox.errors import (
    InvalidActionInput,
)
from outbox.guidance import BULK_ELIGIBLE_STATES
from outbox.models import BulkJob, Handoff
from outbox.selectors import (
    handoffs_in,
)
from outbox.services import BULK_INLINE_LIMIT

# A bulk action runs inside the web request; above this many matches it asks for a narrower filter.
# The most handoffs one bulk action may cover; above BULK_INLINE_LIMIT it runs as a background job.
BULK_JOB_LIMIT = 100_000


@require_POST
@login_required
def handoff_bulk(request: HtmxHttpRequest) -> HttpResponse:
    """Bulk retry / reconcile / assign / cancel / acknowledge over every handoff matching the posted filter
    (not only the page).

    First post: show how many match and ask to confirm. Second post (with `bulk_confirm`): apply to the same
    filter, bounded by the highest id seen at preview so rows created since are left alone; more than
    `BULK_INLINE_LIMIT` matches run as a background job whose progress the panel shows.
    """
    data = _filter_data(request.POST)
    action = request.POST.get("bulk_action", "")
    operator_ws = workspace_ids_for(request.user, Role.OPERATOR)
    bulk, status = _bulk_refusal(request, action, data, operator_ws)
    if status == 200:
        matching = HandoffFilter(
            data or None,
            queryset=handoffs_in(operator_ws).filter(state__in=BULK_ELIGIBLE_STATES[action]),
            request=request,
            workspace_ids=operator_ws,
        ).qs
        bulk = (_bulk_confirm if request.POST.get("bulk_confirm") else _bulk_preview)(
            request, action, matching
        )
    context = {**_list_context(request, data), "bulk": bulk}
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
    ids = list(matching.order_by("id").values_list("id", flat=True)[: BULK_JOB_LIMIT + 1])
    if len(ids) > BULK_JOB_LIMIT:
        return {
            "action": action,
            "level": "warning",
            "text": f"More than {BULK_JOB_LIMIT} handoffs match. Narrow "
            "the filter first: a bulk action applies to every match or to none.",
        }
    if not ids:
        return {
            "action": action,
            "level": "info",
            "text": f"No handoff matching this filter can be {_verb(action)}.",
        }
    return {
        "action": action,
        "confirm": True,
        "count": len(ids),
        "upto": max(ids),
        "owner": owner_raw,
        "reason": reason,
        "owner_name": _owner_name(owner_raw),
        "background": len(ids) > BULK_INLINE_LIMIT,
    }


def _bulk_confirm(request, action: str, matching) -> dict:
    upto = id_or_none(request.POST.get("bulk_upto", ""))
    ids = list(
        matching.filter(id__lte=upto or 0)
        .order_by("id")
        .values_list("id", flat=True)[:BULK_JOB_LIMIT]
    )
    owner_raw, reason = (
        request.POST.get("bulk_owner", ""),
        request.POST.get("bulk_reason", "").strip(),
    )
    if len(ids) <= BULK_INLINE_LIMIT:
        return {"action": action, **_bulk_apply(request, action, ids, owner_raw, reason)}
    owner = user_by_id(owner_raw) if owner_raw else None
    try:
        job = services.bulk_job_start(
            action=action, handoff_ids=ids, actor=request.user, owner=owner, reason=reason
        )
    except InvalidActionInput as exc:
        return {"action": action, "level": "error", "text": f"Nothing was done: {exc}."}
    return {
        "action": action,
        "job": job,
        "level": "info",
        "text": f"{len(ids)} handoffs: running in the background; the progress shows below.",
    }


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


def _bulk_apply(
    request: HtmxHttpRequest, action: str, ids: list[int], owner_raw: str, reason: str
) -> dict:
    owner = None
    if action == "assign" and owner_raw:
        owner = user_by_id(owner_raw)
        if owner is None:
            return {"level": "error", "text": "Choose an operator to assign to."}
    try:
        result = services.handoffs_bulk_apply(
            action=action, handoff_ids=ids, actor=request.user, owner=owner, reason=reason
        )
    except InvalidActionInput as exc:
        return {"level": "error", "text": f"Nothing was done: {exc}."}
    text = f"{_verb(action).capitalize()} {result.done} of {result.total} matching handoffs."
    if action == "retry" and result.done:
        text += " The dispatcher sends them with their same action keys."
    return {
        "level": "warning" if result.skipped else "success",
        "text": text,
        "skipped": sorted(result.skipped.items()),
    }
