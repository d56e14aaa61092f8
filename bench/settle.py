"""The same starting state for every run of a pair, whichever side it is and whichever went before.

In the one-call pairs (issue 40) whoever ran second did worse: outside check 0.81 with the reference first
against 0.96 with the subject first, the e2e one-call pairs 0.81 against 0.91 (idle make bench of
2026-12-07 14:35). A run leaves work for the next: the rows it inserted and updated are dead tuples that
autovacuum and autoanalyze take up as the next run starts, and its dirty pages a checkpoint writes during
the next. `settle` clears both before each run of both sides (`bench/pairs.py`, `measure_pairs(settle=)`):
it waits for any autovacuum worker on the run's databases to finish, empties the receiver's tables when
asked, VACUUMs and ANALYZEs every table a run changed, then CHECKPOINTs. It returns what it found, so
that each run's record says the state it started from and a difference left can be told from the order.
"""

import sys
import time
from pathlib import Path

import psycopg

sys.path.insert(0, str(Path(__file__).resolve().parent))

from harness import dsn  # noqa: E402

# The receiver's tables, which both sides' creates fill: emptied before every run of a one-call pair.
RECEIVER_TABLES = ("delivery_receivertask", "delivery_seenmessage")
# The longest wait for autovacuum workers already running on the run's databases.
WAIT_SECONDS = 30.0

# The tables a run left something to do in: dead tuples, rows changed since the last analyze, or rows inserted
# since the last vacuum (autovacuum's insert threshold). Whichever side wrote them, both are settled alike.
TABLE_STATS = """
    SELECT relname, n_live_tup, n_dead_tup, n_mod_since_analyze, n_ins_since_vacuum,
           autovacuum_count, autoanalyze_count
    FROM pg_stat_user_tables
    WHERE n_dead_tup > 0 OR n_mod_since_analyze > 0 OR n_ins_since_vacuum > 0
    ORDER BY relname
"""
AUTOVACUUM_RUNNING = """
    SELECT count(*) FROM pg_stat_activity
    WHERE backend_type = 'autovacuum worker' AND datname = current_database()
"""
CHECKPOINTS = "SELECT checkpoints_timed + checkpoints_req FROM pg_stat_bgwriter"


def _wait_for_autovacuum(conn, deadline: float) -> int:
    """Polls until no autovacuum worker runs on the connection's database (or the deadline); how many ran
    when it began."""
    running = found = conn.execute(AUTOVACUUM_RUNNING).fetchone()[0]
    while running and time.monotonic() < deadline:
        time.sleep(0.1)
        running = conn.execute(AUTOVACUUM_RUNNING).fetchone()[0]
    return found


def settle(
    databases: list[str],
    *,
    empty: dict[str, tuple[str, ...]] | None = None,
    wait_seconds: float = WAIT_SECONDS,
    act: bool = True,
) -> dict:
    """`databases`: the run's (the source's and the receiver's); `empty`: tables emptied once their counters
    are read, by database (the receiver's tasks, which either side's creates fill: each run starts with
    none). Returns, by database, the tables' counters as found (dead tuples, rows changed since the last
    analyze, autovacuum runs so far) and the autovacuum workers it waited for; and the checkpoints counted
    before its own and the seconds it took.
    `act=False` only reads the counters (the state an unsettled run starts from, for comparison)."""
    began = time.monotonic()
    deadline = began + wait_seconds
    found: dict = {}
    for database in databases:
        with psycopg.connect(dsn(database), autocommit=True) as conn:
            waited_for = _wait_for_autovacuum(conn, deadline if act else began)
            columns = ("live", "dead", "changed_since_analyze", "inserted_since_vacuum")
            stats = {
                row[0]: dict(zip((*columns, "autovacuums", "autoanalyzes"), row[1:], strict=True))
                for row in conn.execute(TABLE_STATS).fetchall()
            }
            if act and (emptied := (empty or {}).get(database)):
                conn.execute(f"TRUNCATE {', '.join(emptied)}")
            for name in stats if act else ():
                conn.execute(f'VACUUM (ANALYZE) "{name}"')
            found[database] = {"autovacuum_workers": waited_for, "tables": stats}
    # One CHECKPOINT is the cluster's: the source and the receiver's databases share it.
    checkpoints = checkpoint(databases[0], act=act)
    return {
        "databases": found,
        "checkpoints_before": checkpoints,
        "seconds": round(time.monotonic() - began, 3),
    }


def checkpoint(database: str, *, act: bool = True) -> int | None:
    """A CHECKPOINT (superuser or pg_checkpoint; without the right, none); the checkpoints counted before it."""
    with psycopg.connect(dsn(database), autocommit=True) as conn:
        before = conn.execute(CHECKPOINTS).fetchone()[0]
        if not act:
            return before
        try:
            conn.execute("CHECKPOINT")
        except psycopg.errors.InsufficientPrivilege:
            return None
        return before
