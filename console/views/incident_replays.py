"""A replay of every handoff the handoff list's filter matches, previewed item by item: the console's screen
that joins the handoff list's filter to the incidents' replays (`incidents/views/replays.py` shows it)."""

from urllib.parse import urlencode

from django.contrib.auth.decorators import login_required
from django.http import HttpResponse
from django.shortcuts import redirect
from django.views.decorators.http import require_POST

from console.filters import HandoffFilter
from console.views.handoff_list import filter_data
from incidents.services.replay_preview import NothingToReplay, TooManyToReplay, replay_start
from incidents.views.replays import operator_scope, replay_refused
from lib.htmx import HtmxHttpRequest
from outbox.selectors import handoffs_in
from outbox.services.call_limits import calls_limited


@require_POST
@login_required
@calls_limited("replay preview")
def filter_replay_start(request: HtmxHttpRequest) -> HttpResponse:
    """Preview a replay of every handoff the posted filter of the handoff list matches."""
    scope = operator_scope(request)
    data = filter_data(request.POST)
    handoff_filter = HandoffFilter(
        data or None, queryset=handoffs_in(scope), request=request, workspace_ids=scope
    )
    if data and not handoff_filter.is_valid():
        problems = "; ".join(
            f"{f}: {' '.join(e)}" for f, e in sorted(handoff_filter.errors.items())
        )
        return replay_refused(request, f"Nothing was done: {problems}.", 422)
    try:
        replay = replay_start(
            handoffs=handoff_filter.qs,
            workspace_ids=scope,
            actor=request.user,
            description="handoffs matching " + (urlencode(data)[:250] or "every filter value"),
        )
    except (NothingToReplay, TooManyToReplay) as exc:
        return replay_refused(request, str(exc), 409)
    return redirect("incidents:replay", pk=replay.pk)
