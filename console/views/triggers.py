"""Console screen of the triggers received: accepted, duplicate, stale and rejected at intake, with reasons."""

from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET

from approvals import intake
from approvals.models import TriggerOutcome
from approvals.rules import known_workflows
from approvals.selectors import workspaces_for
from lib.htmx import HtmxHttpRequest
from lib.querystring import BadQueryValue, keyset_cursor, parse_keyset_cursor
from outbox.redaction import redact

PAGE_SIZE = 50


@require_GET
@login_required
def triggers(request: HtmxHttpRequest) -> HttpResponse:
    reference = request.GET.get("q", "").strip()[:120]
    outcome = request.GET.get("outcome", "")
    if outcome not in TriggerOutcome.values:
        outcome = ""
    # A cursor that cannot be read answers 400 with the page (or, for htmx, the results in place): no rows,
    # the reason where the rows would be.
    refused, rows, more = "", [], False
    try:
        before = parse_keyset_cursor(request.GET.get("before", ""), name="before")
    except BadQueryValue as exc:
        refused = str(exc)
    else:
        rows, more = intake.triggers_visible_to(
            request.user, reference=reference, outcome=outcome, before=before, limit=PAGE_SIZE
        )
    next_cursor = keyset_cursor(rows[-1], field="received_at") if more else ""
    context = {
        "refused": refused,
        "triggers": rows,
        "q": reference,
        "outcome": outcome,
        "outcomes": TriggerOutcome.choices,
        "next_cursor": next_cursor,
        "workspaces": workspaces_for(request.user),
        "workflows": sorted(known_workflows()),
    }
    template = (
        "approvals/triggers_results.html"
        if getattr(request, "htmx", False)
        else "approvals/triggers.html"
    )
    return render(request, template, context, status=400 if refused else 200)


@require_GET
@login_required
def trigger_detail(request: HtmxHttpRequest, pk: int) -> HttpResponse:
    record = intake.trigger_visible_to(request.user, pk)
    if record is None:
        raise Http404("no such trigger")
    repeats = record.repeats.order_by("received_at", "id") if record.duplicate_of_id is None else []
    return render(
        request,
        "approvals/triggers_detail.html",
        {"t": record, "document": redact(record.document), "repeats": repeats},
    )
