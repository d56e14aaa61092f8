"""Dispatchers that lose their database mid-run, with real processes on PostgreSQL: every connection of
every dispatcher terminated again and again, and a server restart. Delivery goes on in the same processes:
every handoff delivered, exactly one receiver task per key, no dispatcher exited."""

import time
import uuid
from collections import Counter
from concurrent.futures import ThreadPoolExecutor

import pytest
from django.db import connections

from delivery.models import ReceiverTask
from outbox.models import Handoff, HandoffState
from outbox.signing import signed_headers
from tests.faults.test_dispatch_faults import make_handoffs, wait_until
from tests.processes import LOCAL_HTTP

pytestmark = [pytest.mark.postgres, pytest.mark.faults, pytest.mark.long]
S = HandoffState
LEASE = "3"
KILL_ROUNDS = 8
# Each kill waits until the dispatchers have reconnected and delivered this many more: the rounds follow
# the run's progress, not a clock, so a fast machine cannot finish the run between two kills.
PROGRESS_BETWEEN_KILLS = 20


def _terminate(cursor, app_prefix: str) -> int:
    cursor.execute(
        "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity"
        " WHERE application_name LIKE %s AND pid <> pg_backend_pid()",
        [app_prefix + "%"],
    )
    return cursor.fetchone()[0]


def start_two_dispatchers(processes, app_prefix: str) -> list:
    # libpq takes the application name from PGAPPNAME: it marks every connection of a dispatcher,
    # its Django connections and its LISTEN connection alike, and only this test's dispatchers.
    return [
        processes.start_dispatcher(
            name, HANDOFF_LEASE_SECONDS=LEASE, PGAPPNAME=f"{app_prefix}{name}"
        )
        for name in ("d1", "d2")
    ]


@pytest.mark.django_db(databases=["default", "delivery"], transaction=True)
def test_dispatcher_connections_terminated_repeatedly_mid_run_all_delivered_once_by_the_same_processes(
    processes,
):
    keys = make_handoffs(1000)
    processes.start_receiver()
    app_prefix = f"faults-{uuid.uuid4().hex[:8]}-"
    dispatchers = start_two_dispatchers(processes, app_prefix)

    kills_mid_run = []  # (backends terminated, handoffs not yet delivered) per round
    delivered_at_last_kill = -PROGRESS_BETWEEN_KILLS
    deadline = time.monotonic() + 120
    while len(kills_mid_run) < KILL_ROUNDS and time.monotonic() < deadline:
        delivered = Handoff.objects.filter(state=S.DELIVERED).count()
        if delivered == len(keys):
            break
        if delivered >= delivered_at_last_kill + PROGRESS_BETWEEN_KILLS:
            with connections["default"].cursor() as cursor:
                terminated = _terminate(cursor, app_prefix)
            if terminated:
                kills_mid_run.append((terminated, len(keys) - delivered))
                delivered_at_last_kill = delivered
        time.sleep(0.02)
    assert len(kills_mid_run) == KILL_ROUNDS, (
        f"connections terminated mid-run only {len(kills_mid_run)} times"
    )
    wait_until(
        lambda: not Handoff.objects.exclude(state=S.DELIVERED).exists(),
        timeout=120,
        what="every handoff delivered after the kills",
        procs=dispatchers,
    )

    states = Counter(Handoff.objects.values_list("state", flat=True))
    assert states == {S.DELIVERED: len(keys)}, (states, kills_mid_run)
    exited = [proc for proc in dispatchers if proc.poll() is not None]
    assert not exited, "a dispatcher exited on a lost connection:\n" + "\n".join(
        proc.log_path.read_text()[-4000:] for proc in exited
    )
    assert_one_task_per_key(keys)


def assert_one_task_per_key(keys: list[str]) -> None:
    tasks = list(ReceiverTask.objects.values_list("action_key", "task_id"))
    assert len(tasks) == len(keys) and {key for key, _ in tasks} == set(keys), (
        "one task per key, none missing"
    )
    destination_ids = dict(Handoff.objects.values_list("action_key", "destination_id"))
    assert all(destination_ids[key] == str(task_id) for key, task_id in tasks)


def lookup_statuses(receiver_url: str, keys: list[str]) -> list[tuple[int, str]]:
    def lookup(key: str) -> tuple[int, str]:
        response = LOCAL_HTTP.get(
            f"{receiver_url}/tasks/{key}", headers=signed_headers(""), timeout=10
        )
        return response.status_code, response.text

    with ThreadPoolExecutor(max_workers=len(keys)) as pool:
        return list(pool.map(lookup, keys))


def test_server_restart_mid_run_all_delivered_once_and_the_receiver_answers_its_first_requests(
    private_postgres, private_processes
):
    import os
    import signal

    procs, server = private_processes, private_postgres
    count = 600
    procs.manage(
        "shell",
        "-c",
        f"from tests.faults.test_dispatch_faults import make_handoffs; make_handoffs({count})",
    )
    procs.start_receiver()
    dispatchers = start_two_dispatchers(procs, f"faults-{uuid.uuid4().hex[:8]}-")

    def delivered() -> int:
        return server.sql(
            "SELECT count(*) FROM outbox_handoff WHERE state = 'delivered'", dbname="handoff"
        )[0][0]

    wait_until(
        lambda: delivered() >= count // 5,
        timeout=60,
        what="a fifth of the handoffs delivered",
        procs=dispatchers,
    )
    # Paused dispatchers make the probe below the receiver's first requests after the restart.
    for proc in dispatchers:
        os.kill(proc.pid, signal.SIGSTOP)
    try:
        done_keys = [
            row[0]
            for row in server.sql(
                "SELECT action_key FROM outbox_handoff WHERE state = 'delivered' ORDER BY id LIMIT 16",
                dbname="handoff",
            )
        ]
        assert lookup_statuses(procs.receiver_url, done_keys)[0][0] == 200, (
            "the receiver holds connections"
        )
        server.restart()
        # As many concurrent lookups as the receiver has threads: each thread's stale connection is met.
        answers = lookup_statuses(procs.receiver_url, done_keys)
    finally:
        for proc in dispatchers:
            os.kill(proc.pid, signal.SIGCONT)
    assert [status for status, _ in answers] == [200] * len(done_keys), answers
    assert all(key in body for key, (_, body) in zip(done_keys, answers, strict=True))
    assert delivered() < count, "the restart happened mid-run"

    wait_until(
        lambda: delivered() == count,
        timeout=120,
        what="every handoff delivered after the restart",
        procs=dispatchers,
    )
    assert all(proc.poll() is None for proc in dispatchers), "a dispatcher exited on the restart"
    states = server.sql(
        "SELECT state, count(*) FROM outbox_handoff GROUP BY state", dbname="handoff"
    )
    assert states == [("delivered", count)]
    tasks = server.sql(
        "SELECT action_key, count(*) FROM delivery_receivertask GROUP BY action_key",
        dbname="handoff_delivery",
    )
    assert len(tasks) == count and {n for _, n in tasks} == {1}, "exactly one task per key"
    mismatched = server.sql(
        "SELECT count(*) FROM outbox_handoff WHERE destination_id = ''", dbname="handoff"
    )
    assert mismatched == [(0,)]


def test_a_dispatcher_started_while_the_database_is_down_waits_for_it_and_then_delivers(
    private_postgres, private_processes
):
    procs, server = private_processes, private_postgres
    count = 30
    procs.manage(
        "shell",
        "-c",
        f"from tests.faults.test_dispatch_faults import make_handoffs; make_handoffs({count})",
    )
    procs.start_receiver()
    server.stop()
    dispatcher = procs.start_dispatcher("d1", HANDOFF_LEASE_SECONDS=LEASE)
    # Its start-up check met the outage: it says so and keeps waiting instead of exiting.
    wait_until(
        lambda: (
            dispatcher.poll() is not None
            or "start: database unavailable (failure 2)" in dispatcher.log_path.read_text()
        ),
        timeout=60,
        what="the dispatcher to meet the outage twice",
        procs=[dispatcher],
    )
    assert dispatcher.poll() is None, "the dispatcher exited on a database that was down at start"
    server.resume()

    def delivered() -> int:
        return server.sql(
            "SELECT count(*) FROM outbox_handoff WHERE state = 'delivered'", dbname="handoff"
        )[0][0]

    wait_until(
        lambda: delivered() == count,
        timeout=120,
        what="every handoff delivered once the database is back",
        procs=[dispatcher],
    )
    assert dispatcher.poll() is None
    tasks = server.sql(
        "SELECT count(DISTINCT action_key), count(*) FROM delivery_receivertask",
        dbname="handoff_delivery",
    )
    assert tasks == [(count, count)], "exactly one task per key"
