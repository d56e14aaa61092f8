"""Migration 0023 copies the operator's pause or window each destination row held into a hold of its own
(issue 36, item 1): a row paused until resumed becomes a live pause, a window scheduled ahead a window, and
the dispatcher's held check reads them as it read the columns."""

from datetime import timedelta

import pytest
from django.utils import timezone

from outbox.services.limits import destination_held
from tests.migrations import latest, migrate

pytestmark = pytest.mark.django_db(transaction=True)
BEFORE = [("outbox", "0022_databasetimeline")]
AFTER = [("outbox", "0023_destination_holds")]


def test_the_columns_pause_and_window_become_holds_that_hold_as_before():
    old = migrate(BEFORE)
    health = old.get_model("outbox", "DestinationHealth")
    now = timezone.now()
    health.objects.create(
        name="accounts",
        window_starts_at=now - timedelta(minutes=5),
        window_reason="accounts migration",
        window_set_by="olga",
    )
    health.objects.create(
        name="crm",
        window_starts_at=now + timedelta(hours=1),
        window_ends_at=now + timedelta(hours=2),
        window_reason="database maintenance",
        window_set_by="olga",
    )
    health.objects.create(name="mail")
    try:
        new = migrate(AFTER)
        hold = new.get_model("outbox", "DestinationHold")
        rows = {
            h.destination: (h.kind, h.reason, h.set_by, h.ends_at is None)
            for h in hold.objects.all()
        }
        assert rows == {
            "accounts": ("operator_pause", "accounts migration", "olga", True),
            "crm": ("window", "database maintenance", "olga", False),
        }
    finally:
        migrate(latest())
    assert destination_held(name="accounts")
    assert not destination_held(name="crm")
    assert not destination_held(name="mail")
