"""A batch of delivered outcomes written in one statement on PostgreSQL.

A delivered outcome's changes do not depend on the handoff's row: the validated receipt decides them. So
the locked read that the other outcomes need (`outbox/outcomes.py` plans a retry from the row's attempts
and retry window) is not needed, and the whole record is one round trip instead of six:

    WITH v AS (VALUES …),
         mine AS (SELECT … WHERE the row still carries the claim's fencing token
                  ORDER BY id FOR NO KEY UPDATE),
         done AS (UPDATE handoff … RETURNING id),
         event AS (INSERT INTO handoffevent …),
         finished AS (UPDATE attempt …)
    SELECT ids, whether the destination's breaker has nothing to reset

The rows are locked in id order, as every multi-row lock of the outbox, so two recorders cannot deadlock.
A row whose token no longer matches (its lease was taken over) is neither locked nor written: its outcome
is refused, as on the locked path. The statement is committed on its own (autocommit), all of it or none.
The breaker's question (`outbox/breaker.py`, "nothing to reset after a healthy batch") is answered by the
same statement instead of one more query.
"""

from dataclasses import dataclass

from django.db import connections
from django.utils import timezone

from outbox.bulk_writes import values_sql
from outbox.models import Attempt, DestinationHealth, DestinationState, Handoff, HandoffEvent, HandoffState

DB = "default"


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


def _assignments(qn, fields: list, columns: list[str]) -> str:
    return ", ".join(f"{qn(field.column)} = v.{qn(column)}" for field, column in zip(fields, columns, strict=True))


def _values(connection, rows: list[DeliveredRow]) -> tuple[str, str, list, str, str]:
    """The VALUES list's column names, rows and parameters, and the SET lists of the handoffs and attempts."""
    qn = connection.ops.quote_name
    handoff_fields = [Handoff._meta.get_field(name) for name in sorted(rows[0].changes)]
    attempt_fields = [Attempt._meta.get_field(name) for name in sorted(rows[0].attempt)]
    token_fields = [Handoff._meta.pk, Handoff._meta.get_field("fencing_epoch"), Attempt._meta.pk,
                    HandoffEvent._meta.get_field("reason")]
    handoff_columns = [f"h_{field.column}" for field in handoff_fields]
    attempt_columns = [f"a_{field.column}" for field in attempt_fields]
    names = ", ".join(qn(name) for name in ["id", "epoch", "attempt_id", "reason", *handoff_columns,
                                            *attempt_columns])
    values, params = values_sql(connection, [*token_fields, *handoff_fields, *attempt_fields], [
        [row.handoff_id, row.epoch, row.attempt_id, row.reason,
         *(row.changes[field.name] for field in handoff_fields), *(row.attempt[field.name] for field in attempt_fields)]
        for row in rows
    ])
    return (names, values, params, _assignments(qn, handoff_fields, handoff_columns),
            _assignments(qn, attempt_fields, attempt_columns))


def record_delivered(rows: list[DeliveredRow], *, worker: str, destination: str) -> DeliveredWritten:
    connection = connections[DB]
    qn = connection.ops.quote_name
    names, values, value_params, handoff_set, attempt_set = _values(connection, rows)
    handoffs, events, attempts, health = (qn(model._meta.db_table)
                                          for model in (Handoff, HandoffEvent, Attempt, DestinationHealth))
    # Identifiers come from the models and are quoted by the backend; every value is a parameter.
    sql = (
        f"WITH v ({names}) AS (VALUES {values}), "  # noqa: S608
        f"mine AS (SELECT h.id FROM {handoffs} h JOIN v ON v.id = h.id "
        "WHERE h.state = %s AND h.lease_owner = %s AND h.fencing_epoch = v.epoch "
        "ORDER BY h.id FOR NO KEY UPDATE OF h), "
        # The token again: the row `mine` locked is the one written, whatever PostgreSQL re-read meanwhile.
        f"done AS (UPDATE {handoffs} h SET {handoff_set}, updated_at = %s FROM v JOIN mine ON mine.id = v.id "
        "WHERE h.id = v.id AND h.state = %s AND h.lease_owner = %s AND h.fencing_epoch = v.epoch RETURNING h.id), "
        f"event AS (INSERT INTO {events} (handoff_id, from_state, to_state, actor_label, action, reason, at) "
        "SELECT v.id, %s, %s, %s, '', v.reason, %s FROM v JOIN done ON done.id = v.id), "
        f"finished AS (UPDATE {attempts} a SET {attempt_set} FROM v JOIN done ON done.id = v.id "
        "WHERE a.id = v.attempt_id) "
        "SELECT ARRAY(SELECT id FROM done), "
        f"(SELECT state = %s AND consecutive_failures = 0 FROM {health} WHERE name = %s)"
    )
    now = timezone.now()
    params = [*value_params, HandoffState.IN_FLIGHT, worker, now, HandoffState.IN_FLIGHT, worker,
              HandoffState.IN_FLIGHT, HandoffState.DELIVERED, worker, now, DestinationState.ACTIVE, destination]
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        ids, healthy = cursor.fetchone()
    return DeliveredWritten(set(ids), healthy)
