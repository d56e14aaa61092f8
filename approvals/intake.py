"""Intake of signed triggers: requests that other systems send, twice, late and out of order.

A trigger is verified (Standard Webhooks signature, timestamp tolerance, replay), deduplicated by its
webhook id, validated (envelope, workspace, workflow, payload under the rules in force) and applied as a
revision of the sender's request. Every outcome is a `TriggerRecord` with its reasons and the answer
sent, not an exception: accepted, duplicate, stale (recorded, ignored) or rejected at intake.

The trigger contract is in docs/intake.md.
"""

import logging
import math
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime

from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import IntegrityError, transaction
from django.db.models import Max

from approvals import services
from approvals.errors import ApprovalsError
from approvals.models import (
    Request,
    RequestReference,
    TriggerOutcome,
    TriggerRecord,
    Workspace,
    WorkspaceWorkflow,
)
from approvals.rules import known_workflows, rules_for, schema_problems
from httpapi.signatures import SignatureInvalid, secrets_in_force, verify_signature
from outbox.payloads import canonical_json, payload_hash

log = logging.getLogger(__name__)
DB = "default"
DEFAULT_WORKFLOW = "onboarding"
WEBHOOK_ID_MAX_LENGTH = 200
# A trigger that loses a race (the same webhook id, or a new reference numbered at the same time)
# is rolled back and applied again against what the winner committed.
CONTENDED_RETRIES = 3

ENVELOPE_SCHEMA = {
    "type": "object",
    "required": ["workspace_id", "reference", "revision", "payload"],
    "properties": {
        "workflow": {"type": "string", "minLength": 1, "maxLength": 40},
        "workspace_id": {"type": "integer", "minimum": 1, "maximum": 2**63 - 1},
        "reference": {"type": "string", "minLength": 1, "maxLength": 120},
        "revision": {"type": "integer", "minimum": 1, "maximum": 2_147_483_647},
        "payload": {"type": "object"},
    },
    "additionalProperties": False,
}


class TriggerSignatureRejected(ApprovalsError):
    """Missing, forged or stale signature: nothing is written."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


class TriggerReplayed(TriggerSignatureRejected):
    """The very message already received (same id, same signed timestamp) sent again."""


@dataclass(frozen=True)
class SignedMessage:
    webhook_id: str
    signed_at: datetime


@dataclass(frozen=True)
class TriggerAnswer:
    status_code: int
    body: dict
    record: TriggerRecord


def trigger_signature_verify(*, body: str, headers: Mapping[str, str]) -> SignedMessage:
    """Check the signature and its timestamp (the package's 5-minute tolerance). Writes nothing.

    During a secret rotation both INTAKE_SIGNING_SECRET and INTAKE_SIGNING_SECRET_PREVIOUS verify.
    """
    secrets = secrets_in_force(
        settings.INTAKE_SIGNING_SECRET,
        settings.INTAKE_SIGNING_SECRET_PREVIOUS,
        name="INTAKE_SIGNING_SECRET",
    )
    headers = {k.lower(): v for k, v in headers.items()}
    try:
        verify_signature(secrets=secrets, body=body, headers=headers)
    except SignatureInvalid as exc:
        raise TriggerSignatureRejected(exc.reason) from exc
    # The signature covers the timestamp to the second: the same id and second is the same message.
    signed_at = datetime.fromtimestamp(math.floor(float(headers["webhook-timestamp"])), tz=UTC)
    return SignedMessage(webhook_id=headers["webhook-id"], signed_at=signed_at)


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


@dataclass
class _Checked:
    problems: list[str]
    workflow: str = ""
    workspace_id: int | None = None
    reference: str = ""
    revision: int | None = None
    rule_version: str = ""


def _whole_number(value: object) -> int | None:
    """The value as an int when JSON gave a whole number (2 or 2.0), else None; booleans are not numbers."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    if isinstance(value, float) and not value.is_integer():
        return None
    return int(value)


def _payload_size_problems(payload: object) -> list[str]:
    """A stored payload is shown, hashed and sent on: its size is bounded, whatever the body limit."""
    if not isinstance(payload, dict):
        return []
    size = len(canonical_json(payload).encode("utf-8"))
    limit = settings.INTAKE_MAX_PAYLOAD_BYTES
    return [f"payload: {size} bytes of JSON, over the limit of {limit}"] if size > limit else []


def _workspace_problems(workspace_id: int, workflow: str | None) -> list[str]:
    """Whether the workspace exists and takes triggers of this workflow (None: the workflow is unknown)."""
    if not Workspace.objects.filter(pk=workspace_id).exists():
        return [f"workspace_id: workspace {workspace_id} does not exist"]
    if (
        workflow is not None
        and WorkspaceWorkflow.objects.filter(
            workspace_id=workspace_id, workflow=workflow, accepts_triggers=False
        ).exists()
    ):
        return [f"workspace_id: workspace {workspace_id} does not accept {workflow} requests"]
    return []


def _read_workflow(checked: _Checked, workflow: object) -> bool:
    """Record the workflow the trigger names; True when it is one this product runs."""
    if not isinstance(workflow, str):
        return False
    checked.workflow = workflow[:40]
    if workflow not in known_workflows():
        checked.problems.append(f"workflow: unknown workflow {workflow!r}")
        return False
    return True


def _check(document: dict) -> _Checked:
    """Every reason the trigger cannot be applied, with whatever it names that could be read."""
    checked = _Checked(problems=schema_problems(ENVELOPE_SCHEMA, document, root="body"))
    checked.problems.extend(_payload_size_problems(document.get("payload")))
    workflow = document.get("workflow", DEFAULT_WORKFLOW)
    workspace_id = document.get("workspace_id")
    reference = document.get("reference")
    revision = document.get("revision")
    payload = document.get("payload")
    if isinstance(reference, str):
        checked.reference = reference[:120]
    if (revision := _whole_number(revision)) is not None and 1 <= revision <= 2_147_483_647:
        checked.revision = revision
    workflow_known = _read_workflow(checked, workflow)
    if (workspace_id := _whole_number(workspace_id)) is not None and 1 <= workspace_id <= 2**63 - 1:
        checked.workspace_id = workspace_id
        checked.problems.extend(
            _workspace_problems(workspace_id, workflow if workflow_known else None)
        )
    if workflow_known and isinstance(payload, dict):
        rules = rules_for(workflow)
        checked.rule_version = rules.version
        checked.problems.extend(
            schema_problems(rules.schema, payload, root="payload", prefix="payload.")
        )
    return checked


def _apply(
    checked: _Checked, document: dict, webhook_id: str
) -> tuple[str, list[str], int, Request | None, dict]:
    """Apply a valid trigger as a revision of the sender's request. Inside the caller's transaction."""
    workspace_id, workflow, reference, revision = (
        checked.workspace_id,
        checked.workflow,
        checked.reference,
        checked.revision,
    )
    sender = _intake_user()
    why = f"trigger {webhook_id}: {reference} revision {revision}"
    ref = (
        RequestReference.objects.select_for_update()
        .filter(workspace_id=workspace_id, workflow=workflow, reference=reference)
        .first()
    )
    if ref is None:
        number = (
            Request.objects.filter(workspace_id=workspace_id, workflow=workflow).aggregate(
                n=Max("number")
            )["n"]
            or 0
        ) + 1
        RequestReference.objects.create(
            workspace_id=workspace_id,
            workflow=workflow,
            reference=reference,
            number=number,
            latest_revision=revision,
        )
        request = services.revision_create(
            workflow=workflow,
            workspace_id=workspace_id,
            number=number,
            revision=1,
            payload=document["payload"],
            requested_by=sender,
            actor=sender,
            reason=why,
        )
        return TriggerOutcome.ACCEPTED, [], 202, request, {"request": _request_summary(request)}

    current = (
        Request.objects.select_for_update(no_key=True)
        .filter(workspace_id=workspace_id, workflow=workflow, number=ref.number)
        .order_by("-revision")
        .first()
    )
    if revision <= ref.latest_revision:
        relation = "older than" if revision < ref.latest_revision else "the same as"
        reasons = [
            f"revision {revision} of {reference} is {relation} revision {ref.latest_revision}, "
            "the newest recorded; ignored"
        ]
        return (
            TriggerOutcome.STALE,
            reasons,
            202,
            None,
            {"current_request": _request_summary(current)},
        )

    request = services.revision_add_locked(
        current, payload=document["payload"], actor=sender, reason=why
    )
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
    return TriggerOutcome.ACCEPTED, reasons, 202, request, {"request": _request_summary(request)}


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
    checked = _check(document)
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


# --- Reads for the console -------------------------------------------------------------------------


def triggers_visible_to(
    user,
    *,
    reference: str = "",
    outcome: str = "",
    before: tuple[datetime, int] | None = None,
    limit: int = 50,
) -> tuple[list[TriggerRecord], bool]:
    """Triggers of the user's workspaces, newest first, one keyset page at a time (and whether more follow)."""
    from approvals.selectors import workspace_ids_for
    from lib.paging import keyset_page

    rows = TriggerRecord.objects.filter(workspace_ref__in=workspace_ids_for(user)).select_related(
        "request"
    )
    if reference:
        rows = rows.filter(reference__icontains=reference)
    if outcome:
        rows = rows.filter(outcome=outcome)
    return keyset_page(rows, after=before, size=limit, field="received_at")


def trigger_visible_to(user, pk: int) -> TriggerRecord | None:
    from approvals.selectors import workspace_ids_for

    return (
        TriggerRecord.objects.filter(pk=pk, workspace_ref__in=workspace_ids_for(user))
        .select_related("request", "duplicate_of")
        .first()
    )
