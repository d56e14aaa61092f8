"""Requests and their revisions: submitting, revising (by anyone entitled, or by the requester), and the
moves of a request's state, each written to its history."""

from collections.abc import Iterable

from django.db import transaction
from django.db.models import Max

from approvals.errors import (
    ApprovalDenied,
    InvalidPayload,
    InvalidRequestState,
    RequestNotFound,
    WorkspaceNotFound,
)
from approvals.models import (
    REQUEST_FINAL_STATES,
    Request,
    RequestEvent,
    RequestReasonCode,
    RequestState,
    Role,
    Workspace,
)
from approvals.request_search import request_search_text
from approvals.rules import payload_problems, rules_for
from approvals.selectors import REQUESTER_REVISABLE_STATES
from approvals.services.memberships import require_member
from lib.databases import DB
from outbox.payloads import payload_hash


def request_move(
    request: Request, to_state: str, *, actor=None, reason: str = "", reason_code: str = ""
) -> None:
    if not request.can_move_to(to_state):
        raise InvalidRequestState(f"{request} is {request.state}; it cannot become {to_state}")
    if to_state in REQUEST_FINAL_STATES and reason_code not in RequestReasonCode.values:
        raise ValueError(f"a move to {to_state} needs its reason code (RequestReasonCode)")
    RequestEvent.objects.create(
        request=request,
        from_state=request.state,
        to_state=to_state,
        actor=actor,
        reason=f"[{reason_code}] {reason}" if reason_code else reason,
    )
    request.state = to_state
    request.reason_code = reason_code or request.reason_code
    request.save(update_fields=["state", "reason_code", "updated_at"])


def validated_payload(workflow: str, payload: object) -> dict:
    problems = payload_problems(workflow, payload)
    if problems:
        raise InvalidPayload(problems)
    return payload


def revision_create(
    *,
    workflow: str,
    workspace_id: int,
    number: int,
    revision: int,
    payload: dict,
    requested_by,
    actor,
    reason: str,
    corrected_by=None,
) -> Request:
    """A new request revision, moved received -> validated -> awaiting approval, each move in its history.

    The caller has checked the payload against the rules in force; call inside its transaction."""
    request = Request(
        workflow=workflow,
        workspace_id=workspace_id,
        number=number,
        revision=revision,
        payload=payload,
        payload_hash=payload_hash(payload),
        state=RequestState.RECEIVED,
        requested_by=requested_by,
        corrected_by=corrected_by,
    )
    request.search_text = request_search_text(request)
    request.save(force_insert=True)
    RequestEvent.objects.create(
        request=request, from_state="", to_state=request.state, actor=actor, reason=reason
    )
    request_move(
        request,
        RequestState.VALIDATED,
        actor=actor,
        reason=f"payload passes rules {rules_for(workflow).version}",
    )
    request_move(
        request,
        RequestState.AWAITING_APPROVAL,
        actor=actor,
        reason="awaiting an approver's decision",
    )
    return request


def request_submit(
    *,
    workspace_id: int,
    payload: dict,
    requested_by,
    number: int | None = None,
    workflow: str = "onboarding",
) -> Request:
    """Record a new request (revision 1) awaiting approval."""
    if not Workspace.objects.filter(pk=workspace_id).exists():
        raise WorkspaceNotFound(workspace_id)
    require_member(requested_by, workspace_id, Role.REQUESTER)
    validated_payload(workflow, payload)
    with transaction.atomic(using=DB):
        if number is None:
            number = (
                Request.objects.filter(workspace_id=workspace_id, workflow=workflow).aggregate(
                    n=Max("number")
                )["n"]
                or 0
            ) + 1
        elif Request.objects.filter(
            workspace_id=workspace_id, workflow=workflow, number=number
        ).exists():
            raise InvalidRequestState(
                f"request {number} already exists in workspace {workspace_id}"
            )
        request = revision_create(
            workflow=workflow,
            workspace_id=workspace_id,
            number=number,
            revision=1,
            payload=payload,
            requested_by=requested_by,
            actor=requested_by,
            reason="submitted",
        )
    return request


def revision_add_locked(
    current: Request, *, payload: dict, actor, reason: str = "", corrected_by=None
) -> Request:
    """The next revision after `current`, the newest revision, locked by the caller inside its transaction.

    One still undecided is superseded; a decided one (approved, rejected, cancelled) stays exactly as it
    was, with its handoff: the new revision needs its own approval and gets its own action key."""
    if current.state in (
        RequestState.RECEIVED,
        RequestState.VALIDATED,
        RequestState.AWAITING_APPROVAL,
    ):
        request_move(
            current,
            RequestState.SUPERSEDED,
            actor=actor,
            reason=reason or "replaced by a newer revision",
            reason_code=RequestReasonCode.SUPERSEDED_BY_REVISION,
        )
    return revision_create(
        workflow=current.workflow,
        workspace_id=current.workspace_id,
        number=current.number,
        revision=current.revision + 1,
        payload=payload,
        requested_by=current.requested_by,
        actor=actor,
        reason=reason or f"revision {current.revision + 1}",
        corrected_by=corrected_by,
    )


def request_revise(
    *,
    workspace_id: int,
    number: int,
    payload: dict,
    actor,
    reason: str = "",
    workflow: str = "onboarding",
) -> Request:
    """A new revision of a request. One awaiting approval is replaced; a decided one stays as it was."""
    validated_payload(workflow, payload)
    with transaction.atomic(using=DB):
        current = (
            Request.objects.select_for_update(no_key=True)
            .filter(workspace_id=workspace_id, workflow=workflow, number=number)
            .order_by("-revision")
            .first()
        )
        if current is None:
            raise RequestNotFound(f"no {workflow} request {number} in workspace {workspace_id}")
        return revision_add_locked(current, payload=payload, actor=actor, reason=reason)


def request_revise_by_requester(
    *,
    workspace_id: int,
    number: int,
    payload: dict,
    actor,
    reason: str = "",
    keep_if_missing: Iterable[str] = (),
    workflow: str = "onboarding",
) -> Request:
    """The requester's own change to their request: a new revision that needs a new approval.

    Only the requester who submitted it, still a requester of the workspace, may revise it, and only while
    nothing was handed off for it: an approved request is changed by an operator's correction. Fields named in
    `keep_if_missing` (shown hidden, e.g. an e-mail address) keep their current value unless given."""
    require_member(actor, workspace_id, Role.REQUESTER)
    with transaction.atomic(using=DB):
        # Locked, so that an approval cannot slip in between this check and the new revision.
        current = (
            Request.objects.select_for_update(no_key=True)
            .filter(workspace_id=workspace_id, workflow=workflow, number=number)
            .order_by("-revision")
            .first()
        )
        if current is None:
            raise RequestNotFound(f"no {workflow} request {number} in workspace {workspace_id}")
        if current.requested_by_id != actor.pk:
            raise ApprovalDenied(
                f"request {number} was submitted by someone else; only its requester revises it"
            )
        if current.state not in REQUESTER_REVISABLE_STATES:
            raise InvalidRequestState(
                f"request {number} is {current.get_state_display().lower()}; "
                "only a request awaiting approval or rejected can be revised"
            )
        kept = {
            k: current.payload[k]
            for k in keep_if_missing
            if k in current.payload and k not in payload
        }
        return request_revise(
            workspace_id=workspace_id,
            number=number,
            payload={**payload, **kept},
            actor=actor,
            reason=reason or f"revised by {actor}",
            workflow=workflow,
        )
