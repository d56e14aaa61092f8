"""Workspace roles follow the identity provider's groups at each sign-in, audited as RoleChange rows."""

import pytest
from django.core.exceptions import ImproperlyConfigured

from approvals.auth.role_mapping import role_mapping_parse
from approvals.auth.role_sync import memberships_sync_from_claims
from approvals.models import Membership, Role, RoleChange
from tests.factories import make_user, make_workspace

MAPPING = {
    "handoff-ws7-approvers": [{"workspace": 7, "role": "approver"}],
    "handoff-ws7-operators": [
        {"workspace": 7, "role": "operator"},
        {"workspace": 7, "role": "requester"},
    ],
    "handoff-ws8-approvers": [{"workspace": 8, "role": "approver"}],
}


@pytest.fixture
def mapped(settings, db):
    settings.OIDC_ROLE_MAPPING = MAPPING
    settings.OIDC_GROUPS_CLAIM = "groups"
    return make_workspace(7, "Client onboarding"), make_workspace(8, "Supplier onboarding")


def _roles(user) -> set[tuple[int, str]]:
    return set(Membership.objects.filter(user=user).values_list("workspace_id", "role"))


def test_groups_give_their_roles_each_audited_under_the_provider(mapped):
    dana = make_user("dana")
    memberships_sync_from_claims(
        user=dana, claims={"groups": ["handoff-ws7-approvers", "unrelated-group"]}
    )
    assert _roles(dana) == {(7, Role.APPROVER)}
    change = RoleChange.objects.get(user=dana)
    assert (change.workspace_id, change.role, change.action) == (7, "approver", "grant")
    assert change.changed_by.username == "identity-provider"
    assert not change.changed_by.is_active
    assert not change.changed_by.has_usable_password()
    assert "handoff-ws7-approvers" in change.reason


def test_a_group_removed_at_the_provider_takes_the_role_away_at_the_next_sign_in(mapped):
    dana = make_user("dana")
    memberships_sync_from_claims(
        user=dana, claims={"groups": ["handoff-ws7-approvers", "handoff-ws8-approvers"]}
    )
    memberships_sync_from_claims(user=dana, claims={"groups": ["handoff-ws8-approvers"]})
    assert _roles(dana) == {(8, Role.APPROVER)}
    revoke = RoleChange.objects.get(user=dana, action="revoke")
    assert (revoke.workspace_id, revoke.role) == (7, "approver")


def test_a_sign_in_with_unchanged_groups_writes_nothing(mapped):
    dana = make_user("dana")
    memberships_sync_from_claims(user=dana, claims={"groups": ["handoff-ws7-operators"]})
    before = RoleChange.objects.count()
    memberships_sync_from_claims(user=dana, claims={"groups": ["handoff-ws7-operators"]})
    assert RoleChange.objects.count() == before == 2


def test_roles_no_group_maps_are_left_as_the_console_set_them(mapped, settings):
    w7, _ = mapped
    settings.OIDC_ROLE_MAPPING = {"handoff-ws7-approvers": [{"workspace": 7, "role": "approver"}]}
    dana = make_user("dana", workspace=w7, roles=(Role.OPERATOR,))
    memberships_sync_from_claims(user=dana, claims={"groups": []})
    assert _roles(dana) == {(7, Role.OPERATOR)}
    assert not RoleChange.objects.exists()


def test_a_single_group_name_and_a_missing_claim_are_read(mapped, settings):
    settings.OIDC_GROUPS_CLAIM = "roles"  # Entra ID's app roles
    dana = make_user("dana")
    memberships_sync_from_claims(user=dana, claims={"roles": "handoff-ws8-approvers"})
    assert _roles(dana) == {(8, Role.APPROVER)}
    memberships_sync_from_claims(user=dana, claims={})
    assert _roles(dana) == set()


def test_a_mapped_workspace_that_does_not_exist_is_skipped(mapped, settings):
    settings.OIDC_ROLE_MAPPING = {"g": [{"workspace": 99, "role": "approver"}]}
    dana = make_user("dana")
    memberships_sync_from_claims(user=dana, claims={"groups": ["g"]})
    assert _roles(dana) == set()


@pytest.mark.parametrize(
    "raw",
    [
        [],
        {"g": {"workspace": 7, "role": "approver"}},
        {"g": [{"workspace": 7, "role": "admin"}]},
        {"g": [{"workspace": "7", "role": "approver"}]},
        {"g": [{"workspace": 7}]},
    ],
)
def test_a_wrong_mapping_is_a_configuration_error_that_names_it(raw):
    with pytest.raises(ImproperlyConfigured, match="OIDC role mapping"):
        role_mapping_parse(raw)


def test_a_sync_actor_that_is_a_persons_account_is_refused(mapped, settings):
    make_user("identity-provider")  # active, with a password: someone's account
    with pytest.raises(ImproperlyConfigured, match="a person's account"):
        memberships_sync_from_claims(user=make_user("dana"), claims={"groups": []})
    assert not RoleChange.objects.exists()
