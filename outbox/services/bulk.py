"""Bulk actions: one operator's action over every handoff a filter matches. Each handoff is changed by the same
service as the single action, in its own transaction, except acknowledge: its rule reads only the row's state,
so a batch is locked with one statement, each row checked under that lock and the eligible ones written with one
UPDATE and their events with one INSERT (`_acknowledge_batch`). More than `BULK_INLINE_LIMIT` run as a
background job (`BulkJob`) with visible progress, and no action covers more than `BULK_JOB_LIMIT`.

A bulk action is previewed first (how many match, up to which id) and applied on confirmation to the same
filter bounded by that id, so rows created since are left alone."""

from dataclasses import dataclass, field

from django.conf import settings
from django.db import transaction

from lib.databases import DB
from outbox.clock import db_now, db_now_plus
from outbox.errors import (
    AssigneeNotFound,
    HandoffNotFound,
    InvalidActionInput,
    InvalidTransition,
    OutboxError,
    ReasonRequired,
    RiskNotConfirmed,
)
from outbox.guidance import BULK_ELIGIBLE_STATES
from outbox.models import (
    BulkJob,
    BulkJobState,
    Handoff,
    HandoffEvent,
    HandoffQuerySet,
    HandoffState,
)
from outbox.services.moves import move_changes
from outbox.services.operator import (
    handoff_assign,
    handoff_cancel,
    handoff_retry,
)
from outbox.services.transitions import lock_with_compensated_steps
from outbox.settlement.asked import handoff_settle

BULK_ACTIONS = ("retry", "reconcile", "assign", "cancel", "acknowledge")
# More matches than this run as a background job (BulkJob) with visible progress, not in the web request.
BULK_INLINE_LIMIT = 1000
# The most handoffs one bulk action may cover; above it the operator is asked for a narrower filter.
BULK_JOB_LIMIT = 100_000
BULK_JOB_CHUNK = 100


@dataclass
class BulkResult:
    """What a bulk action did: how many it applied to, and why the others were skipped (reason: count)."""

    action: str
    total: int
    done: int = 0
    skipped: dict[str, int] = field(default_factory=dict)

    def skip(self, reason: str) -> None:
        self.skipped[reason] = self.skipped.get(reason, 0) + 1


def _bulk_one(action: str, pk: int, *, actor, owner, reason: str) -> None:
    if action == "retry":
        handoff_retry(handoff_id=pk, actor=actor, reason=reason or "bulk retry")
    elif action == "reconcile":
        handoff_settle(handoff_id=pk, actor=actor)
    elif action == "cancel":
        handoff_cancel(handoff_id=pk, actor=actor, reason=reason)
    else:
        handoff_assign(handoff_id=pk, actor=actor, owner=owner, reason=reason)


def _check_bulk(action: str, reason: str) -> None:
    if action not in BULK_ACTIONS:
        raise InvalidActionInput(f"unknown bulk action {action!r}")
    if action == "cancel" and not reason.strip():
        raise ReasonRequired("a reason is required to cancel handoffs")


def bulk_job_start(
    *, action: str, handoff_ids: list[int], actor, owner=None, reason: str = ""
) -> BulkJob:
    """Queue a bulk action over many handoffs for the workers; the operator watches its progress."""
    _check_bulk(action, reason)
    with transaction.atomic(using=DB):
        job = BulkJob.objects.using(DB).create(
            action=action, actor=actor, owner=owner, reason=reason, handoff_ids=list(handoff_ids)
        )
        transaction.on_commit(lambda: _enqueue_bulk_job_not_rollback_safe(job.pk), using=DB)
    return job


def _enqueue_bulk_job_not_rollback_safe(job_id: int) -> None:
    if not settings.HANDOFF_WAKE_ON_COMMIT:
        return  # no cluster to wake (tests run the job themselves)
    from django_q.tasks import async_task

    async_task("outbox.tasks.bulk_job_run", job_id, q_options={"task_name": f"bulk-job-{job_id}"})


def bulk_job_run(*, job_id: int, chunk: int = BULK_JOB_CHUNK) -> BulkJob:
    """Work through a bulk job from where it stopped, a chunk at a time, writing its progress after each."""
    claimed = (
        BulkJob.objects.using(DB)
        .filter(pk=job_id)
        .exclude(state=BulkJobState.DONE)
        .update(state=BulkJobState.RUNNING)
    )
    job = BulkJob.objects.using(DB).get(pk=job_id)
    while claimed and job.position < job.total:
        ids = job.handoff_ids[job.position : job.position + chunk]
        result = handoffs_bulk_apply(
            action=job.action, handoff_ids=ids, actor=job.actor, owner=job.owner, reason=job.reason
        )
        job.position += len(ids)
        job.done += result.done
        for why, count in result.skipped.items():
            job.skipped[why] = job.skipped.get(why, 0) + count
        job.save(using=DB, update_fields=["position", "done", "skipped", "updated_at"])
    if claimed:
        job.state, job.finished_at = BulkJobState.DONE, db_now()
        job.save(using=DB, update_fields=["state", "finished_at"])
    return job


BULK_JOB_STALLED_SECONDS = 120


def bulk_jobs_resume() -> int:
    """Run the bulk jobs whose wake-up was lost or whose worker died (not moved for a while); returns how
    many. Their position makes each continue where it stopped."""
    stalled = (
        BulkJob.objects.using(DB)
        .exclude(state=BulkJobState.DONE)
        .filter(updated_at__lt=db_now_plus(-BULK_JOB_STALLED_SECONDS))
        .values_list("pk", flat=True)
    )
    resumed = 0
    for pk in list(stalled):
        # Touch it first (a conditional update): of two sweeps, one resumes it.
        if (
            BulkJob.objects.using(DB)
            .filter(pk=pk, updated_at__lt=db_now_plus(-BULK_JOB_STALLED_SECONDS))
            .update(updated_at=db_now())
        ):
            bulk_job_run(job_id=pk)
            resumed += 1
    return resumed


def handoffs_bulk_apply(
    *, action: str, handoff_ids: list[int], actor, owner=None, reason: str = ""
) -> BulkResult:
    """Apply one action to each handoff, each in its own transaction through the same service as the single
    action (acknowledge: the same rule, a batch at a time); a handoff the action does not fit is skipped with
    the reason, never half done."""
    _check_bulk(action, reason)
    result = BulkResult(action=action, total=len(handoff_ids))
    if action == "acknowledge":
        for start in range(0, len(handoff_ids), BULK_JOB_CHUNK):
            batch = handoff_ids[start : start + BULK_JOB_CHUNK]
            _acknowledge_batch(batch, actor=actor, reason=reason, result=result)
        return result
    for pk in handoff_ids:
        try:
            _bulk_one(action, pk, actor=actor, owner=owner, reason=reason)
        except RiskNotConfirmed:
            result.skip("outcome unknown: reconcile these first")
        except OutboxError as exc:
            result.skip(_skip_reason(exc))
        else:
            result.done += 1
    return result


def _skip_reason(exc: OutboxError) -> str:
    return str(exc).split(": ", 1)[-1] if str(exc) else type(exc).__name__


def _acknowledge_batch(handoff_ids: list[int], *, actor, reason: str, result: BulkResult) -> None:
    """`handoff_acknowledge` over a batch in a constant number of statements: the rows are locked as that
    service locks one (compensated steps first, then in id order), each is checked under the lock (needs
    attention, else skipped with the same reason), and the eligible ones are moved and evented together."""
    with transaction.atomic(using=DB):
        lock_with_compensated_steps(handoff_ids)
        locked = (
            Handoff.objects.using(DB)
            .select_for_update(no_key=True)
            .filter(pk__in=handoff_ids)
            .order_by("pk")
            .only("pk", "state", "action_key")
        )
        rows = {row.pk: row for row in locked}
        eligible = []
        for pk in handoff_ids:
            row = rows.get(pk)
            if row is None:
                result.skip(_skip_reason(HandoffNotFound(pk)))
            elif row.state != HandoffState.NEEDS_ATTENTION:
                result.skip(
                    _skip_reason(InvalidTransition(row.action_key, row.state, "acknowledged"))
                )
            else:
                eligible.append(pk)
        if not eligible:
            return
        state = HandoffState.NEEDS_ATTENTION
        changes = move_changes(
            state, state, {"acknowledged_at": db_now(), "acknowledged_by": actor}
        )
        Handoff.objects.using(DB).filter(pk__in=eligible).update(**changes, updated_at=db_now())
        label = actor.get_username() if actor else "system"
        HandoffEvent.objects.using(DB).bulk_create(
            HandoffEvent(
                handoff_id=pk,
                from_state=state,
                to_state=state,
                actor=actor,
                actor_label=label,
                action="acknowledge",
                reason=reason or "bulk acknowledge",
            )
            for pk in eligible
        )
        result.done += len(eligible)


@dataclass(frozen=True)
class BulkPreview:
    """What confirming a bulk action would cover: how many handoffs match (`too_many` past
    `BULK_JOB_LIMIT`: nothing may be done), the highest id among them, and whether it would run in the
    background."""

    action: str
    count: int
    upto: int | None

    @property
    def too_many(self) -> bool:
        return self.count > BULK_JOB_LIMIT

    @property
    def background(self) -> bool:
        return self.count > BULK_INLINE_LIMIT


def bulk_eligible(matching: HandoffQuerySet, action: str) -> HandoffQuerySet:
    """The handoffs among `matching` that the action considers (its services still check every row)."""
    return matching.filter(state__in=BULK_ELIGIBLE_STATES[action])


def handoffs_bulk_preview(*, action: str, matching: HandoffQuerySet) -> BulkPreview:
    """How many of the handoffs `matching` (the operator's filter) the action would cover. Writes nothing."""
    ids = list(
        bulk_eligible(matching, action)
        .order_by("id")
        .values_list("id", flat=True)[: BULK_JOB_LIMIT + 1]
    )
    return BulkPreview(action=action, count=len(ids), upto=max(ids) if ids else None)


@dataclass(frozen=True)
class BulkConfirmed:
    """A confirmed bulk action: applied at once (`result`), or queued as a background job (`job`)."""

    action: str
    total: int
    result: BulkResult | None = None
    job: BulkJob | None = None


def handoffs_bulk_confirm(
    *,
    action: str,
    matching: HandoffQuerySet,
    upto: int | None,
    actor,
    owner=None,
    reason: str = "",
    owner_missing: bool = False,
) -> BulkConfirmed:
    """Apply a previewed action to the handoffs `matching` the same filter, up to the id the preview saw (rows
    created since are left alone), at most `BULK_JOB_LIMIT`: at once up to `BULK_INLINE_LIMIT`, as a
    background job above. InvalidActionInput (or ReasonRequired) when the action cannot be applied;
    AssigneeNotFound when an assign applied at once names an owner that is no user (`owner_missing`: the
    job of a larger one assigns to nobody, as it always did)."""
    ids = list(
        bulk_eligible(matching, action)
        .filter(id__lte=upto or 0)
        .order_by("id")
        .values_list("id", flat=True)[:BULK_JOB_LIMIT]
    )
    if len(ids) <= BULK_INLINE_LIMIT:
        if action == "assign" and owner_missing:
            raise AssigneeNotFound("Choose an operator to assign to.")
        result = handoffs_bulk_apply(
            action=action, handoff_ids=ids, actor=actor, owner=owner, reason=reason
        )
        return BulkConfirmed(action=action, total=len(ids), result=result)
    job = bulk_job_start(action=action, handoff_ids=ids, actor=actor, owner=owner, reason=reason)
    return BulkConfirmed(action=action, total=len(ids), job=job)
