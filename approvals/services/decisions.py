"""Decisions: an approver approves (and the handoff is recorded in the same transaction) or rejects exactly
the revision and payload they saw."""

from django.contrib.auth import get_user_model
from django.db import transaction
from django.db.models import Max

from approvals.errors import (
    ApprovalDenied,
    InvalidPayload,
    InvalidRequestState,
    RequestNotFound,
    StaleRevision,
)
from approvals.models import (
    Approval,
    Decision,
    Request,
    RequestReasonCode,
    RequestState,
    WorkflowMode,
    Workspace,
)
from approvals.on_call import failure_owner_id
from approvals.route_requests import (
    RouteRequest,
    frozen_requests,
    route_requests,
    route_requests_hash,
)
from approvals.rules import payload_problems, rules_for, searchable_fields, steps_of
from approvals.selectors import decider_refusal
from approvals.services.delegations import require_approver_or_delegate
from approvals.services.requests import request_move
from lib.databases import DB
from lib.request_mapping import MappingRefused
from lib.telemetry import approval_trace
from outbox import services as outbox_services
from outbox.models import Handoff


def _locked_revision(*, workspace_id: int, number: int, revision: int, workflow: str) -> Request:
    request = (
        Request.objects.select_for_update(no_key=True)
        .filter(workspace_id=workspace_id, workflow=workflow, number=number, revision=revision)
        .first()
    )
    if request is None:
        if Request.objects.filter(
            workspace_id=workspace_id, workflow=workflow, number=number
        ).exists():
            raise StaleRevision(f"request {number} has no revision {revision}")
        raise RequestNotFound(f"no {workflow} request {number} in workspace {workspace_id}")
    return request


def _require_newest(request: Request) -> None:
    newest = Request.objects.filter(
        workspace_id=request.workspace_id, workflow=request.workflow, number=request.number
    ).aggregate(n=Max("revision"))["n"]
    if newest != request.revision:
        raise StaleRevision(
            f"request {request.number} revision {request.revision} was replaced by revision {newest}"
        )


def revision_locked_for_review(
    *,
    workspace_id: int,
    number: int,
    revision: int,
    workflow: str,
    actor,
    payload_hash: str,
    as_decider: bool,
) -> Request:
    """The revision an approver acts on (decides, or corrects), locked: the newest, awaiting approval, exactly
    as shown to them, and not their own request (nor, to decide it, one they corrected)."""
    request = _locked_revision(
        workspace_id=workspace_id, number=number, revision=revision, workflow=workflow
    )
    require_approver_or_delegate(actor, request.workspace_id)
    refusal = decider_refusal(actor.pk, request)
    if refusal == "own":
        raise ApprovalDenied(
            "a requester cannot decide their own request"
            if as_decider
            else "a requester cannot correct their own request as its approver"
        )
    if as_decider and refusal == "corrected":
        raise ApprovalDenied(
            "the approver who corrected a request cannot also approve it: another approver decides"
        )
    _require_newest(request)
    if request.payload_hash != payload_hash:
        raise StaleRevision(
            f"{request} changed since it was shown: the payload hash does not match"
        )
    if request.state != RequestState.AWAITING_APPROVAL:
        raise InvalidRequestState(
            f"{request} is {request.get_state_display().lower()}, not awaiting approval"
        )
    return request


def _decide(
    *,
    workspace_id: int,
    number: int,
    revision: int,
    actor,
    payload_hash: str,
    decision: str,
    reason: str,
    workflow: str,
    requests_hash: str | None = None,
) -> tuple[Request, Approval]:
    request = revision_locked_for_review(
        workspace_id=workspace_id,
        number=number,
        revision=revision,
        workflow=workflow,
        actor=actor,
        payload_hash=payload_hash,
        as_decider=True,
    )
    rules = rules_for(workflow)
    if decision == Decision.APPROVE and (
        problems := payload_problems(workflow, request.payload, rules)
    ):
        # The rules changed since the request was validated: approving it would break the rules in force.
        raise InvalidPayload([f"under rules {rules.version}: {p}" for p in problems])
    routes = (
        _routes_as_shown(request, rules, requests_hash) if decision == Decision.APPROVE else None
    )
    approval = Approval.objects.create(
        request=request,
        revision=request.revision,
        decision=decision,
        reason=reason,
        decided_by=actor,
        payload_hash=request.payload_hash,
        rule_version=rules.version,
        requests=[route.stored() for route in routes] if routes is not None else None,
        requests_hash=route_requests_hash(routes) if routes is not None else "",
    )
    rejected = decision != Decision.APPROVE
    request_move(
        request,
        RequestState.REJECTED if rejected else RequestState.APPROVED,
        actor=actor,
        reason=reason,
        reason_code=RequestReasonCode.REJECTED_BY_APPROVER if rejected else "",
    )
    return request, approval


def _routes_as_shown(request: Request, rules, requests_hash: str | None) -> list[RouteRequest]:
    """What each routed step will send, rendered from the payload under the rules in force; StaleRevision when
    it is not what the approver was shown (`requests_hash`; None: a caller that shows none, as the API)."""
    try:
        routes = route_requests(request.payload, rules.steps)
    except MappingRefused as exc:
        raise InvalidPayload([f"under rules {rules.version}: {exc}"]) from exc
    # "": a form that showed no requests, which is what was shown when none is mapped.
    shown_none = requests_hash == "" and not routes
    if (
        requests_hash is not None
        and not shown_none
        and requests_hash != route_requests_hash(routes)
    ):
        raise StaleRevision(
            f"{request}: what each destination will receive changed since it was shown "
            f"(the rules are now {rules.version}): the requests hash does not match"
        )
    return routes


def _failure_owner(workspace: Workspace, workflow: str):
    """Who owns the handoff if it fails: the workspace's operator, else the fallback on-call."""
    owner_id = failure_owner_id(workspace.pk, workflow=workflow)
    return get_user_model().objects.filter(pk=owner_id).first() if owner_id else None


def request_approve(
    *,
    workspace_id: int,
    number: int,
    revision: int,
    actor,
    payload_hash: str,
    reason: str = "",
    workflow: str = "onboarding",
    requests_hash: str | None = None,
) -> Handoff:
    """Approve exactly the revision and payload the approver saw, and record its handoff with it.
    `requests_hash`: of the rendered requests the approver saw (`route_requests`); None where none are shown.

    The handoff is sent only when the workflow's mode sends for this workspace; otherwise it is recorded
    as observed (what would have been sent, never sent). Traced as the root of the handoff's trace."""
    with approval_trace() as traced, transaction.atomic(using=DB):
        request, approval = _decide(
            workspace_id=workspace_id,
            number=number,
            revision=revision,
            actor=actor,
            payload_hash=payload_hash,
            decision=Decision.APPROVE,
            reason=reason,
            workflow=workflow,
            requests_hash=requests_hash,
        )
        _, sends = WorkflowMode.objects.effective(workflow, request.workspace_id)
        handoff = outbox_services.handoff_record(
            workflow=workflow,
            workspace_id=request.workspace_id,
            source_ref=request.source_ref,
            source_id=request.pk,
            action_key=request.action_key,
            payload=request.payload,
            rule_version=approval.rule_version,
            owner=_failure_owner(request.workspace, workflow),
            actor=actor,
            observe_only=not sends,
            steps=steps_of(approval.rule_version),
            requests=frozen_requests(approval.requests),
            searchable=searchable_fields(approval.rule_version),
        )
        return traced(handoff)


def request_reject(
    *,
    workspace_id: int,
    number: int,
    revision: int,
    actor,
    payload_hash: str,
    reason: str,
    workflow: str = "onboarding",
) -> Request:
    if not reason.strip():
        raise InvalidPayload(["a reason is required to reject a request"])
    with transaction.atomic(using=DB):
        request, _ = _decide(
            workspace_id=workspace_id,
            number=number,
            revision=revision,
            actor=actor,
            payload_hash=payload_hash,
            decision=Decision.REJECT,
            reason=reason,
            workflow=workflow,
        )
    return request
