"""Reads the console shares. Every query is scoped to the workspaces the user belongs to."""

from django.db.models import QuerySet

from approvals.models import Membership, Request, RequestState, Role, Workspace


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
            workspace_id__in=workspace_ids_for(user, Role.APPROVER), state=RequestState.AWAITING_APPROVAL
        )
        .select_related("workspace", "requested_by")
        .order_by("created_at", "id")
    )


def current_revision(*, workspace_id: int, number: int, workflow: str = "onboarding") -> Request | None:
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
    for workspace_id, role in Membership.objects.filter(user=user).order_by("workspace_id", "role").values_list(
        "workspace_id", "role"
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


def console_nav(user) -> list[dict]:
    """The user's workspaces with their roles and what waits for them there (three queries)."""
    from outbox.selectors import open_counts_by_workspace

    roles = roles_by_workspace(user)
    if not roles:
        return []
    names = dict(Workspace.objects.filter(id__in=list(roles)).values_list("id", "name"))
    approver_ws = [ws for ws, rs in roles.items() if Role.APPROVER in rs]
    operator_ws = [ws for ws, rs in roles.items() if Role.OPERATOR in rs]
    awaiting = awaiting_counts_by_workspace(approver_ws) if approver_ws else {}
    attention = open_counts_by_workspace(operator_ws) if operator_ws else {}
    return [
        {
            "id": ws,
            "name": names.get(ws, f"Workspace {ws}"),
            "roles": rs,
            "awaiting": awaiting.get(ws, 0) if ws in approver_ws else None,
            "attention": attention.get(ws, 0) if ws in operator_ws else None,
        }
        for ws, rs in sorted(roles.items())
    ]


def request_evidence(request: Request) -> dict:
    """What the approver decides on besides the payload: the rules that apply and whether it passes them."""
    from approvals.rules import payload_problems, rules_for

    return {"rule_version": rules_for(request.workflow).version,
            "problems": payload_problems(request.workflow, request.payload)}


def operators_of(workspace_ids: list[int]) -> list:
    """Users who hold the operator role in any of the workspaces, by name (assign targets)."""
    from django.contrib.auth import get_user_model

    return list(
        get_user_model().objects.filter(memberships__workspace_id__in=workspace_ids,
                                        memberships__role=Role.OPERATOR).distinct().order_by("username")
    )


def is_operator_of(user_id: int, workspace_id: int) -> bool:
    return Membership.objects.filter(user_id=user_id, workspace_id=workspace_id, role=Role.OPERATOR).exists()


def revision_by_id(pk: int) -> Request | None:
    return Request.objects.filter(pk=pk).only("id", "workspace_id", "number", "revision", "workflow").first()


def role_changes_visible_to(user, *, limit: int = 200) -> QuerySet:
    """Role grants and revocations in the workspaces where the user is an operator, newest first."""
    from approvals.models import RoleChange

    return (RoleChange.objects.filter(workspace_id__in=workspace_ids_for(user, Role.OPERATOR))
            .select_related("workspace", "user", "changed_by").order_by("-changed_at", "-id")[:limit])
