"""approvals/selectors.py: every read is scoped to the workspaces (and roles) the user holds."""

import pytest
from django.contrib.auth.models import AnonymousUser

from approvals import selectors
from approvals.models import RequestState, Role, RoleChange
from approvals.services import request_revise
from console.selectors import console_nav
from tests.factories import ONBOARDING_PAYLOAD, make_request, make_user

pytestmark = pytest.mark.django_db(databases=["default", "delivery"])


def test_workspace_ids_for_lists_the_user_workspaces_optionally_for_one_role(world):
    assert selectors.workspace_ids_for(world["rita"]) == [7]
    world["rita"].memberships.create(workspace=world["w8"], role=Role.OPERATOR)
    assert selectors.workspace_ids_for(world["rita"]) == [7, 8]
    assert selectors.workspace_ids_for(world["rita"], Role.APPROVER) == [7]
    assert selectors.workspace_ids_for(world["rita"], Role.OPERATOR) == [8]


def test_anonymous_users_have_no_workspaces_and_no_roles(world):
    assert selectors.workspace_ids_for(AnonymousUser()) == []
    assert selectors.roles_by_workspace(AnonymousUser()) == {}
    assert console_nav(AnonymousUser()) == []


def test_user_has_role_only_for_that_workspace_and_role(world):
    assert selectors.user_has_role(world["alice"], 7, Role.APPROVER)
    assert not selectors.user_has_role(world["alice"], 7, Role.OPERATOR)
    assert not selectors.user_has_role(world["alice"], 8, Role.APPROVER)


def test_workspaces_for_is_the_user_workspaces_in_id_order(world):
    assert list(selectors.workspaces_for(world["mallory"])) == [world["w8"]]
    assert list(selectors.workspaces_for(make_user("nobody"))) == []


def test_requests_awaiting_decision_are_undecided_ones_where_the_user_approves_oldest_first(world):
    make_request(world["w7"], 43, world["bob"])
    make_request(world["w7"], 44, world["bob"], state=RequestState.APPROVED)
    make_request(world["w8"], 1, world["mallory"])
    assert [r.number for r in selectors.requests_awaiting_decision(world["alice"])] == [42, 43]
    assert selectors.requests_awaiting_decision(world["olga"]).count() == 0, (
        "operators decide nothing"
    )


def test_current_revision_is_the_newest_revision_or_none(world):
    assert selectors.current_revision(workspace_id=7, number=42).revision == 1
    request_revise(
        workspace_id=7,
        number=42,
        payload={**ONBOARDING_PAYLOAD, "plan": "starter"},
        actor=world["bob"],
    )
    assert selectors.current_revision(workspace_id=7, number=42).revision == 2
    assert selectors.current_revision(workspace_id=8, number=42) is None
    assert selectors.current_revision(workspace_id=7, number=42, workflow="offboarding") is None


def test_roles_by_workspace_groups_roles_sorted(world):
    world["rita"].memberships.create(workspace=world["w8"], role=Role.OPERATOR)
    assert selectors.roles_by_workspace(world["rita"]) == {
        7: [Role.APPROVER, Role.REQUESTER],
        8: [Role.OPERATOR],
    }


def test_awaiting_counts_by_workspace_counts_undecided_requests_only(world):
    make_request(world["w7"], 43, world["bob"])
    make_request(world["w7"], 44, world["bob"], state=RequestState.REJECTED)
    assert selectors.awaiting_counts_by_workspace([7, 8]) == {7: 2}


def test_request_evidence_names_the_rules_in_force_and_the_payload_problems(world):
    assert selectors.request_evidence(world["request"]) == {
        "rule_version": "onboarding-v1",
        "problems": [],
    }
    bad = make_request(
        world["w7"], 43, world["bob"], payload={"client_name": "X", "contact_email": "x@y.z"}
    )
    evidence = selectors.request_evidence(bad)
    assert evidence["rule_version"] == "onboarding-v1"
    assert len(evidence["problems"]) == 1 and "plan" in evidence["problems"][0]


def test_operators_of_are_the_operators_of_any_given_workspace_once_each_by_name(world):
    world["olga"].memberships.create(workspace=world["w8"], role=Role.OPERATOR)
    oscar = world["oscar"]
    assert selectors.operators_of([7, 8]) == [world["olga"], oscar]
    assert selectors.operators_of([8]) == [world["olga"]]
    assert selectors.operators_of([]) == []


def test_is_operator_of_checks_the_operator_role_in_that_workspace(world):
    assert selectors.is_operator_of(world["olga"].pk, 7)
    assert not selectors.is_operator_of(world["olga"].pk, 8)
    assert not selectors.is_operator_of(world["alice"].pk, 7)


def test_revision_by_id_returns_the_revision_or_none(world):
    found = selectors.revision_by_id(world["request"].pk)
    assert (found.workspace_id, found.number, found.revision, found.workflow) == (
        7,
        42,
        1,
        "onboarding",
    )
    assert selectors.revision_by_id(987654) is None


def test_role_changes_visible_to_are_those_of_workspaces_the_user_operates_newest_first(world):
    admin = make_user("root", is_superuser=True)
    first = RoleChange.objects.create(
        workspace=world["w7"],
        user=world["bob"],
        role=Role.APPROVER,
        action=RoleChange.Action.GRANT,
        changed_by=admin,
        reason="one",
    )
    second = RoleChange.objects.create(
        workspace=world["w7"],
        user=world["bob"],
        role=Role.APPROVER,
        action=RoleChange.Action.REVOKE,
        changed_by=admin,
        reason="two",
    )
    RoleChange.objects.create(
        workspace=world["w8"],
        user=world["mallory"],
        role=Role.OPERATOR,
        action=RoleChange.Action.GRANT,
        changed_by=admin,
        reason="elsewhere",
    )
    assert list(selectors.role_changes_visible_to(world["olga"])) == [second, first]
    assert list(selectors.role_changes_visible_to(world["olga"], limit=1)) == [second]
    assert list(selectors.role_changes_visible_to(world["alice"])) == [], (
        "approvers do not see role changes"
    )
