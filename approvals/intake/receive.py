"""Receiving a verified trigger: deduplicated by its webhook id, checked, and applied as a revision of the
sender's request. Every outcome is a `TriggerRecord` with its reasons and the answer sent, not an
exception: accepted, duplicate, stale (recorded, ignored) or rejected at intake."""

import logging
from dataclasses import dataclass
from typing import NamedTuple

from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import IntegrityError, transaction
from django.db.models import Max

from approvals.intake.checks import CheckedTrigger, trigger_check
from approvals.intake.signatures import SignedMessage, TriggerReplayed
from approvals.models import Request, RequestReference, TriggerOutcome, TriggerRecord
from approvals.services.requests import revision_add_locked, revision_create
from lib.databases import DB
from outbox.payloads import payload_hash

log = logging.getLogger(__name__)
# A trigger that loses a race (the same webhook id, or a new reference numbered at the same time)
# is rolled back and applied again against what the winner committed.
CONTENDED_RETRIES = 3


@dataclass(frozen=True)
class TriggerAnswer:
    status_code: int
    body: dict
    record: TriggerRecord


def _intake_user():
    """The requester recorded on requests that arrive as triggers: an account nobody can sign in with."""
    user, created = get_user_model().objects.get_or_create(
        username=settings.INTAKE_SENDER_USERNAME, defaults={"is_active": False}
    )
    if created:
        user.set_unusable_password()
        user.save(update_fields=["password"])
    return user


def _request_summary(request: Request) -> dict:
    return {
        "workspace_id": request.workspace_id,
        "workflow": request.workflow,
        "number": request.number,
        "revision": request.revision,
        "state": request.state,
        "payload_hash": request.payload_hash,
        "action_key": request.action_key,
    }


class Applied(NamedTuple):
    """What applying a valid trigger did: the record's outcome and reasons, the status answered, the revision
    written (None when stale) and what the answer says about the request."""

    outcome: str
    reasons: list[str]
    status: int
    request: Request | None
    extra: dict


def _apply(checked: CheckedTrigger, document: dict, webhook_id: str) -> Applied:
    """Apply a valid trigger as a revision of the sender's request. Inside the caller's transaction."""
    sender = _intake_user()
    why = f"trigger {webhook_id}: {checked.reference} revision {checked.revision}"
    ref = (
        RequestReference.objects.select_for_update(no_key=True)
        .filter(
            workspace_id=checked.workspace_id,
            workflow=checked.workflow,
            reference=checked.reference,
        )
        .first()
    )
    if ref is None:
        return _apply_first(checked, document, sender=sender, why=why)
    return _apply_next(checked, document, ref, sender=sender, why=why)


def _apply_first(checked: CheckedTrigger, document: dict, *, sender, why: str) -> Applied:
    """A reference not seen before: a new request, numbered after the workspace's last."""
    workspace_id, workflow = checked.workspace_id, checked.workflow
    number = (
        Request.objects.filter(workspace_id=workspace_id, workflow=workflow).aggregate(
            n=Max("number")
        )["n"]
        or 0
    ) + 1
    RequestReference.objects.create(
        workspace_id=workspace_id,
        workflow=workflow,
        reference=checked.reference,
        number=number,
        latest_revision=checked.revision,
    )
    request = revision_create(
        workflow=workflow,
        workspace_id=workspace_id,
        number=number,
        revision=1,
        payload=document["payload"],
        requested_by=sender,
        actor=sender,
        reason=why,
    )
    return Applied(
        TriggerOutcome.ACCEPTED, [], 202, request, {"request": _request_summary(request)}
    )


def _apply_next(
    checked: CheckedTrigger, document: dict, ref: RequestReference, *, sender, why: str
) -> Applied:
    """A known reference (its row locked): a newer sender revision is the request's next revision; an older
    or the same one is recorded as stale and ignored."""
    reference, revision = checked.reference, checked.revision
    current = (
        Request.objects.select_for_update(no_key=True)
        .filter(workspace_id=checked.workspace_id, workflow=checked.workflow, number=ref.number)
        .order_by("-revision")
        .first()
    )
    if revision <= ref.latest_revision:
        relation = "older than" if revision < ref.latest_revision else "the same as"
        reasons = [
            f"revision {revision} of {reference} is {relation} revision {ref.latest_revision}, "
            "the newest recorded; ignored"
        ]
        return Applied(
            TriggerOutcome.STALE,
            reasons,
            202,
            None,
            {"current_request": _request_summary(current)},
        )

    request = revision_add_locked(current, payload=document["payload"], actor=sender, reason=why)
    ref.latest_revision = revision
    ref.save(update_fields=["latest_revision"])
    reasons = []
    if current.state == "superseded":
        reasons.append(f"replaces revision {current.revision}, which was awaiting approval")
    else:
        reasons.append(
            f"revision {current.revision} is {current.state} and stays so; "
            "this revision needs its own approval"
        )
    return Applied(
        TriggerOutcome.ACCEPTED, reasons, 202, request, {"request": _request_summary(request)}
    )


def _repeat(
    original: TriggerRecord, message: SignedMessage, document: dict, document_hash: str
) -> TriggerAnswer:
    """A webhook id seen before: the original answer again, recorded as a duplicate; nothing else changes."""
    if TriggerRecord.objects.filter(
        webhook_id=message.webhook_id, signed_at=message.signed_at
    ).exists():
        raise TriggerReplayed("replayed message: this id and timestamp were already received")
    if original.document_hash != document_hash:
        reasons = [
            f"webhook-id {message.webhook_id} was already used for a different trigger "
            f"(received {original.received_at:%Y-%m-%d %H:%M:%S}); nothing changed"
        ]
        outcome, status = TriggerOutcome.REJECTED_AT_INTAKE, 409
        body = {"outcome": "conflict", "webhook_id": message.webhook_id, "reasons": reasons}
    else:
        reasons = [f"duplicate of the trigger received {original.received_at:%Y-%m-%d %H:%M:%S}"]
        outcome = TriggerOutcome.DUPLICATE
        # A sender that retries after a lost answer must read the same verdict: only a success becomes 200.
        status = 200 if original.status_code < 300 else original.status_code
        body = {
            **original.response,
            "outcome": TriggerOutcome.DUPLICATE,
            "duplicate": True,
            "original_outcome": original.outcome,
            "original_status": original.status_code,
        }
    record = TriggerRecord.objects.create(
        webhook_id=message.webhook_id,
        signed_at=message.signed_at,
        duplicate_of=original,
        workflow=original.workflow,
        workspace_ref=original.workspace_ref,
        reference=original.reference,
        sender_revision=original.sender_revision,
        document=document,
        document_hash=document_hash,
        outcome=outcome,
        reasons=reasons,
        status_code=status,
        response=body,
        rule_version=original.rule_version,
        request=original.request,
    )
    return TriggerAnswer(status_code=status, body=body, record=record)


def _receive_once(message: SignedMessage, document: dict) -> TriggerAnswer:
    document_hash = payload_hash(document)
    original = TriggerRecord.objects.filter(
        webhook_id=message.webhook_id, duplicate_of__isnull=True
    ).first()
    if original is not None:
        return _repeat(original, message, document, document_hash)
    checked = trigger_check(document)
    request = None
    if checked.problems:
        outcome, reasons, status, extra = (
            TriggerOutcome.REJECTED_AT_INTAKE,
            checked.problems,
            422,
            {},
        )
    else:
        outcome, reasons, status, request, extra = _apply(checked, document, message.webhook_id)
    body = {
        "outcome": outcome,
        "webhook_id": message.webhook_id,
        "reference": checked.reference,
        "revision": checked.revision,
        "reasons": reasons,
        **extra,
    }
    # Inserted last: a concurrent trigger with the same id waits on this row's unique index, then
    # fails, is rolled back and answered as a duplicate of this one.
    record = TriggerRecord.objects.create(
        webhook_id=message.webhook_id,
        signed_at=message.signed_at,
        workflow=checked.workflow,
        workspace_ref=checked.workspace_id,
        reference=checked.reference,
        sender_revision=checked.revision,
        document=document,
        document_hash=document_hash,
        outcome=outcome,
        reasons=reasons,
        status_code=status,
        response=body,
        rule_version=checked.rule_version,
        request=request,
    )
    return TriggerAnswer(status_code=status, body=body, record=record)


def trigger_receive(*, message: SignedMessage, document: dict) -> TriggerAnswer:
    """Record and apply one verified trigger. Raises TriggerReplayed (nothing written) for a replay."""
    for attempt in range(1, CONTENDED_RETRIES + 1):
        try:
            with transaction.atomic(using=DB):
                answer = _receive_once(message, document)
        except IntegrityError:
            if attempt == CONTENDED_RETRIES:
                raise
            continue
        log.info(
            "trigger %s for %r: %s (%s)",
            message.webhook_id,
            answer.record.reference,
            answer.record.outcome,
            answer.status_code,
        )
        return answer
    raise AssertionError("unreachable")
