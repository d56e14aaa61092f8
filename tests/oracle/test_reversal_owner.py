"""A workflow being reversed whose later step's compensation is stuck (found by the oracle's fault run, issue
37): the step whose compensation waits for it, and the later step itself, name the operators as the owner of
the next step on the handoff page as on the request's line, and every claim is true. Both backends."""

import pytest

from outbox.dispatch.dispatcher import drain, handoff_deliver
from outbox.models import Handoff, HandoffState
from outbox.services.compensation import instance_compensate
from tests.builders import approve
from tests.factories import three_step_onboarding_world
from tests.oracle.oracle import assert_pages_true, claims_in
from tests.oracle.screens import render_every_screen
from tests.oracle.truth import Truth
from tests.outbox.scripted_destination import TIMEOUT, ScriptedDestination

pytestmark = pytest.mark.django_db(databases=["default", "delivery"])
INSTANCE = "onboarding:7:42:1"
S = HandoffState


def test_a_step_waiting_for_a_stuck_later_compensation_is_the_operators_on_every_screen():
    world = three_step_onboarding_world()
    approve(world)
    drain()
    instance_compensate(instance_key=INSTANCE, actor=world["olga"], reason="client withdrew")
    undo = Handoff.objects.get(instance_key=INSTANCE, state=S.PENDING, kind="compensation")
    handoff_deliver(handoff_id=undo.pk, destination=ScriptedDestination(TIMEOUT))
    undo.refresh_from_db()
    assert undo.state in (S.UNCERTAIN, S.NEEDS_ATTENTION)
    waiting = Handoff.objects.filter(instance_key=INSTANCE, kind="action").exclude(
        pk=undo.compensates_id
    )
    waiting = waiting.filter(compensation_state="planned").order_by("step_index").first()
    assert waiting is not None and waiting.step_index < undo.compensates.step_index

    pages = render_every_screen({"requester": world["bob"], "operator": world["olga"]})
    assert_pages_true(pages, Truth())
    owners = {
        (c.subject, c.value)
        for url, html in pages.items()
        for c in claims_in(url, html)
        if c.name == "handoff.next_owner"
    }
    assert (f"handoff:{waiting.pk}", "operator") in owners
    assert (f"handoff:{undo.compensates_id}", "operator") in owners
