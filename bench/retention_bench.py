"""Retention beside delivery: four dispatchers' rate with `manage.py archive_settled` running against without,
on an outbox of `--rows` settled handoffs (default 1,000,000), and retention's own rate beside it.

    .venv/bin/python bench/retention_bench.py [--rows 1000000] [--handoffs 3000] [--pairs 3] [--json PATH]

The fill: `--rows` delivered handoffs, each with an attempt and an event, their last change 40 days ago (past
the default HANDOFF_RETENTION_DAYS of 30), by INSERT … SELECT generate_series into the bench's own databases.
Each pair is two runs back to back, in alternating order: `--handoffs` new handoffs queued at once for four
`manage.py dispatch` processes and the bundled receiver under gunicorn, with nothing else running ("without"),
and with `manage.py archive_settled` started first, in its batches (its first one committed) before they are
queued, and stopped when the last of them is delivered ("with"; what it has not moved yet is there for the
next "with" run, so one fill serves every pair). A run's rate: its handoffs over the span from the first to the
last `delivered_at`; retention's: archive rows written over the same span, and its CPU per row moved (its
process and its backend, from /proc). The figure is the median of the quiet pairs' ratios (with / without),
taken and judged by bench/pairs.py (at least three pairs); aim ≥ 0.9. After the pairs, retention's own pace
with nothing delivered beside it (`--alone-seconds`, 10 by default): the rate it catches up at once the
dispatchers are not behind (beside them it waits while HANDOFF_RETENTION_YIELD_BACKLOG handoffs are due).
"""

import argparse
import os
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from e2e import wait_for  # noqa: E402
from harness import (  # noqa: E402
    PRELOAD_FIRST,
    PYTHON,
    Bench,
    bulk_fill,
    bulk_fill_concurrently,
    dsn,
    insert_handoffs_sql,
    write_json,
)
from pairs import figure_json, measure_pairs, print_pair  # noqa: E402
from settlement_bench import (  # noqa: E402
    RECEIVER_CONN_MAX_AGE,
    cpu_seconds,
    database_cpu,
    receiver_cpu,
    tree_cpu,
)

AIM = 0.9
DISPATCHERS = 4
AGED = "LATERAL (SELECT now() - interval '40 days' - ("

HISTORY = (
    (
        "outbox_attempt",
        "INSERT INTO outbox_attempt (handoff_id, number, fencing_epoch, worker, started_at, finished_at, "
        "outcome, failure_class, reason_code, status_code, latency_ms, detail) "
        "SELECT id, 1, 1, 'fill', created_at, created_at, 'created', '', '', 201, 5, '' FROM outbox_handoff",
    ),
    (
        "outbox_handoffevent",
        "INSERT INTO outbox_handoffevent (handoff_id, from_state, to_state, actor_label, action, reason, at) "
        "SELECT id, 'in_flight', 'delivered', 'dispatcher', '', 'the receiver created the task', created_at "
        "FROM outbox_handoff",
    ),
)


def settled_fill_sql(rows: int) -> str:
    """`rows` delivered handoffs from PRELOAD_FIRST on, settled 40 days ago."""
    sql = insert_handoffs_sql(PRELOAD_FIRST, rows, state="delivered")
    assert "LATERAL (SELECT now() - (" in sql, "the harness's fill changed: age its rows here again"
    return sql.replace("LATERAL (SELECT now() - (", AGED)


def settings_value(name: str) -> float:
    """A retention setting as archive_settled reads it when the bench names none (the settings' default)."""
    out = subprocess.run(
        [PYTHON, "-c", f"from config.settings import retention; print(retention.{name})"],
        cwd=Path(__file__).resolve().parents[1],
        env={**os.environ, "DJANGO_DEBUG": "1"},
        capture_output=True,
        text=True,
        check=True,
    )
    return float(out.stdout)


def fill(bench: Bench, rows: int) -> float:
    """The settled handoffs, then their attempts and events side by side (each reads the handoffs only:
    2026-12-06, 2 interleaved pairs at loads 5-6, 18.2 s and 20.7 s against 24.2 s and 22.4 s one after the
    other)."""
    seconds = bulk_fill(dsn(bench.source), "outbox_handoff", settled_fill_sql(rows))
    history = ((dsn(bench.source), table, statement) for table, statement in HISTORY)
    return seconds + bulk_fill_concurrently(*history)


def clear_new(bench: Bench) -> None:
    """Remove the handoffs of the last run (numbered below PRELOAD_FIRST), their history and tasks."""
    new = f"SELECT id FROM outbox_handoff WHERE source_id < {PRELOAD_FIRST}"
    with bench.sql() as conn:
        for table in ("outbox_attempt", "outbox_handoffevent", "outbox_statusevent"):
            conn.execute(f"DELETE FROM {table} WHERE handoff_id IN ({new})")  # noqa: S608
        conn.execute(f"DELETE FROM outbox_archivedhandoff WHERE source_id < {PRELOAD_FIRST}")  # noqa: S608
        conn.execute(f"DELETE FROM outbox_handoff WHERE source_id < {PRELOAD_FIRST}")  # noqa: S608
        conn.execute("VACUUM ANALYZE outbox_handoff")
    with bench.sql("delivery") as conn:
        conn.execute("TRUNCATE delivery_receivertask, delivery_seenmessage")


RETENTION_APP = "bench-retention"


def in_its_batches(bench: Bench, tag: str, duty_cycle: str) -> subprocess.Popen:
    """`manage.py archive_settled` started, returned once its first batch is committed: its start (Django's,
    about 1.2 s of CPU on 2 cores, more than the 4,000 rows a run moves) is not retention beside delivery, and
    a fixed sleep of 1 s left part of it inside the run on a busy machine."""
    archived = bench.scalar("SELECT count(*) FROM outbox_archivedhandoff")
    retention = bench.spawn(
        [PYTHON, "manage.py", "archive_settled"],
        f"retention-{tag}.log",
        PGAPPNAME=RETENTION_APP,
        **({"HANDOFF_RETENTION_DUTY_CYCLE": duty_cycle} if duty_cycle else {}),
    )
    wait_for(bench, "SELECT count(*) FROM outbox_archivedhandoff", archived + 1, timeout=300)
    return retention


def retention_cpu(bench: Bench, retention: subprocess.Popen | None) -> float:
    """CPU seconds so far of the retention process and of its backend (named by its application_name); 0
    without one."""
    if retention is None:
        return 0.0
    backends = bench.scalar(
        "SELECT coalesce(string_agg(pid::text, ','), '') FROM pg_stat_activity "
        f"WHERE application_name = '{RETENTION_APP}'"  # noqa: S608 - our own constant
    )
    pids = [retention.pid] + [int(pid) for pid in backends.split(",") if pid]
    return sum(cpu_seconds(pid) for pid in pids)


def run_cpu(bench: Bench, running: list, retention: subprocess.Popen | None) -> float:
    """CPU seconds so far of everything a run is: the dispatchers, the receiver (with its backends), the
    backends on the source database (the dispatchers' and retention's), and the retention process."""
    return (
        sum(tree_cpu(proc.pid) for proc in running)
        + receiver_cpu(bench)
        + database_cpu(bench.source)
        + (cpu_seconds(retention.pid) if retention is not None else 0.0)
    )


def retention_figures(
    archived: int, span: float, cpu: float, *, with_retention: bool
) -> dict[str, float | None]:
    """Retention's rate over the run's span, and the CPU it took from the dispatchers' cores in the run per
    row it moved (its process and its backend, from /proc); None in a run without it."""
    if not with_retention:
        return {"retention_rows_per_second": None, "retention_cpu_ms_per_row": None}
    return {
        "retention_rows_per_second": round(archived / span, 1) if span else None,
        "retention_cpu_ms_per_row": round(1000 * cpu / archived, 3) if archived else None,
    }


def run(
    bench: Bench, handoffs: int, *, with_retention: bool, tag: str, duty_cycle: str, running: list
) -> dict:
    """One side of a pair: `handoffs` delivered by the `running` dispatchers (`Bench.kept_running`, the same
    processes for both sides), with `manage.py archive_settled` beside them or not."""
    clear_new(bench)
    retention = in_its_batches(bench, tag, duty_cycle) if with_retention else None
    archived_before = bench.scalar("SELECT count(*) FROM outbox_archivedhandoff")
    retention_before = retention_cpu(bench, retention)
    receiver_before = tree_cpu(bench.receiver.pid)
    machine_before = run_cpu(bench, running, retention)
    with bench.sql() as conn:
        conn.execute(insert_handoffs_sql(1, handoffs))
        conn.execute("NOTIFY handoff_due")
    wait_for(
        bench,
        f"SELECT count(*) FROM outbox_handoff WHERE state = 'delivered' AND source_id < {PRELOAD_FIRST}",
        handoffs,
        timeout=900,
    )
    archived = bench.scalar("SELECT count(*) FROM outbox_archivedhandoff") - archived_before
    retention_seconds = retention_cpu(bench, retention) - retention_before
    receiver = tree_cpu(bench.receiver.pid) - receiver_before
    machine = run_cpu(bench, running, retention) - machine_before
    if retention is not None:
        if retention.poll() is None:
            retention.send_signal(signal.SIGTERM)
        bench.stop([retention])
    span = float(
        bench.scalar(
            "SELECT extract(epoch FROM max(delivered_at) - min(delivered_at)) FROM outbox_handoff "
            f"WHERE source_id < {PRELOAD_FIRST}"
        )
    )
    result = {
        "with_retention": with_retention,
        "handoffs": handoffs,
        "seconds": round(span, 3),
        "per_second": round(handoffs / span, 1) if span else 0.0,
        "archived_during": archived,
        "cpu_ms_per_handoff": round(1000 * machine / handoffs, 3),
        # The receiver's processes (gunicorn's) in cores over the span: near 1 it is the saturated stage, and
        # its CPU per handoff is its cores over the rate, the run's length rather than its work.
        "receiver_cores": round(receiver / span, 2) if span else None,
        **retention_figures(archived, span, retention_seconds, with_retention=with_retention),
    }
    print(result, flush=True)
    return result


def alone(bench: Bench, seconds: float, duty_cycle: str) -> dict[str, float | None]:
    """Retention's own pace with no delivery beside it, the rate at which it catches up once the dispatchers
    are not behind: `manage.py archive_settled` in its batches for `seconds`, its rows and its CPU (process
    and backend) per row over that span."""
    clear_new(bench)
    retention = in_its_batches(bench, "alone", duty_cycle)
    archived_before = bench.scalar("SELECT count(*) FROM outbox_archivedhandoff")
    cpu_before, began = retention_cpu(bench, retention), time.monotonic()
    time.sleep(seconds)
    archived = bench.scalar("SELECT count(*) FROM outbox_archivedhandoff") - archived_before
    cpu, span = retention_cpu(bench, retention) - cpu_before, time.monotonic() - began
    if retention.poll() is None:
        retention.send_signal(signal.SIGTERM)
    bench.stop([retention])
    figures = retention_figures(archived, span, cpu, with_retention=True)
    print({"retention_alone": figures, "seconds": round(span, 1), "archived": archived}, flush=True)
    return figures


def median_of_measured(values) -> float | None:
    """The median of the runs that measured a figure (one that moved no row in its span has none)."""
    measured = [value for value in values if value is not None]
    return statistics.median(measured) if measured else None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--handoffs", type=int, default=3000)
    parser.add_argument("--pairs", type=int, default=3)
    parser.add_argument("--json", default="")
    parser.add_argument(
        "--alone-seconds",
        type=float,
        default=10.0,
        help="How long retention's own pace is measured with no delivery beside it (0: not measured)",
    )
    parser.add_argument(
        "--duty-cycle",
        default="",
        help="HANDOFF_RETENTION_DUTY_CYCLE for archive_settled (default: the settings' own)",
    )
    args = parser.parse_args()

    bench = Bench("retention").setup()
    try:
        # Connections for the whole section, so that no backend ends inside a run whose CPU is read (at the
        # settings' 60 s the dispatchers', kept running, and the receiver's did).
        bench.env["DATABASE_CONN_MAX_AGE"] = str(RECEIVER_CONN_MAX_AGE)
        bench.start_receiver()
        filled = fill(bench, args.rows)
        print(
            f"filled {args.rows:,} settled handoffs with their history in {filled:.0f} s",
            flush=True,
        )
        runs: dict[tuple[int, str], dict] = {}
        with bench.kept_running(DISPATCHERS, "retention") as running:

            def side(with_retention: bool):
                name = "with" if with_retention else "without"

                def one(n: int) -> float:
                    runs[(n, name)] = run(
                        bench,
                        args.handoffs,
                        with_retention=with_retention,
                        tag=f"p{n}-{name}",
                        duty_cycle=args.duty_cycle,
                        running=running,
                    )
                    return runs[(n, name)]["per_second"]

                return one

            figure = measure_pairs(
                "retention_without", side(False), side(True), pairs=args.pairs, on_pair=print_pair
            )
        by_itself = alone(bench, args.alone_seconds, args.duty_cycle) if args.alone_seconds else {}
        left = bench.scalar("SELECT count(*) FROM outbox_handoff")
    finally:
        bench.stop()
    paired = figure_json(figure, runs, ("without", "with"))
    pairs, ratio = paired["pairs"], figure.ratio
    result = {
        "rows": args.rows,
        "handoffs": args.handoffs,
        "dispatchers": DISPATCHERS,
        "duty_cycle": float(args.duty_cycle or settings_value("HANDOFF_RETENTION_DUTY_CYCLE")),
        **paired,
        "median_ratio": ratio,
        "aim": AIM,
        "met": ratio is not None and ratio >= AIM,
        "dispatch_per_second_without": statistics.median(p["without"]["per_second"] for p in pairs),
        "dispatch_per_second_with": statistics.median(p["with"]["per_second"] for p in pairs),
        "retention_rows_per_second": statistics.median(
            p["with"]["retention_rows_per_second"] for p in pairs
        ),
        # What the rates would give when the cores are the limit and nothing else runs on them: each pair's
        # CPU per delivered handoff without over with, retention's own in the "with" side.
        "cpu_ratio": median_of_measured(
            round(p["without"]["cpu_ms_per_handoff"] / p["with"]["cpu_ms_per_handoff"], 3)
            for p in pairs
            if p["with"]["cpu_ms_per_handoff"]
        ),
        "retention_cpu_ms_per_row": median_of_measured(
            p["with"]["retention_cpu_ms_per_row"] for p in pairs
        ),
        "retention_alone_rows_per_second": by_itself.get("retention_rows_per_second"),
        "retention_alone_cpu_ms_per_row": by_itself.get("retention_cpu_ms_per_row"),
        "yield_backlog": settings_value("HANDOFF_RETENTION_YIELD_BACKLOG"),
        "max_yield_seconds": settings_value("HANDOFF_RETENTION_MAX_YIELD_SECONDS"),
        "hot_rows_left": left,
        "command": "python bench/retention_bench.py " + " ".join(sys.argv[1:]),
    }
    print(
        f"with retention / without: {figure.describe()} (aim ≥ {AIM}); dispatch "
        f"{result['dispatch_per_second_without']:.0f}/s without, {result['dispatch_per_second_with']:.0f}/s "
        f"with; retention {result['retention_rows_per_second']:.0f} rows/s beside it, "
        f"{result['retention_alone_rows_per_second'] or 0:.0f} alone, at duty cycle {result['duty_cycle']}",
        flush=True,
    )
    if args.json:
        write_json(Path(args.json), result)


if __name__ == "__main__":
    main()
