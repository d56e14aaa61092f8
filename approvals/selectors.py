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


def requests_visible_to(user) -> QuerySet[Request]:
    return Request.objects.filter(workspace_id__in=workspace_ids_for(user)).select_related("workspace", "requested_by")


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
