import pytest
from django.db import connections
from hypothesis import settings as hypothesis_settings

from outbox.destinations import reset_destination

# No per-example deadline for the property tests: Hypothesis fails a test whose one example outlasts 200 ms
# once, as happens when a loaded machine (two cores shared with PostgreSQL, gunicorn and Chromium) sets the
# process aside for a moment; what the properties check does not depend on time.
hypothesis_settings.register_profile("suite", deadline=None)
hypothesis_settings.load_profile("suite")


@pytest.fixture(autouse=True)
def _fresh_destination():
    reset_destination()
    yield
    reset_destination()


@pytest.fixture
def on_postgres() -> bool:
    return connections["default"].vendor == "postgresql"
