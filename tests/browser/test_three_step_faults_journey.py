"""Bob's three-step request, walked in Chromium with a fault at each step (issue 37, done-when): step 1's
answer is dropped after the receiver created its task, step 2's call times out before it did, step 3's receipt
is malformed. At every moment, at 1280 and 390 px, his request page and his list read true: every claim they
carry (`data-claim`) is checked by the truth oracle (tests/oracle) against both databases and the receiver's
records, and axe finds nothing serious."""

import pytest
from django.urls import reverse

from approvals.models import Request
from approvals.services import request_approve
from delivery.models import ReceiverTask
from delivery.services import task_create_idempotent
from outbox.destinations import InProcessDestination
from outbox.dispatch.dispatcher import handoff_deliver
from outbox.failures import DeliveryResult
from outbox.models import DestinationHealth, FailureClass, Handoff, HandoffState
from outbox.services import handoff_settle
from tests.factories import three_step_onboarding_world
from tests.oracle.oracle import assert_pages_true
from tests.oracle.truth import Truth
from tests.outbox.scripted_destination import ScriptedDestination

pytestmark = [
    pytest.mark.browser,
    pytest.mark.django_db(databases=["default", "delivery"], transaction=True),
]
S = HandoffState
WIDTHS = ({"width": 1280, "height": 800}, {"width": 390, "height": 844})
TIMEOUT = DeliveryResult.failed(FailureClass.UNCERTAIN, "read_timeout", "timeout")
MALFORMED = DeliveryResult.failed(
    FailureClass.MALFORMED, "malformed_receipt", "receipt has no task_id"
)


def current_step(request: Request) -> Handoff:
    return Handoff.objects.filter(source_id=request.pk).order_by("-step_index", "-pk").first()


def test_bobs_three_step_request_reads_true_through_a_fault_at_each_step(
    page, live_server, sign_in, axe_check, no_horizontal_scroll
):
    world = three_step_onboarding_world()
    DestinationHealth.objects.get_or_create(name="receiver")
    request = world["request"]
    request_approve(
        workspace_id=7,
        number=42,
        revision=1,
        actor=world["alice"],
        payload_hash=request.payload_hash,
    )
    sign_in("bob")
    screens = [
        live_server.url + reverse("approvals:detail", args=[7, 42, 1]),
        live_server.url + reverse("approvals:mine"),
    ]
    checked = []

    def reads_true(moment: str) -> None:
        for size in WIDTHS:
            page.set_viewport_size(size)
            pages = {}
            truth = Truth()
            for url in screens:
                page.goto(url)
                pages[url] = page.content()
                axe_check(f"{moment}, {url} at {size['width']} px")
                no_horizontal_scroll(f"{moment}, {url} at {size['width']} px")
            checked.append(assert_pages_true(pages, truth, context=f" ({moment})"))

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
    assert all(checked), "every moment's screens carried claims"
