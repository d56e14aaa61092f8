"""A destination's status event about a task, recorded on its handoff: the work status it reports, or that
the task was deleted, with when and through what.

Deduplicated by the event's webhook-id (one `StatusEvent` row per destination and id, inserted first, so a
repeat sent concurrently waits for the first and is then answered as a repeat) and safe out of order: the
receiver numbers its events (`sequence`, growing per task), and an event numbered at or below the newest
one applied is kept as `stale` and changes nothing. Not a state transition: the handoff keeps its state;
its history says what the receiver said.

An event must name the task the receiver gave for the key (the handoff's `destination_id`): one naming
another task speaks for a task the receiver never gave this handoff, and is refused (`StatusEventForged`,
nothing written). While no task id is known yet (the receiver's answer was lost), the event is taken.
"""

from dataclasses import dataclass
from datetime import datetime

from django.db import IntegrityError, transaction

from lib.databases import DB
from outbox.clock import db_now
from outbox.errors import OutboxError
from outbox.models import Handoff, HandoffState, StatusEvent, StatusEventResult
from outbox.models.states import WORK_STATUSES
from outbox.services.transitions import handoff_lock, handoff_transition
from outbox.services.work_status import WORK_REPLACES

S = HandoffState
R = StatusEventResult
TASK_DELETED = "task.deleted"
STATUS_CHANGED = "task.status_changed"
EVENT_KINDS = (STATUS_CHANGED, TASK_DELETED)


class StatusEventForged(OutboxError):
    """The event names a task the receiver never gave the key's handoff; the message says which."""


@dataclass(frozen=True)
class ReceiverStatement:
    """What one status event says, as read from its signed body."""

    kind: str
    action_key: str
    task_id: str
    status: str
    sequence: int
    occurred_at: datetime
    # A pulled read (`work_pull.py`), not an event the receiver sent: what was asked and what it answered,
    # in words ("GET /v1/accounts/acc_1: status 'active'"). "" for a status event.
    read: str = ""


@dataclass(frozen=True)
class StatusEventOutcome:
    event: StatusEvent
    repeated: bool

    @property
    def handoff_id(self) -> int | None:
        return self.event.handoff_id if self.event.result == R.APPLIED else None


def _changes(statement: ReceiverStatement, handoff: Handoff, *, source: str) -> dict:
    changes = {
        "receiver_event_sequence": statement.sequence,
        "task_checked_at": db_now(),
        "task_checked_by": source,
        "task_seen": statement.kind != TASK_DELETED,
    }
    if statement.read:
        # A read says when the work was last asked about, whatever it answered.
        changes["work_checked_at"] = changes["task_checked_at"]
    if (
        statement.kind != STATUS_CHANGED
        or handoff.state != S.DELIVERED
        or statement.status not in WORK_STATUSES
    ):
        return changes
    # A status earlier than the stored one (stored by a run that read the task later) is older news.
    replaces = WORK_REPLACES[statement.status]
    if handoff.work_status in replaces:
        changes.update(work_status=statement.status, work_checked_at=changes["task_checked_at"])
    # The receiver's own time of a status event; a read has none (`work_checked_at` says when it was read).
    if handoff.work_status in (*replaces, statement.status) and not statement.read:
        changes["work_reported_at"] = statement.occurred_at
    return changes


def _said(statement: ReceiverStatement, destination: str) -> str:
    if statement.read:
        meaning = (
            f"the work is {statement.status.replace('_', ' ')}"
            if statement.status
            else "a value its configuration does not name: the work is unknown"
        )
        if statement.kind == TASK_DELETED:
            meaning = f"it has no task {statement.task_id} any more"
        return f"{destination} answered {statement.read}: {meaning}"
    at = f"{statement.occurred_at:%Y-%m-%d %H:%M:%S} UTC, its time"
    if statement.kind == TASK_DELETED:
        return f"the receiver deleted task {statement.task_id} ({at}, event {statement.sequence})"
    return (
        f"the receiver reports the work {statement.status.replace('_', ' ')} on task "
        f"{statement.task_id} ({at}, event {statement.sequence})"
    )


def _apply(statement: ReceiverStatement, *, destination: str) -> tuple[str, int | None]:
    """Lock the key's handoff and apply the statement unless a newer one is recorded; (result, handoff id)."""
    found = (
        Handoff.objects.using(DB)
        .filter(action_key=statement.action_key, destination=destination)
        .values_list("pk", "destination_id")
        .first()
    )
    if found is None:
        return R.UNKNOWN_KEY, None
    handoff_id, task_id = found
    if task_id and task_id != statement.task_id:
        raise StatusEventForged(
            f"the event names task {statement.task_id} for {statement.action_key}, but {destination} "
            f"gave that handoff task {task_id}, not {statement.task_id}"
        )
    handoff = handoff_lock(handoff_id)
    newest = handoff.receiver_event_sequence
    if newest is not None and statement.sequence <= newest:
        return R.STALE, handoff_id
    source = f"{'work status read' if statement.read else 'status event'} from {destination}"
    changes = _changes(statement, handoff, source=source)
    handoff_transition(
        handoff,
        handoff.state,
        actor_label=f"receiver {destination}",
        action="receiver_event",
        reason=_said(statement, destination),
        **changes,
    )
    return R.APPLIED, handoff_id


def handoff_record_status_event(
    *, destination: str, webhook_id: str, statement: ReceiverStatement
) -> StatusEventOutcome:
    """Record one status event of `destination` and apply it to the handoff of its key, in one transaction.

    The same webhook-id again returns the first recording (`repeated`) and changes nothing. Raises
    StatusEventForged (nothing written) for an event naming a task the receiver never gave the handoff.
    """
    with transaction.atomic(using=DB):
        try:
            with transaction.atomic(using=DB):
                event = StatusEvent.objects.using(DB).create(
                    destination=destination,
                    webhook_id=webhook_id,
                    kind=statement.kind,
                    action_key=statement.action_key,
                    task_id=statement.task_id,
                    status=statement.status,
                    sequence=statement.sequence,
                    occurred_at=statement.occurred_at,
                    result=R.STALE,
                )
        except IntegrityError:
            first = StatusEvent.objects.using(DB).get(
                destination=destination, webhook_id=webhook_id
            )
            return StatusEventOutcome(event=first, repeated=True)
        event.result, event.handoff_id = _apply(statement, destination=destination)
        event.save(using=DB, update_fields=["result", "handoff_id"])
    return StatusEventOutcome(event=event, repeated=False)


def handoffs_note_receiver_answer(*, ids: list[int], found: bool, source: str) -> int:
    """Record that the receiver, asked by `source` (a person's check, a reconciliation run), has (found) or
    has no task for these handoffs' keys. Evidence only: no state moves, no history of its own."""
    if not ids:
        return 0
    return (
        Handoff.objects.using(DB)
        .filter(pk__in=ids)
        .update(task_seen=found, task_checked_at=db_now(), task_checked_by=source[:120])
    )
