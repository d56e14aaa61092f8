"""Settled as delivered in one statement on PostgreSQL: the answers that found the key's task with the same
payload hash, for claims whose delivery records nothing else (no next workflow step, not a compensation).

What such an answer means (`outbox/outcomes.py` `settlement_for`) depends only on the claim (its payload hash,
read back by the claim) and the receiver's task, not on anything else in the row: the locked read the other
answers need is not needed, and a request's answers are written in one round trip:

    WITH v AS (SELECT * FROM json_to_recordset(one JSON parameter: a record per row, the fields that
                                               differ between rows)),
         mine AS (SELECT … WHERE the row, found by id, still carries the claim's owner and fencing epoch,
                  ORDER BY id FOR NO KEY UPDATE),
         done AS (UPDATE handoff … WHERE still uncertain and still the claim's … RETURNING id),
         event AS (INSERT INTO handoffevent …)
    SELECT the ids written

The rows travel as one JSON text, encoded by the json module's C encoder: an array parameter per field
(`outbox/bulk_writes.py` `unnest_sql`) was quoted element by element in Python by psycopg's client-side
binding, each value prepared by its model field first, and cost the settler more CPU than everything else it
did per key (docs/benchmarks.md, the settlement section). The rows are locked in id order, as every multi-row
lock of the outbox. A row whose token no longer matches (its lease ran out and another settler took it, or a
person settled it meanwhile) is neither locked nor written; the caller gives it to the locked path, which
refuses it. The statement text depends only on which fields differ between rows, never on how many rows there
are, so psycopg converts it once per process.
"""

import json
from datetime import datetime
from typing import NamedTuple

from django.core.serializers.json import DjangoJSONEncoder
from django.db import connections
from django.db.models import JSONField

from lib.databases import DB
from outbox.bulk_writes import one_value
from outbox.clock import DbNow
from outbox.models import Handoff, HandoffEvent, HandoffState

S = HandoffState


class _Row(NamedTuple):
    handoff_id: int
    epoch: int
    payload_hash: str
    reason: str
    changes: dict


def _varying(rows: list[_Row]) -> list[str]:
    """The fields of the moves whose value differs between rows (the others are one parameter each). A time on
    the database clock compares by its offset: an expression's own equality deconstructs it, which cost more
    than writing the row."""
    varying = []
    for name, first in sorted(rows[0].changes.items()):
        values = [row.changes[name] for row in rows]
        if isinstance(first, DbNow):
            same = all(
                isinstance(value, DbNow) and value.seconds == first.seconds for value in values
            )
        else:
            same = values.count(first) == len(values)
        if not same:
            varying.append(name)
    return varying


def _as_json(field, value):
    """A varying value as its record's JSON field: JSON as it is, a time in ISO form, a plain value as is."""
    if isinstance(value, DbNow):
        raise TypeError(f"{field.name}: a time on the database clock cannot be sent in a record")
    if value is None or isinstance(value, (str, int, float, bool)) or isinstance(field, JSONField):
        return value
    return value.isoformat() if isinstance(value, datetime) else str(value)


def _records(connection, rows: list[_Row], varying: list[str]) -> tuple[str, list]:
    """`json_to_recordset(%s::json) AS v(…)` of the rows: id, epoch, hash and reason always, and each field
    of `varying` as `h_<field>`; its one parameter."""
    qn = connection.ops.quote_name
    meta = Handoff._meta
    fields = [meta.get_field(name) for name in varying]
    names = ["id", "epoch", "hash", "reason", *(f"h_{name}" for name in varying)]
    types = [
        meta.pk.db_type(connection),
        meta.get_field("fencing_epoch").db_type(connection),
        meta.get_field("payload_hash").db_type(connection),
        HandoffEvent._meta.get_field("reason").db_type(connection),
        *(field.db_type(connection) for field in fields),
    ]
    records = [
        dict(
            zip(
                names,
                (
                    row.handoff_id,
                    row.epoch,
                    row.payload_hash,
                    row.reason,
                    *(_as_json(f, row.changes[f.name]) for f in fields),
                ),
                strict=True,
            )
        )
        for row in rows
    ]
    columns = ", ".join(f"{qn(name)} {db_type}" for name, db_type in zip(names, types, strict=True))
    text = json.dumps(records, cls=DjangoJSONEncoder, separators=(",", ":"))
    return f"json_to_recordset(%s::json) AS v ({columns})", [text]


def _assignments(connection, rows: list[_Row], varying: list[str]) -> tuple[str, list]:
    """`column = v.h_<field>` for the fields of `varying`, `column = <one parameter>` for the others, which
    every row holds (a time on the database clock: the statement's own)."""
    qn = connection.ops.quote_name
    parts, params = [], []
    for name, value in sorted(rows[0].changes.items()):
        field = Handoff._meta.get_field(name)
        if name in varying:
            parts.append(f"{qn(field.column)} = v.{qn(f'h_{name}')}")
        else:
            sql, value_params = one_value(connection, field, value)
            parts.append(f"{qn(field.column)} = {sql}")
            params += value_params
    return ", ".join(parts), params


def record_found_delivered(rows: list[tuple[int, int, str, str, dict]], *, worker: str) -> set[int]:
    """Write each row (handoff id, claim epoch, payload hash found, event reason, the move's changes from
    `move_changes`: every row sets the same fields) as delivered with its event, where the handoff is still
    uncertain, still carries `worker`'s claim at that epoch, and has that payload hash. Returns the ids written.
    Committed on its own (autocommit), all of it or none."""
    if not rows:
        return set()
    connection = connections[DB]
    qn = connection.ops.quote_name
    rows = [_Row(*row) for row in rows]
    varying = _varying(rows)
    values, value_params = _records(connection, rows, varying)
    handoff_set, set_params = _assignments(connection, rows, varying)
    handoffs, events = qn(Handoff._meta.db_table), qn(HandoffEvent._meta.db_table)
    claimed_by = "h.lease_owner = %s AND h.fencing_epoch = v.epoch AND h.payload_hash = v.hash"
    held = f"h.state = %s AND {claimed_by}"
    # Identifiers come from the models and are quoted by the backend; every value is a parameter. `mine` names no
    # state: with one, PostgreSQL could (and did) read the rows through the partial uncertain index, the whole
    # backlog for every request; without it the claimed rows are found by id. `done` checks the state.
    sql = (
        f"WITH v AS (SELECT * FROM {values}), "  # noqa: S608
        f"mine AS (SELECT h.id FROM {handoffs} h JOIN v ON v.id = h.id WHERE {claimed_by} "
        "ORDER BY h.id FOR NO KEY UPDATE OF h), "
        # The token again: the row `mine` locked is the one written, whatever PostgreSQL re-read meanwhile.
        f"done AS (UPDATE {handoffs} h SET {handoff_set}, updated_at = STATEMENT_TIMESTAMP() "
        f"FROM v JOIN mine ON mine.id = v.id WHERE h.id = v.id AND {held} RETURNING h.id), "
        f"event AS (INSERT INTO {events} (handoff_id, from_state, to_state, actor_label, action, reason, at) "
        "SELECT v.id, %s, %s, 'settlement', '', v.reason, STATEMENT_TIMESTAMP() "
        "FROM v JOIN done ON done.id = v.id) "
        "SELECT ARRAY(SELECT id FROM done)"
    )
    params = [
        *value_params,
        worker,
        *set_params,
        S.UNCERTAIN,
        worker,
        S.UNCERTAIN,
        S.DELIVERED,
    ]
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return set(cursor.fetchone()[0])
