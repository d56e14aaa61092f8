"""Console views of handoffs. Thin: parse, authorize (workspace scope), call a selector or service, render."""

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, render
from django.views.decorators.http import require_GET

from approvals.selectors import workspace_ids_for
from outbox.redaction import redact
from outbox.selectors import handoff_timeline, handoffs_in


@require_GET
@login_required
def handoff_list(request: HttpRequest) -> HttpResponse:
    handoffs = handoffs_in(workspace_ids_for(request.user)).order_by("-created_at", "-id")[:100]
    return render(request, "outbox/list.html", {"handoffs": handoffs})


@require_GET
@login_required
def handoff_detail(request: HttpRequest, pk: int) -> HttpResponse:
    handoff = get_object_or_404(handoffs_in(workspace_ids_for(request.user)), pk=pk)
    attempts, events = handoff_timeline(handoff)
    return render(
        request,
        "outbox/detail.html",
        {"handoff": handoff, "payload": redact(handoff.payload), "attempts": attempts, "events": events},
    )
