"""Handoffs made the way the product makes them: approved through `request_approve`, recorded through
`handoff_record`, delivered through the in-process destination. For a row in a given state without the
path that leads there, use `tests.factories.HandoffFactory`."""

from approvals.models import Request
from approvals.services import request_approve
from outbox.destinations import InProcessDestination
from outbox.dispatch.dispatcher import handoff_deliver
from outbox.models import Handoff
from outbox.services import handoff_record
from tests.factories import ONBOARDING_PAYLOAD, make_request


def record(
    number: int,
    *,
    workspace_id: int = 7,
    payload: dict | None = None,
    owner=None,
    rule_version: str = "onboarding-v1",
) -> Handoff:
    """The pending handoff of request `number` revision 1, recorded with its event as an approval records it."""
    return handoff_record(
        workflow="onboarding",
        workspace_id=workspace_id,
        source_ref=f"request {number} revision 1",
        source_id=number,
        action_key=f"onboarding:{workspace_id}:{number}:1",
        payload=dict(ONBOARDING_PAYLOAD if payload is None else payload),
        rule_version=rule_version,
        owner=owner,
    )


def deliver(handoff: Handoff) -> Handoff:
    """Deliver through the in-process receiver; the handoff as stored afterwards."""
    state = handoff_deliver(handoff_id=handoff.pk, destination=InProcessDestination())
    assert state == "delivered"
    return Handoff.objects.get(pk=handoff.pk)


def approve(world, number: int = 42, workspace=None, requested_by=None, payload=None) -> Handoff:
    """Approve request `number` revision 1 of `world` (submitted first unless it is request 42 as is)."""
    workspace = workspace or world["w7"]
    if number != 42 or payload is not None:
        make_request(workspace, number, requested_by or world["bob"], payload=payload)
    req = Request.objects.get(workspace=workspace, number=number, revision=1)
    approver = world["alice"] if workspace.pk == 7 else world["mallory"]
    return request_approve(
        workspace_id=workspace.pk,
        number=number,
        revision=1,
        actor=approver,
        payload_hash=req.payload_hash,
    )
