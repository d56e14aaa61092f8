"""approvals/services/decisions.py: approving and rejecting, and the domain error each refusal raises."""

import pytest

from approvals import services
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
    Mode,
    Request,
    RequestState,
    WorkflowMode,
)
from approvals.rules import ONBOARDING_V1
from outbox.models import Handoff, HandoffEvent, HandoffState
from outbox.payloads import payload_hash
from tests.approvals.services.calls import (
    ENTERPRISE_ONLY,
    approve,
    publisher,
    reject,
)
from tests.factories import ONBOARDING_PAYLOAD, make_request

pytestmark = pytest.mark.django_db(databases=["default", "delivery"])

R = RequestState


# --- request_approve ---------------------------------------------------------------------------


def test_approval_records_decision_request_state_and_one_pending_handoff_together(world):
    handoff = approve(world, reason="looks right")
    request = Request.objects.get(pk=world["request"].pk)
    assert request.state == R.APPROVED
    approval = Approval.objects.get(request=request)
    assert (approval.decision, approval.decided_by, approval.rule_version) == (
        Decision.APPROVE,
        world["alice"],
        "onboarding-v1",
    )
    assert approval.payload_hash == request.payload_hash
    assert handoff.action_key == "onboarding:7:42:1"
    assert (handoff.state, handoff.payload, handoff.source_id) == (
        HandoffState.PENDING,
        request.payload,
        request.pk,
    )
    assert handoff.rule_version == "onboarding-v1"
    assert handoff.source_ref == "request 42 revision 1"
    assert HandoffEvent.objects.get(handoff=handoff).actor == world["alice"]


def test_approved_handoff_is_owned_by_the_workspace_on_call_operator(world):
    assert approve(world).owner == world["olga"]


def test_without_on_call_the_first_operator_of_the_workspace_owns_the_handoff(world):
    world["w7"].on_call = None
    world["w7"].save()
    assert approve(world).owner == world["olga"]


def test_approval_in_observe_mode_records_an_observed_handoff(world):
    WorkflowMode.objects.create(workflow="onboarding", mode=Mode.OBSERVE)
    handoff = approve(world)
    assert handoff.state == HandoffState.OBSERVED
    assert handoff.next_attempt_at is None


def test_a_requester_cannot_approve_their_own_request(world):
    request = make_request(world["w7"], 43, world["rita"])
    with pytest.raises(ApprovalDenied, match="own request"):
        services.request_approve(
            workspace_id=7,
            number=43,
            revision=1,
            actor=world["rita"],
            payload_hash=request.payload_hash,
        )
    assert Request.objects.get(pk=request.pk).state == R.AWAITING_APPROVAL
    assert not Handoff.objects.exists()


@pytest.mark.parametrize("actor", ["bob", "olga", "mallory"])
def test_only_an_approver_of_the_request_workspace_may_approve(world, actor):
    # bob requests and olga operates in workspace 7; mallory approves, but in workspace 8.
    with pytest.raises(ApprovalDenied):
        approve(world, actor=actor)
    assert not Approval.objects.exists()
    assert not Handoff.objects.exists()


def test_approval_with_a_payload_hash_not_shown_for_this_revision_is_stale(world):
    with pytest.raises(StaleRevision):
        approve(world, hash_=payload_hash({**ONBOARDING_PAYLOAD, "plan": "enterprise"}))
    assert Request.objects.get(pk=world["request"].pk).state == R.AWAITING_APPROVAL


def test_approval_of_a_revision_that_does_not_exist_is_stale(world):
    with pytest.raises(StaleRevision):
        approve(world, revision=2)


def test_approval_of_a_request_that_does_not_exist_is_not_found(world):
    with pytest.raises(RequestNotFound):
        approve(world, number=4242)


def test_approval_of_a_replaced_revision_is_stale(world):
    services.request_revise(
        workspace_id=7,
        number=42,
        payload={**ONBOARDING_PAYLOAD, "plan": "enterprise"},
        actor=world["bob"],
    )
    with pytest.raises(StaleRevision, match="replaced by revision 2"):
        approve(world)


def test_a_revision_is_decided_once(world):
    approve(world)
    with pytest.raises(InvalidRequestState):
        approve(world)
    assert Handoff.objects.count() == 1
    assert Approval.objects.count() == 1


def test_approval_under_rules_published_since_validation_is_refused(world):
    services.rule_version_publish(workflow="onboarding", schema=ENTERPRISE_ONLY, actor=publisher())
    with pytest.raises(InvalidPayload, match="under rules onboarding-v2"):
        approve(world)
    assert not Handoff.objects.exists()


def test_approval_stores_the_rule_version_in_force(world):
    services.rule_version_publish(
        workflow="onboarding", schema=ONBOARDING_V1.schema, actor=publisher()
    )
    handoff = approve(world)
    assert handoff.rule_version == "onboarding-v2"
    assert Approval.objects.get().rule_version == "onboarding-v2"


# --- request_reject ----------------------------------------------------------------------------


def test_rejection_records_the_decision_and_its_reason_and_no_handoff(world):
    request = reject(world, reason="duplicate client")
    assert request.state == R.REJECTED
    approval = Approval.objects.get(request=request)
    assert (approval.decision, approval.reason) == (Decision.REJECT, "duplicate client")
    rejected = request.events.get(to_state=R.REJECTED)
    assert rejected.reason == "[rejected_by_approver] duplicate client"
    assert request.reason_code == "rejected_by_approver"
    assert not Handoff.objects.exists()


def test_rejection_without_a_reason_is_refused(world):
    with pytest.raises(InvalidPayload):
        reject(world, reason="   ")
    assert Request.objects.get(pk=world["request"].pk).state == R.AWAITING_APPROVAL


def test_rejection_follows_the_approval_rules_on_who_decides(world):
    with pytest.raises(ApprovalDenied):
        reject(world, actor="bob")
    with pytest.raises(ApprovalDenied):
        reject(world, actor="mallory")


def test_rejection_is_allowed_under_rules_the_payload_no_longer_passes(world):
    services.rule_version_publish(workflow="onboarding", schema=ENTERPRISE_ONLY, actor=publisher())
    assert reject(world).state == R.REJECTED
