"""The console's needs-attention and owner lists on PostgreSQL at a size where the planner would rather read the
whole table: 200,000 handoffs of the bench's shape (bench/console_bench.py's fill, ANALYZEd), and each page's
queries read through PostgreSQL's own EXPLAIN (FORMAT JSON): no query of the page reads outbox_handoff by a
sequential scan, the list itself comes from the index named, the header's count of handoffs needing a person from
its own index, and the page runs a fixed number of queries.
A dropped index, a filter the partial indexes cannot serve, or a query per row fails here."""

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from bench.console_bench import FILL_SQL
from incidents.selectors.channels import alert_channel_delivery
from tests.console.clients import HTMX, client_for

pytestmark = [
    pytest.mark.postgres,
    pytest.mark.long,
    pytest.mark.django_db(databases=["default", "delivery"]),
]
ROWS = 200_000

# Each page: its filter, the index its list is read from, and the queries the full page and its htmx results run
# (one fewer since the owner filter and the assign menu read the workspace's operators in one query, 9b2adad).
# ("Needs a person" adds an open finding to the states: the keyset index, filtered, at the bench's share of 8%.)
PAGES = {
    "needs attention": ({"state": "needs_attention"}, "handoff_state_open_idx", 9, 8),
    "needs a person": ({"state": "attention"}, "handoff_ws_keyset_idx", 10, 9),
    "owner me, older than 1 day": ({"owner": "me", "age": "1d"}, "handoff_ws_keyset_idx", 10, 9),
    "owner nobody": ({"owner": "nobody"}, "handoff_ws_keyset_idx", 9, 8),
}


@pytest.fixture
def filled(world):
    """The bench's handoffs in workspaces 7 and 8, a third of them olga's, with the planner's statistics. (Inside
    the test's transaction: ANALYZE counts the rows this transaction inserted, and it all rolls back.)"""
    assert connection.vendor == "postgresql", (
        "PostgreSQL's planner: run with DATABASE_URL (marked postgres)"
    )
    with connection.cursor() as cursor:
        cursor.execute(FILL_SQL, {"rows": ROWS, "owner": world["olga"].pk})
        cursor.execute("ANALYZE outbox_handoff")
    return world


def plan_nodes(node: dict):
    yield node
    for child in node.get("Plans", []):
        yield from plan_nodes(child)


def handoff_reads(sql: str) -> list[tuple[str, str]]:
    """(node type, index) of every read of outbox_handoff in the query's plan."""
    with connection.cursor() as cursor:
        cursor.execute(f"EXPLAIN (FORMAT JSON) {sql}", None)
        (document,) = cursor.fetchone()
    return [
        (node["Node Type"], node.get("Index Name", ""))
        for node in plan_nodes(document[0]["Plan"])
        if node.get("Relation Name") == "outbox_handoff"
    ]


def page_queries(client, params: dict, **headers) -> list[dict]:
    with CaptureQueriesContext(connection) as captured:
        response = client.get("/handoffs/", params, **headers)
    assert response.status_code == 200
    return captured.captured_queries


def test_the_console_lists_read_their_index_and_run_a_fixed_number_of_queries_at_200000_handoffs(
    filled,
):
    client = client_for(filled["olga"])
    for page in PAGES:
        page_reads_its_index(client, page)
    header_count_reads_its_index(client)


def header_count_reads_its_index(client) -> None:
    """The header's count of handoffs needing a person (every full page runs it) finds the workspace's own
    handoffs in a person's states through `handoff_needs_person_idx`, whose condition holds the workflow too.
    Read through the state index, every entry sent PostgreSQL to the row for its workflow, and on the bench's
    vacuumed 1,000,000 handoffs it read the table from the start instead: 6-25 ms on every page."""
    (count,) = [
        query["sql"]
        for query in page_queries(client, {})
        if query["sql"].startswith('SELECT "approvals_workspace"."id"')
        and "COUNT(*)" in query["sql"]
    ]
    with connection.cursor() as cursor:
        cursor.execute(f"EXPLAIN (FORMAT JSON) {count}", None)
        (document,) = cursor.fetchone()
    nodes = list(plan_nodes(document[0]["Plan"]))
    read = {node.get("Index Name") for node in nodes} - {None}
    assert "handoff_needs_person_idx" in read, f"the header's count reads {read}"
    assert not [
        node
        for node in nodes
        if node["Node Type"] == "Seq Scan" and node.get("Relation Name") == "outbox_handoff"
    ], "the header's count reads outbox_handoff by a sequential scan"


def page_reads_its_index(client, page: str) -> None:
    params, index, full_count, htmx_count = PAGES[page]
    full = page_queries(client, params)
    htmx = page_queries(client, params, **HTMX)

    assert (len(full), len(htmx)) == (full_count, htmx_count), f"{page}: queries of the page"
    reads = {}
    for query in full:
        sql = query["sql"]
        if "outbox_handoff" in sql and sql.lstrip().upper().startswith("SELECT"):
            # Captured with its parameters inlined as literals (psycopg's own quoting): run as it is.
            reads[sql] = handoff_reads(sql)
    assert reads, f"{page}: the page read no handoff"
    sequential = {sql[:200]: r for sql, r in reads.items() if ("Seq Scan", "") in r}
    assert not sequential, f"{page}: outbox_handoff read by a sequential scan: {sequential}"
    listing = next(r for sql, r in reads.items() if "LIMIT 51" in sql)
    assert {name for _, name in listing} == {index}, f"{page}: the list is read by {listing}"


def test_the_health_pages_alert_channel_line_reads_the_open_notifications_alone_at_200000_handoffs(
    filled,
):
    """Health's line of the alert channels (every health page, not cached) counts the product's open alert
    notifications of the workspaces: through `handoff_open_notifications_idx`, never through the open-state
    index, which holds every open handoff of the workspace (18,000 here; 85 ms at the bench's 1,000,000)."""
    with CaptureQueriesContext(connection) as captured:
        alert_channel_delivery([7])
    (counts,) = [q["sql"] for q in captured.captured_queries if "outbox_handoff" in q["sql"]]
    assert {name for _, name in handoff_reads(counts)} == {"handoff_open_notifications_idx"}, (
        handoff_reads(counts)
    )
