"""The requester's line for a step with business times (issue 39, "Business deadlines"): one waiting for its
not-before says until when and that the system sends it then; one whose must-finish-by passed says so, that
it is not sent late, and that an operator owns it."""

from datetime import timedelta

import pytest

from console.step_status import Evidence, step_line
from outbox.clock import db_time
from outbox.models import FailureClass, HandoffState
from outbox.services.deadlines import DEADLINE_PASSED
from tests.factories import HandoffFactory

pytestmark = pytest.mark.django_db(databases=["default", "delivery"])


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
