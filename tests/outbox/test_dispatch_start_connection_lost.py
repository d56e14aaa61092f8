"""A dispatcher whose connection is cut during its start (its destinations' problems, the seed variables'
check, the holds it writes) waits for the database and starts again from the beginning, instead of exiting:
seen in `tests/faults/test_connection_faults.py`, where a dispatcher that started a little late lost its
connection in the seed variables' check and exited. Here every query of the start loses its connection once,
in turn, by a real `pg_terminate_backend` of the dispatcher's own backend."""

import contextlib
import threading
from io import StringIO

import psycopg
import pytest
from django.db import connection

from outbox.management.commands.dispatch import Command
from outbox.models import DestinationConfig, DestinationHealth, DestinationHold, PauseReason

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]
URL = "http://127.0.0.1:9/delivery/api"


@pytest.fixture
def a_start_that_asks_everything(settings):
    """The default destination's row agreeing with its seed variable (the check reads it), and a destination
    that cannot be served (the start holds it: it writes)."""
    settings.HANDOFF_DESTINATION = {**settings.HANDOFF_DESTINATION, "url": URL}
    settings.HANDOFF_DESTINATION_SEED_VARIABLES = {"RECEIVER_URL": "url"}
    DestinationConfig.objects.create(
        name=settings.HANDOFF_DESTINATION.get("name", "receiver"),
        kind="http",
        config={"url": URL},
    )
    DestinationConfig.objects.create(
        name="crm", kind="http", config={"url": "http://x", "retries": 3}
    )


def start(cut_at: int | None = None) -> tuple[object, int]:
    """The dispatcher's start; with `cut_at`, its connection is terminated by its own backend just before
    that query (counted from 1). The queries it made, counted."""
    made = 0

    def cutting(execute, sql, params, many, context):
        nonlocal made
        made += 1
        if made == cut_at:
            with contextlib.suppress(psycopg.Error):
                connection.connection.execute("SELECT pg_terminate_backend(pg_backend_pid())")
        return execute(sql, params, many, context)

    stop = threading.Event()
    # A start that never ends fails the test, not the suite; a daemon, cancelled, so that no timer keeps the
    # test process alive after its tests.
    timer = threading.Timer(120, stop.set)
    timer.daemon = True
    timer.start()
    command = Command(stdout=StringIO(), stderr=StringIO())
    try:
        with connection.execute_wrapper(cutting):
            holds = command.run_start(stop)
    finally:
        timer.cancel()
    return holds, made


def test_every_query_of_the_start_may_lose_its_connection_and_the_start_still_completes(
    a_start_that_asks_everything, caplog
):
    holds, queries = start()
    assert holds is not None and set(holds.seen) == {"crm"}
    assert queries >= 3, "the start asks the destinations, the seed variables and writes the hold"
    for cut_at in range(1, queries + 1):
        # Each start from none: the unservable hold is a row of its own (the breaker's pause is its hold).
        DestinationHealth.objects.all().delete()
        DestinationHold.objects.all().delete()
        caplog.clear()
        holds, _ = start(cut_at)
        assert holds is not None, f"the start ended without holds when query {cut_at} was cut"
        assert set(holds.seen) == {"crm"}, cut_at
        assert DestinationHealth.objects.get(name="crm").pause_reason == PauseReason.UNSERVABLE
        assert "start: database unavailable (failure 1)" in caplog.text, cut_at
