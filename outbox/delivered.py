"""A batch of delivered outcomes written in one statement on PostgreSQL.

A delivered outcome's changes do not depend on the handoff's row: the validated receipt decides them. So
the locked read that the other outcomes need (`outbox/outcomes.py` plans a retry from the row's attempts
and retry window) is not needed, and the whole record is one round trip instead of six:

    WITH v AS (SELECT * FROM unnest(an array per field that differs between rows)),
         mine AS (SELECT … WHERE the row still carries the claim's fencing token
                  ORDER BY id FOR NO KEY UPDATE),
         done AS (UPDATE handoff … RETURNING id),
         event AS (INSERT INTO handoffevent …),
         finished AS (UPDATE attempt …)
    SELECT ids, whether the destination's breaker has nothing to reset

The rows are locked in id order, as every multi-row lock of the outbox, so two recorders cannot deadlock.
A row whose token no longer matches (its lease was taken over) is neither locked nor written: its outcome
is refused, as on the locked path. The statement is committed on its own (autocommit), all of it or none.
The breaker's question (`outbox/services/breaker.py`, "nothing to reset after a healthy batch") is answered by the
same statement instead of one more query.
"""

from dataclasses import dataclass

from django.db import connections

from lib.databases import DB
from outbox.bulk_writes import unnest_sql
from outbox.clock import POSTGRES_NOW_PLUS, DbNow
from outbox.models import (
    Attempt,
    DestinationHealth,
    DestinationState,
    Handoff,
    HandoffEvent,
    HandoffState,
)


@dataclass(frozen=True)
class DeliveredRow:
    """One delivered outcome: the claim's fencing token, the handoff's changes, its event's reason and its
    attempt's fields. Every row of a batch sets the same fields."""

    handoff_id: int
    epoch: int
    attempt_id: int
    changes: dict
    reason: str
    attempt: dict


@dataclass(frozen=True)
class DeliveredWritten:
    ids: set[int]  # the rows written; the others' outcomes were refused (lease taken over)
    # The destination is active with no failure streak, read by the same statement; None without its row.
    destination_healthy: bool | None


def _same_in_every_row(rows: list[DeliveredRow], get) -> bool:
    first = get(rows[0])
    return all(get(row) == first for row in rows[1:])


def _one_value(connection, field, value) -> tuple[str, list]:
    """The SQL of a value every row holds: one cast parameter, or for a time of record (`delivered_at`, the
    attempt's end: a `DbNow`) the statement's own time, on the database clock."""
    if isinstance(value, DbNow):
        return f"{POSTGRES_NOW_PLUS}::{field.db_type(connection)}", [value.seconds]
    return f"%s::{field.db_type(connection)}", [field.get_db_prep_save(value, connection)]


def _columns(connection, rows: list[DeliveredRow]) -> tuple[str, list, dict[str, tuple[str, list]]]:
    """`unnest` of the arrays of what differs between rows, its parameters, and for every written column its
    SQL (`v.<column>`, or one cast parameter when every row holds the same value: a batch of deliveries clears
    the same failure fields in every row) with that parameter. The rows' ids, fencing tokens and attempts are
    always arrays. The statement's text depends only on which fields differ, never on how many rows there are,
    so psycopg converts it once per process."""
    qn = connection.ops.quote_name
    token_fields = [Handoff._meta.pk, Handoff._meta.get_field("fencing_epoch"), Attempt._meta.pk]
    arrays = [
        ("id", token_fields[0], lambda row: row.handoff_id),
        ("epoch", token_fields[1], lambda row: row.epoch),
        ("attempt_id", token_fields[2], lambda row: row.attempt_id),
    ]
    written: dict[str, tuple[str, list]] = {}
    columns = [("reason", HandoffEvent._meta.get_field("reason"), lambda row: row.reason)]
    columns += [
        (f"h_{name}", Handoff._meta.get_field(name), lambda row, name=name: row.changes[name])
        for name in sorted(rows[0].changes)
    ]
    columns += [
        (f"a_{name}", Attempt._meta.get_field(name), lambda row, name=name: row.attempt[name])
        for name in sorted(rows[0].attempt)
    ]
    for column, field, get in columns:
        if _same_in_every_row(rows, get):
            written[column] = _one_value(connection, field, get(rows[0]))
        else:
            arrays.append((column, field, get))
            written[column] = (f"v.{qn(column)}", [])
    values, params = unnest_sql(
        connection,
        [field for _column, field, _get in arrays],
        [[get(row) for _column, _field, get in arrays] for row in rows],
    )
    return (
        f"{values} AS v ({', '.join(qn(column) for column, _field, _get in arrays)})",
        params,
        written,
    )


def _assignments(
    connection, written: dict[str, tuple[str, list]], prefix: str, model
) -> tuple[str, list]:
    qn = connection.ops.quote_name
    parts, params = [], []
    for column, (sql, column_params) in written.items():
        if column.startswith(prefix):
            parts.append(f"{qn(model._meta.get_field(column[len(prefix) :]).column)} = {sql}")
            params += column_params
    return ", ".join(parts), params


def record_delivered(
    rows: list[DeliveredRow], *, worker: str, destination: str
) -> DeliveredWritten:
    connection = connections[DB]
    qn = connection.ops.quote_name
    values, value_params, written = _columns(connection, rows)
    handoff_set, handoff_params = _assignments(connection, written, "h_", Handoff)
    attempt_set, attempt_params = _assignments(connection, written, "a_", Attempt)
    reason, reason_params = written["reason"]
    handoffs, events, attempts, health = (
        qn(model._meta.db_table) for model in (Handoff, HandoffEvent, Attempt, DestinationHealth)
    )
    # Identifiers come from the models and are quoted by the backend; every value is a parameter.
    sql = (
        f"WITH v AS (SELECT * FROM {values}), "  # noqa: S608
        f"mine AS (SELECT h.id FROM {handoffs} h JOIN v ON v.id = h.id "
        "WHERE h.state = %s AND h.lease_owner = %s AND h.fencing_epoch = v.epoch "
        "ORDER BY h.id FOR NO KEY UPDATE OF h), "
        # The token again: the row `mine` locked is the one written, whatever PostgreSQL re-read meanwhile.
        f"done AS (UPDATE {handoffs} h SET {handoff_set}, updated_at = STATEMENT_TIMESTAMP() "
        "FROM v JOIN mine ON mine.id = v.id "
        "WHERE h.id = v.id AND h.state = %s AND h.lease_owner = %s AND h.fencing_epoch = v.epoch RETURNING h.id), "
        f"event AS (INSERT INTO {events} (handoff_id, from_state, to_state, actor_label, action, reason, at) "
        f"SELECT v.id, %s, %s, %s, '', {reason}, STATEMENT_TIMESTAMP() FROM v JOIN done ON done.id = v.id), "
        f"finished AS (UPDATE {attempts} a SET {attempt_set} FROM v JOIN done ON done.id = v.id "
        "WHERE a.id = v.attempt_id) "
        "SELECT ARRAY(SELECT id FROM done), "
        f"(SELECT state = %s AND consecutive_failures = 0 FROM {health} WHERE name = %s)"
    )
    params = [
        *value_params,
        HandoffState.IN_FLIGHT,
        worker,
        *handoff_params,
        HandoffState.IN_FLIGHT,
        worker,
        HandoffState.IN_FLIGHT,
        HandoffState.DELIVERED,
        worker,
        *reason_params,
        *attempt_params,
        DestinationState.ACTIVE,
        destination,
    ]
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        ids, healthy = cursor.fetchone()
    return DeliveredWritten(set(ids), healthy)
