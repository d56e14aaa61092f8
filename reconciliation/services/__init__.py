"""Reconciliation: compare every approved source action with the receiver's tasks, and keep findings.

The receiver is read only through the destination interface (`list_keys`, `lookup`); the source
is the outbox. Both are streamed in key order and merged (reconciliation/merge.py). Because the two
listings are read at different moments, every cross-side problem is confirmed with a point lookup on
both sides before it is recorded: a handoff delivered while the run was between pages is not a
false `missing_at_receiver`, and a task created for a handoff approved mid-run is not an orphan.
"""

import contextlib
import hashlib
import json
import logging
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import Exists, OuterRef
from django.utils import timezone

from approvals.models import Request, RequestState, Workspace
from lib.querystring import id_or_none
from outbox.destinations import Destination, LookupFailed, RemoteTask, get_destination
from outbox.errors import HandoffNotFound
from outbox.limits import LimitedLookups
from outbox.models import OPEN_STATES, Handoff, HandoffState
from outbox.services import (
    PERSON_LOOKUP_WAIT_SECONDS,
    handoff_lock,
    handoff_note_check,
    handoff_settle_manually,
    handoffs_record_work_status,
    manual_settle_applies,
)
from reconciliation import next_actions
from reconciliation.errors import (
    FindingNotFound,
    InvalidFindingTransition,
    NoteRequired,
    RepairDetailsRequired,
    RepairNotConfirmed,
)
from reconciliation.merge import (
    WORK_FAILED,
    SourceKey,
    SourceRow,
    StreamStats,
    merge_streams,
    receiver_stream,
    receiver_stream_of_workspace,
    reports_work,
    source_row,
    source_stream,
    work_problem,
    workspace_prefixes,
)
from reconciliation.models import (
    Finding,
    FindingEvent,
    FindingKind,
    FindingStatus,
    ManualRepair,
    ReconciliationRun,
    RunStatus,
)

log = logging.getLogger(__name__)
DB = "default"
S = HandoffState
K = FindingKind

# Kinds that compare the two sides and so are confirmed by a point lookup before they are recorded.
CROSS_SIDE = frozenset(
    {K.MISSING_AT_RECEIVER, K.ORPHAN_AT_RECEIVER, K.PAYLOAD_MISMATCH, K.DESTINATION_MISMATCH}
)
# Source states for which no task at the receiver is expected.
NOT_SENT_STATES = frozenset({S.CANCELLED, S.SUPERSEDED, S.OBSERVED})


@dataclass(frozen=True)
class Problem:
    kind: str
    action_key: str
    source: dict
    receiver: dict
    handoff_id: int | None = None
    workspace_id: int | None = None
    workflow: str = ""
    outcome_validation: bool = False


@dataclass
class RunProgress:
    keys_compared: int
    source_rows: int
    receiver_rows: int
    problems: int


def _iso(value: datetime | None) -> str | None:
    return value.isoformat() if value else None


def source_evidence(row: SourceRow) -> dict:
    return {
        "handoff_id": row.id,
        "state": row.state,
        "payload_hash": row.payload_hash,
        "destination_id": row.destination_id,
        "source_ref": row.source_ref,
        "workspace_id": row.workspace_id,
        "attempts": row.attempts,
        "failure_class": row.failure_class,
        "reason_code": row.reason_code,
        "created_at": _iso(row.created_at),
        "delivered_at": _iso(row.delivered_at),
        "sla_due_at": _iso(row.sla_due_at),
        "work_status": row.work_status,
    }


def receiver_evidence(task: RemoteTask | None) -> dict:
    if task is None:
        return {"found": False}
    evidence = {"found": True, "task_id": task.task_id, "payload_hash": task.payload_hash}
    if task.status:
        evidence["status"] = task.status
    return evidence


def work_before(now: datetime) -> datetime:
    """Delivered before this, a task still open or in progress is late (HANDOFF_WORK_DEADLINE_HOURS)."""
    return now - timedelta(hours=settings.HANDOFF_WORK_DEADLINE_HOURS)


def _work_reason(row: SourceRow, task: RemoteTask | None, *, now: datetime) -> tuple[str, str]:
    """(finding kind, why) for the business outcome of a delivered handoff, or ("", "") when there is none."""
    if not reports_work(row.state, row.payload_hash, task):
        return "", ""
    late = row.delivered_at is not None and row.delivered_at < work_before(now)
    if not work_problem(task, work_late=late):
        return "", ""
    if task.status == WORK_FAILED:
        return K.WORK_FAILED, f"the receiver reports the work on task {task.task_id} failed"
    hours = (now - row.delivered_at).total_seconds() / 3600
    return K.WORK_NOT_DONE, (
        f"work still {task.status} {hours:.0f} h after delivery (deadline {settings.HANDOFF_WORK_DEADLINE_HOURS:g} h)"
    )


def _key_parts(action_key: str) -> tuple[str, int | None]:
    """Workflow and workspace of an action key `<workflow>:<workspace>:<request>:<revision>`, when it has them."""
    parts = action_key.split(":")
    # The key may be the receiver's (an orphan task): whatever it holds, never int() on it unchecked.
    workspace = id_or_none(parts[1]) if len(parts) > 1 else None
    return parts[0], workspace


def _stuck_reason(row: SourceRow, *, now: datetime, stuck_before: datetime) -> str:
    if row.state not in OPEN_STATES:
        return ""
    if row.sla_due_at is not None and row.sla_due_at < now:
        return f"{row.state} past its SLA (due {row.sla_due_at:%Y-%m-%d %H:%M} UTC)"
    if row.state == S.PENDING:
        due = row.next_attempt_at or row.created_at
        if due < stuck_before:
            return f"pending and due since {due:%Y-%m-%d %H:%M} UTC without being claimed"
    elif row.state in (S.IN_FLIGHT, S.UNCERTAIN) and row.updated_at < stuck_before:
        return f"{row.state} since {row.updated_at:%Y-%m-%d %H:%M} UTC"
    return ""


def _side_problem(src: SourceRow, task: RemoteTask | None) -> tuple[str, bool] | None:
    """The kind of disagreement between the handoff and the receiver's task, if any, and whether it is an
    outcome-validation failure (a delivered handoff whose receipt the receiver no longer backs)."""
    delivered = src.state == S.DELIVERED
    if task is None:
        return (K.MISSING_AT_RECEIVER, True) if delivered else None
    if src.state in NOT_SENT_STATES:
        return K.ORPHAN_AT_RECEIVER, False
    if task.payload_hash != src.payload_hash:
        return K.PAYLOAD_MISMATCH, delivered
    if delivered and task.task_id != src.destination_id:
        return K.DESTINATION_MISMATCH, True
    return None


def _orphan(action_key: str, task: RemoteTask | None) -> list[Problem]:
    if task is None:
        return []
    workflow, workspace = _key_parts(action_key)
    return [
        _problem(
            K.ORPHAN_AT_RECEIVER,
            action_key,
            {"found": False},
            receiver_evidence(task),
            workflow=workflow,
            workspace_id=workspace,
        )
    ]


def classify(
    action_key: str,
    src: SourceRow | None,
    task: RemoteTask | None,
    *,
    now: datetime,
    stuck_before: datetime,
) -> list[Problem]:
    """Every problem one key has, given what each side says about it."""
    if src is None:
        return _orphan(action_key, task)
    rcv, source = receiver_evidence(task), source_evidence(src)
    common = {"handoff_id": src.id, "workspace_id": src.workspace_id, "workflow": src.workflow}
    problems = []
    if side := _side_problem(src, task):
        kind, validation = side
        problems.append(
            _problem(kind, action_key, source, rcv, outcome_validation=validation, **common)
        )
    if stuck := _stuck_reason(src, now=now, stuck_before=stuck_before):
        problems.append(_problem(K.STUCK, action_key, {**source, "why": stuck}, rcv, **common))
    work_kind, why = _work_reason(src, task, now=now)
    if work_kind:
        problems.append(_problem(work_kind, action_key, {**source, "why": why}, rcv, **common))
    return problems


def may_have_problems(src: SourceKey | None, task: RemoteTask | None) -> bool:
    """The fast check every key gets; a key that fails it is classified in full with its evidence."""
    if src is None:
        return task is not None
    if src.stuck:
        return True
    if task is None:
        return src.state == S.DELIVERED
    if src.state in NOT_SENT_STATES or task.payload_hash != src.payload_hash:
        return True
    if src.state != S.DELIVERED:
        return False
    return task.task_id != src.destination_id or (
        reports_work(src.state, src.payload_hash, task)
        and work_problem(task, work_late=src.work_late)
    )


def _problem(kind: str, action_key: str, source: dict, receiver: dict, **extra) -> Problem:
    return Problem(kind=kind, action_key=action_key, source=source, receiver=receiver, **extra)


@dataclass
class _Recorder:
    """Buffers problems and writes them as findings one batch at a time (memory stays bounded)."""

    run: ReconciliationRun
    now: datetime
    batch_size: int
    buffer: list[Problem] = field(default_factory=list)
    by_kind: dict[str, int] = field(default_factory=dict)
    new: int = 0
    outcome_validation: int = 0
    covered: int = 0

    def add(self, problems: Iterable[Problem]) -> None:
        for problem in problems:
            self.buffer.append(problem)
            self.by_kind[problem.kind] = self.by_kind.get(problem.kind, 0) + 1
            self.outcome_validation += problem.outcome_validation
        if len(self.buffer) >= self.batch_size:
            self.flush()

    def _covered(self, problem: Problem) -> None:
        """Seen exactly as a repair accounted for: not a problem of this run, not reopened."""
        self.covered += 1
        self.outcome_validation -= problem.outcome_validation
        self.by_kind[problem.kind] -= 1
        if not self.by_kind[problem.kind]:
            del self.by_kind[problem.kind]

    def _not_covered(self, problems: list[Problem], live: dict) -> list[Problem]:
        """Drop the problems with no live finding that a manual repair accounted for, fact for fact."""
        repaired = _repaired_facts({p.action_key for p in problems})
        kept = []
        for p in problems:
            if (p.kind, p.action_key) not in live and (
                p.kind,
                p.action_key,
                facts_fingerprint(p.source, p.receiver),
            ) in repaired:
                self._covered(p)
            else:
                kept.append(p)
        return kept

    def flush(self) -> None:
        if not self.buffer:
            return
        problems, self.buffer = self.buffer, []
        label = f"reconciliation run {self.run.pk}"
        with transaction.atomic(using=DB):
            live = {
                (f.kind, f.action_key): f
                for f in Finding.objects.using(DB)
                .select_for_update()
                .filter(action_key__in={p.action_key for p in problems})
                .exclude(status=FindingStatus.RESOLVED)
            }
            problems = self._not_covered(problems, live)
            updated, created = [], []
            for p in problems:
                finding = live.get((p.kind, p.action_key))
                values = {
                    "handoff_id": p.handoff_id,
                    "workspace_id": p.workspace_id,
                    "workflow": p.workflow,
                    "source_evidence": p.source,
                    "receiver_evidence": p.receiver,
                    "outcome_validation": p.outcome_validation,
                    "next_action": next_actions.for_finding(p.kind, p.source, p.receiver),
                    "last_run": self.run,
                    "last_seen_at": self.now,
                }
                if finding is None:
                    created.append(
                        Finding(kind=p.kind, action_key=p.action_key, first_run=self.run, **values)
                    )
                else:
                    for name, value in values.items():
                        setattr(finding, name, value)
                    updated.append(finding)
            if updated:
                Finding.objects.using(DB).bulk_update(updated, [*values.keys()])
            if created:
                _set_owners(created)
                Finding.objects.using(DB).bulk_create(created)
                FindingEvent.objects.using(DB).bulk_create(
                    FindingEvent(
                        finding=f,
                        action="opened",
                        to_status=FindingStatus.OPEN,
                        actor_label=label,
                        note=f"found by {label}",
                    )
                    for f in created
                )
            self.new += len(created)


def _set_owners(findings: list[Finding]) -> None:
    """Who acts on a new finding: its handoff's owner, else its workspace's on-call operator."""
    handoff_owners = dict(
        Handoff.objects.using(DB)
        .filter(pk__in={f.handoff_id for f in findings if f.handoff_id})
        .exclude(owner=None)
        .values_list("pk", "owner_id")
    )
    on_call = dict(
        Workspace.objects.using(DB)
        .filter(pk__in={f.workspace_id for f in findings if f.workspace_id})
        .exclude(on_call=None)
        .values_list("pk", "on_call_id")
    )
    for finding in findings:
        finding.owner_id = handoff_owners.get(finding.handoff_id) or on_call.get(
            finding.workspace_id
        )


def facts_fingerprint(source: dict, receiver: dict) -> str:
    """The facts of a problem a repair accounts for: what each side holds, not when it was looked at."""
    facts = {
        "source": {name: source.get(name) for name in ("state", "payload_hash", "destination_id")},
        "receiver": {name: receiver.get(name) for name in ("found", "task_id", "payload_hash")},
    }
    return hashlib.sha256(json.dumps(facts, sort_keys=True).encode()).hexdigest()


def _repaired_facts(action_keys: set[str]) -> set[tuple[str, str, str]]:
    """(kind, key, facts) that a manual repair accounted for: seen again exactly so, they stay closed."""
    return set(
        ManualRepair.objects.using(DB)
        .filter(action_key__in=action_keys)
        .exclude(covered_kind="")
        .values_list("covered_kind", "action_key", "covered_fingerprint")
    )


def _unconfirmed(problem: Problem, why: str) -> Problem:
    return Problem(
        **{
            **problem.__dict__,
            "receiver": {**problem.receiver, "confirmed": False, "not_confirmed": why},
        }
    )


def _confirm(
    problems: list[Problem],
    key: str,
    destination: Destination,
    *,
    now: datetime,
    stuck_before: datetime,
) -> list[Problem]:
    """Re-read both sides for one key and classify again: the listings were read at different moments."""
    if not destination.supports_lookup:
        return problems
    try:
        task = destination.lookup(key)
    except LookupFailed as exc:
        log.warning("reconciliation could not confirm %s: %s", key, exc)
        return [_unconfirmed(p, str(exc)) for p in problems]
    return classify(key, source_row(key), task, now=now, stuck_before=stuck_before)


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
                kind=K.NOT_HANDED_OFF,
                action_key=key,
                workspace_id=r["workspace_id"],
                workflow=r["workflow"],
                source={
                    "request_id": r["pk"],
                    "state": RequestState.APPROVED,
                    "payload_hash": r["payload_hash"],
                    "approved_at": _iso(r["updated_at"]),
                    "outbox_row": None,
                },
                receiver={"checked": False},
            )
        if len(page) < batch_size:
            return
        last = page[-1]["pk"]


def _resolve_unseen(
    run: ReconciliationRun, *, batch_size: int, now: datetime, action_key: str = ""
) -> int:
    """Live findings this run did not see again are resolved by the run, with an event saying so.

    A workspace run resolves only that workspace's findings, a one-key check only that key's."""
    label = f"reconciliation run {run.pk}"
    resolved = 0
    unseen = Finding.objects.using(DB).exclude(status=FindingStatus.RESOLVED).exclude(last_run=run)
    if run.workspace_id is not None:
        unseen = unseen.filter(workspace_id=run.workspace_id)
    if action_key:
        unseen = unseen.filter(action_key=action_key)
    while True:
        with transaction.atomic(using=DB):
            rows = list(unseen.select_for_update().values_list("pk", "status")[:batch_size])
            if not rows:
                return resolved
            Finding.objects.using(DB).filter(pk__in=[pk for pk, _ in rows]).update(
                status=FindingStatus.RESOLVED, resolved_at=now
            )
            FindingEvent.objects.using(DB).bulk_create(
                FindingEvent(
                    finding_id=pk,
                    action="auto_resolved",
                    from_status=status,
                    to_status=FindingStatus.RESOLVED,
                    actor_label=label,
                    note=f"not found again by {label}",
                )
                for pk, status in rows
            )
            resolved += len(rows)


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
    recorder: _Recorder
    confirm_limit: int
    now: datetime
    stuck_before: datetime
    work_before: datetime
    batch_size: int
    source_stats: StreamStats = field(default_factory=StreamStats)
    receiver_stats: StreamStats = field(default_factory=StreamStats)
    compared: int = 0
    confirmed: int = 0
    # Work statuses the receiver reported that differ from the stored ones, written one page at a time.
    work_statuses: dict[str, str] = field(default_factory=dict)
    work_statuses_recorded: int = 0

    def progress(self) -> RunProgress:
        return RunProgress(
            self.compared,
            self.source_stats.rows,
            self.receiver_stats.rows,
            sum(self.recorder.by_kind.values()),
        )

    def key(self, key: str, src: SourceKey | None, task: RemoteTask | None) -> None:
        self.compared += 1
        self._note_work(key, src, task)
        if not may_have_problems(src, task):
            return
        full = source_row(key) if src is not None else None
        problems = classify(key, full, task, now=self.now, stuck_before=self.stuck_before)
        if any(p.kind in CROSS_SIDE for p in problems):
            problems = self._confirmed(problems, key)
        self.recorder.add(problems)

    def _note_work(self, key: str, src: SourceKey | None, task: RemoteTask | None) -> None:
        """Keep the work status the receiver reports for a delivered handoff, written one page at a time."""
        if (
            src is None
            or not reports_work(src.state, src.payload_hash, task)
            or task.status == src.work_status
        ):
            return
        self.work_statuses[key] = task.status
        if len(self.work_statuses) >= self.batch_size:
            self.record_work()

    def _confirmed(self, problems: list[Problem], key: str) -> list[Problem]:
        """A cross-side problem is checked on both sides again before it is stored, up to the run's limit."""
        if self.confirmed >= self.confirm_limit:
            return [_unconfirmed(p, "over the confirmation limit of this run") for p in problems]
        self.confirmed += 1
        return _confirm(
            problems, key, self.destination, now=self.now, stuck_before=self.stuck_before
        )

    def record_work(self) -> None:
        if self.work_statuses:
            self.work_statuses_recorded += handoffs_record_work_status(statuses=self.work_statuses)
            self.work_statuses = {}


def _finish(run: ReconciliationRun, merge: _Merge, resolved: int) -> None:
    recorder = merge.recorder
    run.finished_at = timezone.now()
    run.source_keys, run.receiver_keys = merge.source_stats.rows, merge.receiver_stats.rows
    run.keys_compared = merge.compared
    run.source_pages, run.receiver_pages = merge.source_stats.pages, merge.receiver_stats.pages
    run.largest_page = max(merge.source_stats.largest_page, merge.receiver_stats.largest_page)
    run.approved_requests_checked = _approved_requests(run.workspace_id).count()
    run.findings_by_kind = recorder.by_kind
    run.new_findings, run.resolved_findings = recorder.new, resolved
    run.outcome_validation_failures = recorder.outcome_validation
    run.covered_by_repairs = recorder.covered
    run.work_statuses_recorded = merge.work_statuses_recorded
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
    now = timezone.now()
    return _Merge(
        destination=destination,
        recorder=_Recorder(run=run, now=now, batch_size=batch_size),
        confirm_limit=confirm_limit,
        now=now,
        stuck_before=now - timedelta(minutes=settings.HANDOFF_STUCK_MINUTES),
        work_before=work_before(now),
        batch_size=batch_size,
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
        ),
        _receiver_side(merge.destination, run, merge.receiver_stats),
    )
    for key, src, task in pairs:
        merge.key(key, src, task)
        if progress is not None and merge.compared % batch_size == 0:
            progress(merge.progress())
    merge.record_work()
    merge.recorder.add(_unhanded_approvals(batch_size=batch_size, workspace_id=run.workspace_id))
    merge.recorder.flush()
    return _resolve_unseen(run, batch_size=batch_size, now=merge.now)


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


# Listings and lookups are requests to the receiver like any other: each takes a permit under the destination's
# limits, and waits for one at most this long (a run waits out a short Retry-After hold; a person's click waits as
# long as a person's reconcile, PERSON_LOOKUP_WAIT_SECONDS). Refused: the run fails with the reason, a person's
# check says the receiver was not asked.
RUN_LIMITS_WAIT_SECONDS = 30.0


def _under_limits(
    destination: Destination | None, worker: str, wait_seconds: float
) -> LimitedLookups:
    return LimitedLookups(
        destination or get_destination(), worker=worker, wait_seconds=wait_seconds
    )


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
    destination = _under_limits(destination, "reconciliation", RUN_LIMITS_WAIT_SECONDS)
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


def _move(
    finding: Finding, to_status: str, *, actor, event_note: str, action: str, **changes
) -> None:
    if not finding.can_move_to(to_status):
        raise InvalidFindingTransition(finding.pk, finding.status, to_status)
    from_status = finding.status
    finding.status = to_status
    for name, value in changes.items():
        setattr(finding, name, value)
    finding.save(using=DB)
    FindingEvent.objects.using(DB).create(
        finding=finding,
        action=action,
        from_status=from_status,
        to_status=to_status,
        actor=actor,
        actor_label=actor.get_username() if actor else "system",
        note=event_note,
    )


def _lock(finding_id: int) -> Finding:
    finding = Finding.objects.using(DB).select_for_update(no_key=True).filter(pk=finding_id).first()
    if finding is None:
        raise FindingNotFound(finding_id)
    return finding


def finding_acknowledge(*, finding_id: int, actor, note: str = "") -> Finding:
    """A person has seen the finding and owns it; the next runs keep it acknowledged while it persists."""
    with transaction.atomic(using=DB):
        finding = _lock(finding_id)
        _move(
            finding,
            FindingStatus.ACKNOWLEDGED,
            actor=actor,
            action="acknowledged",
            event_note=note,
            acknowledged_at=timezone.now(),
            acknowledged_by=actor,
            note=note or finding.note,
        )
    return finding


def finding_resolve(*, finding_id: int, actor, note: str) -> Finding:
    """A person says it is repaired. If the next run still sees the problem, it opens a new finding."""
    if not note.strip():
        raise NoteRequired("say what was done to resolve the finding")
    with transaction.atomic(using=DB):
        finding = _lock(finding_id)
        _move(
            finding,
            FindingStatus.RESOLVED,
            actor=actor,
            action="resolved",
            event_note=note,
            resolved_at=timezone.now(),
            resolved_by=actor,
            note=note,
        )
    return finding


# Above this many handoffs a console-started workspace run goes to the django-q2 cluster.
CONSOLE_SYNC_LIMIT = 2000


@dataclass(frozen=True)
class KeyCheck:
    run: ReconciliationRun
    found: bool | None
    problems: tuple[str, ...]
    lookup_error: str = ""

    def summary(self) -> str:
        if self.lookup_error:
            return f"the receiver could not be asked: {self.lookup_error}"
        seen = (
            "the receiver has a task for this key"
            if self.found
            else "the receiver has no task for this key"
        )
        if not self.problems:
            return f"{seen}; source and receiver agree"
        return f"{seen}; open: {', '.join(self.problems)}"


def _lookup(destination: Destination, key: str) -> tuple[RemoteTask | None, str]:
    if not destination.supports_lookup:
        return None, "this destination cannot be asked about a key; check at the receiver by hand"
    try:
        return destination.lookup(key), ""
    except LookupFailed as exc:
        return None, str(exc)


def _finish_key_run(
    run: ReconciliationRun, recorder, *, found: bool, error: str, resolved: int
) -> None:
    run.status = RunStatus.FAILED if error else RunStatus.COMPLETED
    run.error, run.finished_at = error, timezone.now()
    run.source_keys, run.receiver_keys, run.keys_compared = 1, int(found), 0 if error else 1
    run.findings_by_kind, run.new_findings, run.resolved_findings = (
        recorder.by_kind,
        recorder.new,
        resolved,
    )
    run.outcome_validation_failures, run.covered_by_repairs = (
        recorder.outcome_validation,
        recorder.covered,
    )
    run.save(using=DB)


def handoff_reconcile_now(
    *, handoff_id: int, actor, destination: Destination | None = None
) -> KeyCheck:
    """Compare one handoff's key with the receiver now; open, update or close its findings at once.

    The same rules as a full run (classify, repairs that cover the facts), for one key. Sends nothing.
    """
    destination = _under_limits(destination, "reconcile-key", PERSON_LOOKUP_WAIT_SECONDS)
    handoff = Handoff.objects.using(DB).only("action_key", "workspace_id").get(pk=handoff_id)
    key = handoff.action_key
    task, error = _lookup(destination, key)
    run = ReconciliationRun.objects.using(DB).create(
        trigger="console_key", batch_size=1, started_by=actor, workspace_id=handoff.workspace_id
    )
    now = timezone.now()
    src = None if error else source_row(key)
    problems = (
        []
        if error
        else classify(
            key,
            src,
            task,
            now=now,
            stuck_before=now - timedelta(minutes=settings.HANDOFF_STUCK_MINUTES),
        )
    )
    if (
        src is not None
        and reports_work(src.state, src.payload_hash, task)
        and task.status != src.work_status
    ):
        run.work_statuses_recorded = handoffs_record_work_status(statuses={key: task.status})
    recorder = _Recorder(run=run, now=now, batch_size=1)
    recorder.add(problems)
    recorder.flush()
    resolved = 0 if error else _resolve_unseen(run, batch_size=100, now=now, action_key=key)
    _finish_key_run(run, recorder, found=task is not None, error=error, resolved=resolved)
    check = KeyCheck(
        run=run,
        found=None if error else task is not None,
        lookup_error=error,
        problems=tuple(FindingKind(k).label.lower() for k in recorder.by_kind),
    )
    handoff_note_check(
        handoff_id=handoff_id, actor=actor, reason=f"reconcile now: {check.summary()}"
    )
    return check


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
    from django_q.tasks import async_task

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


def _repair_target(
    finding_id: int | None, handoff_id: int | None
) -> tuple[Finding | None, Handoff | None]:
    """The locked finding and the handoff a repair is about (the handoff locks in its own service)."""
    finding = _lock(finding_id) if finding_id is not None else None
    if finding is not None and finding.status == FindingStatus.RESOLVED:
        raise InvalidFindingTransition(finding.pk, finding.status, FindingStatus.RESOLVED)
    handoff_id = handoff_id if handoff_id is not None else (finding.handoff_id if finding else None)
    handoff = None
    if handoff_id is not None:
        with contextlib.suppress(HandoffNotFound):
            handoff = handoff_lock(handoff_id)
    if finding is None and handoff is None:
        raise FindingNotFound(finding_id)
    return finding, handoff


def _check_task_at_receiver(action_key: str, task_id: str, destination: Destination) -> None:
    """Where the receiver can be asked, the task id a person names must be the one it holds for the key."""
    task, error = _lookup(destination, action_key)
    if error:
        return
    if task is None or task.task_id != task_id:
        held = f"task {task.task_id}" if task else "no task"
        raise RepairNotConfirmed(f"the receiver holds {held} for {action_key}, not task {task_id}")


def manual_repair_record(
    *,
    actor,
    what_was_done: str,
    evidence: str = "",
    receiver_task_id: str = "",
    finding_id: int | None = None,
    handoff_id: int | None = None,
    destination: Destination | None = None,
) -> ManualRepair:
    """Record what a person did outside the system; close the finding and/or settle the handoff with it.

    The repair remembers the facts it accounted for (kind, key, what each side held), so a later run
    that sees exactly those facts does not reopen the finding; any other discrepancy opens a new one.
    """
    what_was_done, evidence, receiver_task_id = (
        what_was_done.strip(),
        evidence.strip(),
        receiver_task_id.strip(),
    )
    if not what_was_done:
        raise RepairDetailsRequired("say what was done outside the system")
    if receiver_task_id:
        key = _subject_key(finding_id, handoff_id)
        if key:
            _check_task_at_receiver(
                key,
                receiver_task_id,
                _under_limits(destination, "repair-check", PERSON_LOOKUP_WAIT_SECONDS),
            )
    with transaction.atomic(using=DB):
        finding, handoff = _repair_target(finding_id, handoff_id)
        state = _repair_handoff(
            handoff,
            finding,
            actor=actor,
            receiver_task_id=receiver_task_id,
            reason=_repair_reason(what_was_done, evidence, finding),
        )
        repair = ManualRepair.objects.using(DB).create(
            **_subject_fields(finding, handoff),
            actor=actor,
            actor_label=actor.get_username(),
            what_was_done=what_was_done,
            evidence=evidence,
            receiver_task_id=receiver_task_id,
            resulting_state=state,
        )
        if finding is not None:
            _move(
                finding,
                FindingStatus.RESOLVED,
                actor=actor,
                action="repaired",
                event_note=what_was_done,
                resolved_at=timezone.now(),
                resolved_by=actor,
                note=what_was_done,
            )
    return repair


def _subject_fields(finding: Finding | None, handoff: Handoff | None) -> dict:
    """What a repair is about, and the facts it accounted for (a finding's kind, key and evidence)."""
    if finding is None:
        return {
            "workspace_id": handoff.workspace_id,
            "action_key": handoff.action_key,
            "handoff_id": handoff.pk,
        }
    return {
        "workspace_id": finding.workspace_id,
        "action_key": finding.action_key,
        "finding": finding,
        "handoff_id": handoff.pk if handoff else None,
        "covered_kind": finding.kind,
        "covered_fingerprint": facts_fingerprint(
            finding.source_evidence, finding.receiver_evidence
        ),
    }


def _subject_key(finding_id: int | None, handoff_id: int | None) -> str:
    if handoff_id is not None:
        return (
            Handoff.objects.using(DB)
            .values_list("action_key", flat=True)
            .filter(pk=handoff_id)
            .first()
            or ""
        )
    return (
        Finding.objects.using(DB).values_list("action_key", flat=True).filter(pk=finding_id).first()
        or ""
    )


def _repair_handoff(
    handoff: Handoff | None, finding: Finding | None, *, actor, receiver_task_id: str, reason: str
) -> str:
    """Settle the handoff where the repair says what the receiver holds; else write it into its history."""
    if handoff is None:
        return ""
    if finding is None or receiver_task_id or manual_settle_applies(handoff):
        return handoff_settle_manually(
            handoff_id=handoff.pk, actor=actor, receiver_task_id=receiver_task_id, reason=reason
        ).state
    handoff_note_check(handoff_id=handoff.pk, actor=actor, reason=reason, action="manual_repair")
    return handoff.state


def _repair_reason(what_was_done: str, evidence: str, finding: Finding | None) -> str:
    about = (
        f"manual repair of {finding.get_kind_display().lower()}: " if finding else "manual repair: "
    )
    return about + what_was_done + (f" (evidence: {evidence})" if evidence else "")
