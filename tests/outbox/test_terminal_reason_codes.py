"""Every terminal path records a documented reason code (issue 37 item 6): each way a handoff ends (created,
duplicate prevented, settled by lookup, by a replay, by hand; cancelled by an operator, by its requester,
compensated; superseded by a correction) and each way a request revision ends (rejected, superseded by a
revision or a correction, cancelled), driven here through the product's services; then no final row has an
empty or undocumented code. `move_changes` refuses a move to a final state without a code, so a path added
later fails at once."""

import pytest

from approvals.models import Request, RequestReasonCode
from approvals.services import request_cancel, request_reject, request_revise
from approvals.services.corrections import handoff_correct
from delivery.services import task_create_idempotent
from outbox.destinations import InProcessDestination
from outbox.models import Handoff, HandoffState
from outbox.models.states import DeliveredCode
from outbox.services import (
    handoff_cancel,
    handoff_settle,
    handoff_settle_manually,
    instance_compensate,
)
from outbox.services.moves import FINAL_STATES, move_changes
from tests.builders import approve, deliver
from tests.factories import ONBOARDING_PAYLOAD, make_request, onboarding_world

pytestmark = pytest.mark.django_db(databases=["default", "delivery"])
S = HandoffState
# The codes docs/console.md lists for a handoff's final states.
HANDOFF_CODES = {
    S.DELIVERED: {code.value for code in DeliveredCode},
    S.CANCELLED: {"cancelled_by_operator", "cancelled_by_requester", "compensated"},
    S.SUPERSEDED: {"corrected"},
}
REQUEST_FINAL = ("rejected", "superseded", "cancelled")


@pytest.fixture
def world():
    return onboarding_world()


def _in_state(handoff: Handoff, state: str) -> Handoff:
    """A row left in `state` by a failure (an unknown outcome, retries spent), as a failed attempt leaves it."""
    Handoff.objects.filter(pk=handoff.pk).update(state=state, failure_class="uncertain")
    return Handoff.objects.get(pk=handoff.pk)


def _task_for(handoff: Handoff) -> str:
    return str(
        task_create_idempotent(action_key=handoff.action_key, payload=handoff.payload).task.task_id
    )


def test_every_terminal_path_records_a_documented_reason_code(world):
    olga, bob, alice = world["olga"], world["bob"], world["alice"]
    receiver = InProcessDestination()
    deliver(approve(world, 42))  # created
    twice = approve(world, 43)
    _task_for(twice)
    deliver(twice)  # duplicate prevented
    looked_up = _in_state(approve(world, 44), S.UNCERTAIN)
    _task_for(looked_up)
    assert handoff_settle(handoff_id=looked_up.pk, destination=receiver) == S.DELIVERED
    replayed = _in_state(approve(world, 45), S.UNCERTAIN)
    _task_for(replayed)
    handoff_settle(
        handoff_id=replayed.pk,
        destination=receiver,
        delivered_code=DeliveredCode.SETTLED_BY_REPLAY,
    )
    by_hand = _in_state(approve(world, 46), S.NEEDS_ATTENTION)
    handoff_settle_manually(
        handoff_id=by_hand.pk, actor=olga, receiver_task_id=_task_for(by_hand), reason="seen"
    )
    handoff_cancel(handoff_id=approve(world, 47).pk, actor=olga, reason="not wanted")
    approve(world, 48)
    request_cancel(workspace_id=7, number=48, actor=olga, reason="no longer needed")
    make_request(world["w7"], 52, bob)
    request_cancel(workspace_id=7, number=52, actor=bob, reason="sent by mistake")
    instance_compensate(instance_key=approve(world, 49).instance_key, actor=olga, reason="undo")
    wrong = _in_state(approve(world, 50), S.NEEDS_ATTENTION)
    handoff_correct(handoff_id=wrong.pk, actor=olga, edits={"plan": "enterprise"}, reason="plan")
    make_request(world["w7"], 51, bob)
    request_revise(
        workspace_id=7,
        number=51,
        payload={**ONBOARDING_PAYLOAD, "plan": "starter"},
        actor=bob,
        reason="plan",
    )
    revised = Request.objects.get(workspace_id=7, number=51, revision=2)
    request_reject(
        workspace_id=7,
        number=51,
        revision=2,
        actor=alice,
        payload_hash=revised.payload_hash,
        reason="wrong plan",
    )

    ended = list(Handoff.objects.filter(state__in=FINAL_STATES).values_list("state", "reason_code"))
    undocumented = [(s, c) for s, c in ended if c not in HANDOFF_CODES[s]]
    assert undocumented == []
    seen = {code for _, code in ended}
    # A requester cancels only before the decision, when no handoff exists: that code is the request's.
    assert seen == {
        *HANDOFF_CODES[S.DELIVERED],
        "cancelled_by_operator",
        "compensated",
        "corrected",
    }
    requests = list(
        Request.objects.filter(state__in=REQUEST_FINAL).values_list("state", "reason_code")
    )
    assert [c for _, c in requests if c not in RequestReasonCode.values] == []
    assert {c for _, c in requests} >= {
        "rejected_by_approver",
        "superseded_by_revision",
        "superseded_by_correction",
        "cancelled_by_requester",
        "cancelled_by_operator",
    }


def test_a_move_to_a_final_state_without_a_reason_code_is_refused():
    for state in FINAL_STATES:
        with pytest.raises(ValueError, match="needs its reason code"):
            move_changes(S.NEEDS_ATTENTION, state, {}, action_key="onboarding:7:1:1")
    assert move_changes(S.NEEDS_ATTENTION, S.CANCELLED, {"reason_code": "cancelled_by_operator"})
