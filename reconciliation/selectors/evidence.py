"""What a handoff page may say about the receiver's side, with who said it and when: never a bare "yes".

Three sources speak about a key's task: the receipt (the receiver created it, at delivery), what the
receiver last told or answered about the key (a status event, a person's "Reconcile now", a run's
finding; stored on the handoff), and the last full reconciliation run (it compared every key: a delivered
key it raised no finding about had its task then). The newest statement is the answer; with none, the
answer is "unknown".
"""

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime

from django.conf import settings
from django.db.models import Q

from outbox.models import Handoff
from reconciliation.models import FindingKind, ReconciliationRun, RunStatus

K = FindingKind
# A live finding of these kinds means the receiver does not hold this handoff's task as recorded.
DISAGREEING = frozenset({K.MISSING_AT_RECEIVER, K.PAYLOAD_MISMATCH, K.DESTINATION_MISMATCH})


@dataclass(frozen=True)
class Statement:
    """One answer about the task: found or not, said by whom, at what time (source's clock)."""

    found: bool
    by: str
    at: datetime


@dataclass(frozen=True)
class HandoffEvidence:
    task: Statement | None
    work_status: str
    work_reported_at: datetime | None
    work_recorded_at: datetime | None
    last_full_run: ReconciliationRun | None
    cadence_minutes: int

    @property
    def work_label(self) -> str:
        return self.work_status.replace("_", " ")

    @property
    def task_answer(self) -> str:
        """ "yes", "no" or "unknown": the one word a reader takes away."""
        if self.task is None:
            return "unknown"
        return "yes" if self.task.found else "no"


def _last_full_run() -> ReconciliationRun | None:
    return (
        ReconciliationRun.objects.filter(status=RunStatus.COMPLETED, workspace_id__isnull=True)
        .filter(~Q(trigger__in=("console_key", "status_event")))
        .only("pk", "started_at", "finished_at")
        .order_by("-started_at", "-id")
        .first()
    )


def _receipt(handoff: Handoff) -> list[Statement]:
    if not (handoff.is_delivered and handoff.delivered_at):
        return []
    if not handoff.receipt:
        # Settled by a person's manual repair (the words of console/evidence_words.py): no receipt came.
        return [Statement(True, "a person (manual repair)", handoff.delivered_at)]
    how = "lookup" if handoff.receipt.get("found_by") == "lookup" else "receipt"
    return [Statement(True, f"the receiver ({how} at delivery)", handoff.delivered_at)]


def _noted(handoff: Handoff) -> list[Statement]:
    if handoff.task_checked_at is None or handoff.task_seen is None:
        return []
    return [Statement(handoff.task_seen, handoff.task_checked_by, handoff.task_checked_at)]


def _disagreements(findings: list) -> list[Statement]:
    return [
        Statement(False, f"reconciliation ({f.get_kind_display().lower()})", f.last_seen_at)
        for f in findings
        if f.kind in DISAGREEING
    ]


def _statements(handoff: Handoff, findings: list, run: ReconciliationRun | None) -> list[Statement]:
    statements = [*_receipt(handoff), *_noted(handoff), *_disagreements(findings)]
    if handoff.is_delivered and _run_found_task(handoff, findings, run):
        statements.append(
            Statement(True, f"reconciliation run {run.pk}", run.finished_at or run.started_at)
        )
    return statements


def _run_found_task(handoff: Handoff, findings: list, run: ReconciliationRun | None) -> bool:
    """The run compared this key after its delivery and raised nothing about its task: neither a live
    finding nor (a problem a repair covers) a note of a missing task written while it ran."""
    if run is None or not handoff.delivered_at or handoff.delivered_at >= run.started_at:
        return False
    if any(f.kind in DISAGREEING for f in findings):
        return False
    noted_missing = handoff.task_seen is False and handoff.task_checked_at is not None
    return not (noted_missing and handoff.task_checked_at >= run.started_at)


def handoff_evidence(handoff: Handoff, findings: Iterable = ()) -> HandoffEvidence:
    """The receiver's side of `handoff`, each answer with its source and time. `findings` are the live
    findings of its key (the page has them already). One query: the last full run."""
    findings = list(findings)
    run = _last_full_run()
    statements = sorted(_statements(handoff, findings, run), key=lambda s: s.at)
    return HandoffEvidence(
        task=statements[-1] if statements else None,
        work_status=handoff.work_status,
        work_reported_at=handoff.work_reported_at,
        work_recorded_at=handoff.work_checked_at,
        last_full_run=run,
        cadence_minutes=settings.RECONCILIATION_EVERY_MINUTES,
    )
