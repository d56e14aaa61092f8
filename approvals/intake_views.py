"""Console screen of the triggers received: accepted, duplicate, stale and rejected at intake, with reasons."""

from datetime import UTC, datetime, timedelta

from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpResponse, HttpResponseBadRequest
from django.shortcuts import render
from django.views.decorators.http import require_GET

from approvals import intake
from approvals.models import TriggerOutcome
from approvals.querystring import BadQueryValue, parse_id
from approvals.rules import known_workflows
from approvals.selectors import workspaces_for
from config.htmx import HtmxHttpRequest
from outbox.redaction import redact

PAGE_SIZE = 50
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def _cursor(row) -> str:
    micros = (row.received_at - _EPOCH) // timedelta(microseconds=1)
    return f"{micros}-{row.pk}"


def _parse_cursor(raw: str) -> tuple[datetime, int] | None:
    if raw == "":
        return None
    micros, _, pk = raw.partition("-")
    if not (micros.isascii() and micros.isdigit()):
        raise BadQueryValue("before is not a cursor of this list (expected <microseconds>-<id>)")
    try:
        stamp = _EPOCH + timedelta(microseconds=int(micros))
    except OverflowError:
        raise BadQueryValue("before names a time out of range") from None
    return stamp, parse_id(pk, name="before")


@require_GET
@login_required
def triggers(request: HtmxHttpRequest) -> HttpResponse:
    reference = request.GET.get("q", "").strip()[:120]
    outcome = request.GET.get("outcome", "")
    if outcome not in TriggerOutcome.values:
        outcome = ""
    try:
        before = _parse_cursor(request.GET.get("before", ""))
    except BadQueryValue as exc:
        return HttpResponseBadRequest(f"Bad request: {exc}.", content_type="text/plain; charset=utf-8")
    rows = intake.triggers_visible_to(request.user, reference=reference, outcome=outcome, before=before,
                                      limit=PAGE_SIZE + 1)
    next_cursor = _cursor(rows[PAGE_SIZE - 1]) if len(rows) > PAGE_SIZE else ""
    context = {
        "triggers": rows[:PAGE_SIZE],
        "q": reference,
        "outcome": outcome,
        "outcomes": TriggerOutcome.choices,
        "next_cursor": next_cursor,
        "workspaces": workspaces_for(request.user),
        "workflows": sorted(known_workflows()),
    }
    template = "approvals/triggers_results.html" if getattr(request, "htmx", False) else "approvals/triggers.html"
    return render(request, template, context)


@require_GET
@login_required
def trigger_detail(request: HtmxHttpRequest, pk: int) -> HttpResponse:
    record = intake.trigger_visible_to(request.user, pk)
    if record is None:
        raise Http404("no such trigger")
    repeats = record.repeats.order_by("received_at", "id") if record.duplicate_of_id is None else []
    return render(request, "approvals/triggers_detail.html",
                  {"t": record, "document": redact(record.document), "repeats": repeats})
