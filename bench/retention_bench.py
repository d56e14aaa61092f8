"""Retention beside delivery: four dispatchers' rate with `manage.py archive_settled` running against without,
on an outbox of `--rows` settled handoffs (default 1,000,000), and retention's own rate beside it.

    .venv/bin/python bench/retention_bench.py [--rows 1000000] [--handoffs 3000] [--pairs 3] [--json PATH]

The fill: `--rows` delivered handoffs, each with an attempt and an event, their last change 40 days ago (past
the default HANDOFF_RETENTION_DAYS of 30), by INSERT … SELECT generate_series into the bench's own databases.
Each pair is two runs back to back, in alternating order: `--handoffs` new handoffs queued at once for four
`manage.py dispatch` processes and the bundled receiver under gunicorn, with nothing else running ("without"),
and with `manage.py archive_settled` started first and stopped when the last of them is delivered ("with";
what it has not moved yet is there for the next "with" run, so one fill serves every pair). A run's rate: its
handoffs over the span from the first to the last `delivered_at`; retention's: archive rows written over the
same span. The figure is the median of the quiet pairs' ratios (with / without), taken and judged by
bench/pairs.py (at least three pairs); aim ≥ 0.9.
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


def settings_duty_cycle() -> float:
    """The duty cycle archive_settled uses when the bench names none: the settings' default, as a child reads it."""
    out = subprocess.run(
        [
            PYTHON,
            "-c",
            "from config.settings.retention import HANDOFF_RETENTION_DUTY_CYCLE as d; print(d)",
        ],
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


def run(
    bench: Bench, handoffs: int, *, with_retention: bool, tag: str, duty_cycle: str, running: list
) -> dict:
    """One side of a pair: `handoffs` delivered by the `running` dispatchers (`Bench.kept_running`, the same
    processes for both sides), with `manage.py archive_settled` beside them or not."""
    clear_new(bench)
    retention = None
    archived_before = bench.scalar("SELECT count(*) FROM outbox_archivedhandoff")
    if with_retention:
        retention = bench.spawn(
            [PYTHON, "manage.py", "archive_settled"],
            f"retention-{tag}.log",
            **({"HANDOFF_RETENTION_DUTY_CYCLE": duty_cycle} if duty_cycle else {}),
        )
        time.sleep(1.0)  # in its batches
    with bench.sql() as conn:
        conn.execute(insert_handoffs_sql(1, handoffs))
        conn.execute("NOTIFY handoff_due")
    wait_for(
        bench,
        f"SELECT count(*) FROM outbox_handoff WHERE state = 'delivered' AND source_id < {PRELOAD_FIRST}",
        handoffs,
        timeout=900,
    )
    archived_after = bench.scalar("SELECT count(*) FROM outbox_archivedhandoff")
    if retention is not None:
        finished = retention.poll() is not None
        if not finished:
            retention.send_signal(signal.SIGTERM)
        bench.stop([retention])
    span = float(
        bench.scalar(
            "SELECT extract(epoch FROM max(delivered_at) - min(delivered_at)) FROM outbox_handoff "
            f"WHERE source_id < {PRELOAD_FIRST}"
        )
    )
    archived = archived_after - archived_before
    result = {
        "with_retention": with_retention,
        "handoffs": handoffs,
        "seconds": round(span, 3),
        "per_second": round(handoffs / span, 1) if span else 0.0,
        "archived_during": archived,
        "retention_rows_per_second": round(archived / span, 1) if span and with_retention else None,
    }
    print(result, flush=True)
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--handoffs", type=int, default=3000)
    parser.add_argument("--pairs", type=int, default=3)
    parser.add_argument("--json", default="")
    parser.add_argument(
        "--duty-cycle",
        default="",
        help="HANDOFF_RETENTION_DUTY_CYCLE for archive_settled (default: the settings' own)",
    )
    args = parser.parse_args()

    bench = Bench("retention").setup()
    try:
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
        left = bench.scalar("SELECT count(*) FROM outbox_handoff")
    finally:
        bench.stop()
    paired = figure_json(figure, runs, ("without", "with"))
    pairs, ratio = paired["pairs"], figure.ratio
    result = {
        "rows": args.rows,
        "handoffs": args.handoffs,
        "dispatchers": DISPATCHERS,
        "duty_cycle": float(args.duty_cycle or settings_duty_cycle()),
        **paired,
        "median_ratio": ratio,
        "aim": AIM,
        "met": ratio is not None and ratio >= AIM,
        "dispatch_per_second_without": statistics.median(p["without"]["per_second"] for p in pairs),
        "dispatch_per_second_with": statistics.median(p["with"]["per_second"] for p in pairs),
        "retention_rows_per_second": statistics.median(
            p["with"]["retention_rows_per_second"] for p in pairs
        ),
        "hot_rows_left": left,
        "command": "python bench/retention_bench.py " + " ".join(sys.argv[1:]),
    }
    print(
        f"with retention / without: {figure.describe()} (aim ≥ {AIM}); dispatch "
        f"{result['dispatch_per_second_without']:.0f}/s without, {result['dispatch_per_second_with']:.0f}/s "
        f"with; retention {result['retention_rows_per_second']:.0f} rows/s at duty cycle "
        f"{result['duty_cycle']}",
        flush=True,
    )
    if args.json:
        write_json(Path(args.json), result)


if __name__ == "__main__":
    main()
