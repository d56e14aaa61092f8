"""Every foreign key of the outbox's tables is the leading column of an index (a cascade delete or a SET NULL
finds its rows without a scan), and the tables written per attempt and per event carry no index that a wider
one already covers: each is one more write on the dispatcher's hot path."""

import pytest
from django.db import connection

from outbox.models import Attempt, Handoff, HandoffEvent

pytestmark = pytest.mark.django_db

MODELS = (Handoff, Attempt, HandoffEvent)


def _indexes(model) -> list[list[str]]:
    with connection.cursor() as cursor:
        constraints = connection.introspection.get_constraints(cursor, model._meta.db_table)
    return [
        spec["columns"]
        for spec in constraints.values()
        if spec["index"] or spec["unique"] or spec["primary_key"]
    ]


@pytest.mark.parametrize("model", MODELS, ids=lambda model: model.__name__)
def test_every_foreign_key_leads_an_index(model):
    leading = {columns[0] for columns in _indexes(model) if columns}
    foreign_keys = [field.column for field in model._meta.concrete_fields if field.many_to_one]
    assert foreign_keys, "the outbox tables refer to handoffs and users"
    assert [column for column in foreign_keys if column not in leading] == []


@pytest.mark.parametrize("model", (Attempt, HandoffEvent), ids=lambda model: model.__name__)
def test_no_single_column_index_repeats_the_start_of_a_wider_one(model):
    indexes = _indexes(model)
    wider_starts = {columns[0] for columns in indexes if len(columns) > 1}
    assert [
        columns for columns in indexes if len(columns) == 1 and columns[0] in wider_starts
    ] == []
