"""Reads the console shares. Every query is scoped to the workspaces the user belongs to."""

from django.db.models import QuerySet

from approvals.models import Membership, Request, RequestState, Role, Workspace
from lib.querystring import id_or_none


def workspace_ids_for(user, role: str | None = None) -> list[int]:
    if not user.is_authenticated:
        return []
    memberships = Membership.objects.filter(user=user)
    if role is not None:
        memberships = memberships.filter(role=role)
    return sorted(set(memberships.values_list("workspace_id", flat=True)))


def user_has_role(user, workspace_id: int, role: str) -> bool:
    return Membership.objects.filter(user=user, workspace_id=workspace_id, role=role).exists()


def workspaces_for(user) -> QuerySet[Workspace]:
    return Workspace.objects.filter(id__in=workspace_ids_for(user)).order_by("id")


def requests_awaiting_decision(user) -> QuerySet[Request]:
    return (
        Request.objects.filter(
            workspace_id__in=workspace_ids_for(user, Role.APPROVER),
            state=RequestState.AWAITING_APPROVAL,
        )
        .select_related("workspace", "requested_by")
        .order_by("created_at", "id")
    )


def current_revision(
    *, workspace_id: int, number: int, workflow: str = "onboarding"
) -> Request | None:
    return (
        Request.objects.filter(workspace_id=workspace_id, workflow=workflow, number=number)
        .order_by("-revision")
        .first()
    )


# --- Console reads: navigation, evidence ------------------------------------------------


def roles_by_workspace(user) -> dict[int, list[str]]:
    if not user.is_authenticated:
        return {}
    roles: dict[int, list[str]] = {}
    for workspace_id, role in (
        Membership.objects.filter(user=user)
        .order_by("workspace_id", "role")
        .values_list("workspace_id", "role")
    ):
        roles.setdefault(workspace_id, []).append(role)
    return roles


def awaiting_counts_by_workspace(workspace_ids: list[int]) -> dict[int, int]:
    from django.db.models import Count

    rows = (
        Request.objects.filter(workspace_id__in=workspace_ids, state=RequestState.AWAITING_APPROVAL)
        .order_by()
        .values_list("workspace_id")
        .annotate(n=Count("id"))
    )
    return dict(rows)


def _counts_where(roles: dict[int, set], role: str, counts_of) -> dict[int, int]:
    """The count for each workspace where the user holds `role` (0 when nothing waits); none elsewhere."""
    ids = [ws for ws, held in roles.items() if role in held]
    counts = counts_of(ids) if ids else {}
    return {ws: counts.get(ws, 0) for ws in ids}


def console_nav(user) -> list[dict]:
    """The user's workspaces with their roles and what waits for them there (four queries, whatever the outbox size;
    the count of handoffs needing a person stops past `COUNT_CAP`)."""
    from outbox.selectors import open_counts_by_workspace

    roles = roles_by_workspace(user)
    if not roles:
        return []
    names = dict(Workspace.objects.filter(id__in=list(roles)).values_list("id", "name"))
    awaiting = _counts_where(roles, Role.APPROVER, awaiting_counts_by_workspace)
    attention = _counts_where(roles, Role.OPERATOR, open_counts_by_workspace)
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


def request_evidence(request: Request) -> dict:
    """What the approver decides on besides the payload: the rules that apply and whether it passes them."""
    from approvals.rules import payload_problems, rules_for

    return {
        "rule_version": rules_for(request.workflow).version,
        "problems": payload_problems(request.workflow, request.payload),
    }


def operators_of(workspace_ids: list[int]) -> list:
    """Users who hold the operator role in any of the workspaces, by name (assign targets)."""
    from django.contrib.auth import get_user_model

    return list(
        get_user_model()
        .objects.filter(
            memberships__workspace_id__in=workspace_ids, memberships__role=Role.OPERATOR
        )
        .distinct()
        .order_by("username")
    )


def is_operator_of(user_id: int, workspace_id: int) -> bool:
    return Membership.objects.filter(
        user_id=user_id, workspace_id=workspace_id, role=Role.OPERATOR
    ).exists()


def revision_by_id(pk: int) -> Request | None:
    return (
        Request.objects.filter(pk=pk)
        .only("id", "workspace_id", "number", "revision", "workflow")
        .first()
    )


def role_changes_visible_to(user, *, limit: int = 200) -> QuerySet:
    """Role grants and revocations in the workspaces where the user is an operator, newest first."""
    from approvals.models import RoleChange

    return (
        RoleChange.objects.filter(workspace_id__in=workspace_ids_for(user, Role.OPERATOR))
        .select_related("workspace", "user", "changed_by")
        .order_by("-changed_at", "-id")[:limit]
    )


# --- Requesters: their requests and where each stands with its three owners ---------------------

# A requester may replace a request that is not decided yet, or resubmit one that was rejected.
REQUESTER_REVISABLE_STATES = frozenset({RequestState.AWAITING_APPROVAL, RequestState.REJECTED})


def requests_of(user, *, limit: int = 100) -> list[Request]:
    """The newest revision of each request the user submitted in their workspaces, newest first (two queries).

    Each carries `.handoff` (its handoff or None) and `.progress` (see `request_progress`)."""
    from django.db.models import Exists, OuterRef

    from outbox.models import Handoff

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
    from outbox.models import HandoffState as H

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
        from reconciliation.selectors import work_outcome

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


def requester_workspaces(user) -> list[tuple[int, str]]:
    """(id, name) of the workspaces where the user may submit requests."""
    ids = workspace_ids_for(user, Role.REQUESTER)
    return list(Workspace.objects.filter(id__in=ids).order_by("id").values_list("id", "name"))


def revision_changes(old: Request, new: Request) -> list[dict]:
    """Field by field, what differs between two revisions' payloads (redacted: secrets stay hidden)."""
    from outbox.redaction import redact

    before, after = redact(old.payload), redact(new.payload)
    changes = []
    for field in sorted(set(old.payload) | set(new.payload)):
        if old.payload.get(field) != new.payload.get(field) or (field in old.payload) != (
            field in new.payload
        ):
            changes.append(
                {
                    "field": field,
                    "before": before.get(field),
                    "after": after.get(field),
                    "added": field not in before,
                    "removed": field not in after,
                }
            )
    return changes


# --- The console's pages and who may use each (the nav and the 403 page read this) ---------------

# url name, title, who may use it: "member" (any workspace), a role in some workspace, or "staff".
CONSOLE_PAGES: list[tuple[str, str, str]] = [
    ("approvals:new", "New request", Role.REQUESTER),
    ("approvals:mine", "My requests", Role.REQUESTER),
    ("approvals:queue", "Approvals", Role.APPROVER),
    ("outbox:list", "Handoffs", "member"),
    ("intake:triggers", "Triggers", "member"),
    ("reconciliation:health", "Health", Role.OPERATOR),
    ("reconciliation:findings", "Findings", Role.OPERATOR),
    ("reconciliation:runs", "Runs", Role.OPERATOR),
    ("approvals:role_changes", "Role changes", Role.OPERATOR),
    ("admin:index", "Admin", "staff"),
]
AUDIENCE_LABELS = {
    Role.REQUESTER: "requesters",
    Role.APPROVER: "approvers",
    Role.OPERATOR: "operators",
    "member": "members",
    "staff": "support staff",
}


def pages_for(user, roles: set[str] | None = None) -> list[dict]:
    """The console pages the user may use, in nav order. `roles`: the user's roles in any workspace,
    when the caller already has them (else one query)."""
    if not user.is_authenticated:
        return []
    if roles is None:
        roles = set(Membership.objects.filter(user=user).values_list("role", flat=True).distinct())
    allowed = roles | ({"member"} if roles else set()) | ({"staff"} if user.is_staff else set())
    return [
        {"url_name": name, "title": title} for name, title, who in CONSOLE_PAGES if who in allowed
    ]


def page_named(view_name: str | None) -> dict | None:
    """The console page of a URL name, with who it is for (a 403 names the page it refuses)."""
    for name, title, who in CONSOLE_PAGES:
        if name == view_name:
            return {"title": title, "audience": AUDIENCE_LABELS[who]}
    return None


def may_cancel(user, request: Request) -> bool:
    """Operators cancel any request of their workspace; a requester their own, before it is decided."""
    if request.state in (RequestState.CANCELLED, RequestState.REJECTED, RequestState.SUPERSEDED):
        return False
    if user_has_role(user, request.workspace_id, Role.OPERATOR):
        return True
    return request.requested_by_id == user.pk and request.state == RequestState.AWAITING_APPROVAL


def user_by_id(raw: str):
    """The user a posted id names, or None (also for an id that is not a number)."""
    from django.contrib.auth import get_user_model

    pk = id_or_none(raw)
    return get_user_model().objects.filter(pk=pk).first() if pk else None


def approver_correctable(payload: dict) -> dict[str, str]:
    """The fields an approver may correct, with their values: the payload's text fields shown as they are
    stored. A field hidden or partly hidden by redaction (an e-mail, a secret inside a note) is not offered:
    nobody overwrites what they cannot see, and a form sent back unchanged must not store the mask."""
    from outbox.redaction import redact

    shown = redact(payload)
    return {
        name: value
        for name, value in shown.items()
        if isinstance(value, str) and value == payload.get(name)
    }
