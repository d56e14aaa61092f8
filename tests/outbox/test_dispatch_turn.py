"""A dispatcher's turn of one-call handoffs, counted: the statements it sends, and its destination's row read
without the ORM building a model at each turn (what a turn costs in CPU is `make bench`'s to measure)."""

import threading

import pytest
from django.db import connection
from django.db.models.signals import post_init
from django.test.utils import CaptureQueriesContext

from delivery.models import ReceiverTask
from outbox.destinations.registry import destination_named
from outbox.dispatch.runner import _serve_turn
from outbox.dispatch.serving import Turn
from outbox.models import DestinationConfig, DestinationHealth, Handoff, HandoffState

pytestmark = pytest.mark.django_db(databases=["default", "delivery"])


def test_a_turn_of_one_call_handoffs_costs_three_statements_and_delivers_each(make_handoff):
    """Its destination's row with its limits and breaker (one statement: two were two round trips between a
    wake-up and its claim), the claim, and the outcomes in one statement: on PostgreSQL a turn's statements
    do not grow with its handoffs."""
    DestinationConfig.objects.create(name="system", kind="in_process", config={})
    DestinationHealth.objects.create(name="system")  # as after the destination's first batch
    handoffs = [make_handoff(n, destination="system") for n in range(1, 6)]
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
    assert ReceiverTask.objects.count() == 5
    if connection.vendor == "postgresql":
        assert len(statements) == 3, [q["sql"][:80] for q in statements]


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
