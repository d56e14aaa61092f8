import pytest

from tests.factories import onboarding_world


@pytest.fixture
def world():
    return onboarding_world()
