import pytest
from django.db import connections

from outbox.destinations import reset_destination


@pytest.fixture(autouse=True)
def _fresh_destination():
    reset_destination()
    yield
    reset_destination()


@pytest.fixture
def on_postgres() -> bool:
    return connections["default"].vendor == "postgresql"
