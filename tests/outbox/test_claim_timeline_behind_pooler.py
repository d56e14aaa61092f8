"""Behind a pooler a dispatcher's connection outlives a failover: the pooler changes the server behind it, so the
timeline check on connect (outbox/failover.py) never runs again, and an idle dispatcher's next claim would take
on the promoted replica what the old primary had already sent. With `HANDOFF_TIMELINE_CHECK_EACH_CLAIM` (on with
DATABASE_TRANSACTION_POOLER) each claim reads the timeline first.

The failover is the database's own record of the timeline it last saw set one behind the server's: what a
process whose connection was opened before the promotion meets at its next claim (the real switch, with real
processes behind PgBouncer, is tests/faults/test_failover_pooler.py)."""

import pytest
from django.db import connection

from outbox.dispatch.claims import handoff_claim_due
from outbox.failover import TIMELINES_SQL
from outbox.models import DatabaseTimeline, Handoff, HandoffState
from tests.builders import record

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(databases=["default", "delivery"])]


def _server_timeline() -> int:
    with connection.cursor() as cursor:
        cursor.execute(TIMELINES_SQL)
        return cursor.fetchone()[0]


def _failed_over_under_an_open_connection() -> None:
    timeline = _server_timeline()
    DatabaseTimeline.objects.update_or_create(pk=1, defaults={"timeline": timeline - 1})


def test_behind_a_pooler_a_claim_after_a_failover_marks_first_and_sends_nothing(settings):
    """Fails on the code that checked only on connect: the claim took the pending handoff."""
    settings.HANDOFF_TIMELINE_CHECK_EACH_CLAIM = True
    handoff = record(501)
    _failed_over_under_an_open_connection()
    assert handoff_claim_due(worker="d1") == []
    handoff.refresh_from_db()
    assert handoff.state == HandoffState.UNCERTAIN, (
        "asked of the destination before any new attempt"
    )
    assert DatabaseTimeline.objects.get(pk=1).timeline == _server_timeline()


def test_without_a_pooler_the_claim_reads_no_timeline_and_claims(settings):
    """Connected directly, every connection is new after a failover: the check on connect covers it, and the
    claim costs no extra statement."""
    settings.HANDOFF_TIMELINE_CHECK_EACH_CLAIM = False
    handoff = record(502)
    _failed_over_under_an_open_connection()
    [claim] = handoff_claim_due(worker="d1")
    assert claim.handoff_id == handoff.pk
    assert Handoff.objects.get(pk=handoff.pk).state == HandoffState.IN_FLIGHT
