"""A dispatcher's turn of one-call handoffs, counted: the statements it sends, and its destination's row read
without the ORM building a model at each turn (what a turn costs in CPU is `make bench`'s to measure)."""

import threading

import psycopg
import pytest
from django.conf import settings
from django.db import connection
from django.db.models.signals import post_init
from django.test.utils import CaptureQueriesContext

from delivery.models import ReceiverTask
from outbox.destinations.registry import DestinationDisabled, destination_named
from outbox.dispatch import runner
from outbox.dispatch.claims import _turn_claim_sql
from outbox.dispatch.runner import _serve_turn
from outbox.dispatch.serving import Turn
from outbox.models import Attempt, DestinationConfig, DestinationHealth, Handoff, HandoffState
from outbox.services.destination_windows import destination_pause_by_operator
from outbox.services.limits import destination_acquire, destination_release, destination_set_limits

pytestmark = pytest.mark.django_db(databases=["default", "delivery"])


@pytest.fixture(autouse=True)
def _first_turn_of_the_process():
    """Each test's destination is new to the process: no row of an earlier test's is remembered."""
    runner._built_from.clear()


def test_a_turn_of_one_call_handoffs_costs_two_statements_and_delivers_each(make_handoff):
    """Its destination's row with its limits and breaker read in the claim's own statement (they were a
    round trip of their own between a wake-up and its claim), and the outcomes in one statement: on
    PostgreSQL a turn's statements do not grow with its handoffs. The destination's first turn in a process
    reads its row before it claims (the claim goes ahead only on the row the last turn built it from)."""
    DestinationConfig.objects.create(name="system", kind="in_process", config={})
    DestinationHealth.objects.create(name="system")  # as after the destination's first batch
    handoffs = [make_handoff(n, destination="system") for n in range(1, 6)]
    with CaptureQueriesContext(connection) as first:
        assert _serve_turn("system", Turn.DELIVER, "w1", threading.Event()).delivered == 5
    handoffs += [make_handoff(n, destination="system") for n in range(6, 11)]
    with CaptureQueriesContext(connection) as statements:
        stats = _serve_turn("system", Turn.DELIVER, "w1", threading.Event())
    assert stats.delivered == 5
    for handoff in handoffs:
        handoff.refresh_from_db()
        task = ReceiverTask.objects.get(action_key=handoff.action_key)
        assert (handoff.state, handoff.destination_id) == (
            HandoffState.DELIVERED,
            str(task.task_id),
        )
    assert ReceiverTask.objects.count() == 10
    if connection.vendor == "postgresql":
        assert len(first) == 3, [q["sql"][:80] for q in first]
        assert len(statements) == 2, [q["sql"][:80] for q in statements]


def test_a_woken_turn_that_finds_nothing_due_sends_one_statement(make_handoff):
    """A dispatcher woken for a handoff another one claimed: its turn's reads and its empty claim are one
    round trip (they were two)."""
    DestinationConfig.objects.create(name="system", kind="in_process", config={})
    DestinationHealth.objects.create(name="system")
    make_handoff(1, destination="system")
    assert _serve_turn("system", Turn.DELIVER, "w1", threading.Event()).delivered == 1
    with CaptureQueriesContext(connection) as statements:
        assert _serve_turn("system", Turn.DELIVER, "w1", threading.Event()).claimed == 0
    if connection.vendor == "postgresql":
        assert len(statements) == 1, [q["sql"][:80] for q in statements]


def test_a_turn_claims_nothing_for_a_destination_paused_since_its_last_turn(make_handoff):
    """An operator's pause that began after the destination's last turn: the next turn's claim (which reads
    the holds itself) takes nothing, and the handoff waits, unattempted."""
    DestinationConfig.objects.create(name="system", kind="in_process", config={})
    DestinationHealth.objects.create(name="system")
    make_handoff(1, destination="system")
    assert _serve_turn("system", Turn.DELIVER, "w1", threading.Event()).delivered == 1
    destination_pause_by_operator(name="system", actor=None, reason="maintenance", actor_label="op")
    waiting = make_handoff(2, destination="system")
    stats = _serve_turn("system", Turn.DELIVER, "w1", threading.Event())
    assert (stats.claimed, stats.limited) == (0, True)
    _never_attempted(waiting)


def test_a_turn_claims_nothing_for_a_destination_limited_since_its_last_turn_while_full(
    make_handoff, django_user_model
):
    """A limit set after the destination's last turn, its one slot held by another dispatcher's call: the next
    turn's claim does not go ahead on its own (nothing claimed, then given back), the turn is refused a slot
    and the handoff waits, unattempted; once the slot is free the turn takes it and delivers under it."""
    DestinationConfig.objects.create(name="system", kind="in_process", config={})
    DestinationHealth.objects.create(name="system")
    make_handoff(1, destination="system")
    assert _serve_turn("system", Turn.DELIVER, "w1", threading.Event()).delivered == 1
    destination_set_limits(
        name="system",
        max_concurrency=1,
        max_requests_per_second="",
        actor=django_user_model.objects.create(username="op"),
        reason="one at a time",
    )
    other = destination_acquire(name="system", worker="w2", requests=1, lease_seconds=30)
    waiting = make_handoff(2, destination="system")
    stats = _serve_turn("system", Turn.DELIVER, "w1", threading.Event())
    assert (stats.claimed, stats.limited) == (0, True)
    _never_attempted(waiting)
    destination_release(permit=other)
    with CaptureQueriesContext(connection) as statements:
        assert _serve_turn("system", Turn.DELIVER, "w1", threading.Event()).delivered == 1
    assert any("outbox_destinationslot" in q["sql"] for q in statements)


def test_a_turn_claims_nothing_for_a_destination_disabled_since_its_last_turn(make_handoff):
    """A destination disabled after its last turn: its row no longer the one the claim was built for, the
    claim does not go ahead, and the turn refuses the destination with the handoff unattempted."""
    DestinationConfig.objects.create(name="system", kind="in_process", config={})
    DestinationHealth.objects.create(name="system")
    make_handoff(1, destination="system")
    assert _serve_turn("system", Turn.DELIVER, "w1", threading.Event()).delivered == 1
    DestinationConfig.objects.filter(name="system").update(enabled=False)
    waiting = make_handoff(2, destination="system")
    with pytest.raises(DestinationDisabled):
        _serve_turn("system", Turn.DELIVER, "w1", threading.Event())
    _never_attempted(waiting)


def _never_attempted(handoff: Handoff) -> None:
    """Pending as it was made, and no attempt of it written: not claimed and given back."""
    handoff.refresh_from_db()
    assert (handoff.state, handoff.attempts) == (HandoffState.PENDING, 0)
    assert not Attempt.objects.filter(handoff_id=handoff.pk).exists()


def test_a_turn_reads_its_destinations_row_without_a_model_and_serves_a_change_at_the_next():
    DestinationConfig.objects.create(name="system", kind="in_process", config={})
    built: list[DestinationConfig] = []

    def seen(sender, instance, **kwargs):
        built.append(instance)

    post_init.connect(seen, sender=DestinationConfig)
    try:
        first = destination_named("system")
        DestinationConfig.objects.filter(name="system").update(config={"supports_lookup": False})
        second = destination_named("system")
    finally:
        post_init.disconnect(seen, sender=DestinationConfig)
    assert first.supports_lookup and not second.supports_lookup
    assert Handoff.objects.count() == 0
    if connection.vendor == "postgresql":
        # The row read at every turn as a tuple (0.35 ms of a dispatcher's CPU a turn went to the ORM).
        assert built == []


def test_an_idle_turn_delivers_what_fell_due_meanwhile(make_handoff):
    """A dispatcher whose last turn found nothing probes at its next one and delivers what is due by then, on
    SQLite too (its probe failed there: SQLite's `now()` is written with escaped `%`s)."""
    DestinationConfig.objects.create(name="system", kind="in_process", config={})
    assert _serve_turn("system", Turn.POLL, "w1", threading.Event()).claimed == 0
    handoff = make_handoff(1, destination="system")
    assert _serve_turn("system", Turn.POLL, "w1", threading.Event()).delivered == 1
    handoff.refresh_from_db()
    assert handoff.state == HandoffState.DELIVERED


def test_an_idle_turn_that_finds_nothing_due_sends_only_its_probe():
    """Most of an idle dispatcher's turns find nothing due: they probe the claim index and send nothing else
    (the destination's row, read first, cost as much as the probe)."""
    DestinationConfig.objects.create(name="system", kind="in_process", config={})
    DestinationHealth.objects.create(name="system")
    with CaptureQueriesContext(connection) as statements:
        idle = _serve_turn("system", Turn.POLL, "w1", threading.Event())
    assert idle.claimed == 0
    assert len(statements) == 1, [q["sql"][:80] for q in statements]


@pytest.mark.postgres  # the turn's claim is PostgreSQL's
def test_a_turns_claim_is_short_enough_for_psycopg_to_keep_it_converted():
    """psycopg converts a statement's `%s` placeholders once per text and keeps the result, only for a text of at
    most `MAX_CACHED_STATEMENT_LENGTH` characters: a longer one was split again by a regular expression at every
    execution, a third of the claim's client CPU (4,625 characters until 2026-12-07)."""
    sql, _reads_params, _due_params = _turn_claim_sql("receiver", settings.HANDOFF_CLAIM_BATCH)
    assert len(sql) <= psycopg._queries.MAX_CACHED_STATEMENT_LENGTH, len(sql)
