"""The receiver's rules: one task per action key, the same answer for the same action."""

import hashlib
import json
from dataclasses import dataclass, field

from django.db import IntegrityError, transaction
from django.utils import timezone

from delivery.errors import ActionKeyConflict, InvalidTaskPayload, InvalidTaskStatus, TaskNotFound
from delivery.models import TASK_STATUS_TRANSITIONS, ReceiverTask, TaskEventKind, TaskStatus
from delivery.status_events import task_event_record

DB = "delivery"
MAX_KEY_LENGTH = 200


def payload_hash(payload: object) -> str:
    """SHA-256 of the canonical JSON (sorted keys, compact, UTF-8): part of the API contract."""
    canonical = json.dumps(payload, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class TaskOutcome:
    task: ReceiverTask
    created: bool


def task_validate(*, action_key: object, payload: object) -> None:
    """Raise InvalidTaskPayload listing every reason the receiver cannot accept this task."""
    reasons = []
    if not isinstance(action_key, str) or not action_key.strip():
        reasons.append("action_key must be a non-empty string")
    elif len(action_key) > MAX_KEY_LENGTH:
        reasons.append(f"action_key must be at most {MAX_KEY_LENGTH} characters")
    if not isinstance(payload, dict):
        reasons.append("payload must be a JSON object")
    else:
        name = payload.get("client_name")
        if not isinstance(name, str) or not name.strip():
            reasons.append("payload.client_name is required and must be a non-empty string")
        if payload.get("operation") == "send_welcome_pack" and not payload.get("contact_email"):
            reasons.append("payload.contact_email is required to send the welcome pack")
    if reasons:
        raise InvalidTaskPayload(reasons)


def _existing_or_conflict(task: ReceiverTask, digest: str) -> TaskOutcome:
    if task.payload_hash != digest:
        raise ActionKeyConflict(task.action_key, str(task.task_id))
    return TaskOutcome(task=task, created=False)


def task_create_idempotent(*, action_key: str, payload: dict) -> TaskOutcome:
    """Create the task for `action_key`, or return the one that exists for the same payload.

    A different payload under an existing key raises ActionKeyConflict and changes nothing.
    Two concurrent calls with the same key meet at the unique constraint and end the same way.
    """
    task_validate(action_key=action_key, payload=payload)
    digest = payload_hash(payload)
    existing = ReceiverTask.objects.using(DB).filter(action_key=action_key).first()
    if existing is not None:
        return _existing_or_conflict(existing, digest)
    try:
        with transaction.atomic(using=DB):
            task = ReceiverTask.objects.using(DB).create(
                action_key=action_key, payload=payload, payload_hash=digest
            )
    except IntegrityError:
        # Another request created the key between our read and our insert.
        return _existing_or_conflict(
            ReceiverTask.objects.using(DB).get(action_key=action_key), digest
        )
    return TaskOutcome(task=task, created=True)


@dataclass
class _BatchPlan:
    """Per item, the outcome known before touching the table; per key, its digest, payload and items."""

    results: list[TaskOutcome | Exception | None]
    wanted: dict[str, tuple[str, dict, list[int]]] = field(default_factory=dict)
    # Items that repeat a key of the same batch with different content: conflicts, whatever is stored.
    conflicting: set[int] = field(default_factory=set)


def _batch_plan(items: list[tuple[object, object]]) -> _BatchPlan:
    plan = _BatchPlan(results=[None] * len(items))
    for index, (action_key, payload) in enumerate(items):
        try:
            task_validate(action_key=action_key, payload=payload)
        except InvalidTaskPayload as exc:
            plan.results[index] = exc
            continue
        digest = payload_hash(payload)
        first_digest, _payload, indexes = plan.wanted.setdefault(action_key, (digest, payload, []))
        indexes.append(index)
        if first_digest != digest:
            plan.conflicting.add(index)
    return plan


def task_create_many(items: list[tuple[object, object]]) -> list[TaskOutcome | Exception]:
    """The batch form of task_create_idempotent, one outcome (or domain error) per item, in order, in
    three statements whatever the size. Call inside a transaction on the delivery database."""
    plan = _batch_plan(items)
    fresh = [
        ReceiverTask(action_key=key, payload=payload, payload_hash=digest)
        for key, (digest, payload, _indexes) in plan.wanted.items()
    ]
    # Keys that exist already (or are inserted concurrently) are skipped here, found below.
    ReceiverTask.objects.using(DB).bulk_create(fresh, ignore_conflicts=True)
    ours = {task.action_key: task.task_id for task in fresh}
    stored = {
        t.action_key: t
        for t in ReceiverTask.objects.using(DB).filter(action_key__in=list(plan.wanted))
    }
    for key, (digest, _payload, indexes) in plan.wanted.items():
        task = stored[key]
        for index in indexes:
            if task.payload_hash != digest or index in plan.conflicting:
                plan.results[index] = ActionKeyConflict(key, str(task.task_id))
            else:
                plan.results[index] = TaskOutcome(
                    task=task, created=task.task_id == ours[key] and index == indexes[0]
                )
    return plan.results


def task_get(*, action_key: str) -> ReceiverTask:
    task = ReceiverTask.objects.using(DB).filter(action_key=action_key).first()
    if task is None:
        raise TaskNotFound(action_key)
    return task


# What the people doing a task may report: a task is created open, and "open" is never a move forward.
SETTABLE_STATUSES = (TaskStatus.IN_PROGRESS, TaskStatus.DONE, TaskStatus.FAILED)


@dataclass(frozen=True)
class TaskStatusChange:
    task: ReceiverTask
    previous_status: str
    changed: bool


def task_status_set(*, action_key: str, status: object) -> TaskStatusChange:
    """Move the task's status forward (open -> in_progress -> done | failed), as the people doing it report.

    Reporting the status the task already has changes nothing and is not an error (a repeated report).
    Raises TaskNotFound for an unknown key, InvalidTaskStatus for an unknown status or a backward move.
    """
    if status not in SETTABLE_STATUSES:
        raise InvalidTaskStatus(
            "status_invalid", f"status must be one of {', '.join(SETTABLE_STATUSES)}"
        )
    while True:
        task = ReceiverTask.objects.using(DB).filter(action_key=action_key).first()
        if task is None:
            raise TaskNotFound(action_key)
        if task.status == status:
            return TaskStatusChange(task=task, previous_status=task.status, changed=False)
        if status not in TASK_STATUS_TRANSITIONS[task.status]:
            raise InvalidTaskStatus(
                "status_not_forward",
                f"a task that is {task.status} cannot become {status}: status only moves forward",
            )
        # Conditional on the status just read, so two reports racing cannot move it backwards on any
        # backend (no row lock needed, SQLite included). A lost race reads again: the status only moves
        # forward, so this ends after at most two rounds.
        if change := _status_move(task, status):
            return change


def _status_move(task: ReceiverTask, status: str) -> TaskStatusChange | None:
    """The move from the status just read, with its event in the same transaction; None when it lost."""
    now = timezone.now()
    with transaction.atomic(using=DB):
        moved = (
            ReceiverTask.objects.using(DB)
            .filter(pk=task.pk, status=task.status)
            .update(status=status, status_changed_at=now)
        )
        if not moved:
            return None
        previous, task.status, task.status_changed_at = task.status, status, now
        task_event_record(task, TaskEventKind.STATUS_CHANGED)
    return TaskStatusChange(task=task, previous_status=previous, changed=True)


def task_delete(*, action_key: str) -> ReceiverTask:
    """Delete the task of `action_key` (the receiver's people removed it), with its event in the same
    transaction, so the sender hears of it. Raises TaskNotFound."""
    with transaction.atomic(using=DB):
        task = (
            ReceiverTask.objects.using(DB).select_for_update().filter(action_key=action_key).first()
        )
        if task is None:
            raise TaskNotFound(action_key)
        task.delete(using=DB)
        task_event_record(task, TaskEventKind.DELETED)
    return task


def task_find_many(*, action_keys: list[str]) -> list[dict]:
    """The tasks of those keys that exist, as `task_list_keys` reports them (one query); a key with no task is
    simply absent."""
    rows = (
        ReceiverTask.objects.using(DB)
        .filter(action_key__in=action_keys)
        .order_by("action_key")
        .values_list("action_key", "task_id", "payload_hash", "status")
    )
    return [
        {"action_key": k, "task_id": str(t), "payload_hash": h, "status": s} for k, t, h, s in rows
    ]


def task_list_keys(*, after: str = "", limit: int = 500) -> list[dict]:
    """One page of (action_key, task_id, payload_hash, status) in action-key order, after `after`."""
    rows = (
        ReceiverTask.objects.using(DB)
        .filter(action_key__gt=after)
        .order_by("action_key")
        .values_list("action_key", "task_id", "payload_hash", "status")[:limit]
    )
    return [
        {"action_key": k, "task_id": str(t), "payload_hash": h, "status": s} for k, t, h, s in rows
    ]


def task_as_receipt(outcome: TaskOutcome) -> dict:
    return {
        "task_id": str(outcome.task.task_id),
        "action_key": outcome.task.action_key,
        "payload_hash": outcome.task.payload_hash,
        "status": outcome.task.status,
        "created": outcome.created,
    }
