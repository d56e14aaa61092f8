"""Reads the console shares. Every query is scoped to the workspaces the user belongs to."""

from django.contrib.auth import get_user_model
from django.db.models import Count, Exists, OuterRef, QuerySet

from approvals.models import (
    ApprovalDelegation,
    Membership,
    Request,
    RequestState,
    Role,
    RoleChange,
    RuleVersion,
    Workspace,
)
from approvals.on_call import active_operators
from approvals.rules import BUILT_IN_RULES, RuleSet, payload_problems, rules_for
from lib.querystring import id_or_none
from lib.request_memo import RequestMemo
from outbox.clock import db_now
from outbox.models import Handoff
from outbox.redaction import REDACTED, redact
from outbox.steps import base_payload


def may_decide_in(user, workspace_id: int) -> bool:
    """The user approves in the workspace, or is right now the delegate of an active approver there
    (`approvals/services/delegations.py`); four eyes (`decider_refusal`) still apply to what they decide."""
    if not user.is_authenticated:
        return False
    if user_has_role(user, workspace_id, Role.APPROVER):
        return True
    now = db_now()
    return ApprovalDelegation.objects.filter(
        delegate=user,
        starts_at__lte=now,
        ends_at__gt=now,
        revoked_at__isnull=True,
        approver__is_active=True,
        approver__memberships__workspace_id=workspace_id,
        approver__memberships__role=Role.APPROVER,
    ).exists()


_memberships = RequestMemo("memberships")


def memberships_read_once_per_request(get_response):
    """Middleware: a page reads its user's memberships and its workspaces' names once (its view, its filter
    and its nav each asked: two to four queries a page). Only where nothing changes them, a GET or HEAD: a
    POST may grant or take a role and then draw the page, so it reads them each time."""
    memoized = _memberships.middleware(get_response)

    def middleware(request):
        return memoized(request) if request.method in ("GET", "HEAD") else get_response(request)

    return middleware


def _roles_held(user_id: int) -> dict[int, tuple[str, ...]]:
    """The user's roles by workspace (one query; within a GET, once: `memberships_read_once_per_request`)."""

    def read() -> dict[int, tuple[str, ...]]:
        roles: dict[int, list[str]] = {}
        for workspace_id, role in (
            Membership.objects.filter(user_id=user_id)
            .order_by("workspace_id", "role")
            .values_list("workspace_id", "role")
        ):
            roles.setdefault(workspace_id, []).append(role)
        return {ws: tuple(held) for ws, held in roles.items()}

    return _memberships.get(("roles", user_id), read)


def workspace_names(workspace_ids: list[int]) -> dict[int, str]:
    """Each workspace's name by id, in id order (one query; within a GET, once a page)."""
    ids = tuple(sorted(set(workspace_ids)))
    return _memberships.get(
        ("names", ids),
        lambda: dict(Workspace.objects.filter(id__in=ids).order_by("id").values_list("id", "name")),
    )


def workspace_ids_for(user, role: str | None = None) -> list[int]:
    if not user.is_authenticated:
        return []
    return [ws for ws, held in _roles_held(user.pk).items() if role is None or role in held]


def user_has_role(user, workspace_id: int, role: str) -> bool:
    return user.is_authenticated and role in _roles_held(user.pk).get(workspace_id, ())


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


def newest_revisions(queryset: QuerySet[Request]) -> QuerySet[Request]:
    """The revisions of `queryset` that no newer revision of their request replaced: one row a request."""
    newer = Request.objects.filter(
        workspace_id=OuterRef("workspace_id"),
        workflow=OuterRef("workflow"),
        number=OuterRef("number"),
        revision__gt=OuterRef("revision"),
    )
    return queryset.filter(~Exists(newer))


def requests_in_view(workspace_ids: list[int]) -> QuerySet[Request]:
    """The newest revision of every request of a person's workspaces (`workspace_ids_for(user)`), whatever
    their role there: what any member (an operator, a requester answering a customer) may look up."""
    return (
        newest_revisions(Request.objects.filter(workspace_id__in=workspace_ids))
        .select_related("workspace", "requested_by")
        .order_by("-created_at", "-id")
    )


def decider_refusal(user_id: int | None, request: Request) -> str:
    """Why this person may not decide this revision, whatever their role: "own" (they requested it) or
    "corrected" (they sent it back corrected: another approver decides); "" when nothing stands in the way.
    One rule for the service that decides and for the screens that offer (or explain) the buttons."""
    if request.requested_by_id == user_id:
        return "own"
    if request.corrected_by_id is not None and request.corrected_by_id == user_id:
        return "corrected"
    return ""


def approvers_by_workspace(workspace_ids: list[int]) -> dict[int, list[tuple[int, str]]]:
    """(user id, user name) of the approvers of each workspace, by name: who may decide a request there
    (less its requester and the approver who corrected it, `decider_refusal`). One query."""
    found: dict[int, list[tuple[int, str]]] = {}
    rows = (
        Membership.objects.filter(
            workspace_id__in=workspace_ids, role=Role.APPROVER, user__is_active=True
        )
        .order_by("user__username")
        .values_list("workspace_id", "user_id", "user__username")
    )
    for workspace_id, user_id, username in rows:
        found.setdefault(workspace_id, []).append((user_id, username))
    return found


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
    return {ws: list(held) for ws, held in _roles_held(user.pk).items()}


def awaiting_counts_by_workspace(workspace_ids: list[int]) -> dict[int, int]:
    rows = (
        Request.objects.filter(workspace_id__in=workspace_ids, state=RequestState.AWAITING_APPROVAL)
        .order_by()
        .values_list("workspace_id")
        .annotate(n=Count("id"))
    )
    return dict(rows)


def request_evidence(request: Request) -> dict:
    """What the approver decides on besides the payload: the rules that apply and whether it passes them."""
    return {
        "rule_version": rules_for(request.workflow).version,
        "problems": payload_problems(request.workflow, request.payload),
    }


def operators_of(workspace_ids: list[int]) -> list:
    """Active users who hold the operator role in any of the workspaces, by name (assign targets)."""
    return list(
        get_user_model()
        .objects.filter(
            is_active=True,
            memberships__workspace_id__in=workspace_ids,
            memberships__role=Role.OPERATOR,
        )
        .distinct()
        .order_by("username")
    )


def is_operator_of(user_id: int, workspace_id: int) -> bool:
    return Role.OPERATOR in _roles_held(user_id).get(workspace_id, ())


def may_own_failures_of(user_id: int, workspace_id: int) -> bool:
    """Who may be given a failure of the workspace (`HANDOFF_ASSIGNEE_CHECK`): an active operator of it. A
    deactivated person keeps their memberships until someone removes them, and could act on nothing."""
    return active_operators(workspace_id).filter(user_id=user_id).exists()


def revision_by_id(pk: int) -> Request | None:
    return (
        Request.objects.filter(pk=pk)
        .only("id", "workspace_id", "number", "revision", "workflow")
        .first()
    )


def role_changes_visible_to(user, *, limit: int = 200) -> QuerySet:
    """Role grants and revocations in the workspaces where the user is an operator, newest first."""
    return (
        RoleChange.objects.filter(workspace_id__in=workspace_ids_for(user, Role.OPERATOR))
        .select_related("workspace", "user", "changed_by")
        .order_by("-changed_at", "-id")[:limit]
    )


# --- Requesters: their requests and where each stands with its three owners ---------------------

# A requester may replace a request that is not decided yet, or resubmit one that was rejected.
REQUESTER_REVISABLE_STATES = frozenset({RequestState.AWAITING_APPROVAL, RequestState.REJECTED})


def requester_workspaces(user) -> list[tuple[int, str]]:
    """(id, name) of the workspaces where the user may submit requests."""
    ids = workspace_ids_for(user, Role.REQUESTER)
    return list(Workspace.objects.filter(id__in=ids).order_by("id").values_list("id", "name"))


def revision_changes(old: Request, new: Request) -> list[dict]:
    """Field by field, what differs between two revisions' payloads (redacted: secrets stay hidden)."""
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
    ("approvals:delegations", "Delegates", Role.APPROVER),
    ("approvals:search", "Requests", "member"),
    ("outbox:list", "Handoffs", "member"),
    ("intake:triggers", "Triggers", "member"),
    ("observation:index", "Observation", "member"),
    ("reconciliation:health", "Health", Role.OPERATOR),
    ("incidents:list", "Incidents", Role.OPERATOR),
    ("destinations:list", "Destinations", Role.OPERATOR),
    ("reconciliation:findings", "Findings", Role.OPERATOR),
    ("reconciliation:runs", "Runs", Role.OPERATOR),
    ("approvals:role_changes", "Role changes", Role.OPERATOR),
    ("audit:export", "Audit export", Role.OPERATOR),
    ("admin:index", "Admin", "staff"),
]
# Pages also offered to the holders of a permission, whatever their roles: support staff granted the security
# incidents (`incidents.view_security_incident`, docs/security.md) find the incident list in their nav.
PAGES_ALSO_FOR_PERMISSION = {"incidents:list": "incidents.view_security_incident"}
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
        {"url_name": name, "title": title}
        for name, title, who in CONSOLE_PAGES
        if who in allowed
        or (
            # Support staff only: asking a requester's permissions would cost every page two queries.
            name in PAGES_ALSO_FOR_PERMISSION
            and user.is_staff
            and user.has_perm(PAGES_ALSO_FOR_PERMISSION[name])
        )
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


def active_user_named(name: str):
    """The active user of that username, or None (a command's `--as`, a delegate typed by name)."""
    return get_user_model().objects.filter(username=name, is_active=True).first()


def user_by_id(raw: str):
    """The user a posted id names, or None (also for an id that is not a number)."""
    pk = id_or_none(raw)
    return get_user_model().objects.filter(pk=pk).first() if pk else None


def approver_correctable(payload: dict) -> dict[str, str]:
    """The fields an approver may correct, with their values: the payload's text fields shown as they are
    stored. A field hidden or partly hidden by redaction (an e-mail, a secret inside a note) is not offered:
    nobody overwrites what they cannot see, and a form sent back unchanged must not store the mask."""
    shown = redact(payload)
    return {
        name: value
        for name, value in shown.items()
        if isinstance(value, str) and value == payload.get(name)
    }


def correction_fields(handoff: Handoff, rules: RuleSet | None = None) -> list[dict]:
    """The editable fields of the approved payload (a step's `operation` is the workflow's, not the request's);
    sensitive ones are shown blank and kept unless retyped. Then, blank, the text fields the workflow's rules
    (`rules`, when the caller has read them already) name that the payload lacks: a receiver may require one
    the rules let through (the usual permanent failure), and the correction must be able to add it."""
    payload = base_payload(handoff.payload)
    shown = redact(payload)
    fields = []
    for key, value in payload.items():
        if not isinstance(value, str):
            continue
        sensitive = shown.get(key) == REDACTED and value != REDACTED
        fields.append(
            {
                "name": key,
                "value": "" if sensitive else shown.get(key, ""),
                "sensitive": sensitive,
                "missing": False,
            }
        )
    for key, rule in (rules or rules_for(handoff.workflow)).schema.get("properties", {}).items():
        if key not in payload and isinstance(rule, dict) and rule.get("type") == "string":
            fields.append({"name": key, "value": "", "sensitive": False, "missing": True})
    return fields


def routed_destination_names(default: str) -> dict[str, list[str]]:
    """Each destination the workflows in force route a step to, with those steps (`onboarding.create_client`);
    a step naming none, and a workflow without steps, go to `default`. The outbox asks this before a
    destination is disabled (HANDOFF_ROUTES_CHECK): a routed destination's handoffs would wait forever."""
    workflows = set(BUILT_IN_RULES) | set(
        RuleVersion.objects.values_list("workflow", flat=True).distinct()
    )
    routes: dict[str, list[str]] = {}
    for workflow in sorted(workflows):
        steps = rules_for(workflow).steps or ({"name": "(the only step)"},)
        for step in steps:
            routes.setdefault(step.get("destination") or default, []).append(
                f"{workflow}.{step['name']}"
            )
    return routes
