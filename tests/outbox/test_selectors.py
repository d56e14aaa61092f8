"""outbox/selectors.py: console reads of handoffs, scoped to the workspaces the caller passes."""

from datetime import timedelta

import pytest
from django.utils import timezone

from lib.paging import keyset_page
from outbox.models import Attempt, Handoff, HandoffEvent, HandoffState
from outbox.selectors import (
    handoff_timeline,
    handoff_visible,
    handoffs_in,
    open_counts_by_workspace,
)
from tests.factories import FindingFactory, HandoffFactory, make_workspace

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


@pytest.mark.parametrize("newest_first", [True, False])
def test_keyset_pages_walk_every_row_once_in_order_with_equal_timestamps(db, newest_first):
    HandoffFactory.create_batch(7)
    Handoff.objects.filter(pk__in=list(Handoff.objects.values_list("pk", flat=True)[2:5])).update(
        created_at=timezone.now()
    )
    seen, after, more = [], None, True
    while more:
        rows, more = keyset_page(
            Handoff.objects.all(), after=after, size=3, newest_first=newest_first
        )
        seen += rows
        after = (rows[-1].created_at, rows[-1].pk)
    keys = [(h.created_at, h.pk) for h in seen]
    assert keys == sorted(keys, reverse=newest_first)
    assert len(seen) == len(set(seen)) == 7


def test_keyset_page_says_whether_another_page_follows(db):
    HandoffFactory.create_batch(3)
    assert keyset_page(Handoff.objects.all(), after=None, size=3)[1] is False
    assert keyset_page(Handoff.objects.all(), after=None, size=2)[1] is True


def test_open_counts_are_handoffs_needing_a_person_per_workspace_including_live_findings(db):
    make_workspace(7), make_workspace(8)
    HandoffFactory(state=S.NEEDS_ATTENTION)
    HandoffFactory(state=S.UNCERTAIN)
    HandoffFactory(state=S.PENDING)
    delivered = HandoffFactory(state=S.DELIVERED)
    FindingFactory(action_key=delivered.action_key)
    HandoffFactory(state=S.NEEDS_ATTENTION, workspace_id=8)
    assert open_counts_by_workspace([7]) == {7: 3}
    assert open_counts_by_workspace([7, 8]) == {7: 3, 8: 1}
