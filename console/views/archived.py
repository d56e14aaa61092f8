"""One archived handoff, read-only: what the archive kept of a settled handoff that left the hot tables
(docs/operations.md, "Retention"). Another workspace's archived handoff is a 404, as a live one is."""

from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET

from approvals.selectors import workspace_ids_for
from lib.htmx import HtmxHttpRequest
from outbox.archive_search import archived_in
from outbox.models import ArchivedHandoff, HandoffState
from outbox.redaction import redact


@require_GET
@login_required
def archived_detail(request: HtmxHttpRequest, pk: int) -> HttpResponse:
    try:
        row = archived_in(workspace_ids_for(request.user)).get(pk=pk)
    except ArchivedHandoff.DoesNotExist:
        raise Http404("No such archived handoff") from None
    history = redact(row.history)
    return render(
        request,
        "outbox/archived_detail.html",
        {
            "row": row,
            "final_state": HandoffState(row.final_state).label.lower(),
            "receipt": redact(row.receipt),
            "request": redact(row.request) if row.request is not None else None,
            "attempts": history.get("attempts", []),
            "events": history.get("events", []),
            "status_events": history.get("status_events", []),
        },
    )
