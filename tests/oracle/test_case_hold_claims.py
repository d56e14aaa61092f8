"""The held state on the console's screens (issue 39, "Hold one case"): a held case's steps say so on the
handoff page and the requester's page, with the operator as the owner of the next step, and every claim of
every screen is true for the truth oracle, held and after the resume; a held step whose deadline passes is
held no more on any screen. Both backends."""

from datetime import timedelta

import pytest

from outbox.clock import db_time
from outbox.dispatch.dispatcher import drain
from outbox.errors import CaseHoldRefused
from outbox.models import Handoff, HandoffEvent, HandoffState
from outbox.services.case_holds import case_hold, case_resume
from outbox.services.deadlines import DEADLINE_PASSED, handoffs_past_deadline
from tests.builders import approve
from tests.factories import ONBOARDING_PAYLOAD, three_step_onboarding_world
from tests.oracle.oracle import assert_pages_true, check_pages, claims_in
from tests.oracle.screens import render_every_screen
from tests.oracle.truth import Truth

pytestmark = pytest.mark.django_db(databases=["default", "delivery"])
S = HandoffState


def _roles(world) -> dict:
    return {"requester": world["bob"], "approver": world["alice"], "operator": world["olga"]}


def _claims(pages: dict, subject: str) -> set[tuple[str, str]]:
    return {
        (c.name, c.value)
        for url, html in pages.items()
        for c in claims_in(url, html)
        if c.subject == subject
    }


def test_a_held_case_is_claimed_held_truly_and_its_next_owner_is_the_operator():
    world = three_step_onboarding_world()
    held = approve(world, 42)
    # Another client: the demo's onboarding orders each client's steps (`order_by` client_name), so a second
    # request of ACME's would rightly wait behind the held one.
    free = approve(world, 43, payload={**ONBOARDING_PAYLOAD, "client_name": "Globex"})
    case_hold(handoff_id=held.pk, actor=world["olga"], reason="calling ACME", whole_case=True)
    drain()
    held.refresh_from_db()
    assert (held.state, held.attempts) == (S.PENDING, 0)

    pages = render_every_screen(_roles(world))
    assert_pages_true(pages, Truth(), context=" (held)")
    mine = _claims(pages, f"handoff:{held.pk}")
    assert {("handoff.held", "yes"), ("handoff.next_owner", "operator")} <= mine
    assert ("handoff.held", "no") not in mine
    page = next(html for url, html in pages.items() if url.endswith(f"/handoffs/{held.pk}/"))
    assert "is held by olga" in page and "calling ACME" in page
    assert Handoff.objects.get(pk=free.pk).state == S.DELIVERED

    # A claim the records no longer bear out is caught: the hold lifted behind the page's back.
    Handoff.objects.filter(pk=held.pk).update(case_hold=None)
    problems, _count = check_pages(pages, Truth())
    assert any(p.claim.name == "handoff.held" for p in problems), problems
    Handoff.objects.filter(pk=held.pk).update(case_hold=held.case_hold_id)

    case_resume(handoff_id=held.pk, actor=world["olga"], reason="ACME called back")
    drain()
    assert Handoff.objects.filter(instance_key=held.instance_key, state=S.DELIVERED).count() == 3
    pages = render_every_screen(_roles(world))
    assert_pages_true(pages, Truth(), context=" (resumed)")


def test_a_held_step_past_its_deadline_goes_to_a_person_and_its_hold_ends_on_every_screen():
    """A step is never sent past its must-finish-by, so no hold keeps it back: the deadline's move lifts the
    hold from it and ends the hold (nothing else of the case left to keep back), who held it and why in the
    move's event; no screen says it is held any more, each says it went to a person; and a step past its
    deadline cannot be held again."""
    world = three_step_onboarding_world()
    step = approve(world, 42)
    hold = case_hold(
        handoff_id=step.pk, actor=world["olga"], reason="calling ACME", whole_case=True
    )
    Handoff.objects.filter(pk=step.pk).update(finish_by=db_time() - timedelta(seconds=1))

    assert handoffs_past_deadline() == 1
    step.refresh_from_db()
    hold.refresh_from_db()
    assert (step.state, step.reason_code, step.attempts) == (S.NEEDS_ATTENTION, DEADLINE_PASSED, 0)
    assert step.case_hold_id is None
    assert hold.ended_at is not None and hold.ended_by == "deadline sweep"
    assert "passed its must-finish-by while held" in hold.end_reason
    moved = HandoffEvent.objects.get(handoff=step, to_state=S.NEEDS_ATTENTION)
    assert moved.actor_label == "deadline sweep"
    assert "its case was held by olga" in moved.reason and "calling ACME" in moved.reason
    assert "the hold ended with this move" in moved.reason

    pages = render_every_screen(_roles(world))
    assert_pages_true(pages, Truth(), context=" (deadline passed while held)")
    mine = _claims(pages, f"handoff:{step.pk}")
    assert ("handoff.held", "no") in mine and ("handoff.held", "yes") not in mine
    assert not any(
        "held (case hold" in html or "is held by olga" in html for html in pages.values()
    )
    requesters = next(html for url, html in pages.items() if url.endswith("/approvals/7/42/1/"))
    assert "passed before it could be sent" in requesters

    with pytest.raises(CaseHoldRefused, match="past its must-finish-by"):
        case_hold(handoff_id=step.pk, actor=world["olga"], reason="again", whole_case=True)
