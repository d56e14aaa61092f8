"""The requester's line for a step with business times (issue 39, "Business deadlines"): one waiting for its
not-before says until when and that the system sends it then; one whose must-finish-by passed says so, that
it is not sent late, and that an operator owns it."""

from datetime import timedelta

import pytest

from console.step_status import Evidence, step_line
from outbox.clock import db_time
from outbox.dispatch.dispatcher import drain
from outbox.models import FailureClass, HandoffState
from outbox.services.case_holds import case_hold
from outbox.services.deadlines import DEADLINE_PASSED
from tests.builders import approve
from tests.factories import ONBOARDING_PAYLOAD, HandoffFactory, three_step_onboarding_world

pytestmark = pytest.mark.django_db(databases=["default", "delivery"])
S = HandoffState


def test_a_step_waiting_for_its_not_before_and_one_past_its_deadline_say_so():
    now = db_time()
    later = HandoffFactory(not_before=now + timedelta(hours=2), next_attempt_at=now)
    line = step_line("This step", later, Evidence(handoffs=[later], now=now))
    start = f"{later.not_before:%H:%M} UTC" if later.not_before.date() == now.date() else ""
    assert line.text.startswith("not sent yet: it may not go before ")
    assert start in line.text and line.owner.startswith("the system")
    late = HandoffFactory(
        state=HandoffState.NEEDS_ATTENTION,
        failure_class=FailureClass.PERMANENT,
        reason_code=DEADLINE_PASSED,
        finish_by=now - timedelta(minutes=5),
    )
    line = step_line("This step", late, Evidence(handoffs=[late], now=now))
    assert "passed before it could be sent; it is not sent late" in line.text
    assert line.owner == "the operators of workspace 7"


def test_a_step_behind_an_earlier_one_of_its_ordering_key_says_so_without_the_key():
    """Order per business entity: the claim leaves a step out while one approved before it for the same key
    is open at its destination; its line said "being sent" meanwhile. Neither the key's value (here an
    e-mail) nor the other request is shown."""
    key = "owner@acme.example"
    first = HandoffFactory(
        order_key=key,
        order_position=1,
        state=HandoffState.NEEDS_ATTENTION,
        failure_class=FailureClass.PERMANENT,
    )
    later = HandoffFactory(order_key=key, order_position=2, destination=first.destination)
    line = step_line("This step", later, Evidence(handoffs=[later], now=db_time()))
    assert line.text.startswith("not sent yet: a step approved before it for the same ordering key")
    assert "in approval order" in line.text and key not in line.text
    assert first.action_key not in line.text
    assert "(an operator decides that one)" in line.text and line.owner.startswith("the system")
    other = HandoffFactory(order_key="globex", order_position=3, destination=first.destination)
    line = step_line("This step", other, Evidence(handoffs=[other], now=db_time()))
    assert line.text.startswith("being sent to")


def test_a_step_behind_a_held_one_of_its_ordering_key_says_an_operator_holds_that_one():
    """Hold one case x order per entity: a held first action keeps its client's later one back (the claim
    leaves the later one out while the first is open), and the later one's line said only that the first
    was "pending", the system sending it once that one is settled, though nothing moves before an operator
    resumes the first. Neither the key's value nor the other request is named."""
    world = three_step_onboarding_world()
    first = approve(world, 42)
    later = approve(world, 43)
    assert first.order_key == later.order_key == ONBOARDING_PAYLOAD["client_name"]
    case_hold(handoff_id=first.pk, actor=world["olga"], reason="calling ACME", whole_case=False)
    drain()
    first.refresh_from_db()
    later.refresh_from_db()
    assert (first.state, later.state, later.attempts) == (S.PENDING, S.PENDING, 0)

    line = step_line("This step", later, Evidence(handoffs=[later], now=db_time()))
    assert line.text.startswith("not sent yet: a step approved before it for the same ordering key")
    assert "(an operator holds that one's case)" in line.text
    assert line.next == "the system sends it once that one is resumed and settled"
    assert later.order_key not in line.text and first.action_key not in line.text
    assert "calling ACME" not in line.text
