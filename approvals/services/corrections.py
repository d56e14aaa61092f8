"""Corrections: an operator corrects a handoff that needs attention, an approver sends a request back
changed. Either way a new revision that needs a new approval."""

from django.db import transaction

from approvals.errors import InvalidPayload, InvalidRequestState, RequestNotFound
from approvals.models import Request, RequestReasonCode, RequestState, Role
from approvals.selectors import approver_correctable, correction_fields
from approvals.services.decisions import revision_locked_for_review
from approvals.services.memberships import require_member
from approvals.services.requests import (
    request_move,
    request_revise,
    revision_add_locked,
    validated_payload,
)
from lib.databases import DB
from outbox.errors import InvalidTransition
from outbox.models import Handoff
from outbox.services.corrections import handoff_supersede_corrected
from outbox.steps import base_payload


def _corrected_payload(handoff: Handoff, edits: dict[str, str]) -> dict:
    """The approved payload with the operator's edits: a sensitive field shown blank and left blank keeps
    its value (nobody retypes a secret they cannot see), a missing field left blank stays missing; fields
    not offered for editing are kept. A step's `operation` belongs to the workflow, not to the request."""
    payload = base_payload(handoff.payload)
    for field in correction_fields(handoff):
        value = edits.get(field["name"])
        if value is None or ((field["sensitive"] or field["missing"]) and value == ""):
            continue
        payload[field["name"]] = value
    return payload


def handoff_correct(*, handoff_id: int, actor, edits: dict[str, str], reason: str) -> Request:
    """Correct a handoff that needs attention: a new request revision (new approval, new action key);
    the old handoff becomes superseded and its request revision too. The state is checked under the lock."""
    handoff = Handoff.objects.filter(pk=handoff_id).first()
    if handoff is None:
        raise RequestNotFound(f"no handoff {handoff_id}")
    require_member(actor, handoff.workspace_id, Role.OPERATOR)
    if not reason.strip():
        raise InvalidPayload(["a reason is required to correct a handoff"])
    if not handoff.correctable_alone:
        raise InvalidRequestState(
            f"{handoff.action_key} is a later step of workflow {handoff.instance_key}, whose earlier steps were "
            "delivered: a corrected revision would run them again under new keys. Compensate the workflow "
            "instead, then submit a new request"
        )
    payload = _corrected_payload(handoff, edits)
    validated_payload(handoff.workflow, payload)
    with transaction.atomic(using=DB):
        old = Request.objects.select_for_update(no_key=True).get(pk=handoff.source_id)
        try:
            handoff_supersede_corrected(handoff_id=handoff.pk, actor=actor, reason=reason)
        except InvalidTransition as exc:
            raise InvalidRequestState(
                f"{handoff.action_key} is {exc.from_state}; only a handoff that needs "
                "attention can be corrected"
            ) from exc
        request_move(
            old,
            RequestState.SUPERSEDED,
            actor=actor,
            reason=f"corrected after handoff failure: {reason}",
            reason_code=RequestReasonCode.SUPERSEDED_BY_CORRECTION,
        )
        return request_revise(
            workspace_id=old.workspace_id,
            number=old.number,
            payload=payload,
            actor=actor,
            reason=f"correction of revision {old.revision}: {reason}",
            workflow=old.workflow,
        )


def request_correct_by_approver(
    *,
    workspace_id: int,
    number: int,
    revision: int,
    actor,
    payload_hash: str,
    edits: dict[str, str],
    reason: str,
    workflow: str = "onboarding",
) -> Request:
    """An approver sends the request back changed: a new revision with the approver's change and reason,
    which needs a fresh approval by another approver (the corrector may not approve it)."""
    if not reason.strip():
        raise InvalidPayload(["a reason is required to correct a request"])
    with transaction.atomic(using=DB):
        current = revision_locked_for_review(
            workspace_id=workspace_id,
            number=number,
            revision=revision,
            workflow=workflow,
            actor=actor,
            payload_hash=payload_hash,
            as_decider=False,
        )
        offered = approver_correctable(current.payload)
        if not_offered := sorted(set(edits) - set(offered)):
            raise InvalidPayload(
                [
                    f"{name} cannot be corrected here; the fields offered are "
                    f"{', '.join(sorted(offered)) or 'none'}"
                    for name in not_offered
                ]
            )
        payload = validated_payload(
            workflow, {**current.payload, **{k: v for k, v in edits.items() if v != ""}}
        )
        return revision_add_locked(
            current,
            payload=payload,
            actor=actor,
            corrected_by=actor,
            reason=f"corrected by approver {actor}: {reason}",
        )
