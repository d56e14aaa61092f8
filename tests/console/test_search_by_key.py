"""A key typed whole into the handoff list's search finds that handoff (or every step of that instance) by
equality on the key columns, which their indexes serve; the text search, which reads every row of a large
outbox (6.7 s at 10,000,000 handoffs), is for anything else."""

import re

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from tests.builders import record
from tests.console.clients import client_for

pytestmark = pytest.mark.django_db(databases=["default", "delivery"])

# The text search's condition: the words' index on PostgreSQL, a regular expression on SQLite.
TEXT_SEARCH = re.compile(r"search_text_words\(|REGEXP")


def _handoff_list_sql(client, text: str) -> tuple[str, str]:
    with CaptureQueriesContext(connection) as queries:
        page = client.get("/handoffs/", {"q": text}).content.decode()
    listing = [q["sql"] for q in queries if 'FROM "outbox_handoff"' in q["sql"]]
    return page, "\n".join(listing)


@pytest.mark.parametrize("typed", ["onboarding:7:42:1", "  onboarding:7:42:1 "])
def test_a_key_typed_whole_is_found_by_equality_not_read_for(world, typed):
    wanted, neighbour = record(42), record(420)
    page, sql = _handoff_list_sql(client_for(world["olga"]), typed)
    assert f"/handoffs/{wanted.pk}/" in page
    assert f"/handoffs/{neighbour.pk}/" not in page, "onboarding:7:420:1 is another key"
    assert '"action_key" = ' in sql and not TEXT_SEARCH.search(sql), sql


def test_other_text_is_still_searched_in_keys_and_payloads(world):
    wanted = record(42)
    page, sql = _handoff_list_sql(client_for(world["olga"]), "7:42")
    assert f"/handoffs/{wanted.pk}/" in page and TEXT_SEARCH.search(sql)
