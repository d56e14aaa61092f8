"""Migration 0031 is release two of the holds' columns (docs/operations.md, "Rolling deploys"): the seven
`hold_*` and `window_*` columns of `outbox_destinationhealth` that 0027 left in the table are gone after it,
a destination's row is written and read without them, and going back re-creates them."""

import pytest
from django.db import connection

from outbox.models import DestinationHealth
from tests.migrations import latest, migrate

pytestmark = pytest.mark.django_db(transaction=True)
BEFORE = [("outbox", "0030_handoff_erasure_index")]
AFTER = [("outbox", "0031_drop_replaced_hold_columns")]
DROPPED = {
    "hold_until",
    "hold_reason",
    "hold_since",
    "window_starts_at",
    "window_ends_at",
    "window_reason",
    "window_set_by",
}


def _columns() -> set[str]:
    with connection.cursor() as cursor:
        description = connection.introspection.get_table_description(
            cursor, "outbox_destinationhealth"
        )
    return {column.name for column in description}


def test_the_replaced_hold_columns_are_dropped_and_come_back_on_the_way_back():
    try:
        migrate(BEFORE)
        assert _columns() >= DROPPED, "release one left them in the table"
        migrate(AFTER)
        assert not DROPPED & _columns()
        DestinationHealth.objects.create(name="crm")
        assert DestinationHealth.objects.get(name="crm").state == "active"
        migrate(BEFORE)
        assert _columns() >= DROPPED
    finally:
        migrate(latest())
    assert not DROPPED & _columns()
