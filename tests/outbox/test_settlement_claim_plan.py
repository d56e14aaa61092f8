"""The settlement claim reads a backlog of uncertain rows through their partial index, in its order, even when the
rows share one `updated_at` (moved by one statement: a lease expiry, an outage): it takes a batch from the top of
the index, never reads and sorts the whole backlog (which every dispatcher's claim did at once). PostgreSQL plans.
"""

import json

import pytest
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext

from outbox.destinations import InProcessDestination, RemoteTask
from outbox.models import Handoff, HandoffState
from outbox.services.lookup_limits import LimitedLookups
from outbox.settlement.claims import (
    SettlementAnswer,
    handoff_claim_uncertain,
    handoffs_record_settlements,
)
from tests.factories import HandoffFactory

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(databases=["default", "delivery"])]
S = HandoffState
BACKLOG = 3_000


def _fill_uncertain_at_one_time(n: int, *, state: str = S.UNCERTAIN, first: int = 1) -> None:
    """n copies of one uncertain row (distinct keys, the same `updated_at`), in one INSERT … SELECT; numbered from
    `first`, in `state`."""
    template = HandoffFactory(number=first, state=state)
    columns = [f.column for f in Handoff._meta.concrete_fields if not f.primary_key]
    quoted = ", ".join(connection.ops.quote_name(c) for c in columns)
    distinct = {
        "action_key": f"'bulk:{first}:' || i",
        "source_ref": f"'request {first}:' || i || ' revision 1'",
    }
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


def _plan_nodes(sql: str, *, analyze: bool = False) -> list[dict]:
    options = "ANALYZE, FORMAT JSON" if analyze else "FORMAT JSON"
    with connection.cursor() as cursor:
        cursor.execute(f"EXPLAIN ({options}) {sql}")
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


def _rows_read(nodes: list[dict], table: str) -> int:
    """Rows a statement's plan read from `table`: those it kept and those its filters removed, every loop."""
    return sum(
        (node["Actual Rows"] + node.get("Rows Removed by Filter", 0)) * node["Actual Loops"]
        + node.get("Rows Removed by Index Recheck", 0)
        for node in nodes
        if node.get("Relation Name") == table and "Scan" in node["Node Type"]
    )


def test_recording_a_requests_answers_reads_its_rows_by_id_not_the_backlog():
    """The found answers of one request are written by one statement that finds the claimed rows by their ids.
    It once joined them with every uncertain row of the destination (read through the partial index, filtered
    by the settler's name): each request of 100 keys read the whole backlog, so settling a backlog of n rows
    cost n² reads."""
    assert connection.vendor == "postgresql", "plans are PostgreSQL's: run with DATABASE_URL"
    # A year's delivered rows beside the backlog, as in production: a table read whole costs more than the
    # backlog, so what the statement reads is the rows it names or the backlog.
    _fill_uncertain_at_one_time(10 * BACKLOG, state=S.DELIVERED, first=2)
    _fill_uncertain_at_one_time(BACKLOG)
    claims = handoff_claim_uncertain(destination_name="receiver", worker="a", limit=100)
    answers = [
        SettlementAnswer(c, RemoteTask(c.action_key, f"task-{c.handoff_id}", c.payload_hash))
        for c in claims
    ]
    destination = LimitedLookups(InProcessDestination(), worker="a")
    # The statement is captured in a savepoint rolled back, then run again under EXPLAIN ANALYZE.
    with transaction.atomic(), CaptureQueriesContext(connection) as captured:
        handoffs_record_settlements(answers=answers, destination=destination)
        transaction.set_rollback(True)
    [sql] = [q["sql"] for q in captured.captured_queries if "FOR NO KEY UPDATE OF h" in q["sql"]]
    nodes = _plan_nodes(sql, analyze=True)
    # It did its work: the 100 claimed rows are delivered.
    claimed = Handoff.objects.filter(pk__in=[c.handoff_id for c in claims])
    assert claimed.filter(state=S.DELIVERED).count() == len(claims) == 100
    assert _rows_read(nodes, Handoff._meta.db_table) <= 3 * len(claims), nodes
