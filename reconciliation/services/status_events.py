"""Intake of a destination's signed status events: the receiver tells us a task's work moved or the task was
deleted, and we know at once instead of at the next reconciliation run.

The event is read (`statement_from`: every reason it cannot be used, nothing written), recorded on its
handoff by the outbox (`handoff_record_status_event`: deduplicated by webhook-id, newest by sequence), and
when it tells of a problem (the task deleted, the work failed) the key is checked with the same rules as a
run, with the event as the receiver's answer, so the finding is open the moment the event arrives. The
periodic run stays the backstop for events lost and for receivers that send none.

The contract is in docs/reconciliation.md ("Status events").
"""

from dataclasses import dataclass
from datetime import datetime

from lib.databases import DB
from lib.moments import BadMoment, parse_moment
from outbox.destinations import RemoteTask
from outbox.models import Handoff
from outbox.models.states import WORK_FAILED, WORK_STATUSES
from outbox.services.status_events import (
    EVENT_KINDS,
    STATUS_CHANGED,
    TASK_DELETED,
    ReceiverStatement,
    StatusEventForged,
    handoff_record_status_event,
)
from reconciliation.models import SecurityEventKind
from reconciliation.security_events import security_event_record
from reconciliation.services.key_check import key_check_record

MAX_KEY_LENGTH = 200
MAX_TASK_ID_LENGTH = 120


class StatusEventInvalid(Exception):
    """The event cannot be used as it is; `reasons` says why, each one a sentence. Nothing was written."""

    def __init__(self, reasons: list[str]):
        super().__init__("; ".join(reasons))
        self.reasons = reasons


def _text(data: dict, name: str, limit: int, reasons: list[str]) -> str:
    value = data.get(name)
    if not isinstance(value, str) or not value.strip() or len(value) > limit:
        reasons.append(f"data.{name} must be a non-empty string of at most {limit} characters")
        return ""
    return value


def _moment(value: object, reasons: list[str]) -> datetime | None:
    field = "data.occurred_at"
    try:
        if not isinstance(value, str):
            raise BadMoment(f"{field}: must be an ISO 8601 time with its offset")
        return parse_moment(value, field=field, offset_required=True)
    except BadMoment as exc:
        reasons.append(str(exc))
        return None


def _sequence(value: object, reasons: list[str]) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 < value < 2**63:
        reasons.append("data.sequence must be a positive whole number")
        return 0
    return value


def statement_from(document: dict) -> ReceiverStatement:
    """What the event says. Raises StatusEventInvalid listing every reason it cannot be used."""
    reasons: list[str] = []
    kind, data = document.get("type"), document.get("data")
    if kind not in EVENT_KINDS:
        reasons.append(f"type must be one of {', '.join(EVENT_KINDS)}")
    if not isinstance(data, dict):
        raise StatusEventInvalid([*reasons, "data must be a JSON object"])
    status = data.get("status", "")
    if kind == STATUS_CHANGED and status not in WORK_STATUSES:
        reasons.append(f"data.status must be one of {', '.join(WORK_STATUSES)}")
    statement = ReceiverStatement(
        kind=kind,
        action_key=_text(data, "action_key", MAX_KEY_LENGTH, reasons),
        task_id=_text(data, "task_id", MAX_TASK_ID_LENGTH, reasons),
        status=status if kind == STATUS_CHANGED else "",
        sequence=_sequence(data.get("sequence"), reasons),
        occurred_at=_moment(data.get("occurred_at"), reasons),
    )
    payload_hash = data.get("payload_hash", "")
    if not isinstance(payload_hash, str) or len(payload_hash) > 64:
        reasons.append("data.payload_hash must be a string of at most 64 characters")
    if "\x00" in statement.action_key + statement.task_id:
        reasons.append("data.action_key and data.task_id must not contain NUL")
    if reasons:
        raise StatusEventInvalid(reasons)
    return statement


@dataclass(frozen=True)
class StatusEventAnswer:
    """What the endpoint answers: the event's result here, and whether it was a repeat."""

    result: str
    repeated: bool
    finding_kinds: tuple[str, ...] = ()

    def as_dict(self) -> dict:
        return {
            "result": self.result,
            "repeated": self.repeated,
            "findings": list(self.finding_kinds),
        }


def _receiver_answer(statement: ReceiverStatement, payload_hash: str) -> RemoteTask | None:
    if statement.kind == TASK_DELETED:
        return None
    return RemoteTask(
        action_key=statement.action_key,
        task_id=statement.task_id,
        payload_hash=payload_hash,
        status=statement.status,
    )


def status_event_receive(*, destination: str, webhook_id: str, document: dict) -> StatusEventAnswer:
    """Record one verified status event of `destination`, and check its key at once when it tells of a
    problem. Raises StatusEventInvalid (nothing written) for an event that cannot be used, and
    StatusEventForged for one naming a task the receiver never gave: recorded as a security event, which
    pages above a rate as a refused signature does."""
    statement = statement_from(document)
    try:
        outcome = handoff_record_status_event(
            destination=destination, webhook_id=webhook_id, statement=statement
        )
    except StatusEventForged as forged:
        security_event_record(
            kind=SecurityEventKind.SIGNATURE_REJECTED,
            source="status_events",
            detail=f"status event of {destination} about a task never given: {forged}",
        )
        raise
    answer = StatusEventAnswer(result=outcome.event.result, repeated=outcome.repeated)
    payload_hash = document["data"].get("payload_hash", "")
    # A failed task is compared as a run would compare it only when the event names its content.
    told_of_problem = statement.kind == TASK_DELETED or (
        statement.status == WORK_FAILED and payload_hash
    )
    if outcome.repeated or outcome.handoff_id is None or not told_of_problem:
        return answer
    handoff = Handoff.objects.using(DB).get(pk=outcome.handoff_id)
    check = key_check_record(
        handoff=handoff,
        task=_receiver_answer(statement, payload_hash),
        error="",
        trigger="status_event",
        source=f"status event from {destination}",
    )
    return StatusEventAnswer(result=answer.result, repeated=False, finding_kinds=check.problems)
