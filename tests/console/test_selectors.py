"""console/selectors.py: the reads that put several apps' answers side by side for the screens."""

import pytest

from approvals.models import Role
from console.selectors import console_nav
from outbox.models import HandoffState
from tests.factories import HandoffFactory, make_user, onboarding_world

pytestmark = pytest.mark.django_db(databases=["default", "delivery"])


@pytest.fixture
def world(db):
    """The onboarding world, plus oscar (operator of workspace 7) and rita (requester and approver there)."""
    world = onboarding_world()
    world["oscar"] = make_user("oscar", workspace=world["w7"], roles=(Role.OPERATOR,))
    world["rita"] = make_user("rita", workspace=world["w7"], roles=(Role.REQUESTER, Role.APPROVER))
    return world


def test_console_nav_shows_awaiting_to_approvers_and_attention_to_operators_in_four_queries(
    world, django_assert_num_queries
):
    HandoffFactory(state=HandoffState.NEEDS_ATTENTION)
    world["rita"].memberships.create(workspace=world["w7"], role=Role.OPERATOR)
    world["rita"].memberships.create(workspace=world["w8"], role=Role.REQUESTER)
    with django_assert_num_queries(4):
        nav = console_nav(world["rita"])
    assert nav == [
        {
            "id": 7,
            "name": "Client onboarding",
            "roles": [Role.APPROVER, Role.OPERATOR, Role.REQUESTER],
            "awaiting": 1,
            "attention": 1,
        },
        {
            "id": 8,
            "name": "Supplier onboarding",
            "roles": [Role.REQUESTER],
            "awaiting": None,
            "attention": None,
        },
    ]
    assert console_nav(world["olga"])[0]["awaiting"] is None
