"""outbox/selectors.py: console reads of handoffs, scoped to the workspaces the caller passes."""

from datetime import timedelta

import pytest
from django.utils import timezone

from outbox.models import Attempt, HandoffEvent, HandoffState
from outbox.selectors import (
    handoff_timeline,
    handoff_visible,
    handoffs_in,
)
from tests.factories import HandoffFactory

pytestmark = pytest.mark.django_db(databases=["default", "delivery"])
S = HandoffState


def test_handoffs_in_and_handoff_visible_keep_to_the_given_workspaces(db):
    mine, theirs = HandoffFactory(workspace_id=7), HandoffFactory(workspace_id=8)
    assert list(handoffs_in([7])) == [mine]
    assert handoff_visible([7], mine.pk) == mine
    assert handoff_visible([7], theirs.pk) is None
    assert handoff_visible([], mine.pk) is None


def test_timeline_is_attempts_by_number_and_events_in_order(db):
    handoff = HandoffFactory()
    now = timezone.now()
    for number in (2, 1):
        Attempt.objects.create(
            handoff=handoff, number=number, fencing_epoch=number, worker="w1", started_at=now
        )
    later = HandoffEvent.objects.create(handoff=handoff, to_state=S.IN_FLIGHT, actor_label="system")
    earlier = HandoffEvent.objects.create(handoff=handoff, to_state=S.PENDING, actor_label="system")
    HandoffEvent.objects.filter(pk=earlier.pk).update(at=now - timedelta(seconds=1))
    attempts, events = handoff_timeline(handoff)
    assert [a.number for a in attempts] == [1, 2]
    assert list(events) == [earlier, later]
