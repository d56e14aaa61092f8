"""Bob's three-step request walked through a fault at each step (issue 37), for the journeys that check
screens at every moment of it: step 1's answer dropped after the receiver created its task, step 2's call
timed out before it did, step 3's receipt malformed, each settled by asking the receiver and sent again
when it had nothing."""

from collections.abc import Callable

from approvals.models import Request
from approvals.services import request_approve
from delivery.models import ReceiverTask
from delivery.services import task_create_idempotent
from outbox.destinations import InProcessDestination
from outbox.dispatch.dispatcher import handoff_deliver
from outbox.models import Handoff, HandoffState
from outbox.services import handoff_settle
from tests.outbox.scripted_destination import MALFORMED, TIMEOUT, ScriptedDestination

S = HandoffState
WIDTHS = ({"width": 1280, "height": 800}, {"width": 390, "height": 844})


def current_step(request: Request) -> Handoff:
    return Handoff.objects.filter(source_id=request.pk).order_by("-step_index", "-pk").first()


def walk_three_faults(world, reads_true: Callable[[str], None]) -> None:
    """Approve the world's request and walk its three steps through their faults, `reads_true(moment)` at
    every moment; each step ends delivered, with the one task the receiver made for its key."""
    request = world["request"]
    request_approve(
        workspace_id=7,
        number=42,
        revision=1,
        actor=world["alice"],
        payload_hash=request.payload_hash,
    )
    receiver = InProcessDestination()
    reads_true("approved, step 1 waiting")
    for fault, created_first, name in (
        (TIMEOUT, True, "step 1: the answer dropped after the task was created"),
        (TIMEOUT, False, "step 2: the call timed out before the receiver acted"),
        (MALFORMED, True, "step 3: a malformed receipt"),
    ):
        step = current_step(request)
        assert step.state == S.PENDING, name
        if created_first:
            task_create_idempotent(action_key=step.action_key, payload=step.payload)
        handoff_deliver(handoff_id=step.pk, destination=ScriptedDestination(fault))
        step.refresh_from_db()
        assert step.state in (S.UNCERTAIN, S.NEEDS_ATTENTION), name
        reads_true(f"{name}: outcome unknown")
        after = handoff_settle(handoff_id=step.pk, destination=receiver)
        reads_true(f"{name}: settled ({after})")
        if after == S.PENDING:
            assert handoff_deliver(handoff_id=step.pk, destination=receiver) == S.DELIVERED
            reads_true(f"{name}: sent again and delivered")
    steps = Handoff.objects.filter(source_id=request.pk)
    assert sorted(steps.values_list("state", flat=True)) == [S.DELIVERED] * 3
    for handoff in steps:
        assert ReceiverTask.objects.filter(action_key=handoff.action_key).count() == 1
