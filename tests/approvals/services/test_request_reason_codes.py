"""Every move of a request revision to a final state records why (issue 37 item 6): rejected and superseded
revisions were left with reason code "", so the screens could not tell a rejection from a revision."""

import pytest

from approvals.models import Request, RequestState
from approvals.services import request_cancel, request_reject, request_revise
from approvals.services.requests import request_move
from tests.factories import make_request, onboarding_world

pytestmark = pytest.mark.django_db(databases=["default", "delivery"])


@pytest.fixture
def world():
    return onboarding_world()


def _codes() -> dict[tuple[int, int], tuple[str, str]]:
    return {
        (r.number, r.revision): (r.state, r.reason_code)
        for r in Request.objects.filter(workspace_id=7)
    }


def test_rejected_superseded_and_cancelled_revisions_each_record_their_code(world):
    first = world["request"]
    request_revise(
        workspace_id=7,
        number=42,
        payload={**first.payload, "plan": "starter"},
        actor=world["bob"],
        reason="plan changed",
    )
    second = Request.objects.get(workspace_id=7, number=42, revision=2)
    request_reject(
        workspace_id=7,
        number=42,
        revision=2,
        actor=world["alice"],
        payload_hash=second.payload_hash,
        reason="wrong plan",
    )
    make_request(world["w7"], 43, world["bob"])
    request_cancel(workspace_id=7, number=43, actor=world["bob"], reason="not needed")
    make_request(world["w7"], 44, world["bob"])
    request_cancel(workspace_id=7, number=44, actor=world["olga"], reason="duplicate of 43")
    assert _codes() == {
        (42, 1): (RequestState.SUPERSEDED, "superseded_by_revision"),
        (42, 2): (RequestState.REJECTED, "rejected_by_approver"),
        (43, 1): (RequestState.CANCELLED, "cancelled_by_requester"),
        (44, 1): (RequestState.CANCELLED, "cancelled_by_operator"),
    }


def test_a_move_to_a_final_state_without_its_code_is_refused(world):
    request = world["request"]
    with pytest.raises(ValueError, match="needs its reason code"):
        request_move(request, RequestState.REJECTED, reason="no code")
    request.refresh_from_db()
    assert (request.state, request.reason_code) == (RequestState.AWAITING_APPROVAL, "")
