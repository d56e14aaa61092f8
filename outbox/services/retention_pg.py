"""Retention's move on PostgreSQL: one INSERT … SELECT that builds each archive row and its history document in
the database (docs/operations.md, "Retention"); `retention._delete_where_in` then deletes by one id array.

The portable move (`retention._move`) reads a batch's attempts, events and status events into Python, builds
the documents there and sends them back as a 21,000-parameter INSERT: in a profile of 5 batches of 1,000 rows
(bench fill, 2 cores), 9.2 s of the 10.2 s were that round trip, 6.0 s of it Django compiling the INSERT and
psycopg splitting its placeholders. Here the rows never leave the server and each statement has one
parameter, the batch's ids. The documents are meant to be the same as the portable move's, key for key and
string for string: `tests/outbox/services/test_retention.py` (the archive row and its history) and
`tests/outbox/services/test_retention_request.py` (the request it sent) run on both backends with the same
assertions; no test yet builds both documents from the same rows and compares them.
"""

from django.db import connection

from outbox.models import ArchivedHandoff, Attempt, Handoff, HandoffEvent, StatusEvent


def _iso(column: str) -> str:
    """SQL for Python's `datetime.isoformat()` of a UTC value: microseconds only when not zero, `+00:00`."""
    utc = f"({column} AT TIME ZONE 'UTC')"
    return (
        f"CASE WHEN {column} IS NULL THEN NULL ELSE to_char({utc}, 'YYYY-MM-DD\"T\"HH24:MI:SS') "
        f"|| CASE WHEN to_char({utc}, 'US') = '000000' THEN '' ELSE to_char({utc}, '.US') END "
        "|| '+00:00' END"
    )


def _table(model) -> str:
    return connection.ops.quote_name(model._meta.db_table)


def _history_sql() -> str:
    """The history document of the handoff `h`: three correlated aggregates, each an index scan by handoff id."""
    # Only our own tables' and columns' names are formatted in (S608); the ids are the one parameter.
    attempts = (
        "SELECT jsonb_agg(jsonb_build_object("  # noqa: S608
        "'number', a.number, 'worker', a.worker, "
        f"'started_at', {_iso('a.started_at')}, 'finished_at', {_iso('a.finished_at')}, "
        "'outcome', a.outcome, 'failure_class', a.failure_class, 'reason_code', a.reason_code, "
        "'status_code', a.status_code, 'latency_ms', a.latency_ms, 'detail', a.detail"
        f") ORDER BY a.number) FROM {_table(Attempt)} a WHERE a.handoff_id = h.id"
    )
    events = (
        "SELECT jsonb_agg(jsonb_build_object("  # noqa: S608
        f"'at', {_iso('e.at')}, 'from', e.from_state, 'to', e.to_state, 'by', e.actor_label, "
        "'action', e.action, 'reason', e.reason"
        f") ORDER BY e.at, e.id) FROM {_table(HandoffEvent)} e WHERE e.handoff_id = h.id"
    )
    statuses = (
        "SELECT jsonb_agg(jsonb_build_object("  # noqa: S608
        "'webhook_id', s.webhook_id, 'kind', s.kind, 'status', s.status, 'sequence', s.sequence, "
        f"'occurred_at', {_iso('s.occurred_at')}, 'received_at', {_iso('s.received_at')}, "
        "'result', s.result"
        f") ORDER BY s.sequence, s.id) FROM {_table(StatusEvent)} s WHERE s.handoff_id = h.id"
    )
    return (
        "jsonb_build_object("
        f"'attempts', coalesce(({attempts}), '[]'::jsonb), "
        f"'events', coalesce(({events}), '[]'::jsonb), "
        f"'status_events', coalesce(({statuses}), '[]'::jsonb))"
    )


# Archive column <- handoff column (the same pairs as `retention._archived`); archived_at is its db default.
_COLUMNS = (
    ("handoff_id", "h.id"),
    ("workspace_id", "h.workspace_id"),
    ("action_key", "h.action_key"),
    ("instance_key", "h.instance_key"),
    ("step", "h.step"),
    ("workflow", "h.workflow"),
    ("source_ref", "h.source_ref"),
    ("source_id", "h.source_id"),
    ("rule_version", "h.rule_version"),
    ("destination", "h.destination"),
    ("final_state", "h.state"),
    ("task_id", "h.destination_id"),
    ("receipt", "h.receipt"),
    ("payload_hash", "h.payload_hash"),
    ("request", "h.request"),
    ("work_status", "h.work_status"),
    ("attempts", "h.attempts"),
    ("created_at", "h.created_at"),
    ("settled_at", "h.updated_at"),
    ("delivered_at", "h.delivered_at"),
    ("erasure_id", "h.erasure_id"),
    ("search_text", "h.search_text"),
)


def archive_insert_sql() -> str:
    names = ", ".join(connection.ops.quote_name(name) for name, _ in _COLUMNS)
    values = ", ".join(expression for _, expression in _COLUMNS)
    return (
        f"INSERT INTO {_table(ArchivedHandoff)} ({names}, history) "  # noqa: S608 (our tables' names)
        f"SELECT {values}, {_history_sql()} FROM {_table(Handoff)} h WHERE h.id = ANY(%s) "
        "ON CONFLICT DO NOTHING"
    )


def archive(ids: list[int]) -> None:
    """Archive rows for these handoffs, their history documents built here. The caller's transaction; the
    caller has locked the handoffs and deletes them after."""
    with connection.cursor() as cursor:
        cursor.execute(archive_insert_sql(), [ids])
