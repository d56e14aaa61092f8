"""Reads that combine apps for the screens: the nav (approvals' queue and the outbox's needs-a-person
counts) and the requester's screen (each request with one status line for it and one per step).

The apps below (approvals, outbox, reconciliation) each answer for their own records; only here are
their answers put side by side."""

from django.db.models import F

from approvals.models import Request, Role
from approvals.request_search import requests_matching
from approvals.selectors import (
    REQUESTER_REVISABLE_STATES,
    awaiting_counts_by_workspace,
    newest_revisions,
    roles_by_workspace,
    workspace_ids_for,
    workspace_names,
)
from console.request_evidence import statuses_of
from lib.paging import narrowed_order, planned_serially
from reconciliation.selectors import needing_person_counts_bounded


def _counts_where(roles: dict[int, set], role: str, counts_of) -> dict[int, int]:
    """The count for each workspace where the user holds `role` (0 when nothing waits); none elsewhere."""
    ids = [ws for ws, held in roles.items() if role in held]
    counts = counts_of(ids) if ids else {}
    return {ws: counts.get(ws, 0) for ws in ids}


def console_nav(user) -> list[dict]:
    """The user's workspaces with their roles and what waits for them there (four queries, whatever the outbox size;
    the count of handoffs needing a person stops past `COUNT_CAP`)."""
    roles = roles_by_workspace(user)
    if not roles:
        return []
    names = workspace_names(list(roles))
    awaiting = _counts_where(roles, Role.APPROVER, awaiting_counts_by_workspace)
    attention = _counts_where(roles, Role.OPERATOR, needing_person_counts_bounded)
    return [
        {
            "id": ws,
            "name": names.get(ws, f"Workspace {ws}"),
            "roles": held,
            "awaiting": awaiting.get(ws),
            "attention": attention.get(ws),
        }
        for ws, held in sorted(roles.items())
    ]


def requests_of(user, *, text: str = "", limit: int = 100) -> list[Request]:
    """The newest revision of each request the user submitted in their workspaces, newest first; with
    `text`, those the request search finds (`approvals.request_search.requests_matching`: `BadSearch`).

    Each carries `.status`: one line for the request and one per step, from every handoff of the revision
    (`console/request_evidence.py`), and `.revisable`. A fixed number of queries whatever the page holds."""
    mine = newest_revisions(
        Request.objects.filter(requested_by=user, workspace_id__in=workspace_ids_for(user))
    )
    # A search sorts what the trigram index found (`narrowed_order`, planned serially), rather than walking
    # a workspace's requests in order and testing each.
    newest = narrowed_order("created_at", newest_first=True) if text else F("created_at").desc()
    found = (
        requests_matching(mine, text)
        .select_related("workspace", "corrected_by")
        .order_by(newest, "-id")[:limit]
    )
    if text:
        with planned_serially(found.db):
            rows = list(found)
    else:
        rows = list(found)
    statuses = statuses_of(rows)
    for row in rows:
        row.status = statuses[row.pk]
        row.revisable = row.state in REQUESTER_REVISABLE_STATES
    return rows
