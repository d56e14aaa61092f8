"""Writes of the source application: requests, revisions and decisions.

An approval writes the decision, the request state and the outbox row in one transaction.
"""

from django.db import transaction
from django.db.models import Max

from approvals.errors import (
    ApprovalDenied,
    InvalidPayload,
    InvalidRequestState,
    RequestNotFound,
    StaleRevision,
    WorkspaceNotFound,
)
from approvals.models import (
    Approval,
    Decision,
    Membership,
    Request,
    RequestEvent,
    RequestState,
    Role,
    Workspace,
)
from approvals.rules import payload_problems, rules_for
from outbox import services as outbox_services
from outbox.models import Handoff, HandoffState
from outbox.payloads import payload_hash

DB = "default"


def _move(request: Request, to_state: str, *, actor=None, reason: str = "") -> None:
    if not request.can_move_to(to_state):
        raise InvalidRequestState(f"{request} is {request.state}; it cannot become {to_state}")
    RequestEvent.objects.create(
        request=request, from_state=request.state, to_state=to_state, actor=actor, reason=reason
    )
    request.state = to_state
    request.save(update_fields=["state", "updated_at"])


def _validated_payload(workflow: str, payload: object) -> dict:
    problems = payload_problems(workflow, payload)
    if problems:
        raise InvalidPayload(problems)
    return payload


def _require_member(user, workspace_id: int, role: str) -> None:
    if not Membership.objects.filter(user=user, workspace_id=workspace_id, role=role).exists():
        raise ApprovalDenied(f"{user} is not {role} in workspace {workspace_id}")


def request_submit(*, workspace_id: int, payload: dict, requested_by, number: int | None = None,
                   workflow: str = "onboarding") -> Request:
    """Record a new request (revision 1) awaiting approval."""
    if not Workspace.objects.filter(pk=workspace_id).exists():
        raise WorkspaceNotFound(workspace_id)
    _require_member(requested_by, workspace_id, Role.REQUESTER)
    _validated_payload(workflow, payload)
    with transaction.atomic(using=DB):
        if number is None:
            number = (Request.objects.filter(workspace_id=workspace_id, workflow=workflow)
                      .aggregate(n=Max("number"))["n"] or 0) + 1
        elif Request.objects.filter(workspace_id=workspace_id, workflow=workflow, number=number).exists():
            raise InvalidRequestState(f"request {number} already exists in workspace {workspace_id}")
        request = Request.objects.create(
            workflow=workflow, workspace_id=workspace_id, number=number, revision=1, payload=payload,
            payload_hash=payload_hash(payload), state=RequestState.AWAITING_APPROVAL, requested_by=requested_by,
        )
        RequestEvent.objects.create(request=request, from_state="", to_state=request.state, actor=requested_by,
                                    reason="submitted")
    return request


def _locked_revision(*, workspace_id: int, number: int, revision: int, workflow: str) -> Request:
    request = (
        Request.objects.select_for_update(no_key=True)
        .filter(workspace_id=workspace_id, workflow=workflow, number=number, revision=revision)
        .first()
    )
    if request is None:
        if Request.objects.filter(workspace_id=workspace_id, workflow=workflow, number=number).exists():
            raise StaleRevision(f"request {number} has no revision {revision}")
        raise RequestNotFound(f"no {workflow} request {number} in workspace {workspace_id}")
    return request


def _require_newest(request: Request) -> None:
    newest = (Request.objects.filter(workspace_id=request.workspace_id, workflow=request.workflow,
                                     number=request.number).aggregate(n=Max("revision"))["n"])
    if newest != request.revision:
        raise StaleRevision(f"request {request.number} revision {request.revision} was replaced by revision {newest}")


def _decide(*, workspace_id: int, number: int, revision: int, actor, payload_hash: str, decision: str,
            reason: str, workflow: str) -> tuple[Request, Approval]:
    request = _locked_revision(workspace_id=workspace_id, number=number, revision=revision, workflow=workflow)
    _require_member(actor, request.workspace_id, Role.APPROVER)
    if request.requested_by_id == actor.pk:
        raise ApprovalDenied("a requester cannot decide their own request")
    _require_newest(request)
    if request.payload_hash != payload_hash:
        raise StaleRevision(f"{request} changed since it was shown: the payload hash does not match")
    if request.state != RequestState.AWAITING_APPROVAL:
        raise InvalidRequestState(f"{request} is {request.get_state_display().lower()}, not awaiting approval")
    approval = Approval.objects.create(
        request=request, revision=request.revision, decision=decision, reason=reason, decided_by=actor,
        payload_hash=request.payload_hash, rule_version=rules_for(workflow).version,
    )
    _move(request, RequestState.APPROVED if decision == Decision.APPROVE else RequestState.REJECTED,
          actor=actor, reason=reason)
    return request, approval


def _on_call_owner(workspace: Workspace):
    if workspace.on_call_id:
        return workspace.on_call
    membership = (Membership.objects.filter(workspace=workspace, role=Role.OPERATOR)
                  .select_related("user").order_by("id").first())
    return membership.user if membership else None


def request_approve(*, workspace_id: int, number: int, revision: int, actor, payload_hash: str,
                    reason: str = "", workflow: str = "onboarding") -> Handoff:
    """Approve exactly the revision and payload the approver saw, and record its handoff with it."""
    with transaction.atomic(using=DB):
        request, approval = _decide(
            workspace_id=workspace_id, number=number, revision=revision, actor=actor, payload_hash=payload_hash,
            decision=Decision.APPROVE, reason=reason, workflow=workflow,
        )
        return outbox_services.handoff_record(
            workflow=workflow,
            workspace_id=request.workspace_id,
            source_ref=f"request {request.number} revision {request.revision}",
            source_id=request.pk,
            action_key=request.action_key,
            payload=request.payload,
            rule_version=approval.rule_version,
            owner=_on_call_owner(request.workspace),
            actor=actor,
        )


def request_reject(*, workspace_id: int, number: int, revision: int, actor, payload_hash: str, reason: str,
                   workflow: str = "onboarding") -> Request:
    if not reason.strip():
        raise InvalidPayload(["a reason is required to reject a request"])
    with transaction.atomic(using=DB):
        request, _ = _decide(
            workspace_id=workspace_id, number=number, revision=revision, actor=actor, payload_hash=payload_hash,
            decision=Decision.REJECT, reason=reason, workflow=workflow,
        )
    return request


def request_revise(*, workspace_id: int, number: int, payload: dict, actor, reason: str = "",
                   workflow: str = "onboarding") -> Request:
    """A new revision of a request. One awaiting approval is replaced; a decided one stays as it was."""
    _validated_payload(workflow, payload)
    with transaction.atomic(using=DB):
        current = (Request.objects.select_for_update(no_key=True)
                   .filter(workspace_id=workspace_id, workflow=workflow, number=number)
                   .order_by("-revision").first())
        if current is None:
            raise RequestNotFound(f"no {workflow} request {number} in workspace {workspace_id}")
        if current.state in (RequestState.RECEIVED, RequestState.VALIDATED, RequestState.AWAITING_APPROVAL):
            _move(current, RequestState.SUPERSEDED, actor=actor, reason=reason or "replaced by a newer revision")
        revision = Request.objects.create(
            workflow=workflow, workspace_id=workspace_id, number=number, revision=current.revision + 1,
            payload=payload, payload_hash=payload_hash(payload), state=RequestState.AWAITING_APPROVAL,
            requested_by=current.requested_by,
        )
        RequestEvent.objects.create(request=revision, from_state="", to_state=revision.state, actor=actor,
                                    reason=reason or f"revision {revision.revision}")
    return revision


def handoff_correct(*, handoff_id: int, actor, payload: dict, reason: str) -> Request:
    """Correct a handoff that needs attention: a new request revision (new approval, new action key);
    the old handoff becomes superseded and its request revision too."""
    handoff = Handoff.objects.filter(pk=handoff_id).first()
    if handoff is None:
        raise RequestNotFound(f"no handoff {handoff_id}")
    _require_member(actor, handoff.workspace_id, Role.OPERATOR)
    if handoff.state != HandoffState.NEEDS_ATTENTION:
        raise InvalidRequestState(f"{handoff.action_key} is {handoff.state}; only a handoff that needs attention "
                                  "can be corrected")
    if not reason.strip():
        raise InvalidPayload(["a reason is required to correct a handoff"])
    _validated_payload(handoff.workflow, payload)
    with transaction.atomic(using=DB):
        old = Request.objects.select_for_update(no_key=True).get(pk=handoff.source_id)
        outbox_services.handoff_supersede(handoff_id=handoff.pk, actor=actor, reason=f"corrected: {reason}")
        _move(old, RequestState.SUPERSEDED, actor=actor, reason=f"corrected after handoff failure: {reason}")
        return request_revise(workspace_id=old.workspace_id, number=old.number, payload=payload, actor=actor,
                              reason=f"correction of revision {old.revision}: {reason}", workflow=old.workflow)
