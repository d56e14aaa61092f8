"""The settlement claim reads a backlog of uncertain rows through their partial index, in its order, even when the
rows share one `updated_at` (moved by one statement: a lease expiry, an outage): it takes a batch from the top of
the index, never reads and sorts the whole backlog (which every dispatcher's claim did at once). PostgreSQL plans.
"""

import json

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from outbox.models import Handoff, HandoffState
from outbox.services.settlement_claims import handoff_claim_uncertain
from tests.factories import HandoffFactory

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(databases=["default", "delivery"])]
S = HandoffState
BACKLOG = 3_000


def _fill_uncertain_at_one_time(n: int) -> None:
    """n copies of one uncertain row (distinct keys, the same `updated_at`), in one INSERT … SELECT."""
    template = HandoffFactory(number=1, state=S.UNCERTAIN)
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
        cursor.execute(f"ANALYZE {table}")


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


def test_a_claim_takes_its_batch_from_the_uncertain_index_without_sorting_the_backlog():
    assert connection.vendor == "postgresql", "plans are PostgreSQL's: run with DATABASE_URL"
    _fill_uncertain_at_one_time(BACKLOG)
    with CaptureQueriesContext(connection) as captured:
        claims = handoff_claim_uncertain(destination_name="receiver", worker="a", limit=100)
    assert len(claims) == 100
    [sql] = [q["sql"] for q in captured.captured_queries if "SKIP LOCKED" in q["sql"]]
    nodes = _plan_nodes(sql)
    reads = [
        (node["Node Type"], node.get("Index Name", ""))
        for node in nodes
        if node.get("Relation Name") == Handoff._meta.db_table
    ]
    # The free rows come from the index, in its order (the UPDATE then finds them by id: on a table this small
    # PostgreSQL may read it whole for that join, so only the backlog's read is checked here).
    assert ("Index Scan", "handoff_uncertain_idx") in reads, reads
    assert not [node for node in nodes if "Sort" in node["Node Type"]], "the backlog was sorted"
