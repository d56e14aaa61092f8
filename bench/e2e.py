"""End-to-end figures of the dispatcher against PostgreSQL's own ceiling and the usual alternative.

    .venv/bin/python bench/e2e.py [--handoffs 5000] [--json var/bench/e2e.json]
    .venv/bin/python bench/e2e.py --latency-only 4276 --json /tmp/latency.json  # the latency runs alone

Everything runs on this machine: PostgreSQL through its unix socket, the receiver under gunicorn,
dispatchers as `manage.py dispatch` processes, the alternative as a django-q2 cluster. Each
delivered run is checked afterwards: every handoff delivered, exactly one receiver task per key.

In order: the receiver's own capacity (plain clients); the batched path at 1, 2, 4 and 8 dispatchers
(the scaling curve), each count in pairs (bench/pairs.py) against pgbench `-N` at as many clients (at 4,
the aim's figure); one call per handoff in pairs against the receiver's capacity, and the lever of
bench/concurrent_dispatch.py; commit-to-receiver latency at half the best rate (and with the lever of
an attempt right after commit) and at 20/s; the `on_commit` + django-q2 alternative and its latency;
every worker killed mid-run, both designs; throughput with delivered rows preloaded (growth) in pairs
against the small table, and with --reconcile-after-growth one reconciliation over the rows of one more
run at the largest size (bench/reconcile_bench.py, http destination); a backlog queued while the
receiver is down, drained after it returns.
"""

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import contextlib

import psycopg  # noqa: E402
import receiver_capacity  # noqa: E402
from harness import (  # noqa: E402
    PGHOST,
    PRELOAD_FIRST,
    PYTHON,
    RECEIVER_THREADS,
    RECEIVER_WORKERS,
    ROOT,
    Bench,
    bulk_fill,
    bulk_fill_concurrently,
    db_name,
    dsn,
    insert_handoffs_sql,
    insert_receiver_tasks_sql,
    kill_tree,
    receiver_placement,
    recreate_database,
    url,
)
from pairs import figure_json, measure_pairs, median_pair, print_pair, recorded  # noqa: E402
from reference_dispatcher import APPLICATION as REFERENCE_APPLICATION  # noqa: E402
from settle import RECEIVER_TABLES, settle  # noqa: E402

# The receiver of every e2e figure: `config.wsgi`, which notes its create calls' arrival and commit while a
# latency run asks it to (one `stat` a request otherwise).
TIMED_RECEIVER = "bench.receiver_timing:application"
TIMED_WORKER = "bench.receiver_timing_worker.TimedThreadWorker"

# Client counts for pgbench and dispatcher counts for the batched path: the scaling curve.
CLIENTS = (1, 2, 4, 8)


def pgbench_init() -> None:
    """The database pgbench's built-in simple-update script (-N) runs on: the commits/s ceiling of each
    client count, measured beside the dispatchers' run it is the reference of (`scaling_pairs`)."""
    recreate_database(db_name("pgbench"))
    subprocess.run(
        ["pgbench", "-h", PGHOST, "-i", "-q", "-s", "10", db_name("pgbench")],
        check=True,
        capture_output=True,
    )


def pgbench_tps(clients: int, seconds: int) -> float:
    """One pgbench `-N` run on the database `pgbench_ceiling` initialised."""
    out = subprocess.run(
        ["pgbench", "-h", PGHOST, "-N", "-c", str(clients), "-j", str(clients)]
        + ["-T", str(seconds), db_name("pgbench")],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    return float(re.search(r"tps = ([0-9.]+)", out).group(1))


def batch_against_pgbench(
    bench: Bench, handoffs: int, seconds: int, pairs: int, dispatchers: int = 4
) -> dict:
    """`dispatchers` (batch API) against pgbench `-N` at as many clients, taken and judged by bench/pairs.py;
    at 4, the aim's figure."""
    runs: dict[tuple[int, str], dict] = {}

    def pgbench(n: int) -> float:
        runs[(n, "pgbench")] = {"per_second": pgbench_tps(dispatchers, seconds)}
        return runs[(n, "pgbench")]["per_second"]

    with bench.kept_running(dispatchers, f"b{dispatchers}") as running:

        def batched(n: int) -> float:
            runs[(n, "batch")] = throughput(
                bench, handoffs, dispatchers, f"b{dispatchers}-{n}", running=running
            )
            return runs[(n, "batch")]["per_second"]

        figure = measure_pairs(
            f"pgbench_{dispatchers}", pgbench, batched, pairs=pairs, on_pair=print_pair
        )
    return figure_json(figure, runs, ("pgbench", "batch"))


def scaling_pairs(bench: Bench, handoffs: int, seconds: int, pairs: int) -> tuple[dict, dict, list]:
    """The scaling curve: each dispatcher count of CLIENTS against pgbench at as many clients, in pairs.
    Returns the 4-dispatcher figure (the aim's), pgbench's rate per count and one row per count: the
    batch run of the pair with the median ratio, its ratio the judged one (None when refused)."""
    figures = {
        count: batch_against_pgbench(bench, handoffs, seconds, pairs, dispatchers=count)
        for count in CLIENTS
    }
    rows, ceiling = [], {}
    for count, paired in figures.items():
        middle = median_pair(paired)
        ceiling[count] = middle["pgbench"]["per_second"]
        rows.append(
            {
                **middle["batch"],
                "ratio_to_pgbench": paired["ratio"],
                "ratio_of_the_pair": middle["ratio"],
                "paired": paired["describe"],
            }
        )
        print(f"  throughput at {count}: {paired['describe']}", flush=True)
    return figures[4], ceiling, rows


def reset(bench: Bench) -> None:
    with bench.sql() as conn:
        conn.execute(
            "TRUNCATE outbox_attempt, outbox_handoffevent, outbox_handoff RESTART IDENTITY CASCADE"
        )
    with bench.sql("delivery") as conn:
        conn.execute("TRUNCATE delivery_receivertask, delivery_seenmessage")


def verify(bench: Bench, expected: int) -> dict:
    delivered = bench.scalar("SELECT count(*) FROM outbox_handoff WHERE state = 'delivered'")
    tasks = bench.scalar("SELECT count(*) FROM delivery_receivertask", "delivery")
    keys = bench.scalar("SELECT count(DISTINCT action_key) FROM delivery_receivertask", "delivery")
    with bench.sql() as src, bench.sql("delivery") as dst:
        ours = dict(src.execute("SELECT action_key, destination_id FROM outbox_handoff").fetchall())
        theirs = dict(
            dst.execute("SELECT action_key, task_id::text FROM delivery_receivertask").fetchall()
        )
    mismatched = sum(1 for key, task in ours.items() if theirs.get(key) != task)
    ok = delivered == expected == tasks == keys and mismatched == 0
    return {
        "delivered": delivered,
        "tasks": tasks,
        "distinct_keys": keys,
        "mismatched": mismatched,
        "ok": ok,
    }


def wait_for(bench: Bench, query: str, target: int, timeout: float, which: str = "source") -> float:
    """Poll every 20 ms on one connection: a connection per poll costs PostgreSQL a backend start each time
    (measured: about 0.7 ms of CPU per handoff of the one-call run, on the cores the run needs)."""
    start = time.monotonic()
    with bench.sql(which) as conn:
        while conn.execute(query).fetchone()[0] < target:
            if time.monotonic() - start > timeout:
                raise RuntimeError(f"timed out: {query} < {target}")
            time.sleep(0.02)
    return time.monotonic() - start


def wait_until_all_delivered(bench: Bench, timeout: float) -> float:
    """Wait until no handoff is in a working state. Read through the partial index on those states, so that
    the poll (every 20 ms) costs the same with 10,000 or 10,000,000 delivered rows; a count of the delivered
    ones would scan them all and take the cores the measured run needs."""
    return wait_for(
        bench,
        "SELECT (NOT EXISTS (SELECT 1 FROM outbox_handoff WHERE NOT state = 'delivered'))::int",
        1,
        timeout=timeout,
    )


def peak_rss_mb(procs) -> float:
    peak = 0
    for proc in procs:
        try:
            status = Path(f"/proc/{proc.pid}/status").read_text()
        except FileNotFoundError:
            continue
        peak = max(peak, int(re.search(r"VmHWM:\s+(\d+)", status).group(1)))
    return round(peak / 1024, 1)


def started_for_one_run(
    bench: Bench, dispatchers: int, tag: str, concurrent_calls: bool
) -> list[subprocess.Popen]:
    if concurrent_calls:
        procs = [
            bench.spawn(
                [PYTHON, "bench/concurrent_dispatch.py", "--worker", f"{tag}-{n}"],
                f"dispatcher-{tag}-{n}.log",
            )
            for n in range(dispatchers)
        ]
    else:
        procs = bench.start_dispatchers(dispatchers, tag)
    bench.dispatchers_started(procs)
    return procs


def throughput(
    bench: Bench,
    handoffs: int,
    dispatchers: int,
    tag: str,
    preload: int = 0,
    concurrent_calls: bool = False,
    also_fill: tuple = (),
    running: list[subprocess.Popen] | None = None,
) -> dict:
    """Handoffs created up front (one commit), delivered by `dispatchers` processes over HTTP.
    `concurrent_calls`: the lever measured by bench/concurrent_dispatch.py instead of `manage.py dispatch`.
    `preload`: delivered rows in the outbox first (growth), filled set-based with the outbox's secondary
    indexes built after, vacuumed, analyzed and checkpointed (`harness.bulk_fill`), so the measured run pays
    for none of it; `also_fill`: more `bulk_fill` arguments run at the same time as the preload. `running`:
    the dispatchers of `Bench.kept_running`, left running after; else `dispatchers` started for this run alone."""
    reset(bench)
    fill_seconds = None
    if preload:
        fill_seconds = round(
            bulk_fill_concurrently(
                (
                    dsn(bench.source),
                    "outbox_handoff",
                    insert_handoffs_sql(PRELOAD_FIRST, preload, state="delivered"),
                ),
                *also_fill,
            ),
            1,
        )
        sizes = {
            "table_mb": round(bench.scalar("SELECT pg_table_size('outbox_handoff')") / 2**20),
            "indexes_mb": round(bench.scalar("SELECT pg_indexes_size('outbox_handoff')") / 2**20),
        }
        print(f"  filled {preload:,} delivered rows in {fill_seconds} s: {sizes}", flush=True)
    procs = running or started_for_one_run(bench, dispatchers, tag, concurrent_calls)
    with bench.sql() as conn:
        conn.execute(insert_handoffs_sql(1, handoffs))
        conn.execute("NOTIFY handoff_due")
    elapsed = wait_until_all_delivered(bench, timeout=900)
    rss = peak_rss_mb(procs)
    if running is None:
        bench.stop(procs)
    check = (
        verify(bench, handoffs + preload)
        if not preload
        else verify_after_preload(bench, handoffs, preload)
    )
    return {
        "handoffs": handoffs,
        "dispatchers": dispatchers,
        "preloaded_rows": preload,
        "seconds": round(elapsed, 2),
        "per_second": round(handoffs / elapsed, 1),
        "peak_rss_mb": rss,
        "check": check,
        **({"fill_seconds": fill_seconds, "outbox_sizes": sizes} if preload else {}),
    }


def verify_after_preload(bench: Bench, handoffs: int, preload: int) -> dict:
    """`verify` for a run over preloaded delivered rows (which have no receiver task here): every row
    delivered, and the run's own handoffs each delivered once, with the receiver's task id stored."""
    delivered = bench.scalar("SELECT count(*) FROM outbox_handoff WHERE state = 'delivered'")
    tasks = bench.scalar("SELECT count(*) FROM delivery_receivertask", "delivery")
    keys = bench.scalar("SELECT count(DISTINCT action_key) FROM delivery_receivertask", "delivery")
    with bench.sql() as src, bench.sql("delivery") as dst:
        ours = dict(
            src.execute(
                "SELECT action_key, destination_id FROM outbox_handoff WHERE source_id < %s",
                (PRELOAD_FIRST,),
            ).fetchall()
        )
        theirs = dict(
            dst.execute("SELECT action_key, task_id::text FROM delivery_receivertask").fetchall()
        )
    mismatched = sum(1 for key, task in ours.items() if theirs.get(key) != task)
    ok = (
        delivered == handoffs + preload
        and len(ours) == tasks == keys == handoffs
        and mismatched == 0
    )
    return {
        "delivered": delivered,
        "tasks": tasks,
        "distinct_keys": keys,
        "mismatched": mismatched,
        "ok": ok,
    }


# The receiver's task columns a copy carries (not its id: each database numbers its own rows).
TASK_COLUMNS = "task_id, action_key, payload, payload_hash, status, status_changed_at, created_at"


def growth_fill(bench: Bench, rows: int) -> dict:
    """The outbox emptied, then `rows` delivered rows filled the fast way (`harness.bulk_fill`): indexes built
    after, vacuumed, analyzed, checkpointed. Its seconds and the table's sizes."""
    reset(bench)
    seconds = bulk_fill(
        dsn(bench.source),
        "outbox_handoff",
        insert_handoffs_sql(PRELOAD_FIRST, rows, state="delivered"),
    )
    sizes = {
        "table_mb": round(bench.scalar("SELECT pg_table_size('outbox_handoff')") / 2**20),
        "indexes_mb": round(bench.scalar("SELECT pg_indexes_size('outbox_handoff')") / 2**20),
    }
    print(f"  filled {rows:,} delivered rows in {seconds:.1f} s: {sizes}", flush=True)
    return {"fill_seconds": round(seconds, 1), "outbox_sizes": sizes}


def remove_run(bench: Bench) -> None:
    """The handoffs of the last run (numbered below PRELOAD_FIRST) and their history removed, the outbox
    vacuumed, analyzed and checkpointed as after its fill, and the receiver emptied: the preloaded rows stay,
    as a table in service keeps its delivered rows while new ones come and go."""
    new = f"SELECT id FROM outbox_handoff WHERE source_id < {PRELOAD_FIRST}"
    with bench.sql() as conn:
        for table in ("outbox_attempt", "outbox_handoffevent", "outbox_statusevent"):
            conn.execute(f"DELETE FROM {table} WHERE handoff_id IN ({new})")  # noqa: S608
        conn.execute(f"DELETE FROM outbox_handoff WHERE source_id < {PRELOAD_FIRST}")  # noqa: S608
        conn.execute("VACUUM (ANALYZE) outbox_handoff")
        conn.execute("CHECKPOINT")
    with bench.sql("delivery") as conn:
        conn.execute("TRUNCATE delivery_receivertask, delivery_seenmessage")


def growth_run(bench: Bench, handoffs: int, preload: int, filled: dict, running: list) -> dict:
    """`handoffs` delivered by `running` over the `preload` rows `growth_fill` left (and `remove_run` kept)."""
    remove_run(bench)
    with bench.sql() as conn:
        conn.execute(insert_handoffs_sql(1, handoffs))
        conn.execute("NOTIFY handoff_due")
    elapsed = wait_until_all_delivered(bench, timeout=900)
    return {
        "handoffs": handoffs,
        "dispatchers": len(running),
        "preloaded_rows": preload,
        "seconds": round(elapsed, 2),
        "per_second": round(handoffs / elapsed, 1),
        "peak_rss_mb": peak_rss_mb(running),
        "check": verify_after_preload(bench, handoffs, preload),
        **filled,
    }


def growth_pairs(bench: Bench, handoffs: int, sizes: list[int], pairs: int) -> list[dict]:
    """Growth: each size after the first (the small table) against the small table, in pairs. Each table is
    filled once, in an outbox of its own (the small one in `bench`'s, each large one in a copy that shares
    its receiver), with 4 dispatchers of its own kept running; between runs only the run's handoffs go
    (`remove_run`). A refill of 1,000,000 rows for each large run took 15 s, 30 s of the section's 85. The
    first row is the small table's run of the last size's median pair; each other row the large run of its
    median pair, its ratio the judged one (None when refused)."""
    small, rows = sizes[0], []
    small_filled = growth_fill(bench, small)
    for large in sizes[1:]:
        runs: dict[tuple[int, str], dict] = {}
        outbox = bench.with_own_source(f"e2e_g{large}")
        large_filled = growth_fill(outbox, large)
        with (
            bench.kept_running(4, f"g{small}") as small_running,
            outbox.kept_running(4, f"g{large}") as large_running,
        ):

            def side(name: str, on: Bench, preload: int, filled: dict, running: list, runs=runs):
                def one(n: int) -> float:
                    runs[(n, name)] = growth_run(on, handoffs, preload, filled, running)
                    return runs[(n, name)]["per_second"]

                return one

            figure = measure_pairs(
                "growth_small",
                side("small", bench, small, small_filled, small_running),
                side("large", outbox, large, large_filled, large_running),
                pairs=pairs,
                on_pair=print_pair,
            )
        outbox.drop_source()
        paired = figure_json(figure, runs, ("small", "large"))
        middle = median_pair(paired)
        rows = [
            {**middle["small"], "ratio_to_small_table": 1.0},
            *rows[1:],
            {
                **middle["large"],
                "ratio_to_small_table": paired["ratio"],
                "ratio_of_the_pair": middle["ratio"],
                "paired": paired["describe"],
            },
        ]
        print(f"  growth at {large:,}: {paired['describe']}", flush=True)
    return rows


def growth_then_reconcile(
    bench: Bench, handoffs: int, rows: int, batch_size: int
) -> tuple[dict, dict]:
    """A growth run over `rows` preloaded delivered rows, then one reconciliation over the same outbox, so one
    fill serves both figures. The receiver side of the reconciliation (a matching task for every preloaded
    row) fills into a database of its own at the same time as the preload, so the growth run's receiver is
    as small as in the other growth runs; after the run, the tasks it delivered are copied over, and
    bench/reconcile_bench.py compares every key through the http destination: it must find nothing."""
    recon = db_name("e2e_recon_delivery")
    recreate_database(recon)
    subprocess.run(
        [PYTHON, "manage.py", "migrate", "--database", "delivery", "-v0"],
        cwd=ROOT,
        check=True,
        env={**bench.env, "DELIVERY_DATABASE_URL": url(recon)},
    )
    row = throughput(
        bench,
        handoffs,
        4,
        f"g{rows}",
        preload=rows,
        also_fill=(
            (dsn(recon), "delivery_receivertask", insert_receiver_tasks_sql(PRELOAD_FIRST, rows)),
        ),
    )
    with bench.sql("delivery") as src, psycopg.connect(dsn(recon), autocommit=True) as dst:
        with (
            src.cursor().copy(
                f"COPY (SELECT {TASK_COLUMNS} FROM delivery_receivertask) TO STDOUT"
            ) as out,
            dst.cursor().copy(f"COPY delivery_receivertask ({TASK_COLUMNS}) FROM STDIN") as into,
        ):
            for chunk in out:
                into.write(chunk)
        dst.execute("ANALYZE delivery_receivertask")
    with bench.sql() as conn:
        # The alternative's approvals (no outbox, by design) are not this outbox's to reconcile.
        conn.execute("TRUNCATE approvals_request CASCADE")
    keys = rows + handoffs
    args = [
        "bench/reconcile_bench.py",
        str(keys),
        "--destination",
        "http",
        "--batch-size",
        str(batch_size),
        "--source-db",
        bench.source,
        "--delivery-db",
        recon,
    ]
    print(f"  reconciling the growth run's {keys:,} keys ...", flush=True)
    try:
        done = subprocess.run([PYTHON, *args], cwd=ROOT, capture_output=True, text=True)
    finally:
        with psycopg.connect(dsn("postgres"), autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{recon}" WITH (FORCE)')
    print(done.stdout, done.stderr, sep="", end="", flush=True)
    if done.returncode:
        raise SystemExit(
            f"the reconciliation after the growth run failed: {done.stderr.strip()[-2000:]}"
        )
    return row, {
        "keys": keys,
        "preloaded_rows": rows,
        "handoffs": handoffs,
        "fill_seconds": row["fill_seconds"],
        "command": " ".join([".venv/bin/python", *args]),
        "output": done.stdout.strip(),
    }


def dispatch_figures(bench: Bench, args: argparse.Namespace, report: dict) -> None:
    """The scaling curve, one call per handoff, latency, the alternative and the crash, into `report`."""
    report["batch_against_pgbench"], report["pgbench_tps"], report["throughput"] = scaling_pairs(
        bench, args.handoffs, args.pgbench_seconds, args.pgbench_pairs
    )
    best = max(report["throughput"], key=lambda r: r["per_second"])

    single = Bench("e2e", RECEIVER_SUPPORTS_BATCH="0", HANDOFF_CLAIM_BATCH="20")
    bench.share_receiver(single)
    report["throughput_single_calls"] = one_call_pairs(
        single, args.handoffs // 2, args.one_call_pairs
    )
    print(f"  single calls {report['throughput_single_calls']}", flush=True)
    # 3 pairs (the fewest bench/pairs.py takes): about a minute of the section's budget.
    report["one_call_ceiling"] = one_call_ceiling_pairs(single, args.handoffs // 2, 3)
    row = throughput(single, args.handoffs // 2, 4, "concurrent", concurrent_calls=True)
    report["throughput_concurrent_single_calls"] = row
    print(f"  single calls, all of a claim batch in flight at once (lever) {row}", flush=True)

    latency_figures(bench, args, best, report)

    report["alternative"] = alternative_throughput(bench, args.alternative_handoffs, 4)
    print(f"  alternative {report['alternative']}", flush=True)
    report["alternative_latency"] = alternative_latency(
        bench,
        min(round(report["alternative"]["per_second"] / 2), round(best["per_second"] / 2)),
        10,
        4,
    )
    print(f"  alternative latency {report['alternative_latency']}", flush=True)
    report["crash"] = crash_comparison(bench, args.crash_handoffs)
    print(f"  crash {report['crash']}", flush=True)


def latency_figures(bench: Bench, args: argparse.Namespace, best: dict, report: dict) -> None:
    """Commit-to-receiver latency at half the best batched rate, its lever, and at a low rate, into `report`.
    The runs with one dispatcher per core share them (`Bench.kept_running`)."""
    # Latency with one dispatcher per core (every dispatcher is woken by each commit's NOTIFY, and on a small
    # machine more of them only share its cores), at half the best batched rate; the best count for comparison.
    per_core = min(os.cpu_count() or 1, best["dispatchers"])
    half = round(best["per_second"] / 2)
    # Three runs, the one with the median median stands for them (one 15-second run on a shared machine swung
    # by a fifth from one bench to the next); every run is kept. Each is paired with the machine's ceiling, a
    # minimal dispatcher's run at the same asked rate (`latency_pairs`).
    report["latency_ceiling"] = latency_pairs(
        bench, half, per_core, args.latency_seconds, args.latency_runs
    )
    runs = [pair["product"] for pair in report["latency_ceiling"]["pairs"]]
    report["latency"] = {
        **sorted(runs, key=lambda run: run["median_ms"])[len(runs) // 2],
        "runs": runs,
    }
    print(f"  latency {report['latency']}", flush=True)
    print(f"  the product's share against the ceiling {report['latency_ceiling']['describe']}")
    with bench.kept_running(per_core, "lat") as running:
        report["latency_inline"] = latency(
            bench, half, per_core, args.latency_seconds, producers=2, inline=True, running=running
        )
        print(
            f"  latency, delivery attempted after commit by the committing process (lever) "
            f"{report['latency_inline']}",
            flush=True,
        )
        report["latency_low_rate"] = latency(
            bench, 20, 2, args.latency_seconds, running=running if per_core == 2 else None
        )
        print(f"  latency at a low rate {report['latency_low_rate']}", flush=True)
    if per_core != best["dispatchers"]:
        report["latency_best_count"] = latency(
            bench, half, best["dispatchers"], args.latency_seconds, producers=2
        )
        print(
            f"  latency with {best['dispatchers']} dispatchers {report['latency_best_count']}",
            flush=True,
        )


PRODUCER = """
import json, os, sys, time
import django
django.setup()
from django.db import transaction
from concurrent.futures import ThreadPoolExecutor
from outbox.dispatch.dispatcher import handoff_deliver
from outbox.services import handoff_record
rate, seconds, first = float(sys.argv[1]), float(sys.argv[2]), int(sys.argv[3])
# "inline": the lever of attempting delivery right after commit in the committing process (a small
# thread pool, so the approval itself does not wait); the dispatchers pick up whatever it did not finish.
inline = ThreadPoolExecutor(max_workers=4) if sys.argv[4:] == ["inline"] else None
# Started, then wait for the word to go: every producer's start (about 2 s of CPU importing the product) ends
# before any approval is timed, instead of the first one's approvals sharing the cores with the others' starts.
print("ready", flush=True)
sys.stdin.readline()
interval, start, n = 1.0 / rate, time.monotonic(), 0
# Each approval's key, when its COMMIT was sent and when it returned (this host's clock): the latency runs from
# the commit, and the approval's own statements and COMMIT are parts of their own (printed at the end).
commits = {}
while time.monotonic() - start < seconds:
    payload = {"client_name": f"Client {first + n}", "plan": "standard"}
    with transaction.atomic():  # the approval's transaction: outbox row + NOTIFY, one commit
        handoff = handoff_record(workflow="onboarding", workspace_id=7, source_ref=f"request {first + n}",
                                 source_id=first + n, action_key=f"onboarding:7:{first + n}:1", payload=payload)
        if inline is not None:
            transaction.on_commit(lambda pk=handoff.pk: inline.submit(handoff_deliver, handoff_id=pk))
        sent = time.time()
    commits[handoff.action_key] = (sent, time.time())
    n += 1
    delay = start + n * interval - time.monotonic()
    if delay > 0:
        time.sleep(delay)
if inline is not None:
    inline.shutdown(wait=True)
print(json.dumps(commits))
print(n)
"""


def producers_go(running: list[subprocess.Popen]) -> list[list[str]]:
    """Once every producer (`PRODUCER`) has said it is ready, tell them all to go; the lines each printed after."""
    for proc in running:
        if proc.stdout.readline().strip() != "ready":
            raise RuntimeError(f"a producer did not start: {proc.args[3:]}")
    for proc in running:
        proc.stdin.write("go\n")
        proc.stdin.flush()
    return [proc.communicate()[0].strip().splitlines() for proc in running]


def one_call_pairs(bench: Bench, handoffs: int, pairs: int) -> dict:
    """One call per handoff (4 dispatchers) against the receiver's capacity (4 plain clients), `pairs` pairs
    taken and judged by bench/pairs.py ("paired": the figure, refused when the capacity collapsed). The run
    with the median rate stands for them; every pair's runs are kept, each with how its connections fell on
    the receiver's workers (`receiver_placement`: the receiver's CPU a create follows it). Every run of either
    side starts settled (`bench/settle.py`): the receiver's tables empty, no autovacuum due, checkpointed."""
    runs: dict[tuple[int, str], dict] = {}

    def capacity(n: int) -> float:
        with receiver_placement(bench) as placed:
            measured = receiver_capacity.measure(
                bench.receiver_url, bench.env["RECEIVER_SIGNING_SECRET"], clients=4, seconds=5
            )
        runs[(n, "capacity")] = {**measured, "receiver_connections": placed["placement"]}
        return runs[(n, "capacity")]["per_second"]

    with bench.kept_running(4, "single") as running:

        def one_call(n: int) -> float:
            with receiver_placement(bench) as placed:
                run = throughput(bench, handoffs, 4, f"single{n}", running=running)
            runs[(n, "one_call")] = {**run, "receiver_connections": placed["placement"]}
            return runs[(n, "one_call")]["per_second"]

        figure = measure_pairs(
            "receiver_capacity",
            capacity,
            one_call,
            pairs=pairs,
            on_pair=print_pair,
            settle=lambda: settle(
                [bench.source, bench.delivery], empty={bench.delivery: RECEIVER_TABLES}
            ),
        )
    paired = figure_json(figure, runs, ("capacity", "one_call"))
    each = [
        {
            **pair["one_call"],
            "capacity": pair["capacity"]["per_second"],
            "capacity_stagger_seconds": pair["capacity"]["stagger_seconds"],
            "capacity_connections": pair["capacity"]["receiver_connections"],
        }
        for pair in paired["pairs"]
    ]
    ordered = sorted(each, key=lambda run: run["per_second"])
    return {**ordered[len(ordered) // 2], "pairs": each, "paired": paired}


def one_call_ceiling_pairs(bench: Bench, handoffs: int, pairs: int, dispatchers: int = 4) -> dict:
    """This machine's ceiling for one call per handoff (issue 40: "where an aim proves physically out of reach
    on this machine, measure the machine's own ceiling in the same run"): `pairs` pairs (bench/pairs.py) of a
    run with `dispatchers` minimal dispatchers (`bench/reference_dispatcher.py` with one call a row: a claim
    statement, signed calls one after another, one outcome statement a batch, and nothing else a dispatcher
    that keeps its work in PostgreSQL could leave out) and one with as many of the product's, each side's
    processes started for its run alone (they serve one outbox), the same handoffs and receiver. The receiver's
    capacity (`one_call_pairs`) is plain clients that keep nothing: what separates the two is the database's
    work and the dispatchers' CPU on the same 2 cores, and this ratio says how much of it is the product's."""
    runs: dict[tuple[int, str], dict] = {}

    def reference(n: int) -> float:
        reset(bench)
        with references_for_run(bench, dispatchers):
            with bench.sql() as conn:
                conn.execute(insert_handoffs_sql(1, handoffs))
                conn.execute("NOTIFY handoff_due")
            elapsed = wait_until_all_delivered(bench, timeout=900)
        check = verify(bench, handoffs)
        # The minimal dispatcher records no task id: every handoff delivered once is what it must show.
        ok = check["delivered"] == check["tasks"] == check["distinct_keys"] == handoffs
        runs[(n, "reference")] = {
            "handoffs": handoffs,
            "dispatchers": dispatchers,
            "seconds": round(elapsed, 2),
            "per_second": round(handoffs / elapsed, 1),
            "check": {**check, "mismatched": None, "ok": ok},
        }
        return runs[(n, "reference")]["per_second"]

    def product(n: int) -> float:
        runs[(n, "product")] = throughput(bench, handoffs, dispatchers, f"ceiling{n}")
        return runs[(n, "product")]["per_second"]

    figure = measure_pairs("one_call_ceiling", reference, product, pairs=pairs, on_pair=print_pair)
    return figure_json(figure, runs, ("reference", "product"))


def latency_pairs(bench: Bench, rate: float, dispatchers: int, seconds: float, pairs: int) -> dict:
    """The product's share of the latency against this machine's ceiling (issue 40: "where an aim proves
    physically out of reach on this machine, measure the machine's own ceiling in the same run"): `pairs`
    pairs (bench/pairs.py) of a run with `dispatchers` minimal dispatchers (`bench/reference_dispatcher.py`,
    graphile-worker's path) and one with as many of the product's, each started for its run alone (both
    serve one outbox: the other side's must not be there), the same producers, asked rate and receiver.
    A side's figure is 1000 / its share in ms (higher is better, as bench/pairs.py wants), so a pair's ratio
    is the reference's share over the product's: 1.0, the product takes no more than the ceiling."""
    runs: dict[tuple[int, str], dict] = {}

    def side(name: str) -> Callable[[int], float]:
        def run(n: int) -> float:
            runs[(n, name)] = latency(
                bench, rate, dispatchers, seconds, producers=2, reference=name == "reference"
            )
            share = runs[(n, name)]["product_share_ms"]
            return round(1000 / share, 3) if share else 0.0

        return run

    figure = measure_pairs(
        "latency_share_reference",
        side("reference"),
        side("product"),
        pairs=pairs,
        on_pair=print_pair,
    )
    return figure_json(figure, runs, ("reference", "product"))


@contextlib.contextmanager
def references_for_run(bench: Bench, count: int, timeout: float = 120):
    """`count` minimal dispatchers (`bench/reference_dispatcher.py`) for one run, once each LISTENs (as
    `Bench.dispatchers_started` waits for the product's); stopped after it, also when it fails."""
    procs = [
        bench.spawn(
            [PYTHON, "bench/reference_dispatcher.py", "--worker", f"reference-{n}"],
            f"reference-{n}.log",
        )
        for n in range(count)
    ]
    listening = (
        "SELECT count(*) FROM pg_stat_activity WHERE datname = %s AND application_name = %s "
        "AND query LIKE 'LISTEN %%'"
    )
    try:
        started = time.monotonic()
        while bench.scalar(listening, params=(bench.source, REFERENCE_APPLICATION)) < count:
            if any(proc.poll() is not None for proc in procs):
                raise RuntimeError(f"a reference dispatcher exited; see {bench.log_dir}")
            if time.monotonic() - started > timeout:
                raise RuntimeError(
                    f"{count} reference dispatchers not all listening in {timeout:g} s"
                )
            time.sleep(0.05)
        yield procs
    finally:
        bench.stop(procs)


def processes_cpu(procs: list[subprocess.Popen]) -> float:
    """The CPU seconds the processes used so far (user and system, /proc/<pid>/stat)."""
    ticks, total = os.sysconf("SC_CLK_TCK"), 0
    for proc in procs:
        with contextlib.suppress(FileNotFoundError, ProcessLookupError):
            fields = Path(f"/proc/{proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
            total += int(fields[11]) + int(fields[12])
    return total / ticks


def serving_for_run(
    bench: Bench, count: int, running: list[subprocess.Popen] | None, reference: bool
):
    """The dispatchers of one latency run: the product's (`dispatchers_for_run`) or the reference's."""
    if reference:
        return references_for_run(bench, count)
    return dispatchers_for_run(bench, count, "lat", running)


def latency_parts(
    committed: dict, received: dict, firsts: list, arrived: dict | None = None
) -> dict:
    """The medians of a handoff's way from its approval's commit to the receiver's, in the order it goes:
    waiting to be claimed (NOTIFY, the wake-up and the rest of the cycle its dispatcher was in: the approval's
    commit, `committed`, to the claim statement), claiming, signing and sending until the request reached the
    receiver (`arrived`: the claim statement, earlier calls of its batch, signing, the request's way), the
    receiver's own part (its arrival to its commit, `received`), and after it recording (the answer's way back,
    the later calls of its batch, the outcome statement). The receiver call (the whole HTTP call as the
    dispatcher timed it) is beside them. Without the receiver's arrivals (`bench/receiver_timing.py`), the claim
    statement to the receiver's commit, as taken until 2026-12-07."""
    waited, to_arrival, own, to_receiver, recording, called = [], [], [], [], [], []
    for key, started, call_ms, finished in firsts:
        waited.append(elapsed_ms(committed[key], started))
        if arrived and key in arrived:
            to_arrival.append(elapsed_ms(started, arrived[key]))
            if key in received:
                own.append(elapsed_ms(arrived[key], received[key]))
        if key in received:
            to_receiver.append(elapsed_ms(started, received[key]))
            if finished is not None:
                recording.append(elapsed_ms(received[key], finished))
        if call_ms is not None:
            called.append(call_ms)
    parts = {
        "median_wait_to_claim_ms": median_ms(waited),
        "median_claim_to_receiver_commit_ms": median_ms(to_receiver),
        "median_receiver_commit_to_recorded_ms": median_ms(recording),
        "median_receiver_call_ms": median_ms(called),
    }
    if arrived:
        parts["median_claim_to_arrival_ms"] = median_ms(to_arrival)
        parts["median_receiver_own_ms"] = median_ms(own)
    return parts


def elapsed_ms(start: datetime, end: datetime) -> float:
    return (end - start).total_seconds() * 1000


def median_ms(values: list) -> float | None:
    return round(float(statistics.median(values)), 1) if values else None


@contextlib.contextmanager
def dispatchers_for_run(
    bench: Bench, count: int, tag: str, running: list[subprocess.Popen] | None = None
):
    """The dispatchers of one run: `running` (those of `Bench.kept_running`, a figure's) left running after
    it, else `count` started for this run alone and stopped after it, also when it fails. Until 2026-12-06
    `latency` reused the name of its `running` for its producers and so never stopped its own: the 8 of the
    run with the best batched count stayed up, serving the same outbox, through the alternative, the crash,
    growth and the backlog (`ps` during a run showed them beside those sections' own)."""
    if running is not None:
        bench.dispatchers_started(running)
        yield running
        return
    with bench.kept_running(count, tag) as procs:
        yield procs


def from_commit(
    commits: dict, approved: dict, received: dict, firsts: list, arrived: dict | None = None
) -> dict:
    """The latency from each approval's commit to the receiver's (`commits`: a key's COMMIT sent and returned,
    the producer's clock; the handoff exists for a dispatcher once it returned; `received`: the receiver's
    commit), its parts (`latency_parts`) and the product's share (issue 40: < 5 ms): the median over handoffs
    of the latency less the receiver's own part (its request's arrival to its commit, `arrived`), which is the
    approval's commit to the request's arrival at the receiver. The receiver call as the dispatcher times it
    is no measure of the receiver's part: it holds the request's and the answer's way and the part after the
    commit (the median less it gave -2.5 ms on 2026-12-06). Beside them the approval's own transaction, which
    the figures included until 2026-12-06 (they ran from the outbox row's `created_at`, the transaction's
    start): its statements, and its COMMIT (the WAL flush, which no wake-up can precede), with the latency
    taken from the insert as before."""
    committed = {key: datetime.fromtimestamp(times[1], tz=UTC) for key, times in commits.items()}
    sent = {key: datetime.fromtimestamp(times[0], tz=UTC) for key, times in commits.items()}
    keys = [key for key in committed if key in received]
    parts = latency_parts(committed, received, firsts, arrived)

    def sorted_ms(start: dict, end: dict, among: list = keys) -> list[float]:
        return sorted(elapsed_ms(start[k], end[k]) for k in among)

    ms, from_insert = sorted_ms(committed, received), sorted_ms(approved, received)
    share = sorted_ms(committed, arrived, [k for k in keys if k in arrived]) if arrived else []
    return {
        "median_ms": round(statistics.median(ms), 1),
        "p99_ms": round(ms[int(len(ms) * 0.99) - 1], 1),
        **parts,
        "product_share_ms": median_ms(share),
        "median_approval_statements_ms": round(statistics.median(sorted_ms(approved, sent)), 1),
        "median_approval_commit_ms": round(statistics.median(sorted_ms(sent, committed)), 1),
        "median_from_insert_ms": round(statistics.median(from_insert), 1),
    }


def receiver_timed(path: Path) -> tuple[dict, dict, dict]:
    """Per action key, when its first create call reached the receiver, when its handler started and when
    that call committed (`bench/receiver_timing.py`'s lines), as times of this host's clock."""
    arrived, handled, committed = {}, {}, {}
    for line in path.read_text().splitlines():
        call = json.loads(line)
        for key in call["keys"]:
            if key not in arrived or call["arrived"] < arrived[key].timestamp():
                arrived[key] = datetime.fromtimestamp(call["arrived"], tz=UTC)
                handled[key] = datetime.fromtimestamp(call["handled"], tz=UTC)
                committed[key] = datetime.fromtimestamp(call["committed"], tz=UTC)
    return arrived, handled, committed


@recorded
def latency(
    bench: Bench,
    rate: float,
    dispatchers: int,
    seconds: float,
    producers: int = 1,
    inline: bool = False,
    running: list[subprocess.Popen] | None = None,
    reference: bool = False,
) -> dict:
    """Handoffs approved at a steady rate by `producers` processes (each rate/producers, own keys);
    approval commit to receiver commit, per key. `running`: `dispatchers` of `Bench.kept_running`, left running.
    `reference`: served by as many minimal dispatchers (`references_for_run`) instead of the product's."""
    reset(bench)
    timing = Path(bench.env.get("BENCH_RECEIVER_TIMING") or bench.log_dir / "receiver-timing.jsonl")
    timing.write_text("")  # the receiver notes each create call while it exists
    with serving_for_run(bench, dispatchers, running, reference) as serving:
        cpu_before = processes_cpu(serving)
        producing = [
            subprocess.Popen(
                [
                    PYTHON,
                    "-c",
                    PRODUCER,
                    str(rate / producers),
                    str(seconds),
                    str(1 + n * 10_000_000),
                    *(["inline"] if inline else []),
                ],
                cwd=ROOT,
                env=bench.env,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                text=True,
            )
            for n in range(producers)
        ]
        printed = producers_go(producing)
        produced = sum(int(lines[-1]) for lines in printed)
        commits = {key: times for lines in printed for key, times in json.loads(lines[-2]).items()}
        wait_for(
            bench,
            "SELECT count(*) FROM outbox_handoff WHERE state = 'delivered'",
            produced,
            timeout=120,
        )
        cpu_ms = (processes_cpu(serving) - cpu_before) * 1000
    arrived, handled, received = receiver_timed(timing)
    timing.unlink()
    with bench.sql() as src, bench.sql("delivery") as dst:
        approved = dict(src.execute("SELECT action_key, created_at FROM outbox_handoff").fetchall())
        # A receiver without its timing (`config.wsgi`): its task's insert, as before.
        if not arrived:
            received = dict(
                dst.execute("SELECT action_key, created_at FROM delivery_receivertask").fetchall()
            )
        # Where the time goes, first attempt of each handoff, on one host's clock (the outbox's times are the
        # database's, the receiver's its gunicorn worker's `time.time()`, the approvals' their producer's).
        firsts = src.execute(
            "SELECT h.action_key, a.started_at, a.latency_ms, a.finished_at FROM outbox_attempt a "
            "JOIN outbox_handoff h ON h.id = a.handoff_id WHERE a.number = 1"
        ).fetchall()
    return {
        "rate": rate,
        "achieved_rate": round(produced / seconds, 1),
        "seconds": seconds,
        "handoffs": produced,
        "producers": producers,
        "inline_attempt": inline,
        "dispatchers": dispatchers,
        "reference": reference,
        # The dispatchers' own CPU (their processes', from /proc, from before the producers start) per handoff.
        "dispatcher_cpu_ms_per_handoff": round(cpu_ms / max(produced, 1), 2),
        **from_commit(commits, approved, received, firsts, arrived),
        # Of the receiver's own part: its request waiting for a thread of gunicorn's and being parsed.
        "median_receiver_queue_ms": median_ms(
            [elapsed_ms(arrived[k], handled[k]) for k in arrived]
        ),
        "wake_up": (
            "delivery attempted after commit by the committing process; NOTIFY and the dispatchers "
            "for the rest"
            if inline
            else "PostgreSQL NOTIFY sent in the approval transaction; 0.5 s poll as fallback"
        ),
    }


ALT_PRODUCER = """
import sys, time
import django
django.setup()
from django.db import transaction
from django_q.tasks import async_task
from approvals.models import Request
rate, count, first = float(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
interval, start = (1.0 / rate if rate else 0), time.monotonic()
for n in range(first, first + count):
    with transaction.atomic():  # the approval, then the usual hand-off: a task queued after commit
        request = Request.objects.create(workspace_id=7, number=n, payload={"client_name": f"Client {n}",
                                         "plan": "standard"}, payload_hash="-", state="approved", requested_by_id=1)
        transaction.on_commit(lambda pk=request.pk: async_task("bench.alternative.deliver_request", pk))
    if interval:
        delay = start + (n - first + 1) * interval - time.monotonic()
        if delay > 0:
            time.sleep(delay)
print(count)
"""


def alternative_setup(bench: Bench) -> None:
    with bench.sql() as conn:
        conn.execute(
            "INSERT INTO auth_user (id, password, is_superuser, username, first_name, last_name, email, "
            "is_staff, is_active, date_joined) VALUES (1, '!', false, 'bench', '', '', '', false, true, "
            "now()) ON CONFLICT DO NOTHING"
        )
        conn.execute(
            "INSERT INTO approvals_workspace (id, name, created_at) VALUES (7, 'bench', now()) "
            "ON CONFLICT DO NOTHING"
        )


def alternative_reset(bench: Bench) -> None:
    with bench.sql() as conn:
        conn.execute("TRUNCATE approvals_request CASCADE")
        conn.execute("TRUNCATE django_q_ormq, django_q_task")
    with bench.sql("delivery") as conn:
        conn.execute("TRUNCATE delivery_receivertask, delivery_seenmessage")


@recorded
def alternative_throughput(bench: Bench, handoffs: int, workers: int) -> dict:
    """on_commit(async_task(deliver, id)) with django-q2 and no outbox: one task per handoff."""
    alternative_setup(bench)
    alternative_reset(bench)
    subprocess.run(
        [PYTHON, "-c", ALT_PRODUCER, "0", str(handoffs), "1"],
        cwd=ROOT,
        env=bench.env,
        check=True,
        capture_output=True,
    )
    cluster = bench.spawn(
        [PYTHON, "manage.py", "qcluster"], "alt-qcluster.log", Q_WORKERS=str(workers)
    )
    elapsed = wait_for(
        bench, "SELECT count(*) FROM delivery_receivertask", handoffs, timeout=900, which="delivery"
    )
    bench.stop([cluster])
    return {
        "handoffs": handoffs,
        "workers": workers,
        "seconds": round(elapsed, 2),
        "per_second": round(handoffs / elapsed, 1),
    }


@recorded
def alternative_latency(bench: Bench, rate: float, seconds: float, workers: int) -> dict:
    alternative_setup(bench)
    alternative_reset(bench)
    cluster = bench.spawn(
        [PYTHON, "manage.py", "qcluster"], "alt-qcluster-lat.log", Q_WORKERS=str(workers)
    )
    time.sleep(3)
    count = int(rate * seconds)
    subprocess.run(
        [PYTHON, "-c", ALT_PRODUCER, str(rate), str(count), "1"],
        cwd=ROOT,
        env=bench.env,
        check=True,
        capture_output=True,
    )
    wait_for(
        bench, "SELECT count(*) FROM delivery_receivertask", count, timeout=300, which="delivery"
    )
    bench.stop([cluster])
    with bench.sql() as src, bench.sql("delivery") as dst:
        approved = dict(
            src.execute(
                "SELECT 'onboarding:7:' || number || ':1', created_at FROM approvals_request"
            )
        )
        received = dict(
            dst.execute("SELECT action_key, created_at FROM delivery_receivertask").fetchall()
        )
    ms = sorted(
        (received[k] - approved[k]).total_seconds() * 1000 for k in approved if k in received
    )
    return {
        "rate": rate,
        "handoffs": count,
        "median_ms": round(statistics.median(ms), 1),
        "p99_ms": round(ms[int(len(ms) * 0.99) - 1], 1),
    }


# Short leases, so that a killed worker's rows are noticed quickly; one call must still fit in a lease.
CRASH_ENV = {
    "HANDOFF_LEASE_SECONDS": "5",
    "RECEIVER_CONNECT_TIMEOUT": "1",
    "RECEIVER_READ_TIMEOUT": "3",
}


def crash_comparison(bench: Bench, handoffs: int, grace: float = 15.0) -> dict:
    """Every worker process killed with SIGKILL a third of the way through, then started again: what did
    each design lose or duplicate `grace` seconds after the restarted workers drained the queue?"""
    results = {}
    reset(bench)
    with bench.sql() as conn:
        conn.execute(insert_handoffs_sql(1, handoffs))
    procs = bench.start_dispatchers(4, "crash", **CRASH_ENV)
    wait_for(
        bench,
        "SELECT count(*) FROM delivery_receivertask",
        handoffs // 3,
        timeout=120,
        which="delivery",
    )
    for proc in procs:
        kill_tree(proc.pid)
        proc.wait()
    bench.procs = [p for p in bench.procs if p not in procs]
    in_flight = bench.scalar("SELECT count(*) FROM outbox_handoff WHERE state = 'in_flight'")
    procs = bench.start_dispatchers(4, "crash-restart", **CRASH_ENV)
    started = time.monotonic()
    with contextlib.suppress(RuntimeError):
        wait_for(
            bench,
            "SELECT count(*) FROM outbox_handoff WHERE state = 'delivered'",
            handoffs,
            timeout=grace + 60,
        )
    recovered = time.monotonic() - started
    bench.stop(procs)
    tasks = bench.scalar("SELECT count(*) FROM delivery_receivertask", "delivery")
    results["outbox"] = {
        "approved": handoffs,
        "in_flight_at_kill": in_flight,
        "receiver_tasks": tasks,
        "lost": handoffs - tasks,
        "duplicated": tasks
        - bench.scalar("SELECT count(DISTINCT action_key) FROM delivery_receivertask", "delivery"),
        "seconds_to_complete_after_restart": round(recovered, 1),
    }

    alternative_setup(bench)
    alternative_reset(bench)
    subprocess.run(
        [PYTHON, "-c", ALT_PRODUCER, "0", str(handoffs), "1"],
        cwd=ROOT,
        env=bench.env,
        check=True,
        capture_output=True,
    )
    cluster = bench.spawn(
        [PYTHON, "manage.py", "qcluster"], "alt-qcluster-crash.log", Q_WORKERS="4"
    )
    wait_for(
        bench,
        "SELECT count(*) FROM delivery_receivertask",
        handoffs // 3,
        timeout=300,
        which="delivery",
    )
    kill_tree(cluster.pid)
    cluster.wait()
    bench.procs = [p for p in bench.procs if p is not cluster]
    cluster = bench.spawn(
        [PYTHON, "manage.py", "qcluster"], "alt-qcluster-crash2.log", Q_WORKERS="4"
    )
    recovered = wait_until_quiet(bench, handoffs, grace)
    bench.stop([cluster])
    tasks = bench.scalar("SELECT count(*) FROM delivery_receivertask", "delivery")
    results["on_commit_django_q2"] = {
        "approved": handoffs,
        "receiver_tasks": tasks,
        "lost": handoffs - tasks,
        "duplicated": tasks
        - bench.scalar("SELECT count(DISTINCT action_key) FROM delivery_receivertask", "delivery"),
        "seconds_to_complete_after_restart": round(recovered, 1),
        "queued_still": bench.scalar("SELECT count(*) FROM django_q_ormq"),
    }
    return results


def wait_until_quiet(bench: Bench, target: int, grace: float, limit: float = 600) -> float:
    """Until the receiver holds `target` tasks, or none came for `grace` seconds after the first that the
    restarted workers delivered (a start slowed by a loaded machine is not a quiet queue; 4 × `grace` with
    none at all is). 15 s, not the 30 s of before 2026-12-06: django-q2 gives a task that the killed cluster had
    taken again only after its retry timeout (Q_CLUSTER "retry", 120 s), so nothing came in between. The
    seconds from the call."""
    started = time.monotonic()
    count = "SELECT count(*) FROM delivery_receivertask"
    last, since = bench.scalar(count, "delivery"), None
    while time.monotonic() - started < limit:
        now = bench.scalar(count, "delivery")
        if now >= target:
            break
        if now != last:
            last, since = now, time.monotonic()
        quiet = time.monotonic() - (since or started)
        if quiet > (grace if since else 4 * grace):
            break
        time.sleep(0.2)
    return time.monotonic() - started


@recorded
def backlog_after_outage(
    bench: Bench,
    handoffs: int,
    dispatchers: int,
    outage: float,
    *,
    max_concurrency: int = 2,
    max_per_second: int = 20,
) -> dict:
    """The receiver is down while `handoffs` are queued and the dispatchers keep trying; it comes back
    after `outage` seconds. The operator has limited the destination to `max_concurrency` calls in flight and
    `max_per_second` requests per second (a batch call of 50 is one request). Time to drain from its return,
    whether the outage handed anything to a person (it must not: the breaker pauses the destination instead of
    spending attempts), and the limit as the receiver saw it: the most calls in flight at once and the most
    that arrived within one second (every create call logged by the receiver, RECEIVER_FAULTS "observe")."""
    reset(bench)
    with bench.sql() as conn:
        # What the console's limits form writes (outbox.services.limits.destination_set_limits), set directly here.
        conn.execute("DELETE FROM outbox_destinationslot")
        conn.execute(
            "INSERT INTO outbox_destinationhealth (name, state, pause_reason, consecutive_failures, probes, "
            "last_error, updated_at, max_concurrency, max_requests_per_second) "
            "VALUES ('receiver', 'active', '', 0, 0, '', now(), %s, %s) ON CONFLICT (name) DO UPDATE SET "
            "max_concurrency = EXCLUDED.max_concurrency, max_requests_per_second = EXCLUDED.max_requests_per_second",
            (max_concurrency, max_per_second),
        )
        # A Retry-After hold left by an earlier run is a row (outbox/models/holds.py): ended, as its end would.
        conn.execute(
            "UPDATE outbox_destinationhold SET ended_at = now(), ended_by = 'bench' "
            "WHERE destination = 'receiver' AND kind = 'retry_after' AND ended_at IS NULL"
        )
    observed = bench.log_dir / "backlog-receiver-calls.log"
    observed.unlink(missing_ok=True)
    port = bench.receiver_port
    bench.stop([bench.receiver])
    procs = bench.start_dispatchers(dispatchers, "backlog")
    with bench.sql() as conn:
        conn.execute(insert_handoffs_sql(1, handoffs))
        conn.execute("NOTIFY handoff_due")
    time.sleep(outage)
    failed_during_outage = bench.scalar("SELECT count(*) FROM outbox_attempt")
    bench.env["RECEIVER_FAULTS"] = json.dumps({"observe": str(observed)})
    bench.start_receiver(port=port)
    del bench.env["RECEIVER_FAULTS"]
    back = time.monotonic()
    first = wait_for(
        bench, "SELECT count(*) FROM outbox_handoff WHERE state = 'delivered'", 1, timeout=120
    )
    wait_until_all_delivered(bench, timeout=900)
    elapsed = time.monotonic() - back  # from the receiver's return to the last delivery
    rss = peak_rss_mb(procs)
    bench.stop(procs)
    calls = sorted(
        (float(arrived), float(answered))
        for method, arrived, answered in (
            line.split() for line in observed.read_text().splitlines()
        )
        if method == "POST"
    )
    edges = sorted(
        [(arrived, 1) for arrived, _ in calls] + [(answered, -1) for _, answered in calls]
    )
    in_flight = most_in_flight = 0
    for _, step in edges:
        in_flight += step
        most_in_flight = max(most_in_flight, in_flight)
    most_in_one_second, first_in_window = 0, 0
    for last, (arrived, _) in enumerate(calls):
        while calls[first_in_window][0] <= arrived - 1.0:
            first_in_window += 1
        most_in_one_second = max(most_in_one_second, last - first_in_window + 1)
    with bench.sql() as conn:
        conn.execute(
            "UPDATE outbox_destinationhealth SET max_concurrency = NULL, max_requests_per_second = NULL"
        )
    bench.stop([bench.receiver])
    bench.start_receiver(port=port)  # the other stages' receiver, without the call log
    return {
        "handoffs": handoffs,
        "dispatchers": dispatchers,
        "outage_seconds": outage,
        "attempts_during_outage": failed_during_outage,
        "seconds_to_first_delivery": round(first, 1),
        "seconds_to_drain": round(elapsed, 1),
        "per_second": round(handoffs / elapsed, 1),
        "peak_rss_mb": rss,
        "needs_attention": bench.scalar(
            "SELECT count(*) FROM outbox_handoff WHERE state = 'needs_attention'"
        ),
        "limit": {"max_concurrency": max_concurrency, "max_requests_per_second": max_per_second},
        "observed": {
            "calls": len(calls),
            "max_in_flight": most_in_flight,
            "max_requests_in_one_second": most_in_one_second,
        },
        "limit_held": most_in_flight <= max_concurrency and most_in_one_second <= max_per_second,
        "check": verify(bench, handoffs),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--handoffs", type=int, default=5000)
    # 3 s: the batch run it is paired with lasts 1.4-2.8 s (5 s until 2026-12-06, when the section overran).
    parser.add_argument("--pgbench-seconds", type=int, default=3)
    # 10 s: about 1,600 handoffs a run at half the best rate, three runs (15 s until 2026-12-06).
    parser.add_argument("--latency-seconds", type=float, default=10)
    parser.add_argument(
        "--latency-runs",
        type=int,
        default=3,
        help="runs of the latency at half the best rate; the one with the median median counts",
    )
    parser.add_argument(
        "--pgbench-pairs",
        type=int,
        default=3,
        help="back-to-back pairs of pgbench -N and the batch API at 4 (bench/pairs.py)",
    )
    parser.add_argument(
        "--one-call-pairs",
        type=int,
        default=5,
        help="back-to-back pairs of the receiver's capacity and the one-call run; the median of "
        "the pairs' ratios counts",
    )
    parser.add_argument(
        "--growth-rows",
        type=int,
        nargs="*",
        default=[10_000, 1_000_000],
        help="delivered rows preloaded; the first is the small table, each other size is run in pairs "
        "against it (10,000,000 takes 148 s to fill, once for its pairs: more than `make bench`'s 20 minutes "
        "leave)",
    )
    parser.add_argument("--growth-pairs", type=int, default=3)
    parser.add_argument(
        "--reconcile-after-growth",
        action=argparse.BooleanOptionalAction,
        default=False,
        help="one more growth run at the largest size, not paired, then a reconciliation of its rows "
        "(http destination)",
    )
    parser.add_argument("--reconcile-batch-size", type=int, default=5000)
    parser.add_argument(
        "--growth-only",
        action="store_true",
        help="skip everything before growth but the receiver's capacity (for timing the growth "
        "and backlog parts; the report needs a full run)",
    )
    parser.add_argument(
        "--latency-only",
        type=float,
        metavar="BEST_RATE",
        help="only the latency runs (`latency_figures`), at half BEST_RATE handoffs/s with one dispatcher a "
        "core, for a quick look at the latency and its parts (the report needs a full run)",
    )
    parser.add_argument("--backlog-handoffs", type=int, default=20_000)
    parser.add_argument("--outage-seconds", type=float, default=15)
    parser.add_argument("--alternative-handoffs", type=int, default=1000)
    parser.add_argument("--crash-handoffs", type=int, default=1500)
    parser.add_argument("--json", default=str(ROOT / "var" / "bench" / "e2e.json"))
    args = parser.parse_args()

    report: dict = {}
    if not args.growth_only and not args.latency_only:
        pgbench_init()

    bench = Bench("e2e", RECEIVER_SUPPORTS_BATCH="1", HANDOFF_CLAIM_BATCH="50").setup()
    # Named by the run's databases: two runs on one machine (BENCH_DB_PREFIX apart) time apart.
    bench.env["BENCH_RECEIVER_TIMING"] = str(
        bench.log_dir / f"receiver-timing-{bench.delivery}.jsonl"
    )
    bench.start_receiver(app=TIMED_RECEIVER, worker_class=TIMED_WORKER)
    report["receiver_workers"], report["receiver_threads"] = RECEIVER_WORKERS, RECEIVER_THREADS
    if args.latency_only:
        best = {"per_second": args.latency_only, "dispatchers": os.cpu_count() or 1}
        latency_figures(bench, args, best, report)
        bench.stop()
        Path(args.json).write_text(json.dumps(report, indent=2, default=str))
        return
    # The receiver's own capacity: plain clients, no outbox. The report divides every figure against the receiver's
    # capacity by the most it answered in any measurement of the run (`bench/report.py`, `one_call_figure`), except
    # the one-call aim, read pair by pair (`one_call_paired`).
    # 5 s each, as the one-call pairs' captures (8 s until 2026-12-07): 1,400-2,500 creates a measurement,
    # the calls in flight at its edges under 1% of them, against the 312-501/s that the receiver's capacity moved
    # between the captures of one run (2026-12-07 17:31) with the machine and its workers' connections.
    report["receiver_capacity"] = [
        receiver_capacity.measure(
            bench.receiver_url, bench.env["RECEIVER_SIGNING_SECRET"], clients=c, seconds=5
        )
        for c in (2, 4)
    ]
    print(f"  receiver capacity {report['receiver_capacity']}", flush=True)
    if not args.growth_only:
        dispatch_figures(bench, args, report)

    report["growth"] = growth_pairs(bench, args.handoffs, args.growth_rows, args.growth_pairs)
    if args.reconcile_after_growth:
        row, report["reconcile_after_growth"] = growth_then_reconcile(
            bench, args.handoffs, max(args.growth_rows), args.reconcile_batch_size
        )
        print(f"  growth before the reconciliation (not paired) {row}", flush=True)
    report["backlog"] = backlog_after_outage(
        bench, args.backlog_handoffs, 4, args.outage_seconds, max_concurrency=2, max_per_second=20
    )
    print(f"  backlog {report['backlog']}", flush=True)
    bench.stop()
    Path(args.json).parent.mkdir(parents=True, exist_ok=True)
    Path(args.json).write_text(json.dumps(report, indent=2, default=str))
    print(json.dumps(report, default=str))


if __name__ == "__main__":
    sys.exit(main())
