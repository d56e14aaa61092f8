import pytest

from tests.factories import onboarding_world
from tests.reconciliation.health_world import build_health_world


@pytest.fixture
def world():
    return onboarding_world()


@pytest.fixture
def health_world(world):
    """Handoffs in every state, with known times; workspace 7's figures are `HEALTH_7` of its module."""
    return build_health_world(world)
