"""Keys compared per second by reconciliation, for N matching handoffs and receiver tasks on PostgreSQL.

    .venv/bin/python bench/reconcile_bench.py 1000000 [--batch-size 5000] [--destination in_process|http|both]

Creates its own databases (`<BENCH_DB_PREFIX>_recon_source` and `_delivery`), fills both sides with N
delivered handoffs and the N receiver tasks that match them (same key, payload hash and task id),
runs one full reconciliation through the destination interface and prints keys compared per second.
`in_process` reads the receiver through its services (the merge and the two databases);
`http` reads it through its signed HTTP API served by gunicorn (what production does). The run
must report no findings: the data agree, so any finding is a bug and the benchmark fails.
"""

import argparse
import os
import resource
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.harness import Bench  # noqa: E402

HASH = "0" * 64
# Keys and task ids are functions of i, so both sides agree without passing anything between them.
SOURCE_SQL = """
INSERT INTO outbox_handoff (action_key, workflow, workspace_id, source_ref, source_id, rule_version, payload,
    payload_hash, destination, state, attempts, attempts_in_run, next_attempt_at, lease_owner, fencing_epoch,
    destination_id, failure_class, reason_code, last_error, created_at, updated_at, delivered_at,
    instance_key, step, step_index, kind, plan, compensation_state, compensation_operation, work_status, receipt)
SELECT 'onboarding:7:' || lpad(i::text, 9, '0') || ':1', 'onboarding', 7, 'request ' || i || ' revision 1', i + 1,
    'onboarding-v1', '{"client_name": "Northwind Traders"}'::jsonb, %(hash)s, 'receiver', 'delivered', 1, 1, now(),
    '', 1, lpad(to_hex(i + 1), 32, '0')::uuid::text, '', '', '', now(), now(), now(),
    '', '', 0, 'action', '[]'::jsonb, '', '', '', '{}'::jsonb
FROM generate_series(0, %(last)s) AS i
"""
RECEIVER_SQL = """
INSERT INTO delivery_receivertask (task_id, action_key, payload, payload_hash, status, created_at)
SELECT lpad(to_hex(i + 1), 32, '0')::uuid, 'onboarding:7:' || lpad(i::text, 9, '0') || ':1',
    '{"client_name": "Northwind Traders"}'::jsonb, %(hash)s, 'open', now()
FROM generate_series(0, %(last)s) AS i
"""


def fill(bench: Bench, n: int) -> float:
    started = time.monotonic()
    with bench.sql("source") as conn:
        conn.execute(SOURCE_SQL, {"last": n - 1, "hash": HASH})
        conn.execute("ANALYZE outbox_handoff")
    with bench.sql("delivery") as conn:
        conn.execute(RECEIVER_SQL, {"last": n - 1, "hash": HASH})
        conn.execute("ANALYZE delivery_receivertask")
    return time.monotonic() - started


def measure(n: int, batch_size: int, destination) -> float:
    from reconciliation.services import reconciliation_run

    started = time.monotonic()
    run = reconciliation_run(destination=destination, batch_size=batch_size, trigger="bench")
    elapsed = time.monotonic() - started
    if run.status != "completed" or run.keys_compared != n or run.findings_by_kind:
        raise SystemExit(f"reconciliation disagreed with the data: {run.status} {run.error} "
                         f"compared {run.keys_compared} findings {run.findings_by_kind}")
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("n", type=int, nargs="?", default=1_000_000, help="handoffs (and receiver tasks)")
    parser.add_argument("--batch-size", type=int, default=5000)
    parser.add_argument("--destination", choices=["in_process", "http", "both"], default="both")
    parser.add_argument("--keep", action="store_true", help="keep the benchmark databases afterwards")
    args = parser.parse_args()

    bench = Bench(prefix="recon").setup()
    baseline = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    try:
        print(f"filling {args.n:,} handoffs and {args.n:,} receiver tasks ...", flush=True)
        print(f"  filled in {fill(bench, args.n):.1f} s", flush=True)
        if args.destination in ("http", "both"):
            bench.start_receiver(workers=1, threads=2)
        os.environ.update(bench.env)
        import django

        django.setup()
        print(f"peak RSS before reconciling (Django loaded, nothing read): "
              f"{resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MB (at start {baseline:.0f} MB)",
              flush=True)
        from outbox.destinations import HttpDestination, InProcessDestination

        kinds = ["in_process", "http"] if args.destination == "both" else [args.destination]
        for kind in kinds:
            destination = InProcessDestination() if kind == "in_process" else HttpDestination(
                url=bench.receiver_url, read_timeout=60.0, signing_secret=bench.env["RECEIVER_SIGNING_SECRET"])
            elapsed = measure(args.n, args.batch_size, destination)
            # ru_maxrss is the process's peak so far (KiB on Linux): bounded memory shows as a peak that
            # does not grow with N.
            peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
            print(f"{kind:>10}: {args.n:,} keys compared in {elapsed:.1f} s = {args.n / elapsed:,.0f} keys/s "
                  f"(pages of {args.batch_size}); peak RSS of the reconciling process {peak:.0f} MB", flush=True)
    finally:
        bench.stop()
        if not args.keep:
            drop_databases(bench)


def drop_databases(bench: Bench) -> None:
    import psycopg
    from django.db import connections

    from bench.harness import dsn

    connections.close_all()
    with psycopg.connect(dsn("postgres"), autocommit=True) as conn:
        for name in (bench.source, bench.delivery):
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


if __name__ == "__main__":
    main()
