"""Console views of handoffs. Thin: parse, authorize (workspace scope and role), call one service, render.

Every screen answers 404 for a handoff outside the user's workspaces. Actions need the operator role
in the handoff's workspace. htmx requests get the swapped region (a table row, the detail panel or the
list results); plain requests get the whole page, so every screen works without JavaScript.
"""

from datetime import datetime
from functools import wraps
from urllib.parse import urlencode

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_POST
from django_htmx.http import push_url

from approvals import services as approval_services
from approvals.errors import ApprovalsError, InvalidPayload
from approvals.models import Role
from approvals.selectors import (
    is_operator_of,
    operators_of,
    revision_by_id,
    user_by_id,
    workspace_ids_for,
)
from console.filters import HandoffFilter
from lib.htmx import HtmxHttpRequest
from lib.paging import keyset_page
from lib.querystring import BadQueryValue, id_or_none, keyset_cursor, parse_keyset_cursor
from outbox import dispatcher, services
from outbox.destinations import get_destination
from outbox.errors import (
    AssigneeNotOperator,
    CompensationBlocked,
    InvalidActionInput,
    OutboxError,
    RiskNotConfirmed,
)
from outbox.guidance import BULK_ELIGIBLE_STATES, available_actions, next_step, retry_is_risky
from outbox.models import BulkJob, Handoff, HandoffState
from outbox.redaction import redact
from outbox.selectors import (
    correction_fields,
    destination_pause,
    handoff_timeline,
    handoff_visible,
    handoffs_in,
    instance_handoffs,
    instance_status,
    last_successful_step,
)
from outbox.services import BULK_INLINE_LIMIT
from outbox.steps import compensation_plan
from reconciliation import services as reconciliation_services
from reconciliation.errors import FindingNotOnHandoff, InvalidRepairInput, ReconciliationError
from reconciliation.selectors import live_findings_of, repairs_of

PAGE_SIZE = 50
# A bulk action runs inside the web request; above this many matches it asks for a narrower filter.
# The most handoffs one bulk action may cover; above BULK_INLINE_LIMIT it runs as a background job.
BULK_JOB_LIMIT = 100_000
# Every field the list's filter offers, taken from the filter itself: a field missing here was shown and then
# dropped, so a bulk action applied to more handoffs than the operator's filter named.
FILTER_FIELDS = tuple(HandoffFilter.base_filters)


# --- list ---------------------------------------------------------------------------------


def _parse_cursor(raw: str | None) -> tuple[datetime, int] | None:
    # A malformed cursor (impossible date, id past the integer range) restarts at the first page
    # instead of reaching the query.
    try:
        return parse_keyset_cursor(raw or "", name="after")
    except BadQueryValue:
        return None


def _filter_data(source) -> dict[str, str]:
    return {name: source.get(name, "") for name in FILTER_FIELDS if source.get(name, "")}


def _list_context(request: HtmxHttpRequest, data: dict[str, str]) -> dict:
    user = request.user
    visible = workspace_ids_for(user)
    operator_ws = set(workspace_ids_for(user, Role.OPERATOR))
    handoff_filter = HandoffFilter(
        data or None, queryset=handoffs_in(visible), request=request, workspace_ids=visible
    )
    rows, more = keyset_page(
        handoff_filter.qs, after=_parse_cursor(request.GET.get("after")), size=PAGE_SIZE
    )
    for h in rows:
        h.quick_actions = [
            a
            for a in available_actions(h)
            if a in ("acknowledge", "reconcile", "run_now")
            or (a == "retry" and not retry_is_risky(h))
        ]
    query = urlencode(data)
    next_url = ""
    if more:
        last = rows[-1]
        next_url = "?" + urlencode({**data, "after": keyset_cursor(last)})
    return {
        "filter": handoff_filter,
        "handoffs": rows,
        "operator_ws": operator_ws,
        "filter_data": data,
        "filter_query": query,
        "next_url": next_url,
        "first_url": "?" + query if request.GET.get("after") else "",
        "operators": operators_of(sorted(operator_ws)) if operator_ws else [],
    }


# Sent by static/js/console.js when it refreshes the list in the background: the address stays as it is.
REFRESH_HEADER = "X-Console-Refresh"


@require_GET
@login_required
def handoff_list(request: HtmxHttpRequest) -> HttpResponse:
    data = _filter_data(request.GET)
    context = _list_context(request, data)
    if request.htmx and not request.htmx.history_restore_request:
        response = render(request, "outbox/list.html#results", context)
        if not request.headers.get(REFRESH_HEADER):
            # The address bar always holds the filter on screen: the server names it, so Back and a
            # reload show exactly these results.
            after = {"after": request.GET["after"]} if request.GET.get("after") else {}
            query = urlencode({**data, **after})
            push_url(response, reverse("outbox:list") + (f"?{query}" if query else ""))
        return response
    return render(request, "outbox/list.html", context)


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


# --- detail and actions ---------------------------------------------------------------


def _visible_or_404(request: HtmxHttpRequest, pk: int) -> Handoff:
    handoff = handoff_visible(workspace_ids_for(request.user), pk)
    if handoff is None:
        raise Http404("no such handoff")
    return handoff


def _panel_context(request: HtmxHttpRequest, handoff: Handoff, result: dict | None = None) -> dict:
    attempts, events = handoff_timeline(handoff)
    is_operator = is_operator_of(request.user.pk, handoff.workspace_id)
    source = revision_by_id(handoff.source_id)
    # Findings carry a key of the handoff's own workspace, so the handoff's scope check covers them.
    findings = list(live_findings_of(handoff.action_key))
    return {
        "handoff": handoff,
        "payload": redact(handoff.payload),
        "attempts": attempts,
        "events": events,
        "findings": [
            {
                "finding": f,
                "source": redact(f.source_evidence),
                "receiver": redact(f.receiver_evidence),
            }
            for f in findings
        ],
        "repairs": repairs_of(handoff),
        "guidance": next_step(
            handoff, findings, paused_destination=destination_pause(handoff.destination)
        ),
        "actions": available_actions(handoff, findings) if is_operator else [],
        "risky_retry": retry_is_risky(handoff),
        "in_backoff": handoff.in_backoff,
        "is_operator": is_operator,
        "operators": operators_of([handoff.workspace_id]) if is_operator else [],
        "correction_fields": correction_fields(handoff) if is_operator else [],
        "source": source,
        "poll": handoff.with_dispatcher,
        "version": handoff.updated_at.isoformat(),
        "result": result,
        "instance": _instance_context(handoff, is_operator),
        "destination": _destination_label(handoff),
        "last_successful_step": last_successful_step(handoff),
    }


def _destination_label(handoff: Handoff) -> str:
    destination = get_destination()
    return (
        destination.describe() if handoff.destination == destination.name else handoff.destination
    )


def _instance_context(handoff: Handoff, is_operator: bool) -> dict | None:
    """The workflow instance a step belongs to: its steps side by side, where it stands, and what
    compensating it would do (shown before an operator confirms)."""
    if not handoff.step:
        return None
    steps = instance_handoffs(handoff.instance_key)
    plan = compensation_plan(steps)
    return {
        "key": handoff.instance_key,
        "steps": steps,
        "status": instance_status(steps),
        "plan": plan,
        "can_compensate": is_operator and not plan.empty and not plan.blockers,
    }


@require_GET
@login_required
def handoff_detail(request: HtmxHttpRequest, pk: int) -> HttpResponse:
    handoff = _visible_or_404(request, pk)
    if request.htmx:
        # The panel polls while the dispatcher works on the handoff; unchanged means nothing to swap.
        if request.GET.get("since") == handoff.updated_at.isoformat():
            return HttpResponse(status=204)
        return render(request, "outbox/detail.html#handoff-panel", _panel_context(request, handoff))
    return render(
        request,
        "outbox/detail.html",
        _panel_context(request, handoff),
    )


def handoff_action(view):
    """Shared frame of every handoff action: POST only, signed in, visible (404), operator (403),
    domain errors shown as messages, then the row, the panel or (without htmx) a redirect."""

    @wraps(view)
    @require_POST
    @login_required
    def wrapper(request: HtmxHttpRequest, pk: int) -> HttpResponse:
        handoff = _visible_or_404(request, pk)
        if not is_operator_of(request.user.pk, handoff.workspace_id):
            result = {
                "level": "error",
                "text": "Not allowed: handoff actions need the operator role in workspace "
                f"{handoff.workspace_id}. Ask an operator, or an administrator for the role.",
            }
            return _respond(request, handoff.pk, result, status=403)
        try:
            result = view(request, handoff)
            status = 200
        except RiskNotConfirmed as exc:
            result = {"level": "warning", "text": str(exc), "confirm_risk": True}
            status = 200
        except InvalidPayload as exc:
            result = {"level": "error", "text": "Not done: " + "; ".join(exc.reasons)}
            status = 422
        except (InvalidActionInput, InvalidRepairInput) as exc:
            result = {"level": "error", "text": f"Not done: {exc}."}
            status = 422
        except (OutboxError, ApprovalsError, ReconciliationError) as exc:
            result = {"level": "error", "text": f"Not done: {exc}."}
            status = 409
        return _respond(request, handoff.pk, result, status=status)

    return wrapper


def _respond(request: HtmxHttpRequest, pk: int, result: dict, *, status: int = 200) -> HttpResponse:
    handoff = Handoff.objects.select_related("owner").get(pk=pk)
    if request.htmx and request.POST.get("render") == "row":
        handoff.quick_actions = [
            a
            for a in available_actions(handoff)
            if a in ("acknowledge", "reconcile", "run_now")
            or (a == "retry" and not retry_is_risky(handoff))
        ]
        context = {
            "h": handoff,
            "operator_ws": set(workspace_ids_for(request.user, Role.OPERATOR)),
            "row_result": result,
        }
        return render(request, "outbox/list.html#handoff-row", context, status=status)
    if request.htmx:
        return render(
            request,
            "outbox/detail.html#handoff-panel",
            _panel_context(request, handoff, result),
            status=status,
        )
    level = {"success": messages.SUCCESS, "warning": messages.WARNING, "error": messages.ERROR}.get(
        result.get("level"), messages.INFO
    )
    messages.add_message(request, level, result["text"])
    if status == 403:
        return render(
            request,
            "outbox/detail.html",
            _panel_context(request, handoff),
            status=403,
        )
    return redirect("outbox:detail", pk=pk)


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
    state = dispatcher.handoff_retry_now(
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
    residuals = ", ".join(step.step for step in plan.residual)
    text = f"Compensating {handoff.instance_key}: reversing {reversed_steps}, latest first."
    if residuals:
        text += f" Nothing can undo {residuals}: record a manual repair for each."
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
