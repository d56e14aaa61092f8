"""The dispatcher's hot queries read partial indexes that delivered rows are not in (PostgreSQL plans).

Thousands of delivered rows next to a few working ones, analyzed: the claim, the lease expiry and the
settlement order must each be planned on their partial index, never on a scan of the table. The SQL is the one
the services run (captured), so a change that makes a query's WHERE stop implying its index's condition
shows here.
"""

import json

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from console.filters import HandoffFilter
from lib.paging import keyset_page
from outbox.clock import db_now_plus
from outbox.destinations import InProcessDestination
from outbox.dispatch.dispatcher import settle_uncertain
from outbox.models import Handoff, HandoffState
from outbox.selectors import handoffs_in
from outbox.services import handoff_claim_due, handoff_expire_leases
from tests.factories import HandoffFactory

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(databases=["default", "delivery"])]
S = HandoffState
DELIVERED_ROWS = 5_000


def _fill_delivered(n: int) -> None:
    """n delivered copies of one delivered row (distinct keys), in one INSERT … SELECT generate_series."""
    template = HandoffFactory(number=1, state=S.DELIVERED)
    columns = [f.column for f in Handoff._meta.concrete_fields if not f.primary_key]
    quoted = ", ".join(connection.ops.quote_name(c) for c in columns)
    distinct = {"action_key": "'bulk:' || i", "source_ref": "'request ' || i || ' revision 1'"}
    copied = ", ".join(distinct.get(c, connection.ops.quote_name(c)) for c in columns)
    table = connection.ops.quote_name(Handoff._meta.db_table)
    with connection.cursor() as cursor:
        # Column names from the model, fixed expressions: test data, never input.
        cursor.execute(
            f"INSERT INTO {table} ({quoted}) SELECT {copied} "  # noqa: S608
            f"FROM {table}, generate_series(1, %s) AS i WHERE id = %s",
            [n, template.pk],
        )


@pytest.fixture
def large_outbox(db):
    # Marked postgres, so never collected on SQLite; run there by hand it fails instead of passing unseen.
    assert connection.vendor == "postgresql", "plans are PostgreSQL's: run with DATABASE_URL"
    _fill_delivered(DELIVERED_ROWS)
    for n in range(2, 22):
        HandoffFactory(number=n)  # pending, due now
    for n in range(22, 27):
        HandoffFactory(number=n, state=S.UNCERTAIN)
    for n in range(27, 57):  # retried: half still in backoff, half due again
        HandoffFactory(number=n, attempts=2, next_attempt_at=db_now_plus(600 if n % 2 else -60))
    for n in range(57, 67):  # in flight, leased to a worker
        HandoffFactory(
            number=n, state=S.IN_FLIGHT, lease_owner="test:0", lease_expires_at=db_now_plus(30)
        )
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE outbox_handoff")


def _plan_nodes(sql: str) -> list[dict]:
    with connection.cursor() as cursor:
        cursor.execute(f"EXPLAIN (FORMAT JSON) {sql}")
        (raw,) = cursor.fetchone()
    plan = raw if isinstance(raw, list) else json.loads(raw)
    nodes, todo = [], [plan[0]["Plan"]]
    while todo:
        node = todo.pop()
        nodes.append(node)
        todo.extend(node.get("Plans", []))
    return nodes


def _reads_of_outbox(sql: str) -> list[tuple[str, str]]:
    """(node type, index name or "") of every plan node that reads the outbox table."""
    return [
        (node["Node Type"], node.get("Index Name", ""))
        for node in _plan_nodes(sql)
        if node.get("Relation Name") == Handoff._meta.db_table
    ]


def _captured(run, marker: str) -> str:
    with CaptureQueriesContext(connection) as captured:
        run()
    statements = [q["sql"] for q in captured.captured_queries if marker in q["sql"]]
    assert statements, f"no statement with {marker!r} was run"
    return statements[0]


def test_the_claim_reads_the_partial_claim_index_not_the_delivered_rows(large_outbox):
    sql = _captured(
        lambda: handoff_claim_due(worker="test:1", limit=5, destination_name="receiver"),
        "SKIP LOCKED",
    )
    reads = _reads_of_outbox(sql)
    # The due rows come from the claim index; the UPDATE then finds each claimed row by its key.
    assert ("Index Scan", "handoff_claim_unheld_idx") in reads, reads
    assert all(kind != "Seq Scan" for kind, _index in reads), reads


def test_lease_expiry_reads_the_partial_lease_index(large_outbox):
    sql = _captured(handoff_expire_leases, '"lease_expires_at" <')
    assert _reads_of_outbox(sql) == [("Index Scan", "handoff_lease_expiry_idx")]


def test_settlement_reads_the_uncertain_ones_through_their_partial_index(large_outbox):
    sql = _captured(
        lambda: settle_uncertain(destination=InProcessDestination(), limit=3),
        'ORDER BY "outbox_handoff"."updated_at"',
    )
    reads = _reads_of_outbox(sql)
    # The settlement claim: the free uncertain rows from their index; the UPDATE finds each by its key.
    assert ("Index Scan", "handoff_uncertain_idx") in reads, reads
    assert all(kind != "Seq Scan" for kind, _index in reads), reads


def test_the_console_retrying_list_reads_the_partial_retrying_index(large_outbox):
    retrying = HandoffFilter({"state": "retrying"}, queryset=handoffs_in([7]), workspace_ids=[7]).qs
    sql = _captured(lambda: keyset_page(retrying, after=None, size=50), '"attempts" >')
    assert _reads_of_outbox(sql) == [("Index Scan", "handoff_retrying_idx")]
