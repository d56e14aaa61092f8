"""The pages an operator on call opens read a bounded part of the outbox (issue 26: 10,000,000 handoffs): every
query of the handoff table stops (LIMIT), covers a window, reads one row or a few named ones, or reads the
working states through their partial index (the backlog, never the delivered history). A page that adds an
exact count or an unfiltered GROUP BY over the handoffs fails here, on a small table, before a bench finds it
on a large one. What the SQL alone cannot show is left to bench/console_operators_bench.py: a LIMIT whose
filter no index serves (a text search for a rare value) still reads the table until it has its rows."""

import re

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from outbox.clock import db_time
from outbox.models import HandoffState
from tests.factories import HandoffFactory

pytestmark = pytest.mark.django_db(databases=["default", "delivery"])
S = HandoffState

_OPEN = "(pending|in_flight|uncertain|needs_attention)"
_BOUNDED = re.compile(
    r"\bLIMIT\b"
    r"|\"(created_at|updated_at|started_at)\" >= "
    rf"|\"state\" = '{_OPEN}'"
    rf"|\"state\" IN \('{_OPEN}'(, '{_OPEN}')*\)"
    r"|\"outbox_handoff\"\.\"id\" (=|IN) "
)


def _world(world):
    now = db_time()
    for _ in range(3):
        HandoffFactory(state=S.DELIVERED, delivered_at=now)
        HandoffFactory(state=S.PENDING)
        HandoffFactory(state=S.UNCERTAIN)
    return HandoffFactory(
        state=S.NEEDS_ATTENTION, reason_code="retries_exhausted", attention_since=now
    )


def _unbounded_reads(client, url: str) -> list[str]:
    with CaptureQueriesContext(connection) as ctx:
        response = client.get(url)
    assert response.status_code == 200, url
    return [
        q["sql"]
        for q in ctx.captured_queries
        if q["sql"].lstrip().upper().startswith("SELECT")
        and '"outbox_handoff"' in q["sql"]
        and not _BOUNDED.search(q["sql"])
    ]


@pytest.mark.parametrize(
    "url",
    [
        "/",
        "/handoffs/",
        "/handoffs/?state=needs_attention",
        "/handoffs/?state=retrying",
        "/handoffs/?state=attention",
        "/handoffs/?owner=me&age=1d",
        "/handoffs/?q=100001",
        "/health/",
        "/incidents/",
        "/destinations/",
    ],
)
def test_every_read_of_the_handoffs_on_the_page_is_bounded(client, world, url):
    _world(world)
    client.force_login(world["olga"])
    assert _unbounded_reads(client, url) == []


def test_the_handoff_page_reads_its_own_rows(client, world):
    failed = _world(world)
    client.force_login(world["olga"])
    assert _unbounded_reads(client, f"/handoffs/{failed.pk}/") == []


def test_the_handoff_page_reads_the_rules_in_force_once(client, world):
    """The operator's correction form takes its field types and its missing fields from the same rules: one
    read of the workflow's newest rule version a page, not one for each."""
    failed = _world(world)
    client.force_login(world["olga"])
    with CaptureQueriesContext(connection) as ctx:
        response = client.get(f"/handoffs/{failed.pk}/")
    assert response.status_code == 200
    assert response.context["correction"] is not None, (
        "olga, an operator, is offered the correction"
    )
    reads = [q["sql"] for q in ctx.captured_queries if '"approvals_ruleversion"' in q["sql"]]
    assert len(reads) == 1, reads
