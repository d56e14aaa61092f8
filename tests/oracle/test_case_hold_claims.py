"""The held state on the console's screens (issue 39, "Hold one case"): a held case's steps say so on the
handoff page and the requester's page, with the operator as the owner of the next step, and every claim of
every screen is true for the truth oracle, held and after the resume. Both backends."""

import pytest

from outbox.dispatch.dispatcher import drain
from outbox.models import Handoff, HandoffState
from outbox.services.case_holds import case_hold, case_resume
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
