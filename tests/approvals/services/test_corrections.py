"""approvals/services/corrections.py: an operator's correction of a handoff, and the error each refusal raises."""

import pytest

from approvals import services
from approvals.errors import (
    ApprovalDenied,
    InvalidPayload,
    InvalidRequestState,
    RequestNotFound,
)
from approvals.models import (
    Request,
    RequestState,
)
from outbox.models import Handoff, HandoffEvent, HandoffState
from tests.approvals.services.calls import (
    approve,
)
from tests.factories import ONBOARDING_PAYLOAD

pytestmark = pytest.mark.django_db(databases=["default", "delivery"])

R = RequestState


# --- handoff_correct ---------------------------------------------------------------------------


def needing_attention(world) -> Handoff:
    handoff = approve(world)
    Handoff.objects.filter(pk=handoff.pk).update(
        state=HandoffState.NEEDS_ATTENTION, failure_class="permanent", reason_code="payload_invalid"
    )
    return handoff


def test_correction_supersedes_handoff_and_revision_and_opens_a_new_revision_for_approval(world):
    handoff = needing_attention(world)
    corrected = {**ONBOARDING_PAYLOAD, "client_name": "Northwind Traders Ltd"}
    new = services.handoff_correct(
        handoff_id=handoff.pk, actor=world["olga"], edits=corrected, reason="legal name"
    )
    assert (new.revision, new.state, new.payload) == (2, R.AWAITING_APPROVAL, corrected)
    assert Handoff.objects.get(pk=handoff.pk).state == HandoffState.SUPERSEDED
    assert Request.objects.get(pk=world["request"].pk).state == R.SUPERSEDED
    assert HandoffEvent.objects.filter(
        handoff=handoff, to_state=HandoffState.SUPERSEDED, reason="corrected: legal name"
    ).exists()
    assert Handoff.objects.count() == 1, "the new revision gets its handoff only when approved"


def test_correction_by_someone_who_does_not_operate_the_workspace_is_denied(world):
    handoff = needing_attention(world)
    for actor in ("alice", "mallory"):
        with pytest.raises(ApprovalDenied):
            services.handoff_correct(
                handoff_id=handoff.pk,
                actor=world[actor],
                edits=dict(ONBOARDING_PAYLOAD),
                reason="fix",
            )
    assert Handoff.objects.get(pk=handoff.pk).state == HandoffState.NEEDS_ATTENTION


def test_only_a_handoff_that_needs_attention_can_be_corrected(world):
    handoff = approve(world)
    with pytest.raises(InvalidRequestState):
        services.handoff_correct(
            handoff_id=handoff.pk, actor=world["olga"], edits=dict(ONBOARDING_PAYLOAD), reason="fix"
        )
    assert Handoff.objects.get(pk=handoff.pk).state == HandoffState.PENDING


def test_correction_needs_a_reason_and_a_payload_that_passes_the_rules(world):
    handoff = needing_attention(world)
    with pytest.raises(InvalidPayload):
        services.handoff_correct(
            handoff_id=handoff.pk, actor=world["olga"], edits=dict(ONBOARDING_PAYLOAD), reason=" "
        )
    with pytest.raises(InvalidPayload):
        services.handoff_correct(
            handoff_id=handoff.pk, actor=world["olga"], edits={"plan": "gold"}, reason="fix"
        )
    assert Handoff.objects.get(pk=handoff.pk).state == HandoffState.NEEDS_ATTENTION
    assert Request.objects.count() == 1


def test_correcting_an_unknown_handoff_is_not_found(world):
    with pytest.raises(RequestNotFound):
        services.handoff_correct(
            handoff_id=987654, actor=world["olga"], edits=dict(ONBOARDING_PAYLOAD), reason="fix"
        )
