import pytest

from approvals.models import Role
from tests.factories import make_user, onboarding_world


@pytest.fixture
def world(db):
    """The onboarding world, plus oscar (operator of workspace 7) and rita (requester and approver there)."""
    world = onboarding_world()
    world["oscar"] = make_user("oscar", workspace=world["w7"], roles=(Role.OPERATOR,))
    world["rita"] = make_user("rita", workspace=world["w7"], roles=(Role.REQUESTER, Role.APPROVER))
    return world
