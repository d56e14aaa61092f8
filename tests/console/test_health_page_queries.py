"""The health page's queries, the page that missed the console's aim with 20 operators at 1,000,000 handoffs
(docs/benchmarks.md: p95 161.7 ms reading ~1,000 ms a page, every other page within 150 ms): a fixed number
of them, and the destinations read once for the table and the paused notice both."""

import pytest
from django.core.cache import cache
from django.db import connection
from django.test.utils import CaptureQueriesContext

from outbox.failures import DeliveryResult
from outbox.models import FailureClass
from outbox.services.breaker import destination_record_results
from tests.builders import approve
from tests.console.clients import client_for

pytestmark = pytest.mark.django_db(databases=["default", "delivery"])

# The queries of the page: computing its figures (HEALTH_FIGURES_SECONDS=0, as the tests run), and with the
# figures shared, only what the page reads live (pauses, holds, incidents, alert channels, the nav).
COMPUTED, SHARED = 29, 15


def _pause_receiver() -> None:
    destination_record_results(
        name="receiver",
        results=[
            DeliveryResult.failed(
                FailureClass.CREDENTIAL, "credential_rejected", "HTTP 401", status_code=401
            )
        ],
    )


def _page_queries(client) -> tuple[str, list[str]]:
    with CaptureQueriesContext(connection) as captured:
        response = client.get("/health/")
    assert response.status_code == 200
    return response.content.decode(), [q["sql"] for q in captured.captured_queries]


def test_the_health_page_reads_its_destinations_once_for_the_table_and_the_paused_notice(world):
    approve(world)
    _pause_receiver()
    page, queries = _page_queries(client_for(world["olga"]))

    assert "Destination receiver is paused since" in page and "credentials refused" in page
    assert 'id="destination-paused-receiver"' in page, "the paused notice"
    assert "Destination receiver <small>(paused)</small>" in page, "the destinations table"
    reads = [sql for sql in queries if sql.startswith('SELECT "outbox_destinationhealth"."id"')]
    assert len(reads) == 1, f"outbox_destinationhealth read {len(reads)} times: {reads}"
    assert len(queries) == COMPUTED, f"{len(queries)} queries computing the figures"


def test_the_health_page_with_shared_figures_runs_only_its_live_reads(world, settings):
    settings.HEALTH_FIGURES_SECONDS = 60
    cache.clear()
    client = client_for(world["olga"])
    try:
        _page_queries(client)
        page, queries = _page_queries(client)
    finally:
        cache.clear()
    assert "computed at most every 60 s" in page, "the page says how old its shared figures may be"
    assert len(queries) == SHARED, f"{len(queries)} queries with the figures shared"
