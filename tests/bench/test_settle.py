"""bench/settle.py: every run of a pair starts from the same state, whichever side ran before it. A table the
last run left dead tuples and unanalyzed rows in is vacuumed and analyzed before the next run, the cluster is
checkpointed, and the record says what was found. The database here is the tests' own PostgreSQL one."""

import time

import psycopg
import pytest
from django.db import connection

from bench.harness import dsn
from bench.settle import settle

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(databases=["default"])]

PROBE = "bench_settle_probe"


def dead_tuples(database: str) -> int:
    with psycopg.connect(dsn(database), autocommit=True) as conn:
        return conn.execute(
            "SELECT n_dead_tup FROM pg_stat_user_tables WHERE relname = %s", (PROBE,)
        ).fetchone()[0]


@pytest.fixture
def probe():
    """A table a "run" wrote: 500 rows inserted, 300 of them deleted, autovacuum off for it (so that only
    settle clears it). The writing connection is closed, so its counts reach the statistics."""
    database = connection.settings_dict["NAME"]
    with psycopg.connect(dsn(database), autocommit=True) as conn:
        conn.execute(f"DROP TABLE IF EXISTS {PROBE}")
        conn.execute(f"CREATE TABLE {PROBE} (n int) WITH (autovacuum_enabled = false)")
        conn.execute(f"INSERT INTO {PROBE} SELECT generate_series(1, 500)")
        conn.execute(f"DELETE FROM {PROBE} WHERE n <= 300")  # noqa: S608 - our own table's name
    deadline = time.monotonic() + 10
    while dead_tuples(database) != 300 and time.monotonic() < deadline:
        time.sleep(0.1)
    yield database
    with psycopg.connect(dsn(database), autocommit=True) as conn:
        conn.execute(f"DROP TABLE IF EXISTS {PROBE}")


def test_a_table_the_last_run_left_dead_tuples_in_is_vacuumed_and_the_cluster_checkpointed(probe):
    record = settle([probe])

    found = record["databases"][probe]["tables"][PROBE]
    assert found["dead"] == 300
    assert found["changed_since_analyze"] == 800
    with psycopg.connect(dsn(probe), autocommit=True) as conn:
        after = conn.execute(
            "SELECT n_dead_tup, n_mod_since_analyze, last_vacuum IS NOT NULL, last_analyze IS NOT NULL "
            "FROM pg_stat_user_tables WHERE relname = %s",
            (PROBE,),
        ).fetchone()
        checkpoints = conn.execute(
            "SELECT checkpoints_timed + checkpoints_req FROM pg_stat_bgwriter"
        ).fetchone()[0]
    assert after == (0, 0, True, True)
    assert checkpoints > record["checkpoints_before"]


def test_reading_only_leaves_the_table_as_the_last_run_left_it(probe):
    record = settle([probe], act=False)

    assert record["databases"][probe]["tables"][PROBE]["dead"] == 300
    assert dead_tuples(probe) == 300
