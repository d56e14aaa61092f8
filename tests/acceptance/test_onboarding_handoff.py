"""The acceptance scenario: request 42 of workspace 7, revision 1, handed off exactly once.

Each test names one outcome of ../shared/seeds/000 and asserts what that outcome means in both
databases. Transactional: every write really commits (or really rolls back).
"""

import pytest
from django.db import transaction

from approvals.errors import ApprovalDenied, RequestNotFound, StaleRevision
from approvals.models import Approval, Membership, Request, RequestState, Role
from approvals.services import request_approve, request_reject, request_revise
from delivery.errors import ActionKeyConflict
from delivery.models import ReceiverTask
from delivery.services import task_create_idempotent
from outbox.destinations import InProcessDestination
from outbox.dispatch.dispatcher import handoff_deliver
from outbox.errors import ActionKeyExists
from outbox.models import Handoff, HandoffState
from outbox.services import handoff_retry, handoff_settle
from tests.factories import make_request, onboarding_world

pytestmark = pytest.mark.django_db(databases=["default", "delivery"], transaction=True)

KEY = "onboarding:7:42:1"


@pytest.fixture
def world():
    return onboarding_world()


def approve_42(world) -> Handoff:
    req = world["request"]
    return request_approve(
        workspace_id=7, number=42, revision=1, actor=world["alice"], payload_hash=req.payload_hash
    )


def assert_untouched(world):
    req = Request.objects.get(pk=world["request"].pk)
    assert req.state == RequestState.AWAITING_APPROVAL
    assert Approval.objects.count() == 0
    assert Handoff.objects.count() == 0


def deliver_with_lost_ack(handoff: Handoff) -> InProcessDestination:
    destination = InProcessDestination(lose_ack_for={handoff.action_key})
    handoff_deliver(handoff_id=handoff.pk, destination=destination)
    return destination


def test_a_approver_from_another_workspace_is_denied(world):
    with pytest.raises(ApprovalDenied):
        request_approve(
            workspace_id=7,
            number=42,
            revision=1,
            actor=world["mallory"],
            payload_hash=world["request"].payload_hash,
        )
    assert_untouched(world)


def test_b_member_without_approver_role_is_denied(world):
    with pytest.raises(ApprovalDenied):
        request_approve(
            workspace_id=7,
            number=42,
            revision=1,
            actor=world["olga"],
            payload_hash=world["request"].payload_hash,
        )
    assert_untouched(world)


def test_b_requester_cannot_approve_own_request(world):
    Membership.objects.create(user=world["bob"], workspace=world["w7"], role=Role.APPROVER)
    with pytest.raises(ApprovalDenied, match="own request"):
        request_approve(
            workspace_id=7,
            number=42,
            revision=1,
            actor=world["bob"],
            payload_hash=world["request"].payload_hash,
        )
    assert_untouched(world)


def test_c_stale_payload_hash_is_refused(world):
    shown_hash = world["request"].payload_hash
    # The request changes after the approver saw it: a new revision replaces the one awaiting approval.
    request_revise(
        workspace_id=7,
        number=42,
        payload={**world["request"].payload, "plan": "enterprise"},
        actor=world["bob"],
    )
    with pytest.raises(StaleRevision):
        request_approve(
            workspace_id=7, number=42, revision=1, actor=world["alice"], payload_hash=shown_hash
        )
    # The newest revision cannot be approved with the hash of the old payload either.
    with pytest.raises(StaleRevision, match="payload hash"):
        request_approve(
            workspace_id=7, number=42, revision=2, actor=world["alice"], payload_hash=shown_hash
        )
    assert Approval.objects.count() == 0
    assert Handoff.objects.count() == 0


def test_c_unknown_request_and_wrong_revision_are_named_errors(world):
    with pytest.raises(RequestNotFound):
        request_approve(
            workspace_id=7, number=4242, revision=1, actor=world["alice"], payload_hash="x"
        )
    with pytest.raises(StaleRevision):
        request_approve(
            workspace_id=7,
            number=42,
            revision=9,
            actor=world["alice"],
            payload_hash=world["request"].payload_hash,
        )
    assert_untouched(world)


def test_d_valid_approval_records_exactly_one_pending_handoff(world):
    handoff = approve_42(world)
    req = Request.objects.get(pk=world["request"].pk)
    assert req.state == RequestState.APPROVED
    approval = Approval.objects.get(request=req)
    assert approval.decided_by == world["alice"]
    assert approval.payload_hash == req.payload_hash
    assert approval.rule_version == "onboarding-v1"
    handoffs = list(Handoff.objects.all())
    assert len(handoffs) == 1
    assert handoffs[0].pk == handoff.pk
    assert handoffs[0].action_key == KEY
    assert handoffs[0].state == HandoffState.PENDING
    assert handoffs[0].payload == req.payload
    assert handoffs[0].payload_hash == req.payload_hash
    assert handoffs[0].workspace_id == 7
    assert handoffs[0].owner == world["olga"]
    assert ReceiverTask.objects.count() == 0, "approval alone must not create the receiver task"


class CrashBeforeCommit(Exception):
    pass


def test_e_failure_inside_approval_transaction_leaves_nothing(world):
    with pytest.raises(CrashBeforeCommit), transaction.atomic():
        approve_42(world)
        assert Handoff.objects.filter(action_key=KEY).exists()  # written, not yet committed
        raise CrashBeforeCommit("process dies before commit")
    assert_untouched(world)


def test_e_outbox_write_failure_rolls_back_the_decision(world):
    # A leftover outbox row with the same key makes the outbox insert fail inside the approval.

    other = make_request(world["w8"], 1, world["mallory"])
    Handoff.objects.create(
        action_key=KEY,
        workflow="onboarding",
        workspace_id=8,
        source_ref="leftover",
        source_id=other.pk,
        payload={},
        payload_hash="0" * 64,
    )
    with pytest.raises(ActionKeyExists):
        approve_42(world)
    req = Request.objects.get(pk=world["request"].pk)
    assert req.state == RequestState.AWAITING_APPROVAL
    assert Approval.objects.count() == 0
    assert Handoff.objects.filter(workspace_id=7).count() == 0


def test_f_lost_acknowledgement_leaves_handoff_unacknowledged_and_one_task(world):
    handoff = approve_42(world)
    deliver_with_lost_ack(handoff)
    handoff.refresh_from_db()
    assert handoff.state == HandoffState.UNCERTAIN
    assert handoff.destination_id == ""
    assert handoff.delivered_at is None
    assert ReceiverTask.objects.filter(action_key=KEY).count() == 1
    assert ReceiverTask.objects.count() == 1


def test_g_retry_with_same_key_returns_same_task(world):
    handoff = approve_42(world)
    deliver_with_lost_ack(handoff)
    original = ReceiverTask.objects.get(action_key=KEY)

    # An operator retries the same approved action: same key, no reconcile first.
    handoff_retry(handoff_id=handoff.pk, actor=world["olga"], confirm_risk=True)
    state = handoff_deliver(handoff_id=handoff.pk, destination=InProcessDestination())

    tasks = ReceiverTask.objects.count()
    assert tasks == 1, f"retry returns same task: expected 1, got {tasks}"
    handoff.refresh_from_db()
    assert state == HandoffState.DELIVERED
    assert handoff.destination_id == str(original.task_id)
    assert handoff.action_key == KEY
    assert list(handoff.attempt_set.order_by("number").values_list("outcome", flat=True)) == [
        "uncertain",
        "duplicate",
    ]


def test_g_settlement_finds_the_task_without_sending_again(world):
    handoff = approve_42(world)
    destination = deliver_with_lost_ack(handoff)
    original = ReceiverTask.objects.get(action_key=KEY)
    assert handoff_settle(handoff_id=handoff.pk, destination=destination) == HandoffState.DELIVERED
    handoff.refresh_from_db()
    assert handoff.destination_id == str(original.task_id)
    assert handoff.attempt_set.count() == 1, "settlement asks the receiver; it does not send again"
    assert ReceiverTask.objects.count() == 1


def test_h_reusing_the_key_with_a_different_payload_is_a_conflict(world):
    handoff = approve_42(world)
    handoff_deliver(handoff_id=handoff.pk, destination=InProcessDestination())
    original = ReceiverTask.objects.get(action_key=KEY)
    with pytest.raises(ActionKeyConflict):
        task_create_idempotent(action_key=KEY, payload={**original.payload, "plan": "enterprise"})
    after = ReceiverTask.objects.get(action_key=KEY)
    assert after.payload == original.payload
    assert after.payload_hash == original.payload_hash
    assert after.task_id == original.task_id
    assert ReceiverTask.objects.count() == 1


def test_i_later_distinct_request_gets_distinct_key_and_task(world):
    first = approve_42(world)
    handoff_deliver(handoff_id=first.pk, destination=InProcessDestination())
    later = make_request(
        world["w7"],
        43,
        world["bob"],
        payload={**world["request"].payload, "client_name": "Contoso"},
    )
    second = request_approve(
        workspace_id=7, number=43, revision=1, actor=world["alice"], payload_hash=later.payload_hash
    )
    assert second.action_key == "onboarding:7:43:1" != first.action_key
    handoff_deliver(handoff_id=second.pk, destination=InProcessDestination())
    first.refresh_from_db()
    second.refresh_from_db()
    assert ReceiverTask.objects.count() == 2
    assert first.state == second.state == HandoffState.DELIVERED
    assert first.destination_id != second.destination_id
    assert {str(t) for t in ReceiverTask.objects.values_list("task_id", flat=True)} == {
        first.destination_id,
        second.destination_id,
    }


def test_j_rejected_request_creates_no_handoff(world):
    request_reject(
        workspace_id=7,
        number=42,
        revision=1,
        actor=world["alice"],
        payload_hash=world["request"].payload_hash,
        reason="client is a duplicate",
    )
    req = Request.objects.get(pk=world["request"].pk)
    assert req.state == RequestState.REJECTED
    assert Approval.objects.get(request=req).decision == "reject"
    assert Handoff.objects.count() == 0
    assert ReceiverTask.objects.count() == 0
