"""Retention in a real process beside four real dispatchers delivering to a real receiver (PostgreSQL).

The outbox is filled with HANDOFF_RETENTION_FAULT_ROWS settled handoffs (default 20,000, for make test's
time; the issue's 1,000,000 is `bench/retention_bench.py`), each with an attempt, an event and its task at the
receiver, all by INSERT … SELECT generate_series, their last change 40 days ago. `manage.py archive_settled` then runs
while new handoffs are recorded and four `manage.py dispatch` processes deliver them. A sampler thread reads
pg_locks every 50 ms: `waitstart` is when a backend began to wait for a lock it has not been granted. It counts
the waits retention takes part in: retention's own connections (named by `PGAPPNAME`) waiting, or anything
waiting on them (`pg_blocking_pids`). Dispatchers waiting on each other are not retention's, and on a loaded
machine one may wait a second for another's commit.

Asserted: every new handoff delivered, one task each, one created attempt each; no statement of the test
databases waited on a lock for 1 s or more where retention held it or asked for it; every filled handoff
archived and the hot tables down to the new ones; an archived key found by the console search (and not by
another workspace's user); reconciliation over the receiver's HTTP API clean, with the archived keys counted
among the source's.
"""

import os
import subprocess
import threading
import time

import psycopg
import pytest
from django.db import connections

from bench.harness import PRELOAD_FIRST, insert_handoffs_sql, insert_receiver_tasks_sql
from delivery.models import ReceiverTask
from outbox.models import ArchivedHandoff, Attempt, AttemptOutcome, Handoff, HandoffState
from tests.builders import record
from tests.console.clients import client_for
from tests.factories import onboarding_world
from tests.faults.test_dispatch_faults import wait_until
from tests.processes import ROOT, database_url, manage_argv

pytestmark = [
    pytest.mark.postgres,
    pytest.mark.faults,
    pytest.mark.long,
    pytest.mark.django_db(transaction=True, databases=["default", "delivery"]),
]

ROWS = int(os.environ.get("HANDOFF_RETENTION_FAULT_ROWS", "20000"))
DISPATCHERS = 4
LOCK_WAIT_LIMIT = 1.0
# New handoffs recorded while retention runs: at least this many, whatever its speed.
MIN_NEW = 200

# Each filled handoff's attempt and event, and its age: settled 40 days ago, past the default 30 days.
HISTORY_SQL = (
    """
    INSERT INTO outbox_attempt (handoff_id, number, fencing_epoch, worker, started_at, finished_at, outcome,
        failure_class, reason_code, status_code, latency_ms, detail)
    SELECT id, 1, 1, 'fill', created_at, created_at, 'created', '', '', 201, 5, ''
    FROM outbox_handoff WHERE source_id >= %(first)s
    """,
    """
    INSERT INTO outbox_handoffevent (handoff_id, from_state, to_state, actor_label, action, reason, at)
    SELECT id, 'in_flight', 'delivered', 'dispatcher', '', 'the receiver created the task', created_at
    FROM outbox_handoff WHERE source_id >= %(first)s
    """,
    """
    UPDATE outbox_handoff SET created_at = created_at - interval '40 days',
        updated_at = updated_at - interval '40 days', delivered_at = delivered_at - interval '40 days',
        work_status = 'done'
    WHERE source_id >= %(first)s
    """,
)


def fill_settled(count: int) -> None:
    with psycopg.connect(database_url("default"), autocommit=True) as conn:
        with conn.transaction():
            conn.execute(insert_handoffs_sql(PRELOAD_FIRST, count, state="delivered"))
            for statement in HISTORY_SQL:
                conn.execute(statement, {"first": PRELOAD_FIRST})
        conn.execute("ANALYZE outbox_handoff")
    with psycopg.connect(database_url("delivery"), autocommit=True) as conn:
        conn.execute(insert_receiver_tasks_sql(PRELOAD_FIRST, count))
        conn.execute("UPDATE delivery_receivertask SET status = 'done'")


# The application name of retention's connections (libpq reads PGAPPNAME), so that the sampler knows them.
RETENTION_APP = "handoff-retention-under-test"


class LockWaits(threading.Thread):
    """The longest time a backend of the test databases has been waiting for a lock that retention holds or
    asks for, sampled."""

    SQL = """
        SELECT coalesce(max(extract(epoch FROM clock_timestamp() - l.waitstart)), 0), string_agg(a.query, ' | ')
        FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid
        WHERE NOT l.granted AND a.datname = ANY(%(dbs)s) AND l.waitstart IS NOT NULL
          AND (a.application_name = %(app)s OR EXISTS (
              SELECT 1 FROM pg_stat_activity b
              WHERE b.pid = ANY(pg_blocking_pids(l.pid)) AND b.application_name = %(app)s))
    """
    # Retention's connections seen at all: without them the waits above would be none by a wrong name.
    SEEN_SQL = "SELECT count(*) FROM pg_stat_activity WHERE application_name = %(app)s AND datname = ANY(%(dbs)s)"

    def __init__(self, dbnames: list[str]):
        super().__init__(daemon=True)
        self.dbnames, self.stop = dbnames, threading.Event()
        self.longest, self.longest_query, self.samples, self.retention_seen = 0.0, "", 0, 0
        self.generation, self.lock = 0, threading.Lock()

    def run(self) -> None:
        with psycopg.connect(database_url("default"), autocommit=True) as conn:
            while not self.stop.is_set():
                names = {"dbs": self.dbnames, "app": RETENTION_APP}
                began = self.generation
                waited, queries = conn.execute(self.SQL, names).fetchone()
                seen = conn.execute(self.SEEN_SQL, names).fetchone()[0]
                with self.lock:
                    # A sample taken across a reset is the proof's wait, not the run's: dropped.
                    if began == self.generation:
                        self.retention_seen += seen
                        self.samples += 1
                        if float(waited) > self.longest:
                            self.longest, self.longest_query = float(waited), queries or ""
                time.sleep(0.05)

    def reset(self) -> None:
        with self.lock:
            self.generation += 1
            self.longest, self.longest_query, self.retention_seen = 0.0, "", 0


def _held_lock_wait_seen_by(waits: LockWaits) -> None:
    """A real lock wait on the test database (an advisory lock held by a session named as retention's are,
    asked for by another, as a dispatcher would wait on retention), held until the sampler has seen it last
    1 s or more, so the test proves its sampler sees one. Released
    on the sampler's word, not after a fixed time: a release timed 0.3 s after the wait reached 1 s was
    missed whenever a loaded machine kept the sampler from a query in those 0.3 s."""
    with (
        psycopg.connect(
            database_url("default"), autocommit=True, application_name=RETENTION_APP
        ) as holder,
        psycopg.connect(database_url("default"), autocommit=True) as waiter,
    ):
        holder.execute("SELECT pg_advisory_lock(7261)")
        asked = threading.Thread(
            target=waiter.execute, args=["SELECT pg_advisory_lock(7261)"], daemon=True
        )
        asked.start()
        try:
            wait_until(
                lambda: waits.longest >= LOCK_WAIT_LIMIT,
                timeout=120,
                what="the sampler to see a lock wait",
            )
        finally:
            holder.execute("SELECT pg_advisory_unlock(7261)")
            asked.join(60)
        waiter.execute("SELECT pg_advisory_unlock(7261)")


def _sampler_that_sees_lock_waits() -> LockWaits:
    """The sampler, started and proved: it must see a real lock wait of 1 s or more."""
    waits = LockWaits([connections[a].settings_dict["NAME"] for a in ("default", "delivery")])
    waits.start()
    _held_lock_wait_seen_by(waits)
    waits.reset()
    return waits


def _deliver_while_retention_runs(processes) -> tuple[list[int], object]:
    """Four dispatchers and `manage.py archive_settled` at once; new handoffs recorded until retention ends."""
    processes.start_receiver()
    dispatchers = [processes.start_dispatcher(f"d{n}") for n in range(DISPATCHERS)]
    retention = processes._spawn(
        manage_argv("archive_settled"),
        processes.dispatcher_env(HANDOFF_RETENTION_DAYS="30", PGAPPNAME=RETENTION_APP),
        "retention.log",
    )
    new: list[int] = []
    while retention.poll() is None or len(new) < MIN_NEW:
        new.extend(record(n).pk for n in range(len(new) + 1, len(new) + 11))
        time.sleep(0.05)
    assert retention.wait(timeout=600) == 0, retention.log_path.read_text()[-3000:]
    wait_until(
        lambda: (
            Handoff.objects.filter(pk__in=new, state=HandoffState.DELIVERED).count() == len(new)
        ),
        timeout=180,
        what="every new handoff delivered",
        procs=[*dispatchers, retention],
    )
    return new, retention


def _assert_delivered_exactly_once(new: list[int]) -> None:
    keys = list(Handoff.objects.filter(pk__in=new).values_list("action_key", flat=True))
    assert ReceiverTask.objects.filter(action_key__in=keys).count() == len(new)
    created = Attempt.objects.filter(handoff_id__in=new, outcome=AttemptOutcome.CREATED)
    assert created.count() == len(new)
    assert created.values("handoff_id").distinct().count() == len(new)


def _assert_archived_keys_searched_and_reconciled(processes, world, new: int) -> None:
    key = f"onboarding:7:{PRELOAD_FIRST + ROWS // 2}:1"
    found = client_for(world["olga"]).get("/handoffs/", {"q": key}).content.decode()
    assert "archived on" in found and "final state delivered" in found
    other = client_for(world["mallory"]).get("/handoffs/", {"q": key}).content.decode()
    assert "archived-matches" not in other

    # Through the receiver's HTTP API, as a deployment reconciles; its own timeout, for a loaded machine.
    done = subprocess.run(
        manage_argv("reconcile", "--strict", "--no-progress"),
        cwd=ROOT,
        env=processes.dispatcher_env(),
        capture_output=True,
        text=True,
        timeout=900,
    )
    report = done.stdout + done.stderr
    assert done.returncode == 0, report
    assert "clean: source and receiver agree; no findings" in report
    assert f"source handoffs {ROWS + new:,}" in report


def test_retention_beside_four_dispatchers_waits_on_no_lock_and_loses_nothing(processes):
    world = onboarding_world()
    fill_settled(ROWS)
    assert Handoff.objects.count() == ROWS
    waits = _sampler_that_sees_lock_waits()

    new, retention = _deliver_while_retention_runs(processes)
    waits.stop.set()
    waits.join()

    assert waits.samples > 10
    assert waits.retention_seen > 0, "no connection of retention's was seen by its name"
    assert waits.longest < LOCK_WAIT_LIMIT, f"waited {waits.longest:.2f} s: {waits.longest_query}"
    _assert_delivered_exactly_once(new)
    assert ArchivedHandoff.objects.count() == ROWS
    assert Handoff.objects.count() == len(new), "the hot table holds the new handoffs only"
    assert not Attempt.objects.exclude(handoff_id__in=new).exists()
    assert f"archived {ROWS} handoff(s)" in retention.log_path.read_text()

    _assert_archived_keys_searched_and_reconciled(processes, world, len(new))
