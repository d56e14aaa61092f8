import pytest

from approvals.models import Role
from outbox.destinations import InProcessDestination
from outbox.dispatch.dispatcher import handoff_deliver
from outbox.models import FailureClass, Handoff, HandoffState
from tests.builders import approve
from tests.factories import ONBOARDING_PAYLOAD, make_user, onboarding_world


@pytest.fixture
def world(db):
    world = onboarding_world()
    # A second operator in workspace 7 (assign target) and an operator of workspace 8 only.
    world["oscar"] = make_user("oscar", workspace=world["w7"], roles=(Role.OPERATOR,))
    world["otto"] = make_user("otto", workspace=world["w8"], roles=(Role.OPERATOR,))
    return world


@pytest.fixture
def pending(world) -> Handoff:
    return approve(world)


@pytest.fixture
def uncertain(world) -> Handoff:
    handoff = approve(world)
    handoff_deliver(
        handoff_id=handoff.pk, destination=InProcessDestination(lose_ack_for={handoff.action_key})
    )
    handoff.refresh_from_db()
    assert handoff.state == HandoffState.UNCERTAIN
    return handoff


@pytest.fixture
def rejected(world) -> Handoff:
    """Needs attention, permanent: the receiver refuses a blank client name the source rules let through."""
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
