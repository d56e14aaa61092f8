import pytest
from django.test import Client

from approvals.services import request_approve
from outbox.destinations import InProcessDestination
from outbox.dispatcher import handoff_deliver
from outbox.models import FailureClass, Handoff, HandoffState
from tests.factories import make_request, make_user, onboarding_world


@pytest.fixture
def world(db):
    world = onboarding_world()
    # A second operator in workspace 7 (assign target) and an operator of workspace 8 only.
    from approvals.models import Role

    world["oscar"] = make_user("oscar", workspace=world["w7"], roles=(Role.OPERATOR,))
    world["otto"] = make_user("otto", workspace=world["w8"], roles=(Role.OPERATOR,))
    return world


def client_for(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


HTMX = {"HTTP_HX_REQUEST": "true"}


def approve(world, number: int = 42, workspace=None, requested_by=None, payload=None) -> Handoff:
    workspace = workspace or world["w7"]
    if number != 42 or payload is not None:
        make_request(workspace, number, requested_by or world["bob"], payload=payload)
    from approvals.models import Request

    req = Request.objects.get(workspace=workspace, number=number, revision=1)
    approver = world["alice"] if workspace.pk == 7 else world["mallory"]
    return request_approve(workspace_id=workspace.pk, number=number, revision=1, actor=approver,
                           payload_hash=req.payload_hash)


@pytest.fixture
def pending(world) -> Handoff:
    return approve(world)


@pytest.fixture
def uncertain(world) -> Handoff:
    handoff = approve(world)
    handoff_deliver(handoff_id=handoff.pk, destination=InProcessDestination(lose_ack_for={handoff.action_key}))
    handoff.refresh_from_db()
    assert handoff.state == HandoffState.UNCERTAIN
    return handoff


@pytest.fixture
def rejected(world) -> Handoff:
    """Needs attention, permanent: the receiver refuses a blank client name the source rules let through."""
    from tests.factories import ONBOARDING_PAYLOAD

    handoff = approve(world, number=50, payload={**ONBOARDING_PAYLOAD, "client_name": "   "})
    handoff_deliver(handoff_id=handoff.pk)
    handoff.refresh_from_db()
    assert handoff.state == HandoffState.NEEDS_ATTENTION
    assert handoff.failure_class == FailureClass.PERMANENT
    return handoff


@pytest.fixture
def foreign(world) -> Handoff:
    """A handoff of workspace 8, which nobody of workspace 7 may see."""
    return approve(world, number=1, workspace=world["w8"], requested_by=make_user("wendy"))
