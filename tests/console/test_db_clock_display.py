"""Ages, waits and "in backoff" on console pages measure from the database clock that wrote the times, not from
the web host's clock: on a host whose clock is 30 s ahead or behind, a retry that is due says "due now", one
still waiting says when, and "x ago" counts from the database's now (both backends). The host's clock is the
one Django's code reads (`timezone.now`), set off by 30 s here; the database's is untouched.
`tests/faults/test_skewed_web.py` does the same with a real web process under libfaketime."""

import threading
from datetime import timedelta

import pytest
from django.db import connections
from django.template import Context, Template
from django.utils import timezone

from lib.databases import DB
from outbox.clock import DbNow, db_time
from outbox.models import FailureClass, Handoff, HandoffState
from outbox.page_clock import measure_offset, page_now
from tests.console.clients import client_for
from tests.factories import HandoffFactory, onboarding_world

pytestmark = pytest.mark.django_db(databases=["default", "delivery"])
SKEW = timedelta(seconds=30)


@pytest.fixture(params=[SKEW, -SKEW], ids=["host 30 s ahead", "host 30 s behind"])
def skewed_host(request, monkeypatch):
    """This host's clock `request.param` off the database's, its offset measured as a new connection does."""
    real_now = timezone.now
    monkeypatch.setattr(timezone, "now", lambda: real_now() + request.param)
    measure_offset()
    yield request.param
    monkeypatch.setattr(timezone, "now", real_now)
    measure_offset()


def in_backoff_for(seconds: float) -> Handoff:
    """A pending handoff after a failed attempt, its next attempt `seconds` from now on the database clock."""
    handoff = HandoffFactory(
        attempts=1, failure_class=FailureClass.TRANSIENT, next_attempt_at=DbNow(seconds)
    )
    return Handoff.objects.get(pk=handoff.pk)


def test_page_now_is_the_database_clock_on_a_skewed_host(skewed_host):
    before, now, after = db_time(), page_now(), db_time()
    # The offset was measured by one query, to within half its time: a third of the skew allows for a loaded
    # machine's slow query and still tells the database's clock from the host's.
    assert before - SKEW / 3 <= now <= after + SKEW / 3
    assert abs(timezone.now() - now) > timedelta(seconds=25)  # the host's clock is not it


def test_a_new_connection_measures_the_host_offset(monkeypatch):
    real_now = timezone.now
    monkeypatch.setattr(timezone, "now", lambda: real_now() - SKEW)
    measured = {}

    def connect():
        connections[DB].ensure_connection()  # a thread's own connection: connection_created
        measured["offset"] = page_now() - timezone.now()
        connections[DB].close()

    thread = threading.Thread(target=connect)
    thread.start()
    thread.join(60)
    monkeypatch.setattr(timezone, "now", real_now)
    measure_offset()
    assert abs(measured["offset"] - SKEW) < SKEW / 3


def test_in_backoff_follows_the_database_clock(skewed_host):
    # Due 25 s ago and in 25 s, on the database clock: a 30 s skew would turn either one around, and a loaded
    # machine has 25 s, not 10, before the waiting one falls due by itself.
    assert not in_backoff_for(-25).in_backoff
    assert in_backoff_for(25).in_backoff


def test_ages_and_waits_count_from_the_database_clock(skewed_host):
    now = db_time()
    page = Template(
        "{% load db_clock %}{{ made|timesince }} ago · in {{ due|timeuntil }} · {{ empty|timesince }}"
    ).render(
        Context(
            {"made": now - timedelta(seconds=35), "due": now + timedelta(seconds=35), "empty": None}
        )
    )
    # 35 s either way is under a minute on the database clock (25 s to spare for a loaded machine); 30 s off,
    # one of them is 65 s ("1 minute").
    assert page == "0\xa0minutes ago · in 0\xa0minutes · "


def test_the_handoff_page_says_a_due_retry_is_due_and_a_waiting_one_waits(skewed_host):
    world = onboarding_world()
    client = client_for(world["olga"])
    # Due in 25 s, not 10: two pages of a loaded machine took longer than 10 s and the waiting one fell due.
    due, waiting = in_backoff_for(-25), in_backoff_for(25)
    assert due.state == waiting.state == HandoffState.PENDING

    due_page = client.get(f"/handoffs/{due.pk}/").content.decode()
    waiting_page = client.get(f"/handoffs/{waiting.pk}/").content.decode()

    assert "· next attempt" not in due_page
    assert "· next attempt" in waiting_page
