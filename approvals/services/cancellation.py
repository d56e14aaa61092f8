"""Cancelling a request: whatever its state, by whoever `may_cancel` allows."""

from django.db import transaction

from approvals.errors import ApprovalDenied, InvalidPayload, RequestNotFound
from approvals.models import Request, RequestReasonCode, RequestState
from approvals.selectors import may_cancel
from approvals.services.requests import request_move
from lib.databases import DB
from outbox import services as outbox_services


def _may_cancel(actor, request: Request) -> None:
    if not may_cancel(actor, request):
        raise ApprovalDenied(
            "a request is cancelled by its requester before it is decided, or by an operator"
        )


def request_cancel(
    *, workspace_id: int, number: int, actor, reason: str, workflow: str = "onboarding"
) -> Request:
    """Cancel a request, whatever its state: before approval it is cancelled; approved with nothing delivered,
    its waiting handoffs are cancelled with it; once a step was delivered, cancelling means compensating
    (`outbox.services.instance_compensate`), which this refuses to do silently."""
    if not reason.strip():
        raise InvalidPayload(["a reason is required to cancel a request"])
    with transaction.atomic(using=DB):
        current = (
            Request.objects.select_for_update(no_key=True)
            .filter(workspace_id=workspace_id, workflow=workflow, number=number)
            .order_by("-revision")
            .first()
        )
        if current is None:
            raise RequestNotFound(f"no {workflow} request {number} in workspace {workspace_id}")
        _may_cancel(actor, current)
        code = (
            RequestReasonCode.CANCELLED_BY_REQUESTER
            if current.requested_by_id == actor.pk
            else RequestReasonCode.CANCELLED_BY_OPERATOR
        ).value
        if current.state == RequestState.APPROVED:
            outbox_services.instance_cancel(
                instance_key=current.action_key, actor=actor, reason=reason, reason_code=code
            )
        request_move(current, RequestState.CANCELLED, actor=actor, reason=reason, reason_code=code)
        return current
