"""Reconciliation reads both sides one page at a time: the batch size is what bounds memory."""

import tracemalloc

import pytest
from django.db import connections
from django.test.utils import CaptureQueriesContext

from outbox.destinations import InProcessDestination
from reconciliation.models import Finding, RunStatus
from reconciliation.services.runs import reconciliation_run
from tests.reconciliation.bulk import bulk_matching_postgres, bulk_matching_sqlite, key

pytestmark = pytest.mark.django_db(databases=["default", "delivery"])


class CountingDestination(InProcessDestination):
    """The in-process receiver, recording every page asked of it and its length."""

    def __init__(self):
        super().__init__()
        self.pages: list[tuple[int, int]] = []

    def list_keys(self, *, after="", limit=500):
        page = super().list_keys(after=after, limit=limit)
        self.pages.append((limit, len(page)))
        return page


def source_page_queries(captured) -> list[str]:
    return [
        q["sql"]
        for q in captured.captured_queries
        if 'FROM "outbox_handoff" WHERE' in q["sql"]
        and '"outbox_handoff"."action_key" >' in q["sql"]
    ]


def test_many_handoffs_are_merged_in_pages_of_the_batch_size():
    n, batch = 2_500, 100
    bulk_matching_sqlite(n) if connections[
        "default"
    ].vendor != "postgresql" else bulk_matching_postgres(n)
    destination = CountingDestination()
    with CaptureQueriesContext(connections["default"]) as captured:
        run = reconciliation_run(destination=destination, batch_size=batch)
    assert run.status == RunStatus.COMPLETED, run.error
    assert run.findings_by_kind == {} and Finding.objects.count() == 0
    assert run.keys_compared == n and run.source_keys == n and run.receiver_keys == n
    # Every page asked of the receiver had the batch size, and none returned more.
    assert {limit for limit, _ in destination.pages} == {batch}
    assert max(rows for _, rows in destination.pages) == batch
    assert len(destination.pages) == n // batch + 1  # the last, empty page ends the stream
    # Every source query is one keyset page with the batch size as its LIMIT.
    pages = source_page_queries(captured)
    assert len(pages) == n // batch + 1
    assert all(sql.rstrip().endswith(f"LIMIT {batch}") for sql in pages)
    assert run.page_limits == [batch] and run.largest_page == batch
    assert (run.source_pages, run.receiver_pages) == (n // batch + 1, n // batch + 1)


def test_a_problem_on_a_page_boundary_is_found():
    """The keyset resumes after the last key of a page: a key on the boundary is neither lost nor doubled."""
    from delivery.models import ReceiverTask

    n, batch = 300, 100
    bulk_matching_sqlite(n) if connections[
        "default"
    ].vendor != "postgresql" else bulk_matching_postgres(n)
    ReceiverTask.objects.using("delivery").filter(action_key__in=[key(99), key(100)]).delete()
    run = reconciliation_run(destination=CountingDestination(), batch_size=batch)
    assert run.findings_by_kind == {"missing_at_receiver": 2}
    assert sorted(Finding.objects.values_list("action_key", flat=True)) == [key(99), key(100)]
    assert run.keys_compared == n


# Long (100,000 rows through the merge: about 25 s of CPU): the long stream, off the rest stream's critical path.
@pytest.mark.postgres
@pytest.mark.long
def test_100000_handoffs_reconcile_in_bounded_memory_on_postgres():
    assert connections["default"].vendor == "postgresql", (
        "this test needs PostgreSQL (run with DATABASE_URL)"
    )
    n, batch = 100_000, 1_000
    bulk_matching_postgres(n)
    destination = CountingDestination()
    tracemalloc.start()
    try:
        run = reconciliation_run(destination=destination, batch_size=batch)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert run.status == RunStatus.COMPLETED, run.error
    assert run.keys_compared == n and run.findings_by_kind == {}
    assert {limit for limit, _ in destination.pages} == {batch}
    assert len(destination.pages) == n // batch + 1
    assert run.page_limits == [batch] and run.largest_page == batch
    assert run.source_pages == n // batch + 1
    # Two pages of 1,000 rows are a megabyte or two; holding 100,000 rows of either side would be
    # several tens of megabytes. (Larger sizes are measured by `make bench`.)
    assert peak < 15 * 1024 * 1024, f"peak traced memory {peak / 1e6:.1f} MB"


def test_a_receiver_that_caps_the_page_size_is_still_listed_to_the_end():
    n = 250
    bulk_matching_sqlite(n) if connections[
        "default"
    ].vendor != "postgresql" else bulk_matching_postgres(n)

    class Capped(CountingDestination):
        def list_keys(self, *, after="", limit=500):
            return super().list_keys(after=after, limit=min(limit, 40))

    destination = Capped()
    run = reconciliation_run(destination=destination, batch_size=100)
    assert run.findings_by_kind == {} and run.receiver_keys == n
    assert max(rows for _, rows in destination.pages) == 40
