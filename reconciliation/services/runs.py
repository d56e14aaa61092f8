"""A reconciliation run: compare every approved source action with the receiver's tasks, keep findings.

The receiver is read only through the destination interface (`list_keys`, `lookup`); the source
is the outbox. Both are streamed in key order and merged (reconciliation/merge.py). Because the two
listings are read at different moments, every cross-side problem is confirmed with a point lookup on
both sides before it is recorded: a handoff delivered while the run was between pages is not a
false `missing_at_receiver`, and a task created for a handoff approved mid-run is not an orphan.
"""

import logging
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from datetime import datetime

from django.conf import settings
from django.db import transaction
from django.db.models import Exists, OuterRef, Q
from django_q.tasks import async_task

from approvals.models import Request, RequestState
from lib.databases import DB
from outbox.clock import db_now_plus, db_time
from outbox.destinations import Destination, LookupFailed, RemoteTask, get_destination
from outbox.models import ArchivedHandoff, DestinationHold, Handoff, HoldKind
from outbox.models.holds import OPERATOR_KINDS
from outbox.services.lookup_limits import lookups_under_limits
from reconciliation.classification import (
    CROSS_SIDE,
    Problem,
    classify,
    in_agreement,
    iso,
    may_have_problems,
    stuck_before,
    unconfirmed,
    work_before,
)
from reconciliation.errors import RunDeferred
from reconciliation.merge import (
    SourceKey,
    StreamStats,
    merge_streams,
    receiver_stream,
    receiver_stream_of_workspace,
    source_row,
    source_stream,
    workspace_prefixes,
)
from reconciliation.models import FindingKind, ReconciliationRun, RunStatus
from reconciliation.services.findings import FindingRecorder, findings_resolve_unseen
from reconciliation.services.work_status import WorkStatuses

log = logging.getLogger(__name__)

# A run's listings and lookups wait this long at most for a permit under the destination's limits
# (outbox/services/lookup_limits.py): long enough to wait out a short Retry-After hold.
RUN_LIMITS_WAIT_SECONDS = 30.0
# Above this many handoffs a console-started workspace run goes to the django-q2 cluster.
CONSOLE_SYNC_LIMIT = 2000


@dataclass
class RunProgress:
    keys_compared: int
    source_rows: int
    receiver_rows: int
    problems: int


def _approved_requests(workspace_id: int | None):
    approved = Request.objects.using(DB).filter(state=RequestState.APPROVED)
    return approved if workspace_id is None else approved.filter(workspace_id=workspace_id)


def _unhanded_approvals(*, batch_size: int, workspace_id: int | None = None) -> Iterable[Problem]:
    """Approved request revisions with no outbox row. The approval writes both in one transaction,
    so this must never find anything: the check is the proof."""
    last = 0
    without_handoff = (
        _approved_requests(workspace_id)
        .filter(~Exists(Handoff.objects.using(DB).filter(source_id=OuterRef("pk"))))
        # Nor in the archive: retention moved its settled handoffs there.
        .filter(~Exists(ArchivedHandoff.objects.using(DB).filter(source_id=OuterRef("pk"))))
        .order_by("pk")
    )
    while True:
        page = list(
            without_handoff.filter(pk__gt=last).values(
                "pk", "workflow", "workspace_id", "number", "revision", "payload_hash", "updated_at"
            )[:batch_size]
        )
        for r in page:
            key = f"{r['workflow']}:{r['workspace_id']}:{r['number']}:{r['revision']}"
            yield Problem(
                kind=FindingKind.NOT_HANDED_OFF,
                action_key=key,
                workspace_id=r["workspace_id"],
                workflow=r["workflow"],
                source={
                    "request_id": r["pk"],
                    "state": RequestState.APPROVED,
                    "payload_hash": r["payload_hash"],
                    "approved_at": iso(r["updated_at"]),
                    "outbox_row": None,
                },
                receiver={"checked": False},
            )
        if len(page) < batch_size:
            return
        last = page[-1]["pk"]


def _receiver_side(
    destination: Destination, run: ReconciliationRun, stats: StreamStats
) -> Iterator[RemoteTask]:
    if run.workspace_id is None:
        return receiver_stream(destination, batch_size=run.batch_size, stats=stats)
    ws = run.workspace_id
    workflows = {
        *Handoff.objects.using(DB)
        .filter(workspace_id=ws)
        .values_list("workflow", flat=True)
        .distinct(),
        *Request.objects.using(DB)
        .filter(workspace_id=ws)
        .values_list("workflow", flat=True)
        .distinct(),
    }
    return receiver_stream_of_workspace(
        destination,
        batch_size=run.batch_size,
        stats=stats,
        prefixes=workspace_prefixes(workflows, ws),
    )


@dataclass
class _Merge:
    """One pass over the merged streams: classifies, confirms and hands problems to the recorder."""

    destination: Destination
    recorder: FindingRecorder
    work: WorkStatuses
    confirm_limit: int
    now: datetime
    stuck_before: datetime
    work_before: datetime
    source_stats: StreamStats = field(default_factory=StreamStats)
    receiver_stats: StreamStats = field(default_factory=StreamStats)
    compared: int = 0
    confirmed: int = 0

    def progress(self) -> RunProgress:
        return RunProgress(
            self.compared,
            self.source_stats.rows,
            self.receiver_stats.rows,
            sum(self.recorder.by_kind.values()),
        )

    def key(self, key: str, src: SourceKey | None, task: RemoteTask | None) -> None:
        self.compared += 1
        if src is not None and task is not None and in_agreement(src, task):
            return
        self.work.note(key, src, task)
        if not may_have_problems(src, task):
            return
        full = source_row(key) if src is not None else None
        problems = classify(key, full, task, now=self.now, stuck_before=self.stuck_before)
        if any(p.kind in CROSS_SIDE for p in problems):
            problems = self._confirmed(problems, key)
        self.recorder.add(problems)

    def _confirmed(self, problems: list[Problem], key: str) -> list[Problem]:
        """A cross-side problem is checked on both sides again before it is stored, up to the run's limit."""
        if self.confirmed >= self.confirm_limit:
            return [unconfirmed(p, "over the confirmation limit of this run") for p in problems]
        self.confirmed += 1
        return self._confirm(problems, key)

    def _confirm(self, problems: list[Problem], key: str) -> list[Problem]:
        """Re-read both sides for one key and classify again: the listings were read at different moments."""
        if not self.destination.supports_lookup:
            return problems
        try:
            task = self.destination.lookup(key)
        except LookupFailed as exc:
            log.warning("reconciliation could not confirm %s: %s", key, exc)
            return [unconfirmed(p, str(exc)) for p in problems]
        return classify(key, source_row(key), task, now=self.now, stuck_before=self.stuck_before)


def _finish(run: ReconciliationRun, merge: _Merge, resolved: int) -> None:
    recorder = merge.recorder
    run.finished_at = db_time()
    run.source_keys, run.receiver_keys = merge.source_stats.rows, merge.receiver_stats.rows
    run.keys_compared = merge.compared
    run.source_pages, run.receiver_pages = merge.source_stats.pages, merge.receiver_stats.pages
    run.largest_page = max(merge.source_stats.largest_page, merge.receiver_stats.largest_page)
    run.approved_requests_checked = _approved_requests(run.workspace_id).count()
    run.findings_by_kind = recorder.by_kind
    run.new_findings, run.resolved_findings = recorder.new, resolved
    run.outcome_validation_failures = recorder.outcome_validation
    run.covered_by_repairs = recorder.covered
    run.work_statuses_recorded = merge.work.recorded
    # The page sizes actually asked of each side: what keeps memory bounded.
    run.page_limits = sorted(
        merge.source_stats.limits_requested | merge.receiver_stats.limits_requested
    )
    run.save(using=DB)


def _checked_batch_size(batch_size: int | None, run: ReconciliationRun | None) -> int:
    batch_size = batch_size or (run.batch_size if run else settings.RECONCILIATION_BATCH_SIZE)
    if batch_size < 1:
        raise ValueError("batch_size must be at least 1")
    return batch_size


def _new_merge(
    run: ReconciliationRun, destination: Destination, *, batch_size: int, confirm_limit: int
) -> _Merge:
    # The one "now" of the run, on the database clock: the stored times it is compared with (SLA due,
    # delivered, updated) are the database's, and findings are seen at it.
    now = db_time()
    return _Merge(
        destination=destination,
        recorder=FindingRecorder(run=run, now=now, batch_size=batch_size),
        work=WorkStatuses(batch_size=batch_size),
        confirm_limit=confirm_limit,
        now=now,
        stuck_before=stuck_before(now),
        work_before=work_before(now),
    )


def _compare(
    run: ReconciliationRun,
    merge: _Merge,
    *,
    batch_size: int,
    progress: Callable[[RunProgress], None] | None,
) -> int:
    """Merge both sides key by key, record the problems, and resolve the findings not seen again (their count)."""
    pairs = merge_streams(
        source_stream(
            batch_size=batch_size,
            stats=merge.source_stats,
            now=merge.now,
            stuck_before=merge.stuck_before,
            work_before=merge.work_before,
            workspace_id=run.workspace_id,
            destination_name=merge.destination.name,
        ),
        _receiver_side(merge.destination, run, merge.receiver_stats),
    )
    for key, src, task in pairs:
        merge.key(key, src, task)
        if progress is not None and merge.compared % batch_size == 0:
            progress(merge.progress())
    merge.work.flush()
    merge.recorder.add(_unhanded_approvals(batch_size=batch_size, workspace_id=run.workspace_id))
    merge.recorder.flush()
    return findings_resolve_unseen(
        run, batch_size=batch_size, now=merge.now, destination_name=merge.destination.name
    )


def _compare_or_fail(
    run: ReconciliationRun,
    merge: _Merge,
    *,
    batch_size: int,
    progress: Callable[[RunProgress], None] | None,
) -> int:
    """A run that breaks is stored as failed with its error, not raised: the run row is the report."""
    try:
        resolved = _compare(run, merge, batch_size=batch_size, progress=progress)
    except Exception as exc:
        log.exception("reconciliation run %s failed", run.pk)
        run.status, run.error = RunStatus.FAILED, f"{type(exc).__name__}: {exc}"[:2000]
        return 0
    run.status = RunStatus.COMPLETED
    return resolved


def reconciliation_run(
    *,
    destination: Destination | None = None,
    batch_size: int | None = None,
    trigger: str = "command",
    progress: Callable[[RunProgress], None] | None = None,
    confirm_limit: int | None = None,
    workspace_id: int | None = None,
    started_by=None,
    run: ReconciliationRun | None = None,
) -> ReconciliationRun:
    """One comparison of source and receiver, of everything or of one workspace's keys.

    Returns the stored run (completed or failed). `run` continues a run queued from the console."""
    destination = lookups_under_limits(
        destination, worker="reconciliation", wait_seconds=RUN_LIMITS_WAIT_SECONDS
    )
    batch_size = _checked_batch_size(batch_size, run)
    confirm_limit = (
        settings.RECONCILIATION_CONFIRM_LIMIT if confirm_limit is None else confirm_limit
    )
    if run is None:
        run = ReconciliationRun.objects.using(DB).create(
            trigger=trigger, batch_size=batch_size, workspace_id=workspace_id, started_by=started_by
        )
    merge = _new_merge(run, destination, batch_size=batch_size, confirm_limit=confirm_limit)
    resolved = _compare_or_fail(run, merge, batch_size=batch_size, progress=progress)
    if progress is not None:
        progress(merge.progress())
    _finish(run, merge, resolved)
    return run


def reconciliation_run_scheduled() -> ReconciliationRun:
    """The schedule's run of the configured destination. While an operator's pause or window holds it, or
    a Retry-After hold that outlasts the run's wait for a permit (the wait the destination itself asked
    for), RunDeferred and no run: the run would wait for a permit the hold never gives and be stored as
    failed, a Prometheus ticket (HandoffReconciliationFailed) for a hold that was meant. A person's own run
    ("Reconcile now", `manage.py reconcile`) is not deferred: it fails saying the destination is held."""
    destination = get_destination()
    outlasting = Q(kind=HoldKind.RETRY_AFTER, ends_at__gt=db_now_plus(RUN_LIMITS_WAIT_SECONDS))
    hold = (
        DestinationHold.objects.using(DB)
        .live()
        .filter(Q(kind__in=OPERATOR_KINDS) | outlasting, destination=destination.name)
        .order_by("starts_at")
        .first()
    )
    if hold is not None:
        raise RunDeferred(
            f"not run: destination {destination.name} is held ({hold.get_kind_display()}: "
            f"{hold.reason}) since {hold.starts_at:%Y-%m-%d %H:%M} UTC"
        )
    return reconciliation_run(destination=destination, trigger="schedule")


def reconciliation_start_for_workspace(*, workspace_id: int, actor) -> ReconciliationRun:
    """An operator's "Reconcile now" for a whole workspace: at once when small, else on the cluster."""
    size = (
        Handoff.objects.using(DB)
        .filter(workspace_id=workspace_id)[: CONSOLE_SYNC_LIMIT + 1]
        .count()
    )
    if size <= CONSOLE_SYNC_LIMIT:
        return reconciliation_run(trigger="console", workspace_id=workspace_id, started_by=actor)
    run = ReconciliationRun.objects.using(DB).create(
        trigger="console",
        workspace_id=workspace_id,
        started_by=actor,
        batch_size=settings.RECONCILIATION_BATCH_SIZE,
        status=RunStatus.QUEUED,
    )
    transaction.on_commit(lambda: _enqueue_run_not_rollback_safe(run.pk), using=DB)
    return run


def _enqueue_run_not_rollback_safe(run_id: int) -> None:
    async_task(
        "reconciliation.tasks.reconcile_queued",
        run_id,
        q_options={"task_name": f"reconcile run {run_id}"},
    )


def reconciliation_run_queued(*, run_id: int) -> ReconciliationRun:
    """Run a queued console run. Claimed by a conditional update, so a doubled task runs it once."""
    claimed = (
        ReconciliationRun.objects.using(DB)
        .filter(pk=run_id, status=RunStatus.QUEUED)
        .update(status=RunStatus.RUNNING)
    )
    run = ReconciliationRun.objects.using(DB).get(pk=run_id)
    if not claimed:
        return run
    return reconciliation_run(run=run)
