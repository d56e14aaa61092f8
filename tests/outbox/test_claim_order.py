"""A batch's claims come back in the order they fell due (`outbox/dispatch/claims.py`), on both databases: the
batch's calls go out in that order. On PostgreSQL the claim reads its rows back through a join, whose output has
no order of its own (a fault run saw a batch's sixth e-mail sent third); on SQLite it read them back by id."""

from datetime import timedelta

import pytest

from outbox.clock import db_time
from outbox.dispatch.claims import handoff_claim_due
from outbox.models import Handoff
from tests.factories import HandoffFactory

pytestmark = pytest.mark.django_db


def test_a_batch_is_claimed_in_the_order_its_handoffs_fell_due_not_by_id():
    handoffs = [HandoffFactory(number=n) for n in range(1, 9)]
    now = db_time()
    # Due in the reverse of their ids, and of the order they were written: the last written fell due first.
    for age, handoff in enumerate(handoffs, start=1):
        Handoff.objects.filter(pk=handoff.pk).update(next_attempt_at=now - timedelta(seconds=age))

    claims = handoff_claim_due(worker="w1", limit=20, lease_seconds=60)

    assert [c.action_key for c in claims] == [h.action_key for h in reversed(handoffs)]
