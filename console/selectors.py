"""Reads that combine apps for the screens: the nav (approvals' queue and the outbox's needs-a-person
counts) and the requester's screen (a request, its handoff and the work the receiver reported).

The apps below (approvals, outbox, reconciliation) each answer for their own records; only here are
their answers put side by side."""

from django.db.models import Exists, OuterRef

from approvals.models import Request, RequestState, Role, Workspace
from approvals.selectors import (
    REQUESTER_REVISABLE_STATES,
    awaiting_counts_by_workspace,
    roles_by_workspace,
    workspace_ids_for,
)
from outbox.models import Handoff
from outbox.models import HandoffState as H
from reconciliation.selectors import needing_person_counts_bounded, work_outcome


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
    names = dict(Workspace.objects.filter(id__in=list(roles)).values_list("id", "name"))
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


def requests_of(user, *, limit: int = 100) -> list[Request]:
    """The newest revision of each request the user submitted in their workspaces, newest first (two queries).

    Each carries `.handoff` (its handoff or None) and `.progress` (see `request_progress`)."""
    newer = Request.objects.filter(
        workspace_id=OuterRef("workspace_id"),
        workflow=OuterRef("workflow"),
        number=OuterRef("number"),
        revision__gt=OuterRef("revision"),
    )
    rows = list(
        Request.objects.filter(requested_by=user, workspace_id__in=workspace_ids_for(user))
        .filter(~Exists(newer))
        .select_related("workspace")
        .order_by("-created_at", "-id")[:limit]
    )
    # With several steps, a request has several handoffs: the newest is the step it has reached.
    handoffs = {
        h.source_id: h
        for h in Handoff.objects.filter(source_id__in=[r.pk for r in rows]).order_by("id")
    }
    for row in rows:
        row.handoff = handoffs.get(row.pk)
        row.progress = request_progress(row, row.handoff)
        row.revisable = row.state in REQUESTER_REVISABLE_STATES
    return rows


def request_progress(request: Request, handoff) -> list[dict]:
    """The three answers about a request, each from its owner: approved? (the source), task created?
    (the receiver's validated receipt), work done? (the receiver task's status).

    Each answer is {question, answer, tone} with tone one of yes, no, waiting, unknown."""
    approved = {
        RequestState.APPROVED: ("yes", "yes"),
        RequestState.REJECTED: ("no: rejected", "no"),
        RequestState.CANCELLED: ("no: cancelled", "no"),
        RequestState.SUPERSEDED: ("replaced by a newer revision", "no"),
    }.get(request.state, ("not yet: awaiting an approver", "waiting"))
    if handoff is None:
        created = ("no", "no") if approved[1] == "no" else ("not yet", "waiting")
    else:
        created = {
            H.DELIVERED: (f"yes: receiver task {handoff.destination_id}", "yes"),
            H.PENDING: ("not yet: being sent", "waiting"),
            H.IN_FLIGHT: ("not yet: being sent", "waiting"),
            H.UNCERTAIN: ("unknown: being checked with the receiver", "unknown"),
            H.NEEDS_ATTENTION: ("not yet: an operator is on it", "waiting"),
            H.OBSERVED: ("no: recorded in observe-only mode, not sent", "no"),
            H.CANCELLED: ("no: cancelled by an operator", "no"),
            H.SUPERSEDED: ("no: replaced by a correction", "no"),
        }.get(handoff.state, (handoff.get_state_display(), "unknown"))
    if handoff is not None and handoff.state == H.DELIVERED:
        # The task's status as the receiver last reported it (read back by reconciliation).
        work = work_outcome(handoff).work_done
        tone = {"yes": "yes", "failed": "no", "no": "waiting"}.get(work.value, "unknown")
        done = (f"{work.label}: {work.detail}", tone)
    else:
        done = ("not started", "waiting") if created[1] != "no" else ("no", "no")
    return [
        {"question": "Approved?", "answer": approved[0], "tone": approved[1]},
        {"question": "Task created?", "answer": created[0], "tone": created[1]},
        {"question": "Work done?", "answer": done[0], "tone": done[1]},
    ]
