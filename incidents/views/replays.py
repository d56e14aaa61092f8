"""Replays previewed item by item: start one for an incident's members, watch the preview, confirm the run,
watch it, export the per-item results as CSV (a replay of the handoff list's filter starts from the console:
`console/views/incident_replays.py`).

Thin: parse, authorize (operators: the incident must be visible, and a replay is shown only to people whose
operator workspaces include every workspace it was started for), call one service or selector, render.
The preview and the run are background jobs; these requests only start them and read their progress.
"""

from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpResponse, StreamingHttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET, require_POST

from approvals.models import Role
from approvals.selectors import workspace_ids_for
from incidents.models import Replay
from incidents.selectors.incidents import incident_visible, sees_security_incidents
from incidents.selectors.replays import (
    replay_csv_rows,
    replay_items_page,
    replay_visible,
)
from incidents.services.replay_preview import (
    NothingToReplay,
    TooManyToReplay,
    replay_start_for_incident,
)
from incidents.services.replay_run import ReplayNotConfirmable, replay_confirm
from lib.csv_cells import csv_line
from lib.htmx import HtmxHttpRequest
from lib.querystring import id_or_none
from outbox.services.call_limits import calls_limited


def operator_scope(request: HtmxHttpRequest) -> list[int]:
    scope = workspace_ids_for(request.user, Role.OPERATOR)
    if not scope:
        raise PermissionDenied("a replay needs the operator role in a workspace")
    return scope


def _replay_or_404(request: HtmxHttpRequest, pk: int) -> Replay:
    replay = replay_visible(operator_scope(request), pk)
    if replay is None:
        raise Http404("no such replay")
    return replay


def replay_refused(request, text: str, status: int) -> HttpResponse:
    return render(request, "incidents/replay_refused.html", {"text": text}, status=status)


@require_POST
@login_required
@calls_limited("replay preview")
def incident_replay_start(request: HtmxHttpRequest, pk: int) -> HttpResponse:
    """Preview a replay of the incident's unsettled handoffs in the operator's workspaces."""
    scope = operator_scope(request)
    incident = incident_visible(scope, pk, security=sees_security_incidents(request.user))
    if incident is None:
        raise Http404("no such incident")
    try:
        # An incident is of one workspace: its replay is that workspace's, seen by its operators.
        replay = replay_start_for_incident(
            incident_id=incident.pk,
            workspace_ids=[incident.workspace_id] if incident.workspace_id in scope else scope,
            actor=request.user,
        )
    except (NothingToReplay, TooManyToReplay) as exc:
        return replay_refused(request, str(exc), 409)
    return redirect("incidents:replay", pk=replay.pk)


@require_GET
@login_required
def replay_detail(request: HtmxHttpRequest, pk: int) -> HttpResponse:
    replay = _replay_or_404(request, pk)
    items, next_after = replay_items_page(
        replay, after=id_or_none(request.GET.get("after", "")) or 0
    )
    context = {"replay": replay, "items": items, "next_after": next_after}
    if request.htmx:
        return render(request, "incidents/replay.html#replay-progress", context)
    return render(request, "incidents/replay.html", context)


@require_POST
@login_required
def replay_run(request: HtmxHttpRequest, pk: int) -> HttpResponse:
    """Confirm the preview: the run starts in the background; the page shows its progress."""
    replay = _replay_or_404(request, pk)
    try:
        replay_confirm(replay_id=replay.pk, actor=request.user)
    except ReplayNotConfirmable as exc:
        return replay_refused(request, str(exc), 409)
    return redirect("incidents:replay", pk=replay.pk)


@require_GET
@login_required
def replay_items_csv(request: HtmxHttpRequest, pk: int) -> StreamingHttpResponse:
    replay = _replay_or_404(request, pk)
    response = StreamingHttpResponse(
        (csv_line(row) for row in replay_csv_rows(replay)),
        content_type="text/csv; charset=utf-8",
    )
    response["Content-Disposition"] = f'attachment; filename="replay-{replay.pk}.csv"'
    return response
