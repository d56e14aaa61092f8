"""Keys compared per second by reconciliation, for N matching handoffs and receiver tasks on PostgreSQL.

    .venv/bin/python bench/reconcile_bench.py 1000000 [--batch-size 5000] [--destination in_process|http|both]
    .venv/bin/python bench/reconcile_bench.py N --source-db NAME --delivery-db NAME [--destination http]

Creates its own databases (`<BENCH_DB_PREFIX>_recon_source` and `_delivery`), fills both sides at once
with N delivered handoffs and the N receiver tasks that match them (same key, payload hash and task id;
`bench/harness.py`, the fill the growth runs use), runs one full reconciliation through the destination
interface and prints keys compared per second, with the reconciling process's memory: its RSS sampled as
the run goes (after each tenth of the keys) and its peak. `in_process` reads the receiver through its
services (the merge and the two databases); `http` reads it through its signed HTTP API served by gunicorn
(what production does). With `--source-db` and `--delivery-db` it fills nothing and reconciles those
databases as they are (`bench/e2e.py` hands over its largest growth run this way: N must then be every key).
The source rows carry the work status the receiver reports ('open'), as after an earlier run: a run
records only changes, so the figure is the steady state, not a first run writing every row.
The run must report no findings: the data agree, so any finding is a bug and the benchmark fails.

With `--keep` the filled databases (`<BENCH_DB_PREFIX>_recon_kept_<N>_source` and `_delivery`) stay after the run,
marked with what made them (`bench/kept.py`), and a later run reuses them while the mark and their shape hold
(N handoffs and N receiver tasks, every index valid; a migration file added since is migrated forward): `make
bench` measures the aim's 10,000,000 keys this way, the fill (about 150 s on 2 idle cores) made once, by
`make bench-reconcile-10m` (`--fill-only`) or by the first run that finds them missing or stale.
"""

import argparse
import gc
import os
import re
import resource
import sys
import time
from pathlib import Path

import psycopg

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench import kept  # noqa: E402
from bench.harness import (  # noqa: E402
    PRELOAD_FIRST,
    Bench,
    bulk_fill_concurrently,
    dsn,
    insert_handoffs_sql,
    insert_receiver_tasks_sql,
)
from bench.pairs import watched, watched_line  # noqa: E402

# What a kept pair rests on besides the two statements and the migrations: bump when the fill changes otherwise
# (bulk_fill's way of filling, or rows seeded beside the statements).
FILL_VERSION = "1"


def fill_statements(n: int) -> tuple[str, str]:
    return insert_handoffs_sql(PRELOAD_FIRST, n, state="delivered"), insert_receiver_tasks_sql(
        PRELOAD_FIRST, n
    )


def fill(bench: Bench, n: int) -> float:
    """Both sides at once, each a set-based INSERT with its secondary indexes built after."""
    handoffs, tasks = fill_statements(n)
    return bulk_fill_concurrently(
        (dsn(bench.source), "outbox_handoff", handoffs),
        (dsn(bench.delivery), "delivery_receivertask", tasks),
    )


def kept_shape(n: int) -> dict[tuple[str, str], int]:
    """The rows a kept pair of N keys holds: N handoffs, N receiver tasks."""
    return {("source", "outbox_handoff"): n, ("delivery", "delivery_receivertask"): n}


def kept_fill_mark(n: int) -> dict:
    return kept.kept_mark("\n".join([*fill_statements(n), FILL_VERSION]))


def prepare_kept(bench: Bench, n: int) -> None:
    """The kept pair of N keys: reused while its mark and shape hold (migrated forward only when a migration
    file was added since), else filled afresh and marked. Prints which, and why a refill."""
    began = time.monotonic()
    wanted = kept_fill_mark(n)
    state = kept.kept_state(bench)
    why = kept.stale(state, wanted, bench, kept_shape(n))
    if not why:
        if state["migrations"] != wanted["migrations"]:
            bench._migrate([bench.source, bench.delivery])
            kept.write_mark(bench, {**state, "migrations": wanted["migrations"]})
        print(
            f"kept databases reused (filled {state.get('built_at')} in {state.get('fill_seconds', 0):.0f} s), "
            f"checked in {time.monotonic() - began:.1f} s",
            flush=True,
        )
        return
    print(
        f"kept databases filled afresh ({why}): {n:,} handoffs and receiver tasks ...", flush=True
    )
    bench.setup()
    seconds = fill(bench, n)
    built_at = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    kept.write_mark(bench, {**wanted, "built_at": built_at, "fill_seconds": seconds})
    print(f"  filled in {seconds:.1f} s", flush=True)


def rss_mb() -> float:
    return int(re.search(r"VmRSS:\s+(\d+)", Path("/proc/self/status").read_text()).group(1)) / 1024


def measure(n: int, batch_size: int, destination) -> tuple[float, list[tuple[int, float]]]:
    """Seconds for one full run, and the process's RSS after each tenth of the keys."""
    from reconciliation.services import reconciliation_run

    samples: list[tuple[int, float]] = []
    step = max(n // 10, 1)

    def progress(p) -> None:
        # Called after every page of keys and once at the end: the first call past each tenth is sampled.
        if p.keys_compared >= (len(samples) + 1) * step and (
            not samples or samples[-1][0] != p.keys_compared
        ):
            samples.append((p.keys_compared, rss_mb()))

    started = time.monotonic()
    run = reconciliation_run(
        destination=destination, batch_size=batch_size, trigger="bench", progress=progress
    )
    elapsed = time.monotonic() - started
    if run.status != "completed" or run.keys_compared != n or run.findings_by_kind:
        raise SystemExit(
            f"reconciliation disagreed with the data: {run.status} {run.error} "
            f"compared {run.keys_compared} findings {run.findings_by_kind}"
        )
    return elapsed, samples


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "n", type=int, nargs="?", default=1_000_000, help="handoffs (and receiver tasks)"
    )
    parser.add_argument("--batch-size", type=int, default=5000)
    parser.add_argument("--destination", choices=["in_process", "http", "both"], default="both")
    parser.add_argument(
        "--keep",
        action="store_true",
        help="keep the filled databases for later runs, and reuse them while made as this one would",
    )
    parser.add_argument(
        "--fill-only",
        action="store_true",
        help="with --keep: fill (or check) them, reconcile nothing",
    )
    parser.add_argument(
        "--source-db", help="reconcile this source database as it is (no fill, kept)"
    )
    parser.add_argument("--delivery-db", help="the receiver's database that goes with --source-db")
    args = parser.parse_args()
    if bool(args.source_db) != bool(args.delivery_db):
        parser.error("--source-db and --delivery-db go together")

    if args.fill_only and not args.keep:
        parser.error("--fill-only goes with --keep")

    given = bool(args.source_db)
    bench = Bench(
        prefix=f"recon_kept_{args.n}" if args.keep else "recon",
        source=args.source_db,
        delivery=args.delivery_db,
    )
    baseline = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    # Held to the end: the kept pair is neither refilled nor checked while another run reconciles it.
    lock = psycopg.connect(dsn("postgres"), autocommit=True)
    try:
        if given:
            print(
                f"reconciling {args.n:,} keys of {bench.source} and {bench.delivery} as they are",
                flush=True,
            )
        elif args.keep:
            lock.execute(kept.KEPT_LOCK, (bench.source,))
            prepare_kept(bench, args.n)
            if args.fill_only:
                return
        else:
            bench.setup()
            print(
                f"filling {args.n:,} handoffs and {args.n:,} receiver tasks (both databases at once) ...",
                flush=True,
            )
            print(f"  filled in {fill(bench, args.n):.1f} s", flush=True)
        if args.destination in ("http", "both"):
            bench.start_receiver(workers=1, threads=2)
        os.environ.update(bench.env)
        import django

        # Started as manage.py starts a command, as the reconciling process runs in production (`manage.py
        # reconcile`, or a worker of `manage.py qcluster`): the collector off while Django loads, then what
        # start-up made frozen out of its reach. Unfrozen, every full collection the run's pages set off
        # scanned all of Django again: a quarter of the process's CPU (manage.py, docs/testing.md "Starting a
        # process").
        gc.disable()
        django.setup()
        gc.enable()
        gc.freeze()
        print(
            f"peak RSS before reconciling (Django loaded, nothing read): "
            f"{resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MB (at start {baseline:.0f} MB)",
            flush=True,
        )
        from outbox.destinations import HttpDestination, InProcessDestination

        kinds = ["in_process", "http"] if args.destination == "both" else [args.destination]
        for kind in kinds:
            destination = (
                InProcessDestination()
                if kind == "in_process"
                else HttpDestination(
                    url=bench.receiver_url,
                    read_timeout=60.0,
                    signing_secret=bench.env["RECEIVER_SIGNING_SECRET"],
                )
            )
            with watched() as machine:
                elapsed, samples = measure(args.n, args.batch_size, destination)
            # ru_maxrss is the process's peak so far (KiB on Linux): bounded memory shows as a peak that
            # does not grow with N, and as an RSS that stays flat from the first tenth of the keys to the last.
            peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
            print(
                f"{kind:>10}: {args.n:,} keys compared in {elapsed:.1f} s = {args.n / elapsed:,.0f} keys/s "
                f"(pages of {args.batch_size}); peak RSS of the reconciling process {peak:.0f} MB",
                flush=True,
            )
            print(f"{kind:>10}: {watched_line(machine)}", flush=True)
            print(
                f"{kind:>10}: RSS after "
                + ", ".join(f"{keys:,} keys {mb:.0f} MB" for keys, mb in samples),
                flush=True,
            )
    finally:
        bench.stop()
        lock.close()
        if not args.keep and not given:
            drop_databases(bench)


def drop_databases(bench: Bench) -> None:
    from django.db import connections

    connections.close_all()
    with psycopg.connect(dsn("postgres"), autocommit=True) as conn:
        for name in (bench.source, bench.delivery):
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


if __name__ == "__main__":
    main()
