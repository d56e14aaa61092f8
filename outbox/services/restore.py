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

A failover to an asynchronous replica is the same loss without a person in the loop: the promoted replica is
a copy as of the last commit it received. `handoffs_mark_after_failover` marks the same rows the first time a
process connects to the new timeline (`outbox/failover.py`), before any claim on it.

`pg_restore` restores no planner statistics, and the marking turns much of the table uncertain at once: the
outbox is analyzed after it, so that settlement's claims read the backlog through its index in order. Without
statistics PostgreSQL read every uncertain row and sorted them all for each claim of each dispatcher.
"""

from django.db import connections, transaction

from lib.databases import DB
from outbox.models import DatabaseTimeline, FailureClass, Handoff, HandoffState
from outbox.services.transitions import handoff_transition

S = HandoffState
REASON_CODE = "restored_from_backup"
FAILOVER_REASON_CODE = "failed_over"
# A claim made on the old primary and lost with it may have taken the next fencing epochs: the marked row
# skips past them, so that a late outcome written under such a claim is refused (it fences by epoch).
FAILOVER_EPOCH_GAP = 1000


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
            rows = _mark_batch(
                after,
                batch_size,
                actor_label="restore from backup",
                reason=reason,
                reason_code=REASON_CODE,
                last_error="restored from a backup: the destination may hold what this copy forgot",
            )
        if not rows:
            _analyze()
            return marked
        marked += len(rows)
        after = rows[-1].pk


def handoffs_mark_after_failover(*, timeline: int) -> int:
    """On the first sight of a new PostgreSQL `timeline` (a replica promoted): every pending handoff becomes
    uncertain, as after a restore, and its fencing epoch skips FAILOVER_EPOCH_GAP; returns how many. One
    transaction under the timeline row's lock, so that every other process's first connection waits for it
    and no claim on the new timeline comes before the marking. The first timeline ever seen marks nothing."""
    seen = DatabaseTimeline.objects.using(DB).filter(pk=1).values_list("timeline", flat=True)
    if seen.first() == timeline:  # the usual case: no lock taken
        return 0
    with transaction.atomic(using=DB):
        DatabaseTimeline.objects.using(DB).bulk_create(
            [DatabaseTimeline(pk=1, timeline=timeline)], ignore_conflicts=True
        )
        seen = DatabaseTimeline.objects.using(DB).select_for_update().get(pk=1)
        if seen.timeline >= timeline:
            return 0
        reason = (
            f"the database failed over to a replica (timeline {seen.timeline} to {timeline}); what the old "
            "primary did not ship is lost: whether this was delivered is asked of the destination before any "
            "new attempt"
        )
        marked, after = 0, 0
        while rows := _mark_batch(
            after,
            500,
            actor_label="database failover",
            reason=reason,
            reason_code=FAILOVER_REASON_CODE,
            last_error="failed over: the old primary may have sent this without the replica knowing",
            epoch_gap=FAILOVER_EPOCH_GAP,
        ):
            marked += len(rows)
            after = rows[-1].pk
        seen.timeline = timeline
        seen.save(using=DB, update_fields=["timeline"])
    _analyze()
    return marked


def _mark_batch(after: int, batch_size: int, *, epoch_gap: int = 0, **why) -> list[Handoff]:
    """The next pending handoffs after id `after` marked uncertain; skips rows a dispatcher holds."""
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
            failure_class=FailureClass.UNCERTAIN,
            fencing_epoch=handoff.fencing_epoch + epoch_gap,
            **why,
        )
    return rows


def _analyze() -> None:
    """Fresh planner statistics of the outbox after the marking (PostgreSQL; SQLite plans without them)."""
    connection = connections[DB]
    if connection.vendor != "postgresql":
        return
    with connection.cursor() as cursor:
        cursor.execute(f"ANALYZE {connection.ops.quote_name(Handoff._meta.db_table)}")
