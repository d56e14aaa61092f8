"""Open work is cross-checked with the receiver's own records: a screen may say the work is open while the
receiver has not sent word of its end yet (the one lag left: the console knows what it is told), and fails
once the receiver has sent it (its event's `sent_at`) and holds no open task. Both backends."""

import pytest
from django.utils import timezone

from delivery.models import TaskEvent
from delivery.services import task_status_set
from tests.builders import approve, deliver
from tests.factories import three_step_onboarding_world
from tests.oracle.oracle import check_pages
from tests.oracle.truth import Truth

pytestmark = pytest.mark.django_db(databases=["default", "delivery"])


def work_claim(pk: int, value: str) -> dict[str, str]:
    return {
        "operator /handoffs/": f'<span data-claim="handoff.work" data-subject="handoff:{pk}" '
        f'data-value="{value}">work: {value}</span>'
    }


def test_open_work_fails_once_the_receiver_has_sent_word_that_it_is_done():
    world = three_step_onboarding_world()
    step = deliver(approve(world))
    task_status_set(action_key=step.action_key, status="done")
    events = TaskEvent.objects.filter(action_key=step.action_key, status="done")
    assert events.exists()
    # Done at the receiver, its word not sent yet: the console cannot know, "open" is what it was told.
    events.update(sent_at=None)
    step.refresh_from_db()
    assert step.work_status in ("open", "in_progress", "")
    problems, _ = check_pages(work_claim(step.pk, "unfinished"), Truth())
    assert problems == []
    # The receiver sent it: a screen still saying the work is open is false.
    events.update(sent_at=timezone.now())
    problems, _ = check_pages(work_claim(step.pk, "unfinished"), Truth())
    assert [(p.claim.name, p.claim.value) for p in problems] == [("handoff.work", "unfinished")]
