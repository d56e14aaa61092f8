"""lib/paging.py: keyset pages of the console's long lists."""

import pytest
from django.db import connections, transaction
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from lib.databases import DB
from lib.paging import keyset_page
from outbox.models import Handoff
from tests.factories import HandoffFactory

pytestmark = pytest.mark.django_db(databases=["default", "delivery"])


@pytest.mark.parametrize("newest_first", [True, False])
def test_keyset_pages_walk_every_row_once_in_order_with_equal_timestamps(db, newest_first):
    HandoffFactory.create_batch(7)
    Handoff.objects.filter(pk__in=list(Handoff.objects.values_list("pk", flat=True)[2:5])).update(
        created_at=timezone.now()
    )
    seen, after, more = [], None, True
    while more:
        rows, more = keyset_page(
            Handoff.objects.all(), after=after, size=3, newest_first=newest_first
        )
        seen += rows
        after = (rows[-1].created_at, rows[-1].pk)
    keys = [(h.created_at, h.pk) for h in seen]
    assert keys == sorted(keys, reverse=newest_first)
    assert len(seen) == len(set(seen)) == 7


def test_keyset_page_says_whether_another_page_follows(db):
    HandoffFactory.create_batch(3)
    assert keyset_page(Handoff.objects.all(), after=None, size=3)[1] is False
    assert keyset_page(Handoff.objects.all(), after=None, size=2)[1] is True


@pytest.mark.postgres
def test_a_narrowed_page_is_planned_without_parallel_workers_and_the_setting_is_put_back():
    """`narrowed_first` reads its page planned serially (`planned_serially`); the queries after it are
    planned with the setting the transaction had before."""
    connection = connections[DB]
    assert connection.vendor == "postgresql", "PostgreSQL's planner: run with DATABASE_URL"
    HandoffFactory.create_batch(3)
    with transaction.atomic(using=DB), connection.cursor() as cursor:
        cursor.execute("SET LOCAL max_parallel_workers_per_gather = 3")
        with CaptureQueriesContext(connection) as ran:
            rows, more = keyset_page(Handoff.objects.all(), after=None, size=2, narrowed_first=True)
        cursor.execute("SHOW max_parallel_workers_per_gather")
        assert cursor.fetchone()[0] == "3"
    assert len(rows) == 2 and more
    ran_sql = [q["sql"] for q in ran.captured_queries]
    (paged,) = [i for i, sql in enumerate(ran_sql) if "LIMIT 3" in sql]
    assert "set_config('max_parallel_workers_per_gather', '0', true)" in ran_sql[paged - 1]
