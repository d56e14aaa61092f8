"""Settled as delivered in one statement on PostgreSQL: the answers that found the key's task with the same
payload hash, for claims whose delivery records nothing else (no next workflow step, not a compensation).

What such an answer means (`outbox/outcomes.py` `settlement_for`) depends only on the claim (its payload hash,
read back by the claim) and the receiver's task, not on anything else in the row: the locked read the other
answers need is not needed, and a request's answers are written in one round trip, as a batch of deliveries is
(`outbox/delivered.py`):

    WITH v AS (SELECT * FROM unnest(an array per field that differs between rows)),
         mine AS (SELECT … WHERE the row, found by id, still carries the claim's owner and fencing epoch,
                  ORDER BY id FOR NO KEY UPDATE),
         done AS (UPDATE handoff … WHERE still uncertain and still the claim's … RETURNING id),
         event AS (INSERT INTO handoffevent …)
    SELECT the ids written

The rows are locked in id order, as every multi-row lock of the outbox. A row whose token no longer matches
(its lease ran out and another settler took it, or a person settled it meanwhile) is neither locked nor
written; the caller gives it to the locked path, which refuses it. The statement text depends only on which
fields differ between rows, never on how many rows there are, so psycopg converts it once per process.
"""

from typing import NamedTuple

from django.db import connections

from lib.databases import DB
from outbox.bulk_writes import Column, assignments, unnest_with_constants
from outbox.models import Handoff, HandoffEvent, HandoffState

S = HandoffState


class _Row(NamedTuple):
    handoff_id: int
    epoch: int
    payload_hash: str
    reason: str
    changes: dict


def _columns(connection, rows: list[_Row]) -> tuple[str, list, dict[str, tuple[str, list]]]:
    """`unnest_with_constants` of a request's answers: ids, epochs and hashes always arrays; the event's
    reason and the handoffs' changes (`h_<field>`) an array only where they differ between rows."""
    meta = Handoff._meta
    arrays = [
        Column("id", meta.pk, lambda row: row.handoff_id),
        Column("epoch", meta.get_field("fencing_epoch"), lambda row: row.epoch),
        Column("hash", meta.get_field("payload_hash"), lambda row: row.payload_hash),
    ]
    columns = [Column("reason", HandoffEvent._meta.get_field("reason"), lambda row: row.reason)]
    columns += [
        Column(f"h_{name}", meta.get_field(name), lambda row, name=name: row.changes[name])
        for name in sorted(rows[0].changes)
    ]
    return unnest_with_constants(connection, rows, arrays, columns)


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
    values, value_params, written = _columns(connection, rows)
    handoff_set, set_params = assignments(connection, written, "h_", Handoff)
    reason, reason_params = written["reason"]
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
        f"SELECT v.id, %s, %s, 'settlement', '', {reason}, STATEMENT_TIMESTAMP() "
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
        *reason_params,
    ]
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return set(cursor.fetchone()[0])
