"""The handoff list: filters, keyset pages, and the quick actions of a row."""

from datetime import datetime
from typing import NamedTuple
from urllib.parse import urlencode

from django.contrib.auth.decorators import login_required
from django.http import HttpResponse
from django.shortcuts import render
from django.template.loader import render_to_string
from django.urls import reverse
from django.views.decorators.http import require_GET
from django_htmx.http import push_url

from approvals.models import Role
from approvals.selectors import workspace_ids_for
from console.destination_holds import destination_held, handoff_rows
from console.filters import HandoffFilter, assign_targets, handoff_list_page, operators_in
from console.waiting_status import case_hold_mark
from lib.htmx import HtmxHttpRequest
from lib.querystring import BadQueryValue, id_or_none, keyset_cursor, parse_keyset_cursor
from lib.row_urls import row_url
from outbox.archive_search import archived_matching
from outbox.guidance import available_actions, read_contracts_of, retry_is_risky
from outbox.models import Handoff
from outbox.page_clock import page_now
from outbox.selectors import (
    handoffs_in,
)
from outbox.services.call_limits import calls_limited

PAGE_SIZE = 50
# Every field the list's filter offers, taken from the filter itself: a field missing here was shown and then
# dropped, so a bulk action applied to more handoffs than the operator's filter named.
FILTER_FIELDS = tuple(HandoffFilter.base_filters)


def _parse_cursor(raw: str | None) -> tuple[datetime, int] | None:
    # A malformed cursor (impossible date, id past the integer range) restarts at the first page
    # instead of reaching the query.
    try:
        return parse_keyset_cursor(raw or "", name="after")
    except BadQueryValue:
        return None


class QuickAction(NamedTuple):
    """A button of a list row: what it says and where it posts (named URLs, never pasted together)."""

    label: str
    url: str


# The URL each quick action posts to: "run now" is a retry of a handoff waiting for its next attempt.
QUICK_ACTION_URLS = {
    "acknowledge": ("Acknowledge", "outbox:acknowledge"),
    "reconcile": ("Reconcile", "outbox:reconcile"),
    "retry": ("Retry", "outbox:retry"),
    "run_now": ("Run now", "outbox:retry"),
}


def quick_actions(handoff: Handoff) -> list[QuickAction]:
    """The actions a list row offers in place: the safe ones of `available_actions` (a risky retry is
    offered only on the handoff's page, where its risk is explained). A row read by `handoff_rows` carries
    its destination's holds: no "Run now" while one is live (the destination takes no call)."""
    held = destination_held(getattr(handoff, "destination_holds", None))
    return [
        QuickAction(label, row_url(url_name, handoff.pk))
        for label, url_name in (
            QUICK_ACTION_URLS[a]
            for a in available_actions(handoff, destination_held=held)
            if a in ("acknowledge", "reconcile", "run_now")
            or (a == "retry" and not retry_is_risky(handoff))
        )
    ]


def table_rows(rows: list[Handoff], workspace_ids) -> list[Handoff]:
    """A handoff table's rows as every table shows them (the list, Home's "need a person", one row again
    after its quick action): its destination's holds and findings (`handoff_rows`), then the quick actions
    those holds allow, and a held case's mark (read with the rows: `select_related("case_hold")`)."""
    now = page_now()
    read_contracts_of(rows)  # the destinations' replay contracts the rows' actions ask: one query
    for h in handoff_rows(rows, workspace_ids):
        h.quick_actions = quick_actions(h)
        h.case_hold_mark = case_hold_mark(h.case_hold, now) if h.is_held else ""
    return rows


def filter_data(source) -> dict[str, str]:
    return {name: source.get(name, "") for name in FILTER_FIELDS if source.get(name, "")}


# The filter's fields as the list draws them, by what they are drawn from: the filter's values and the
# workspace and owner choices of the viewer (`filter_fields`). Emptied when it holds this many.
FILTER_FIELDS_KEPT = 512
_filter_fields: dict[tuple, str] = {}


def filter_fields(handoff_filter: HandoffFilter) -> str:
    """The filter form's fields (`outbox/list.html#filter-fields`), drawn once for each set of values and
    choices: the same every time for them, and through Django's widget templates (a template and its
    attributes' per option) a sixth of a list page's CPU (issue 40)."""
    key = (
        tuple(sorted(handoff_filter.data.items())) if handoff_filter.is_bound else None,
        tuple(handoff_filter.filters["workspace"].extra["choices"]),
        tuple(handoff_filter.filters["owner"].extra["choices"]),
    )
    html = _filter_fields.get(key)
    if html is None:
        if len(_filter_fields) >= FILTER_FIELDS_KEPT:
            _filter_fields.clear()
        html = render_to_string("outbox/list.html#filter-fields", {"filter": handoff_filter})
        _filter_fields[key] = html
    return html


def list_context(request: HtmxHttpRequest, data: dict[str, str]) -> dict:
    user = request.user
    visible = workspace_ids_for(user)
    operator_ws = set(workspace_ids_for(user, Role.OPERATOR))
    handoff_filter = HandoffFilter(
        data or None,
        # A held row's mark comes from the same query (`case_hold_mark`), not a query per row.
        queryset=handoffs_in(visible).select_related("case_hold"),
        request=request,
        workspace_ids=visible,
        operators=(operators := operators_in(visible)),  # for the assign menu too: one read
    )
    # A search it cannot read (`readable_search`) lists nothing, with the reason, rather than every handoff.
    search_refused = " ".join(handoff_filter.errors.get("q", []))
    rows, more = (
        ([], False)
        if search_refused
        else handoff_list_page(
            handoff_filter.qs,
            data=data,
            workspace_ids=visible,
            after=_parse_cursor(request.GET.get("after")),
            size=PAGE_SIZE,
        )
    )
    table_rows(rows, visible)
    query = urlencode(data)
    next_url = ""
    if more:
        last = rows[-1]
        next_url = "?" + urlencode({**data, "after": keyset_cursor(last)})
    return {
        "filter": handoff_filter,
        "filter_fields": filter_fields(handoff_filter),
        "handoffs": rows,
        "operator_ws": operator_ws,
        "filter_data": data,
        "filter_query": query,
        "next_url": next_url,
        "first_url": "?" + query if request.GET.get("after") else "",
        "operators": assign_targets(operators, operator_ws),
        # A replay covers the operator's workspaces (POST /incidents/replays/from-filter): offered unless the
        # filter names a workspace where the user is not an operator.
        "may_replay": bool(operator_ws)
        and (not data.get("workspace") or id_or_none(data["workspace"]) in operator_ws),
        "archived": []
        if request.GET.get("after") or search_refused
        else _archived_matches(data, visible),
        "search_refused": search_refused,
    }


def _archived_matches(data: dict[str, str], visible: list[int]) -> list:
    """Archived handoffs whose key the search names (first page only), in the filtered workspace if one is."""
    if not data.get("q"):
        return []
    chosen = data.get("workspace", "")
    ids = [ws for ws in visible if str(ws) == chosen] if chosen else visible
    return archived_matching(workspace_ids=ids, text=data["q"])


# Sent by static/js/console.js when it refreshes the list in the background: the address stays as it is.
REFRESH_HEADER = "X-Console-Refresh"


@require_GET
@login_required
@calls_limited("handoff search", when=lambda request: bool(request.GET.get("q", "").strip()))
def handoff_list(request: HtmxHttpRequest) -> HttpResponse:
    data = filter_data(request.GET)
    context = list_context(request, data)
    # A search that cannot be read is a 400 with the reason, as the request searches answer it.
    status = 400 if context["search_refused"] else 200
    if request.htmx and not request.htmx.history_restore_request:
        response = render(request, "outbox/list.html#results", context, status=status)
        if not request.headers.get(REFRESH_HEADER):
            # The address bar always holds the filter on screen: the server names it, so Back and a
            # reload show exactly these results.
            after = {"after": request.GET["after"]} if request.GET.get("after") else {}
            query = urlencode({**data, **after})
            push_url(response, reverse("outbox:list") + (f"?{query}" if query else ""))
        return response
    return render(request, "outbox/list.html", context, status=status)
