"""After the source database is restored from a backup: what the copy forgot is asked of the destinations,
never sent again.

A restored copy holds every handoff as it stood when the backup was taken. A row `pending` in it may have
been delivered since (the destination holds the task; the copy does not know), so sending it again is a
second call for an effect that may exist, and at a destination that ignores idempotency keys a second
effect. `handoffs_mark_restored` turns each such row into `uncertain` with the reason; settlement, which
runs in every dispatcher's maintenance, then looks the key up before any new attempt: found, it is
delivered with the destination's task id; not found, it is pending again and sent as usual; a destination
that cannot be asked or ignores the key sends it to a person. Rows `in_flight` in the copy need nothing: their
leases have run out, and lease expiry makes them uncertain the same way. docs/operations.md, "Restore from a
backup".

`pg_restore` restores no planner statistics, and the marking turns much of the table uncertain at once: the
outbox is analyzed after it, so that settlement's claims read the backlog through its index in order. Without
statistics PostgreSQL read every uncertain row and sorted them all for each claim of each dispatcher.
"""

from django.db import connections, transaction

from lib.databases import DB
from outbox.models import FailureClass, Handoff, HandoffState
from outbox.services.transitions import handoff_transition

S = HandoffState
REASON_CODE = "restored_from_backup"


def handoffs_mark_restored(*, backup_taken_at: str, batch_size: int = 500) -> int:
    """Every pending handoff becomes uncertain, to be asked about before any new attempt; returns how many.
    Bounded transactions in id order; a row a dispatcher holds meanwhile is skipped (it is in flight, not
    pending). `backup_taken_at` is the operator's statement of when the backup was taken, kept in the reason."""
    marked, after = 0, 0
    reason = (
        f"the source was restored from a backup taken at {backup_taken_at}: whether this was delivered "
        "since is asked of the destination before any new attempt"
    )
    while True:
        with transaction.atomic(using=DB):
            rows = list(
                Handoff.objects.using(DB)
                .select_for_update(no_key=True, skip_locked=True)
                .filter(state=S.PENDING, pk__gt=after)
                .order_by("pk")[:batch_size]
            )
            for handoff in rows:
                handoff_transition(
                    handoff,
                    S.UNCERTAIN,
                    actor_label="restore from backup",
                    reason=reason,
                    failure_class=FailureClass.UNCERTAIN,
                    reason_code=REASON_CODE,
                    last_error="restored from a backup: the destination may hold what this copy forgot",
                )
        if not rows:
            _analyze()
            return marked
        marked += len(rows)
        after = rows[-1].pk


def _analyze() -> None:
    """Fresh planner statistics of the outbox after the marking (PostgreSQL; SQLite plans without them)."""
    connection = connections[DB]
    if connection.vendor != "postgresql":
        return
    with connection.cursor() as cursor:
        cursor.execute(f"ANALYZE {connection.ops.quote_name(Handoff._meta.db_table)}")
