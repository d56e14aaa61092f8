"""Console views of requests: home, the approvals queue, the requests of one's workspaces, role changes, a
new request, my requests.

Thin: parse, authorize (workspace scope and role), call one service, render. A request of another
workspace is a 404; deciding needs the approver role (403 with a message otherwise).
"""

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.http import HttpResponse, HttpResponseBadRequest
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET, require_http_methods

from approvals import selectors, services
from approvals.errors import ApprovalsError, InvalidPayload
from approvals.models import Role
from approvals.request_search import requests_matching
from approvals.rules import rules_for
from console import selectors as console_selectors
from console.forms import RequestForm
from console.views.handoff_list import table_rows
from console.views.request_detail import detail_url
from lib.paging import keyset_page
from lib.querystring import BadQueryValue, keyset_cursor, parse_id, parse_keyset_cursor
from lib.search_syntax import BadSearch
from outbox.selectors import handoffs_in
from reconciliation.selectors import needing_person

PAGE_SIZE = 50


@require_GET
@login_required
def home(request) -> HttpResponse:
    # One query for both: the workspaces in scope, and those where the rows offer an operator's actions.
    roles = selectors.roles_by_workspace(request.user)
    visible = sorted(roles)
    # The one "needs a person" rule: needs attention, uncertain, or with an open reconciliation finding.
    # The workspaces' own handoffs (alert notifications are counted apart), each row as the list shows it.
    needing = needing_person(handoffs_in(visible).business()).select_related("case_hold")
    attention = table_rows(list(needing.order_by("created_at", "id")[:20]), visible)
    return render(
        request,
        "approvals/home.html",
        {
            "awaiting": selectors.requests_awaiting_decision(request.user)[:10],
            "handoffs": attention,
            "operator_ws": {ws for ws, held in roles.items() if Role.OPERATOR in held},
        },
    )


def bad_request(reason) -> HttpResponse:
    return HttpResponseBadRequest(
        f"Bad request: {reason}.", content_type="text/plain; charset=utf-8"
    )


def search_refused(request, template: str, refused: BadSearch) -> HttpResponse:
    """A list whose search cannot be read: its page, no rows, the reason under the search box
    (`approvals/_request_search.html`), answered 400."""
    context = {
        "requests": [],
        "q": request.GET.get("q", "").strip(),
        # Read before the search by `searched_page`: a workspace that reached the search is a number.
        "workspace": request.GET.get("workspace", ""),
        "search_error": str(refused),
    }
    return render(request, template, context, status=400)


def searched_page(
    request, requests, *, newest_first: bool, workspace_ids: list[int] | None = None
) -> dict:
    """One keyset page of `requests` (already in the viewer's scope) narrowed by the list's `workspace` and
    its search `q` (`requests_matching`). Raises `BadQueryValue` or `BadSearch` with the reason.
    `workspace_ids`: the scope's workspaces, when an index leads with the workspace and the list's order:
    without a search or a workspace chosen, the page is read one workspace at a time and merged."""
    workspace = parse_id(request.GET.get("workspace", ""), name="workspace")
    after = parse_keyset_cursor(request.GET.get("after", ""), name="after")
    text = request.GET.get("q", "").strip()
    found = requests_matching(requests, text)
    if workspace is not None:
        found = found.filter(workspace_id=workspace)
    # A search is narrowed by the trigram index first, then sorted; merged branches would each walk a
    # workspace's order.
    merge = workspace_ids is not None and workspace is None and not text
    rows, more = keyset_page(
        found,
        after=after,
        size=PAGE_SIZE,
        newest_first=newest_first,
        merge_by=("workspace_id", workspace_ids) if merge else None,
        narrowed_first=bool(text),
    )
    return {
        "requests": rows,
        "next_after": keyset_cursor(rows[-1]) if more else "",
        "workspace": workspace or "",
        "q": text,
    }


@require_GET
@login_required
def queue(request) -> HttpResponse:
    try:
        page = searched_page(
            request, selectors.requests_awaiting_decision(request.user), newest_first=False
        )
    except BadQueryValue as exc:
        return bad_request(exc)
    except BadSearch as exc:
        return search_refused(request, "approvals/queue.html", exc)
    for row in page["requests"]:
        # Say why a request here is not this approver's to decide, instead of a button that would refuse.
        row.refusal = selectors.decider_refusal(request.user.pk, row)
    return render(request, "approvals/queue.html", page)


@require_GET
@login_required
def search(request) -> HttpResponse:
    """Every request of the viewer's workspaces (its newest revision), whatever their role: found by what a
    customer or a colleague knows, newest first."""
    try:
        ids = selectors.workspace_ids_for(request.user)
        requests = selectors.requests_in_view(ids)
        page = searched_page(request, requests, newest_first=True, workspace_ids=ids)
    except BadQueryValue as exc:
        return bad_request(exc)
    except BadSearch as exc:
        return search_refused(request, "approvals/search.html", exc)
    return render(request, "approvals/search.html", page)


@require_GET
@login_required
def role_changes(request) -> HttpResponse:
    """Who was given or lost which role, in the workspaces where the user is an operator."""
    return render(
        request,
        "approvals/role_changes.html",
        {
            "changes": selectors.role_changes_visible_to(request.user),
            "is_operator": bool(selectors.workspace_ids_for(request.user, Role.OPERATOR)),
        },
    )


def requester_workspaces_or_403(request, page: str) -> list[tuple[int, str]]:
    workspaces = selectors.requester_workspaces(request.user)
    if not workspaces:
        raise PermissionDenied(
            f"{page} is for requesters: you are not a requester in any workspace"
        )
    return workspaces


def form_context(request, form: RequestForm, **extra) -> dict:
    return {"form": form, **extra}


@require_http_methods(["GET", "POST"])
@login_required
def request_new(request) -> HttpResponse:
    """A new request, its form generated from the rules in force; the rules' reasons shown at their fields."""
    workspaces = requester_workspaces_or_403(request, "New request")
    rules = rules_for("onboarding")
    form = RequestForm(request.POST or None, schema=rules.schema, workspaces=workspaces)
    status = 200
    if request.method == "POST":
        if form.is_valid():
            try:
                created = services.request_submit(
                    workspace_id=form.cleaned_data["workspace"],
                    payload=form.payload(),
                    requested_by=request.user,
                )
            except InvalidPayload as exc:
                form.add_reasons(exc.reasons)
            except ApprovalsError as exc:
                form.add_error(None, f"Not submitted: {exc}.")
            else:
                messages.success(
                    request, f"Submitted request {created.number}: it awaits an approver."
                )
                return redirect(detail_url(created))
        status = 422
    return render(
        request,
        "approvals/request_form.html",
        form_context(request, form, rules=rules, title="New request"),
        status=status,
    )


@require_GET
@login_required
def my_requests(request) -> HttpResponse:
    requester_workspaces_or_403(request, "My requests")
    text = request.GET.get("q", "").strip()
    try:
        requests = console_selectors.requests_of(request.user, text=text)
    except BadSearch as exc:
        return search_refused(request, "approvals/mine.html", exc)
    return render(request, "approvals/mine.html", {"requests": requests, "q": text})
