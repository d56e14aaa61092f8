"""Retention: settled handoffs leave the hot tables for the archive (docs/operations.md, "Retention").

A handoff is archived when it is settled (delivered, cancelled or superseded) and its last change is older
than HANDOFF_RETENTION_DAYS on the database clock, unless something still needs it there:

- another handoff of its workflow instance is not settled (the workflow is unfinished), or a compensation
  still names it (it leaves after that compensation does);
- it is a delivered step whose compensation is planned or a residual not closed by a manual repair;
- the receiver reports its work failed, or said it has no task for the key (work still open is the
  receiver's business: past HANDOFF_WORK_DEADLINE_HOURS reconciliation opens a finding, which holds it);
- the source's hold rule (HANDOFF_RETENTION_HOLD_CHECK: a live finding, an unsettled incident member).

Each batch is one short transaction: pick up to `batch_size` eligible rows, oldest change first (the
partial index `handoff_settled_idx`), write their archive rows with attempts, events and status events as
one JSON document, and delete them from the hot tables. On PostgreSQL the pick is `FOR UPDATE SKIP LOCKED`
(a row someone works on is left for the next run) and the batch sets `lock_timeout`, so no statement of it
waits long for a lock and none of the dispatcher's waits on it for longer than a batch.
"""

import time
from dataclasses import dataclass, field
from datetime import datetime

from django.conf import settings
from django.db import OperationalError, connection, transaction
from django.db.models import Exists, OuterRef, Q
from django.utils.module_loading import import_string

from lib.databases import rows_compiled_once
from outbox.clock import DbNow
from outbox.models import (
    SETTLED_STATES,
    ArchivedHandoff,
    Attempt,
    CompensationState,
    DestinationHold,
    Handoff,
    HandoffEvent,
    StatusEvent,
)
from outbox.models.holds import hold_end
from outbox.models.states import WORK_FAILED
from outbox.services import retention_pg

# The columns of a handoff that its archive row keeps.
_KEPT = (
    "id",
    "workspace_id",
    "action_key",
    "instance_key",
    "step",
    "workflow",
    "source_ref",
    "source_id",
    "rule_version",
    "destination",
    "state",
    "destination_id",
    "receipt",
    "payload_hash",
    "request",
    "work_status",
    "attempts",
    "created_at",
    "updated_at",
    "delivered_at",
    "erasure_id",
    "search_text",
)
# What a batch reads into Python on PostgreSQL, where the archive rows are built in the database
# (`retention_pg`): the ids, the keys (the hold check) and where the next batch starts. Reading and converting
# all of `_KEPT` (the request, the receipt, the search text) for rows only deleted after was a third of a
# batch's CPU in the retention process (5 batches of 1,000 profiled, 2026-12-07).
_PICKED_ON_POSTGRESQL = ("id", "action_key", "updated_at")


@dataclass
class RetentionRun:
    """What one run did (or, dry, would do): rows archived, rows eligible by state and age but held, and how
    its time went (inside batches, and paused between them to leave the machine to delivery)."""

    archived: int = 0
    held: int = 0
    batches: int = 0
    gave_up_on_lock: int = 0
    dry_run: bool = False
    seconds: float = 0.0
    working_seconds: float = 0.0
    paused_seconds: float = 0.0
    # Waits before a batch while the dispatchers were behind (`_Pacing.yield_to_delivery`), and their time.
    yields: int = 0
    yielded_seconds: float = 0.0
    # Destination holds that ended before the retention age (`destination_holds_prune`): deleted, or counted.
    holds_pruned: int = 0
    archived_ids: list[int] = field(default_factory=list, repr=False)

    @property
    def rows_per_second(self) -> float:
        return self.archived / self.seconds if self.seconds else 0.0


def pause_after(batch_seconds: float, *, duty_cycle: float, floor: float) -> float:
    """The pause after a batch that took `batch_seconds`: long enough that batches fill at most `duty_cycle`
    of the run's time (0.2: a batch of 0.3 s is followed by 1.2 s of rest), and never less than `floor`.
    The pause scales with the batch: on a busy machine a batch takes longer, so retention steps back more."""
    if not 0 < duty_cycle <= 1:
        raise ValueError(f"the duty cycle must be in (0, 1], not {duty_cycle}")
    return max(floor, batch_seconds * (1 - duty_cycle) / duty_cycle)


def settled_candidates(*, older_than_days: float):
    """Handoffs retention may move, by the outbox's own rules (the source's hold rule is asked per batch)."""
    unsettled_sibling = Handoff.objects.filter(instance_key=OuterRef("instance_key")).exclude(
        state__in=SETTLED_STATES
    )
    named_by_compensation = Handoff.objects.filter(compensates=OuterRef("pk"))
    return (
        Handoff.objects.filter(
            state__in=SETTLED_STATES,
            updated_at__lt=DbNow(-older_than_days * 86400),
        )
        .exclude(compensation_state__in=[CompensationState.PLANNED, CompensationState.RESIDUAL])
        .exclude(work_status=WORK_FAILED)
        .exclude(task_seen=False)
        .exclude(Q(~Q(instance_key="")) & Exists(unsettled_sibling))
        .exclude(Exists(named_by_compensation))
        .order_by("updated_at", "id")
    )


def delivery_is_behind(backlog: int) -> bool:
    """Whether at least `backlog` handoffs are due (`HandoffQuerySet.due`): the dispatchers have more work than
    they keep up with. One statement through the claim's partial index, reading at most `backlog` entries,
    compiled once a process (`rows_compiled_once`: through the ORM each look cost the waiting process 1.7 ms of
    CPU, its backend 0.7)."""
    if backlog <= 0:
        return False
    due = rows_compiled_once(
        ("retention_delivery_is_behind", backlog),
        lambda: Handoff.objects.due().values_list("id").order_by()[:backlog],
    )
    return len(due) >= backlog


@dataclass
class _Pacing:
    """When retention stops, how long it rests between batches (the duty cycle's share of the wall clock,
    `pause_after`), when it waits for delivery (`yield_to_delivery`), and a time budget after which no batch is
    begun."""

    duty_cycle: float
    floor: float
    max_seconds: float | None
    max_batches: int | None
    yield_backlog: int = 0
    yield_check: float = 0.5
    max_yield: float = 10.0
    started: float = field(default_factory=time.monotonic)

    @classmethod
    def from_settings(
        cls,
        *,
        duty_cycle: float | None,
        floor: float | None,
        max_seconds: float | None,
        max_batches: int | None,
        dry_run: bool,
    ) -> "_Pacing":
        """The settings' pacing where the caller names none; a dry run only reads, so it never yields."""
        return cls(
            duty_cycle=settings.HANDOFF_RETENTION_DUTY_CYCLE if duty_cycle is None else duty_cycle,
            floor=settings.HANDOFF_RETENTION_PAUSE_SECONDS if floor is None else floor,
            max_seconds=max_seconds,
            max_batches=max_batches,
            yield_backlog=0 if dry_run else settings.HANDOFF_RETENTION_YIELD_BACKLOG,
            yield_check=settings.HANDOFF_RETENTION_YIELD_CHECK_SECONDS,
            max_yield=settings.HANDOFF_RETENTION_MAX_YIELD_SECONDS,
        )

    def __post_init__(self) -> None:
        # A bad value fails here, before any batch.
        pause_after(0.0, duty_cycle=self.duty_cycle, floor=self.floor)

    def may_begin(self, batches: int) -> bool:
        """Whether another batch may begin after `batches` of them."""
        if self.max_batches is not None and batches >= self.max_batches:
            return False
        return self.max_seconds is None or time.monotonic() - self.started < self.max_seconds

    def rest(self, run: RetentionRun, worked: float) -> None:
        rest = pause_after(worked, duty_cycle=self.duty_cycle, floor=self.floor)
        if rest > 0:
            run.paused_seconds += rest
            time.sleep(rest)

    def yield_to_delivery(self, run: RetentionRun) -> None:
        """Before a batch: while delivery is behind (`delivery_is_behind`), wait, looking again every
        `yield_check` seconds, for at most `max_yield` seconds; then the batch goes anyway, so that a backlog
        that lasts (a destination down with its rows due) slows retention instead of stopping it. On 2 cores
        a batch's CPU and I/O come out of the dispatchers' (docs/benchmarks.md, "Retention beside delivery")."""
        began = time.monotonic()
        behind = False
        while delivery_is_behind(self.yield_backlog):
            behind = True
            left = self.max_yield - (time.monotonic() - began)
            if left <= 0 or not self.may_begin(run.batches):
                break
            time.sleep(min(self.yield_check, left))
        if behind:
            run.yields += 1
            run.yielded_seconds += time.monotonic() - began


def handoffs_archive_settled(
    *,
    older_than_days: float | None = None,
    batch_size: int | None = None,
    max_batches: int | None = None,
    dry_run: bool = False,
    pause_seconds: float | None = None,
    duty_cycle: float | None = None,
    max_seconds: float | None = None,
) -> RetentionRun:
    """Archive every eligible handoff (or, with `max_batches`, that many batches of them; with
    `max_seconds`, no batch is begun after that long). Between two batches it pauses as `pause_after`
    says (HANDOFF_RETENTION_DUTY_CYCLE, at least HANDOFF_RETENTION_PAUSE_SECONDS). Safe to run twice and
    beside itself: an archived row is gone from the hot tables, a locked one is skipped. Before each batch it
    waits while the dispatchers are behind (HANDOFF_RETENTION_YIELD_BACKLOG due handoffs), at most
    HANDOFF_RETENTION_MAX_YIELD_SECONDS a batch (`_Pacing.yield_to_delivery`)."""
    days = settings.HANDOFF_RETENTION_DAYS if older_than_days is None else older_than_days
    size = batch_size or settings.HANDOFF_RETENTION_BATCH_SIZE
    pacing = _Pacing.from_settings(
        duty_cycle=duty_cycle,
        floor=pause_seconds,
        max_seconds=max_seconds,
        max_batches=max_batches,
        dry_run=dry_run,
    )
    run = RetentionRun(dry_run=dry_run)
    after: tuple[datetime, int] | None = None
    while pacing.may_begin(run.batches):
        pacing.yield_to_delivery(run)
        began = time.monotonic()
        try:
            picked, after = _batch(
                run, older_than_days=days, size=size, after=after, dry_run=dry_run
            )
        except OperationalError:
            # lock_timeout ran out: this batch is rolled back whole; the next run tries again.
            run.gave_up_on_lock += 1
            break
        worked = time.monotonic() - began
        run.batches += 1
        run.working_seconds += worked
        if picked < size or max_batches == run.batches:
            break  # no pause after the last batch
        if not dry_run:  # a dry run only reads: nothing to yield
            pacing.rest(run, worked)
    run.holds_pruned = destination_holds_prune(older_than_days=days, dry_run=dry_run)
    run.seconds = time.monotonic() - pacing.started
    return run


def destination_holds_prune(*, older_than_days: float, dry_run: bool = False) -> int:
    """Delete the destination holds that stopped holding (`hold_end()`) longer than `older_than_days` ago
    (database clock); return how many (a dry run only counts). A destination answering Retry-After writes a
    hold an episode, and nothing else ends a row's life. Nothing still needs one that old: the screens and
    the dispatcher read the holds not ended, the backlog alert only an intended hold that ended within its age
    limit, and an operator's pause, window and resume are each a `DestinationEvent` (the audit), kept."""
    ended = (
        DestinationHold.objects.annotate(end=hold_end())
        .filter(end__lt=DbNow(-86400.0 * older_than_days))
        .values("pk")
    )
    if dry_run:
        return ended.count()
    deleted, _by_model = DestinationHold.objects.filter(pk__in=ended).delete()
    return deleted


def _batch(
    run: RetentionRun,
    *,
    older_than_days: float,
    size: int,
    after: tuple[datetime, int] | None,
    dry_run: bool,
) -> tuple[int, tuple[datetime, int] | None]:
    """One short transaction. Returns how many rows it looked at and where the next batch starts."""
    with transaction.atomic():
        rows = _pick(older_than_days=older_than_days, size=size, after=after, lock=not dry_run)
        if not rows:
            return 0, after
        held = import_string(settings.HANDOFF_RETENTION_HOLD_CHECK)(
            [(row["id"], row["action_key"]) for row in rows]
        )
        moving = [row for row in rows if row["id"] not in held]
        run.held += len(rows) - len(moving)
        if moving and not dry_run:
            _move(moving)
            run.archived_ids.extend(row["id"] for row in moving)
        run.archived += len(moving)
        last = rows[-1]
        return len(rows), (last["updated_at"], last["id"])


def _pick(
    *, older_than_days: float, size: int, after: tuple[datetime, int] | None, lock: bool
) -> list[dict]:
    """Up to `size` candidates after `after`, oldest change first; on PostgreSQL, locked unless someone
    else holds them (skipped), with the transaction's lock_timeout set first."""
    query = settled_candidates(older_than_days=older_than_days)
    if after is not None:
        # The >= bound is an index condition: the scan starts where the last batch stopped instead of
        # stepping again over the index entries of the rows moved already (dead until a vacuum).
        query = query.filter(updated_at__gte=after[0]).filter(
            Q(updated_at__gt=after[0]) | Q(updated_at=after[0], id__gt=after[1])
        )
    if lock and connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT set_config('lock_timeout', %s, true)",
                [f"{settings.HANDOFF_RETENTION_LOCK_TIMEOUT_MS}ms"],
            )
        query = query.select_for_update(skip_locked=True, of=("self",))
    fields = _PICKED_ON_POSTGRESQL if connection.vendor == "postgresql" else _KEPT
    return list(query.values(*fields)[:size])


def _move(rows: list[dict]) -> None:
    """Write the archive rows and delete the handoffs with their attempts, events and status events."""
    ids = [row["id"] for row in rows]
    # What these rows count in /metrics' counters is carried over first (the source's rule, by name).
    import_string(settings.HANDOFF_RETENTION_CARRY_OVER)(ids)
    if connection.vendor == "postgresql":
        retention_pg.archive(ids)  # the same rows and documents, built in the database
    else:
        history = _histories(ids)
        ArchivedHandoff.objects.bulk_create(
            [_archived(row, history.get(row["id"], {})) for row in rows], ignore_conflicts=True
        )
    # Children first; plain deletes (no Python collector: nothing else points at these rows).
    for model, column in (
        (StatusEvent, "handoff_id"),
        (Attempt, "handoff_id"),
        (HandoffEvent, "handoff_id"),
        (Handoff, "id"),
    ):
        _delete_where_in(model, column, ids)


def _delete_where_in(model, column: str, ids: list[int]) -> None:
    """One DELETE by id list. The table and column names come from the models, the ids are parameters: on
    PostgreSQL one array (a thousand placeholders cost more to compose and parse than the delete itself)."""
    table = connection.ops.quote_name(model._meta.db_table)
    name = connection.ops.quote_name(column)
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute(f"DELETE FROM {table} WHERE {name} = ANY(%s)", [ids])  # noqa: S608
        else:
            where = f"{name} IN ({', '.join(['%s'] * len(ids))})"
            cursor.execute(f"DELETE FROM {table} WHERE {where}", ids)  # noqa: S608


def _iso(value: datetime | None) -> str | None:
    return value.isoformat() if value else None


def _histories(ids: list[int]) -> dict[int, dict]:
    """Each handoff's attempts, events and status events, compact, in order. Three queries."""
    out: dict[int, dict] = {pk: {"attempts": [], "events": [], "status_events": []} for pk in ids}
    for a in Attempt.objects.filter(handoff_id__in=ids).order_by("handoff_id", "number").values():
        out[a["handoff_id"]]["attempts"].append(
            {
                "number": a["number"],
                "worker": a["worker"],
                "started_at": _iso(a["started_at"]),
                "finished_at": _iso(a["finished_at"]),
                "outcome": a["outcome"],
                "failure_class": a["failure_class"],
                "reason_code": a["reason_code"],
                "status_code": a["status_code"],
                "latency_ms": a["latency_ms"],
                "detail": a["detail"],
            }
        )
    events = HandoffEvent.objects.filter(handoff_id__in=ids).order_by("handoff_id", "at", "id")
    for e in events.values():
        out[e["handoff_id"]]["events"].append(
            {
                "at": _iso(e["at"]),
                "from": e["from_state"],
                "to": e["to_state"],
                "by": e["actor_label"],
                "action": e["action"],
                "reason": e["reason"],
            }
        )
    statuses = StatusEvent.objects.filter(handoff_id__in=ids).order_by(
        "handoff_id", "sequence", "id"
    )
    for s in statuses.values():
        out[s["handoff_id"]]["status_events"].append(
            {
                "webhook_id": s["webhook_id"],
                "kind": s["kind"],
                "status": s["status"],
                "sequence": s["sequence"],
                "occurred_at": _iso(s["occurred_at"]),
                "received_at": _iso(s["received_at"]),
                "result": s["result"],
            }
        )
    return out


def _archived(row: dict, history: dict) -> ArchivedHandoff:
    return ArchivedHandoff(
        handoff_id=row["id"],
        workspace_id=row["workspace_id"],
        action_key=row["action_key"],
        instance_key=row["instance_key"],
        step=row["step"],
        workflow=row["workflow"],
        source_ref=row["source_ref"],
        source_id=row["source_id"],
        rule_version=row["rule_version"],
        destination=row["destination"],
        final_state=row["state"],
        task_id=row["destination_id"],
        receipt=row["receipt"],
        payload_hash=row["payload_hash"],
        request=row["request"],
        work_status=row["work_status"],
        attempts=row["attempts"],
        created_at=row["created_at"],
        settled_at=row["updated_at"],
        delivered_at=row["delivered_at"],
        history=history,
        erasure_id=row["erasure_id"],
        search_text=row["search_text"],
    )
