"""The health dashboard reads a bounded part of the outbox however long its history (issue 26): counts stop
past a cap and say so on the page, rates and series cover a window read by an indexed time column, and no
query of the page reads the handoffs without a LIMIT, a time bound or an open state's index."""

import re
from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from outbox.clock import db_time
from outbox.models import Attempt, AttemptOutcome, Handoff, HandoffEvent, HandoffState
from reconciliation.selectors.health import failure_rates, health_summary
from tests.factories import HandoffFactory

pytestmark = pytest.mark.django_db(databases=["default", "delivery"])
S = HandoffState


def _many(world, cap: int) -> None:
    """cap + 2 rows in each counted set of workspace 7 (so every count is over its cap)."""
    now = db_time()
    for _ in range(cap + 2):
        HandoffFactory(state=S.DELIVERED, delivered_at=now)
        HandoffFactory(state=S.PENDING)
        failed = HandoffFactory(
            state=S.NEEDS_ATTENTION, reason_code="retries_exhausted", attention_since=now
        )
        Attempt.objects.create(
            handoff=failed,
            number=1,
            fencing_epoch=1,
            worker="w1",
            started_at=now,
            outcome=AttemptOutcome.DUPLICATE,
        )
        HandoffEvent.objects.create(
            handoff=failed,
            to_state=S.NEEDS_ATTENTION,
            actor=world["olga"],
            actor_label="olga",
            action="assign",
        )


def test_counts_stop_past_the_cap_and_the_page_says_so(client, world, settings):
    settings.HEALTH_COUNT_CAP = 3
    _many(world, 3)
    figures = health_summary([7])["figures"]
    for name in (
        "pending",
        "needs_attention",
        "needing_person",
        "retry_exhausted",
        "duplicate_preventions",
        "manual_interventions",
    ):
        assert (figures[name]["value"], figures[name]["text"], figures[name]["capped"]) == (
            4,
            "3+",
            True,
        ), name
    assert (figures["uncertain"]["text"], figures["uncertain"]["capped"]) == ("0", False)
    # Completed: the deliveries of the last 24 hours, exact (the window bounds the read).
    assert figures["completed"]["value"] == 5
    client.force_login(world["olga"])
    html = client.get(reverse("reconciliation:health")).content.decode()
    # The count's words, inside its claim (console/claims.py).
    assert re.search(r'<a href="/handoffs/\?state=pending"><span [^>]*>3\+</span></a>', html)
    assert re.search(
        r'<a href="/handoffs/\?state=needs_attention"><span [^>]*>3\+</span></a>', html
    )
    assert 'Counts stop at 3: "3+" means more' in html
    assert "cover the last 24 hours" in html


def test_a_count_below_the_cap_is_exact(world, settings):
    settings.HEALTH_COUNT_CAP = 10
    _many(world, 3)  # 5 of each
    figures = health_summary([7])["figures"]
    assert (figures["pending"]["value"], figures["pending"]["text"]) == (5, "5")
    assert figures["pending"]["capped"] is False


def test_failure_rates_cover_the_handoffs_created_in_the_last_24_hours(db):
    now = db_time()
    recent = HandoffFactory(state=S.NEEDS_ATTENTION, attention_since=now)
    HandoffFactory(state=S.DELIVERED)
    old = HandoffFactory(state=S.NEEDS_ATTENTION, attention_since=now)
    Handoff.objects.filter(pk=old.pk).update(created_at=now - timedelta(days=2))
    assert recent.pk != old.pk
    [row] = failure_rates([7], now=now)
    assert (row["total"], row["failed"]) == (2, 1)


def test_completed_counts_the_deliveries_of_the_last_24_hours(db):
    now = db_time()
    HandoffFactory(state=S.DELIVERED, delivered_at=now)
    old = HandoffFactory(state=S.DELIVERED)
    Handoff.objects.filter(pk=old.pk).update(
        delivered_at=now - timedelta(days=2), updated_at=now - timedelta(days=2)
    )
    assert health_summary([7], now=now)["figures"]["completed"]["value"] == 1


def test_a_delivery_is_in_the_hour_it_was_delivered_though_changed_since(db):
    """The series finds deliveries through `updated_at` (the retention index): a delivered row changed later
    (a work status read back) still counts in its delivery hour."""
    now = db_time()
    hour = now.replace(minute=0, second=0, microsecond=0)
    row = HandoffFactory(state=S.DELIVERED)
    Handoff.objects.filter(pk=row.pk).update(delivered_at=hour - timedelta(hours=3), updated_at=now)
    series = health_summary([7], now=now)["series"]
    assert series[-4]["delivered"] == 1 and sum(p["delivered"] for p in series) == 1


# A read of the handoff table is bounded when it stops (LIMIT), covers a window (a time lower bound), or is
# one open state's rows (the partial index of open states: the backlog, not the history).
_BOUNDED = re.compile(
    r"\bLIMIT\b"
    r"|\"(created_at|updated_at|started_at)\" >= "
    r"|\"state\" = '(pending|in_flight|uncertain|needs_attention)'",
)


def _reads_of_handoffs(queries) -> list[str]:
    return [
        q["sql"]
        for q in queries
        if q["sql"].lstrip().upper().startswith("SELECT") and '"outbox_handoff"' in q["sql"]
    ]


def test_every_read_of_the_handoffs_is_bounded(client, world, settings):
    settings.HEALTH_COUNT_CAP = 3
    _many(world, 3)
    client.force_login(world["olga"])
    with CaptureQueriesContext(connection) as ctx:
        assert client.get(reverse("reconciliation:health")).status_code == 200
    reads = _reads_of_handoffs(ctx.captured_queries)
    assert reads, "the page reads the handoffs"
    unbounded = [sql for sql in reads if not _BOUNDED.search(sql)]
    assert unbounded == []
    # No exact count of a state over the whole table: every COUNT of handoffs is over a capped subquery,
    # a window, or one open state.
    grouped = [sql for sql in reads if "GROUP BY" in sql and not _BOUNDED.search(sql)]
    assert grouped == []


def test_the_counts_are_one_query_whatever_their_number(
    client, world, settings, django_assert_max_num_queries
):
    settings.HEALTH_COUNT_CAP = 3
    _many(world, 3)
    client.force_login(world["olga"])
    with CaptureQueriesContext(connection) as ctx:
        assert client.get(reverse("reconciliation:health")).status_code == 200
    capped = [q["sql"] for q in ctx.captured_queries if "AS capped" in q["sql"]]
    assert len(capped) == 1
    assert capped[0].count("LIMIT 4") == 7  # cap + 1, for each of the seven counts
