"""Hold one case x the backlog page (issue 39 beside the incidents of issue 40's round): a case an operator
holds, and a step waiting behind an earlier one of its ordering key, wait for a person, not a dispatcher.
They are not a destination "falling behind": the backlog cause counts what the claim would take
(`HandoffQuerySet.due`), so holding one case for an hour pages nobody, while a truly due handoff left an
hour still does. Both backends."""

import pytest

from incidents.causes import backlog_causes
from outbox.clock import DbNow, db_time
from outbox.models import Handoff
from outbox.services.case_holds import case_hold
from tests.builders import approve
from tests.factories import ONBOARDING_PAYLOAD, three_step_onboarding_world

pytestmark = pytest.mark.django_db(databases=["default", "delivery"])


def test_a_held_case_and_the_step_behind_it_are_no_backlog_a_due_one_still_is(settings):
    """Fails on the code that counted every pending handoff whose time had come: the held case and the
    step behind it (same client) made a backlog page, "while no call fails", an hour after the hold."""
    settings.ALERT_BACKLOG_AGE_SECONDS = 600
    world = three_step_onboarding_world()
    held, behind = approve(world, 42), approve(world, 43)
    assert held.order_key == behind.order_key
    case_hold(handoff_id=held.pk, actor=world["olga"], reason="calling ACME", whole_case=False)
    Handoff.objects.update(next_attempt_at=DbNow(-3600.0))

    assert backlog_causes(now=db_time()) == []

    due = approve(world, 44, payload={**ONBOARDING_PAYLOAD, "client_name": "Globex"})
    Handoff.objects.filter(pk=due.pk).update(next_attempt_at=DbNow(-3600.0))
    [cause] = backlog_causes(now=db_time())
    assert cause.cause == f"backlog:{due.destination}"
    assert [m.handoff_id for m in cause.members] == [due.pk]
    assert cause.title.endswith(": 1 due handoff(s) waiting")
