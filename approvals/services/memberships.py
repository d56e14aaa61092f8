"""Memberships: who holds which role in a workspace, and the audited grants and revocations."""

from django.db import transaction

from approvals.errors import ApprovalDenied, InvalidPayload, RoleChangeRefused, WorkspaceNotFound
from approvals.models import Membership, Role, RoleChange, Workspace
from lib.databases import DB


def require_member(user, workspace_id: int, role: str) -> None:
    if not Membership.objects.filter(user=user, workspace_id=workspace_id, role=role).exists():
        raise ApprovalDenied(f"{user} is not {role} in workspace {workspace_id}")


def _role_change_checks(*, workspace_id: int, role: str, actor, reason: str, perm: str) -> None:
    if role not in Role.values:
        raise InvalidPayload([f"unknown role {role!r}; one of {', '.join(Role.values)}"])
    if not reason.strip():
        raise InvalidPayload(["a reason is required to change a role"])
    if not actor.has_perm(perm):
        raise ApprovalDenied(f"{actor} may not change roles")
    if not Workspace.objects.filter(pk=workspace_id).exists():
        raise WorkspaceNotFound(workspace_id)


def membership_grant(*, workspace_id: int, user, role: str, actor, reason: str) -> Membership:
    """Give `user` a role in a workspace, with its audit record (who, whose, which role, why)."""
    _role_change_checks(
        workspace_id=workspace_id,
        role=role,
        actor=actor,
        reason=reason,
        perm="approvals.add_membership",
    )
    with transaction.atomic(using=DB):
        if Membership.objects.filter(user=user, workspace_id=workspace_id, role=role).exists():
            raise RoleChangeRefused(f"{user} is already {role} in workspace {workspace_id}")
        membership = Membership.objects.create(user=user, workspace_id=workspace_id, role=role)
        RoleChange.objects.create(
            workspace_id=workspace_id,
            user=user,
            role=role,
            action=RoleChange.Action.GRANT,
            changed_by=actor,
            reason=reason,
        )
    return membership


def membership_revoke(*, workspace_id: int, user, role: str, actor, reason: str) -> None:
    """Take a role away, with its audit record."""
    _role_change_checks(
        workspace_id=workspace_id,
        role=role,
        actor=actor,
        reason=reason,
        perm="approvals.delete_membership",
    )
    with transaction.atomic(using=DB):
        deleted, _ = Membership.objects.filter(
            user=user, workspace_id=workspace_id, role=role
        ).delete()
        if not deleted:
            raise RoleChangeRefused(f"{user} is not {role} in workspace {workspace_id}")
        RoleChange.objects.create(
            workspace_id=workspace_id,
            user=user,
            role=role,
            action=RoleChange.Action.REVOKE,
            changed_by=actor,
            reason=reason,
        )
