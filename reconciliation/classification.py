"""What is wrong with one key, given what each side says about it: pure rules, no query, no write.

A problem carries the evidence of both sides; the services record it as a finding. The fast check
(`may_have_problems`) is what every key of a run gets; a key that fails it is classified in full.
"""

import hashlib
import json
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings

from lib.querystring import id_or_none
from outbox.destinations import RemoteTask
from outbox.models import OPEN_STATES, HandoffState
from outbox.models.states import WORK_FAILED, WORK_UNFINISHED
from reconciliation.merge import SourceKey, SourceRow, reports_work, work_problem
from reconciliation.models import FindingKind

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


def iso(value: datetime | None) -> str | None:
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
        "created_at": iso(row.created_at),
        "delivered_at": iso(row.delivered_at),
        "sla_due_at": iso(row.sla_due_at),
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


def stuck_before(now: datetime) -> datetime:
    """In flight or uncertain since before this (or due since before it), a handoff is stuck (HANDOFF_STUCK_MINUTES)."""
    return now - timedelta(minutes=settings.HANDOFF_STUCK_MINUTES)


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


def key_parts(action_key: str) -> tuple[str, int | None]:
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
    workflow, workspace = key_parts(action_key)
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


def in_agreement(src: SourceKey, task: RemoteTask) -> bool:
    """The common key, told in one check: the same delivered handoff on both sides, its work status already
    stored and no problem with it. Nothing to classify (`may_have_problems` is False) and nothing to write
    (`work_status_changed` is False); any other key takes those two checks."""
    return (
        src.state == S.DELIVERED
        and not src.stuck
        and task.payload_hash == src.payload_hash
        and task.task_id == src.destination_id
        and task.status == src.work_status
        # `work_problem`, spelled out: this check runs once a key.
        and task.status != WORK_FAILED
        and not (src.work_late and task.status in WORK_UNFINISHED)
    )


def _problem(kind: str, action_key: str, source: dict, receiver: dict, **extra) -> Problem:
    return Problem(kind=kind, action_key=action_key, source=source, receiver=receiver, **extra)


def unconfirmed(problem: Problem, why: str) -> Problem:
    """The problem as seen, marked as not confirmed by a second look at the receiver, and why."""
    return Problem(
        **{
            **problem.__dict__,
            "receiver": {**problem.receiver, "confirmed": False, "not_confirmed": why},
        }
    )


def facts_fingerprint(source: dict, receiver: dict) -> str:
    """The facts of a problem a repair accounts for: what each side holds, not when it was looked at."""
    facts = {
        "source": {name: source.get(name) for name in ("state", "payload_hash", "destination_id")},
        "receiver": {name: receiver.get(name) for name in ("found", "task_id", "payload_hash")},
    }
    return hashlib.sha256(json.dumps(facts, sort_keys=True).encode()).hexdigest()
