"""A one-handoff hold whose only row settles while it holds (issue 39, "Hold one case"): a call already under
way at hold time delivers, or the held failed row is cancelled. No screen says the settled row is held or
offers its Resume, before the sweep too; the dispatcher's supervision sweep (`lapsed_expire`) ends the hold,
who and why recorded. Fails on the code that kept such a hold live for ever, its row marked held. Both
backends."""

import pytest
from django.urls import reverse

from outbox.destinations import InProcessDestination
from outbox.dispatch.claims import handoff_claim_due
from outbox.dispatch.dispatcher import lapsed_expire
from outbox.failures import DeliveryResult
from outbox.models import CaseHold, FailureClass, Handoff, HandoffEvent, HandoffState
from outbox.services.case_holds import SWEEP, case_hold
from outbox.services.operator import handoff_cancel
from outbox.services.outcomes import handoff_record_outcomes
from tests.builders import approve
from tests.factories import three_step_onboarding_world
from tests.oracle.oracle import assert_pages_true
from tests.oracle.screens import render_every_screen
from tests.oracle.truth import Truth

pytestmark = pytest.mark.django_db(databases=["default", "delivery"])
S = HandoffState
HELD_WORDS = ("held (case hold", "is held by olga", "what is left is sent")


def _roles(world) -> dict:
    return {"requester": world["bob"], "approver": world["alice"], "operator": world["olga"]}


def _held_while_in_flight(world) -> tuple[Handoff, CaseHold, object]:
    """Request 42's first step, claimed (its call under way), then held alone by olga."""
    step = approve(world, 42)
    [claim] = handoff_claim_due(worker="w1")
    assert claim.handoff_id == step.pk
    hold = case_hold(
        handoff_id=step.pk, actor=world["olga"], reason="calling ACME", whole_case=False
    )
    return step, hold, claim


def _assert_screens_say_not_held(world, step: Handoff, context: str) -> None:
    pages = render_every_screen(_roles(world))
    assert any(url.endswith(f"/handoffs/{step.pk}/") for url in pages)
    assert_pages_true(pages, Truth(), context=context)
    words = (*HELD_WORDS, reverse("outbox:resume", args=[step.pk]))
    said = [(url, w) for url, html in pages.items() for w in words if w in html]
    assert said == [], said


def _assert_ended_by_the_sweep(step: Handoff, hold: CaseHold, settled: str) -> None:
    assert CaseHold.objects.get(pk=hold.pk).ended_at is None
    assert lapsed_expire().resumed == 0
    hold.refresh_from_db()
    assert hold.ended_at is not None and hold.ended_by == SWEEP
    assert hold.end_reason == f"nothing left to hold: {step.action_key} {settled}"
    assert Handoff.objects.get(pk=step.pk).case_hold_id is None
    event = HandoffEvent.objects.get(handoff_id=step.pk, action="resume")
    assert (event.actor_label, event.reason) == (SWEEP, f"hold ended: {hold.end_reason}")
    # A sweep more finds nothing to end.
    assert lapsed_expire().resumed == 0
    assert HandoffEvent.objects.filter(handoff_id=step.pk, action="resume").count() == 1


def test_a_hold_whose_call_under_way_delivers_ends_and_no_screen_says_held():
    world = three_step_onboarding_world()
    step, hold, claim = _held_while_in_flight(world)
    handoff_record_outcomes(
        outcomes=[(claim, DeliveryResult.ok(task_id="t-1", created=True))],
        destination=InProcessDestination(),
    )
    row = Handoff.objects.get(pk=step.pk)
    assert (row.state, row.case_hold_id) == (S.DELIVERED, hold.pk)

    _assert_screens_say_not_held(world, step, " (delivered, before the sweep)")
    _assert_ended_by_the_sweep(step, hold, "delivered")
    _assert_screens_say_not_held(world, step, " (delivered, after the sweep)")


def test_a_hold_whose_failed_row_is_cancelled_ends_and_no_screen_says_held():
    world = three_step_onboarding_world()
    step, hold, claim = _held_while_in_flight(world)
    handoff_record_outcomes(
        outcomes=[
            (claim, DeliveryResult.failed(FailureClass.PERMANENT, "rejected", "no such plan"))
        ],
        destination=InProcessDestination(),
    )
    assert Handoff.objects.get(pk=step.pk).state == S.NEEDS_ATTENTION
    handoff_cancel(handoff_id=step.pk, actor=world["olga"], reason="client withdrew")
    row = Handoff.objects.get(pk=step.pk)
    assert (row.state, row.case_hold_id) == (S.CANCELLED, hold.pk)

    _assert_screens_say_not_held(world, step, " (cancelled, before the sweep)")
    _assert_ended_by_the_sweep(step, hold, "cancelled")
    _assert_screens_say_not_held(world, step, " (cancelled, after the sweep)")
