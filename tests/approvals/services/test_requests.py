"""approvals/services/requests.py: submitting and revising requests, and the domain error each refusal raises."""

import pytest

from approvals import services
from approvals.errors import (
    ApprovalDenied,
    InvalidPayload,
    InvalidRequestState,
    RequestNotFound,
    WorkspaceNotFound,
)
from approvals.models import (
    Request,
    RequestState,
)
from outbox.models import Handoff, HandoffState
from outbox.payloads import payload_hash
from tests.approvals.services.calls import (
    approve,
    states,
)
from tests.factories import ONBOARDING_PAYLOAD

pytestmark = pytest.mark.django_db(databases=["default", "delivery"])

R = RequestState


# --- revision_create, request_submit -----------------------------------------------------------


def test_revision_create_moves_the_revision_to_awaiting_approval_with_each_move_in_its_history(
    world,
):
    request = services.revision_create(
        workflow="onboarding",
        workspace_id=7,
        number=60,
        revision=1,
        payload=dict(ONBOARDING_PAYLOAD),
        requested_by=world["bob"],
        actor=world["bob"],
        reason="submitted",
    )
    assert request.state == R.AWAITING_APPROVAL
    assert request.payload_hash == payload_hash(ONBOARDING_PAYLOAD)
    assert states(request) == [
        ("", R.RECEIVED),
        (R.RECEIVED, R.VALIDATED),
        (R.VALIDATED, R.AWAITING_APPROVAL),
    ]
    assert "onboarding-v1" in request.events.get(to_state=R.VALIDATED).reason


def test_request_submit_numbers_the_next_request_of_the_workspace(world):
    request = services.request_submit(
        workspace_id=7, payload=dict(ONBOARDING_PAYLOAD), requested_by=world["bob"]
    )
    assert (request.number, request.revision, request.state) == (43, 1, R.AWAITING_APPROVAL)
    assert request.requested_by == world["bob"]


def test_request_submit_with_a_taken_number_is_refused(world):
    with pytest.raises(InvalidRequestState):
        services.request_submit(
            workspace_id=7, payload=dict(ONBOARDING_PAYLOAD), requested_by=world["bob"], number=42
        )


def test_request_submit_by_someone_who_is_not_a_requester_there_is_denied(world):
    with pytest.raises(ApprovalDenied):
        services.request_submit(
            workspace_id=7, payload=dict(ONBOARDING_PAYLOAD), requested_by=world["alice"]
        )
    with pytest.raises(ApprovalDenied):
        services.request_submit(
            workspace_id=8, payload=dict(ONBOARDING_PAYLOAD), requested_by=world["bob"]
        )
    assert Request.objects.count() == 1


def test_request_submit_to_an_unknown_workspace_is_refused(world):
    with pytest.raises(WorkspaceNotFound):
        services.request_submit(
            workspace_id=99, payload=dict(ONBOARDING_PAYLOAD), requested_by=world["bob"]
        )


def test_request_submit_with_a_payload_that_breaks_the_rules_names_every_problem(world):
    with pytest.raises(InvalidPayload) as raised:
        services.request_submit(
            workspace_id=7, payload={"client_name": "X", "plan": "gold"}, requested_by=world["bob"]
        )
    assert len(raised.value.reasons) == 2
    assert Request.objects.count() == 1


# --- revision_add_locked, request_revise -------------------------------------------------------


def test_revising_an_undecided_request_supersedes_it(world):
    new = services.request_revise(
        workspace_id=7,
        number=42,
        payload={**ONBOARDING_PAYLOAD, "plan": "starter"},
        actor=world["bob"],
        reason="plan changed",
    )
    assert (new.revision, new.state, new.payload["plan"]) == (2, R.AWAITING_APPROVAL, "starter")
    assert new.requested_by == world["bob"]
    assert Request.objects.get(pk=world["request"].pk).state == R.SUPERSEDED


def test_revising_a_decided_request_leaves_the_decided_revision_and_its_handoff_as_they_were(world):
    handoff = approve(world)
    new = services.request_revise(
        workspace_id=7,
        number=42,
        payload={**ONBOARDING_PAYLOAD, "plan": "starter"},
        actor=world["bob"],
    )
    assert new.revision == 2
    assert new.action_key == "onboarding:7:42:2"
    assert Request.objects.get(pk=world["request"].pk).state == R.APPROVED
    assert Handoff.objects.get(pk=handoff.pk).state == HandoffState.PENDING


def test_revision_add_locked_numbers_the_revision_after_the_current_one(world):
    new = services.revision_add_locked(
        world["request"], payload=dict(ONBOARDING_PAYLOAD), actor=world["bob"]
    )
    assert new.revision == 2
    assert new.events.filter(reason="revision 2").exists()


def test_revising_an_unknown_request_is_not_found(world):
    with pytest.raises(RequestNotFound):
        services.request_revise(
            workspace_id=7, number=4242, payload=dict(ONBOARDING_PAYLOAD), actor=world["bob"]
        )


def test_a_revision_with_an_invalid_payload_is_refused_and_the_current_one_stays(world):
    with pytest.raises(InvalidPayload):
        services.request_revise(
            workspace_id=7, number=42, payload={"plan": "gold"}, actor=world["bob"]
        )
    assert Request.objects.get().state == R.AWAITING_APPROVAL
