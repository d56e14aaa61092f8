"""approvals/services/memberships.py: granting and revoking roles, audited."""

import pytest

from approvals import services
from approvals.errors import (
    ApprovalDenied,
    InvalidPayload,
    RoleChangeRefused,
    WorkspaceNotFound,
)
from approvals.models import (
    Membership,
    RequestState,
    Role,
    RoleChange,
)
from tests.approvals.services.calls import (
    approve,
    role_admin,
)
from tests.factories import make_user

pytestmark = pytest.mark.django_db(databases=["default", "delivery"])

R = RequestState


# --- membership_grant, membership_revoke -------------------------------------------------------


def test_granting_a_role_adds_the_membership_and_its_audit_row(world):
    actor, carol = role_admin(), make_user("carol")
    membership = services.membership_grant(
        workspace_id=7, user=carol, role=Role.APPROVER, actor=actor, reason="covers for alice"
    )
    assert (membership.user, membership.workspace_id, membership.role) == (carol, 7, Role.APPROVER)
    change = RoleChange.objects.get()
    assert (
        change.workspace_id,
        change.user,
        change.role,
        change.action,
        change.changed_by,
        change.reason,
    ) == (7, carol, Role.APPROVER, RoleChange.Action.GRANT, actor, "covers for alice")


def test_granting_a_role_already_held_is_refused_without_an_audit_row(world):
    with pytest.raises(RoleChangeRefused):
        services.membership_grant(
            workspace_id=7,
            user=world["alice"],
            role=Role.APPROVER,
            actor=role_admin(),
            reason="again",
        )
    assert not RoleChange.objects.exists()


def test_revoking_a_role_removes_the_membership_and_writes_its_audit_row(world):
    actor = role_admin()
    services.membership_revoke(
        workspace_id=7, user=world["alice"], role=Role.APPROVER, actor=actor, reason="left"
    )
    assert not Membership.objects.filter(user=world["alice"], workspace_id=7).exists()
    change = RoleChange.objects.get()
    assert (change.user, change.role, change.action, change.changed_by, change.reason) == (
        world["alice"],
        Role.APPROVER,
        RoleChange.Action.REVOKE,
        actor,
        "left",
    )


def test_a_revoked_approver_can_no_longer_approve(world):
    services.membership_revoke(
        workspace_id=7, user=world["alice"], role=Role.APPROVER, actor=role_admin(), reason="left"
    )
    with pytest.raises(ApprovalDenied):
        approve(world)


def test_revoking_a_role_not_held_is_refused_without_an_audit_row(world):
    with pytest.raises(RoleChangeRefused):
        services.membership_revoke(
            workspace_id=8,
            user=world["alice"],
            role=Role.APPROVER,
            actor=role_admin(),
            reason="never had it",
        )
    assert not RoleChange.objects.exists()


@pytest.mark.parametrize("change", [services.membership_grant, services.membership_revoke])
@pytest.mark.parametrize(
    ("workspace_id", "role", "reason", "error"),
    [
        (7, "owner", "why", InvalidPayload),
        (7, Role.OPERATOR, " ", InvalidPayload),
        (99, Role.OPERATOR, "why", WorkspaceNotFound),
    ],
)
def test_role_change_with_unknown_role_no_reason_or_unknown_workspace_is_refused(
    world, change, workspace_id, role, reason, error
):
    with pytest.raises(error):
        change(
            workspace_id=workspace_id,
            user=world["olga"],
            role=role,
            actor=role_admin(),
            reason=reason,
        )
    assert Membership.objects.filter(user=world["olga"]).count() == 1
    assert not RoleChange.objects.exists()


@pytest.mark.parametrize("change", [services.membership_grant, services.membership_revoke])
def test_role_change_without_the_permission_is_denied(world, change):
    # An operator of the workspace is not thereby allowed to change its roles.
    with pytest.raises(ApprovalDenied):
        change(
            workspace_id=7,
            user=world["olga"],
            role=Role.OPERATOR,
            actor=world["olga"],
            reason="why",
        )
    assert Membership.objects.filter(user=world["olga"]).count() == 1
    assert not RoleChange.objects.exists()
