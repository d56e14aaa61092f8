"""Who may export which workspace's trail, and which kinds of event in it.

Operators of the workspace export every kind. Support staff (staff, never superusers, in a least-privilege
group) export any workspace, but only the kinds their group may view in admin. Anyone else: the workspace
is not found (404), as any other screen of a workspace one does not belong to; a member without the
operator role is refused (403)."""

from approvals.errors import ApprovalDenied, WorkspaceNotFound
from approvals.models import Membership, Role, Workspace
from console.audit_trail.sources import SOURCES


def audit_kinds_for(user, workspace_id: int) -> list[str]:
    """The kinds `user` may export for the workspace; raises WorkspaceNotFound or ApprovalDenied."""
    if not Workspace.objects.filter(pk=workspace_id).exists():
        raise WorkspaceNotFound(workspace_id)
    roles = set(
        Membership.objects.filter(user=user, workspace_id=workspace_id).values_list(
            "role", flat=True
        )
    )
    if Role.OPERATOR in roles:
        return list(SOURCES)
    if user.is_staff:
        kinds = [kind for kind, source in SOURCES.items() if user.has_perm(source.permission)]
        if kinds:
            return kinds
        raise ApprovalDenied(f"{user} may view none of the audited records")
    if roles:
        raise ApprovalDenied(
            f"exporting the audit trail of workspace {workspace_id} needs the operator role"
        )
    raise WorkspaceNotFound(workspace_id)
