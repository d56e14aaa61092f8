"""Findings: written by runs (opened, updated, resolved when not seen again) and moved by people.

A finding is identified by (kind, action key) while it is live; every run that sees the problem
again updates it, a run that no longer sees it resolves it, and a problem seen again exactly as a
manual repair accounted for is not reopened.
"""

from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime

from django.db import transaction
from django.db.models import Exists, OuterRef

from approvals.models import Workspace
from lib.databases import DB
from outbox.clock import db_now
from outbox.models import Handoff
from outbox.services.status_events import handoffs_note_receiver_answer
from reconciliation import next_actions
from reconciliation.classification import Problem, facts_fingerprint
from reconciliation.errors import FindingNotFound, InvalidFindingTransition, NoteRequired
from reconciliation.models import (
    Finding,
    FindingEvent,
    FindingKind,
    FindingStatus,
    ManualRepair,
    ReconciliationRun,
)


def _run_label(run: ReconciliationRun) -> str:
    return f"reconciliation run {run.pk}"


def _finding_values(p: Problem, run: ReconciliationRun, now: datetime) -> dict:
    """What a run writes on the finding of a problem it saw, new or live."""
    return {
        "handoff_id": p.handoff_id,
        "workspace_id": p.workspace_id,
        "workflow": p.workflow,
        "source_evidence": p.source,
        "receiver_evidence": p.receiver,
        "outcome_validation": p.outcome_validation,
        "next_action": next_actions.for_finding(p.kind, p.source, p.receiver),
        "last_run": run,
        "last_seen_at": now,
    }


@dataclass
class FindingRecorder:
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
        with transaction.atomic(using=DB):
            live = {
                (f.kind, f.action_key): f
                for f in Finding.objects.using(DB)
                .live()
                .select_for_update(no_key=True)
                .filter(action_key__in={p.action_key for p in problems})
            }
            updated, created = [], []
            for p in self._not_covered(problems, live):
                values = _finding_values(p, self.run, self.now)
                finding = live.get((p.kind, p.action_key))
                if finding is None:
                    created.append(
                        Finding(kind=p.kind, action_key=p.action_key, first_run=self.run, **values)
                    )
                else:
                    for name, value in values.items():
                        setattr(finding, name, value)
                    updated.append(finding)
            if updated:
                Finding.objects.using(DB).bulk_update(updated, [*values])
            self._open(created)
            _note_missing_tasks(problems, self.run)

    def _open(self, created: list[Finding]) -> None:
        if not created:
            return
        label = _run_label(self.run)
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


def _note_missing_tasks(problems: list[Problem], run: ReconciliationRun) -> None:
    """The handoff page says what the receiver said: a delivered handoff whose task it no longer has (seen
    again, confirmed) stops being shown as one whose task exists, repaired or not."""
    handoffs_note_receiver_answer(
        ids=[
            p.handoff_id
            for p in problems
            if p.kind == FindingKind.MISSING_AT_RECEIVER
            and p.handoff_id
            and p.receiver.get("confirmed", True)
        ],
        found=False,
        source=_run_label(run),
    )


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


def _repaired_facts(action_keys: set[str]) -> set[tuple[str, str, str]]:
    """(kind, key, facts) that a manual repair accounted for: seen again exactly so, they stay closed."""
    return set(
        ManualRepair.objects.using(DB)
        .filter(action_key__in=action_keys)
        .exclude(covered_kind="")
        .values_list("covered_kind", "action_key", "covered_fingerprint")
    )


def findings_resolve_unseen(
    run: ReconciliationRun,
    *,
    batch_size: int,
    now: datetime,
    action_key: str = "",
    destination_name: str | None = None,
) -> int:
    """Live findings this run did not see again are resolved by the run, with an event saying so.

    A workspace run resolves only that workspace's findings, a one-key check only that key's, and a run
    that compared one destination none about a handoff sent to another."""
    label = _run_label(run)
    resolved = 0
    unseen = Finding.objects.using(DB).live().exclude(last_run=run)
    if destination_name is not None:
        elsewhere = Handoff.objects.using(DB).filter(pk=OuterRef("handoff_id"))
        unseen = unseen.exclude(Exists(elsewhere.exclude(destination=destination_name)))
    if run.workspace_id is not None:
        unseen = unseen.filter(workspace_id=run.workspace_id)
    if action_key:
        unseen = unseen.filter(action_key=action_key)
    while True:
        with transaction.atomic(using=DB):
            rows = list(
                unseen.select_for_update(no_key=True).values_list("pk", "status")[:batch_size]
            )
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


def finding_move(
    finding: Finding, to_status: str, *, actor, event_note: str, action: str, **changes
) -> None:
    """Move a locked finding along LIFECYCLE_TRANSITIONS, with the event saying who and why."""
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


def finding_lock(finding_id: int) -> Finding:
    finding = Finding.objects.using(DB).select_for_update(no_key=True).filter(pk=finding_id).first()
    if finding is None:
        raise FindingNotFound(finding_id)
    return finding


def finding_acknowledge(*, finding_id: int, actor, note: str = "") -> Finding:
    """A person has seen the finding and owns it; the next runs keep it acknowledged while it persists."""
    with transaction.atomic(using=DB):
        finding = finding_lock(finding_id)
        finding_move(
            finding,
            FindingStatus.ACKNOWLEDGED,
            actor=actor,
            action="acknowledged",
            event_note=note,
            acknowledged_at=db_now(),
            acknowledged_by=actor,
            note=note or finding.note,
        )
    return finding


def finding_resolve(*, finding_id: int, actor, note: str) -> Finding:
    """A person says it is repaired. If the next run still sees the problem, it opens a new finding."""
    if not note.strip():
        raise NoteRequired("say what was done to resolve the finding")
    with transaction.atomic(using=DB):
        finding = finding_lock(finding_id)
        finding_move(
            finding,
            FindingStatus.RESOLVED,
            actor=actor,
            action="resolved",
            event_note=note,
            resolved_at=db_now(),
            resolved_by=actor,
            note=note,
        )
    return finding
