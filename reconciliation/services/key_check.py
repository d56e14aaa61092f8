"""A person's "Reconcile now" on one handoff: the rules of a full run (classify, repairs that cover
the facts, the work read back), for one key, at once. Sends nothing."""

from dataclasses import dataclass

from lib.databases import DB
from outbox.clock import db_time
from outbox.destinations import Destination, RemoteTask, destination_named
from outbox.models import Handoff
from outbox.services import PERSON_LOOKUP_WAIT_SECONDS, handoff_note_check
from outbox.services.lookup_limits import lookups_under_limits
from outbox.services.status_events import handoffs_note_receiver_answer
from reconciliation.classification import classify, stuck_before
from reconciliation.merge import source_row
from reconciliation.models import FindingKind, ReconciliationRun, RunStatus
from reconciliation.services.findings import FindingRecorder, findings_resolve_unseen
from reconciliation.services.lookups import lookup_key
from reconciliation.services.work_status import WorkStatuses


@dataclass(frozen=True)
class KeyCheck:
    run: ReconciliationRun
    found: bool | None
    problems: tuple[str, ...]
    lookup_error: str = ""
    # Problems seen exactly as a manual repair accounted for them: not reopened, and not "agreement" either.
    covered: int = 0

    def summary(self) -> str:
        if self.lookup_error:
            return f"the receiver could not be asked: {self.lookup_error}"
        seen = (
            "the receiver has a task for this key"
            if self.found
            else "the receiver has no task for this key"
        )
        if not self.problems and self.covered:
            return f"{seen}; a manual repair accounts for that, so no finding is reopened"
        if not self.problems:
            return f"{seen}; source and receiver agree"
        return f"{seen}; open: {', '.join(self.problems)}"


def _finish_key_run(
    run: ReconciliationRun, recorder: FindingRecorder, *, found: bool, error: str, resolved: int
) -> None:
    run.status = RunStatus.FAILED if error else RunStatus.COMPLETED
    run.error, run.finished_at = error, db_time()
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


def key_check_record(
    *,
    handoff: Handoff,
    task: RemoteTask | None,
    error: str,
    trigger: str,
    actor=None,
    source: str = "",
) -> KeyCheck:
    """Apply the rules of a full run (classify, repairs that cover the facts, the work read back) to one
    key, given what the receiver said about it (`task`, or `error` when it could not be asked): open,
    update or close its findings at once, and note the answer on the handoff. Sends nothing."""
    key = handoff.action_key
    run = ReconciliationRun.objects.using(DB).create(
        trigger=trigger, batch_size=1, started_by=actor, workspace_id=handoff.workspace_id
    )
    now = db_time()  # the stored times it is compared with are the database's
    src = None if error else source_row(key)
    problems = [] if error else classify(key, src, task, now=now, stuck_before=stuck_before(now))
    work = WorkStatuses(batch_size=1)
    work.note(key, src, task)
    run.work_statuses_recorded = work.recorded
    recorder = FindingRecorder(run=run, now=now, batch_size=1)
    recorder.add(problems)
    recorder.flush()
    resolved = 0 if error else findings_resolve_unseen(run, batch_size=100, now=now, action_key=key)
    _finish_key_run(run, recorder, found=task is not None, error=error, resolved=resolved)
    if not error:
        by = source or (
            f"reconcile now by {actor.get_username()}" if actor else f"reconciliation run {run.pk}"
        )
        handoffs_note_receiver_answer(ids=[handoff.pk], found=task is not None, source=by)
    return KeyCheck(
        run=run,
        found=None if error else task is not None,
        lookup_error=error,
        problems=tuple(FindingKind(k).label.lower() for k in recorder.by_kind),
        covered=recorder.covered,
    )


def handoff_reconcile_now(
    *, handoff_id: int, actor, destination: Destination | None = None
) -> KeyCheck:
    """Compare one handoff's key with the receiver now; open, update or close its findings at once.

    The same rules as a full run (classify, repairs that cover the facts), for one key. Sends nothing.
    """
    handoff = (
        Handoff.objects.using(DB)
        .only("action_key", "workspace_id", "destination")
        .get(pk=handoff_id)
    )
    # The handoff's own destination is asked (DestinationUnavailable when it is unknown or disabled).
    destination = lookups_under_limits(
        destination or destination_named(handoff.destination),
        worker="reconcile-key",
        wait_seconds=PERSON_LOOKUP_WAIT_SECONDS,
    )
    task, error = lookup_key(destination, handoff.action_key)
    check = key_check_record(
        handoff=handoff, task=task, error=error, trigger="console_key", actor=actor
    )
    handoff_note_check(
        handoff_id=handoff_id, actor=actor, reason=f"reconcile now: {check.summary()}"
    )
    return check
