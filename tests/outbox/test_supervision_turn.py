"""A dispatcher's supervision turn (`outbox/dispatch/runner.py` `_supervise`), counted: it comes every
`--maintain-every` seconds (the settlement bench's every 50 ms, at each of 4 dispatchers), so what one turn
reads and writes is paid that often, beside the work it supervises."""

import threading

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from outbox.dispatch import heartbeat
from outbox.dispatch.held_destinations import Holds
from outbox.dispatch.runner import Pool, _supervise
from outbox.dispatch.serving import Schedule
from outbox.models import DestinationConfig

pytestmark = pytest.mark.django_db


@pytest.fixture
def pool(settings, tmp_path):
    settings.VAR_DIR = tmp_path
    # The turn alone: no worker threads taking turns beside it.
    settings.HANDOFF_DISPATCH_WORKERS = 0
    stop = threading.Event()
    yield Pool(Schedule(idle_sleep=0.5, maintain_every=5.0, stop=stop, lanes=1), "w1", stop)
    stop.set()


def _reads_of_destination_rows(statements) -> int:
    table = DestinationConfig._meta.db_table
    return sum(1 for query in statements if f'FROM "{table}"' in query["sql"])


def test_a_supervision_turn_reads_the_enabled_destinations_once_and_serves_them(pool):
    DestinationConfig.objects.create(name="system", kind="in_process", config={})
    served = set(pool.schedule.names())
    with CaptureQueriesContext(connection) as statements:
        _supervise(pool, Holds())
    assert "system" in set(pool.schedule.names()) - served
    # The names once (they were read twice, by the problems' check and by what is served), then each
    # destination's own row once (its configuration, for its problems).
    destinations = len(pool.schedule.names())
    assert _reads_of_destination_rows(statements) == 1 + destinations, [
        q["sql"][:90] for q in statements
    ]


def test_supervision_beats_at_its_first_turn_then_not_again_within_a_second(pool):
    _supervise(pool, Holds())
    first = heartbeat.last_beat("w1")
    assert first is not None
    _supervise(pool, Holds())  # the next turn, a few milliseconds later
    assert heartbeat.last_beat("w1") == first


def test_supervision_beats_again_once_the_bound_has_passed(settings, tmp_path, monkeypatch):
    monkeypatch.setattr(heartbeat, "BEAT_EVERY_SECONDS", 0.0)
    settings.VAR_DIR = tmp_path
    settings.HANDOFF_DISPATCH_WORKERS = 0
    stop = threading.Event()
    pool = Pool(Schedule(idle_sleep=0.5, maintain_every=5.0, stop=stop, lanes=1), "w1", stop)
    _supervise(pool, Holds())
    first = heartbeat.last_beat("w1")
    _supervise(pool, Holds())
    assert heartbeat.last_beat("w1").at > first.at
