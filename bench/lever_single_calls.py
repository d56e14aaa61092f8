"""Where the one-call-per-handoff path loses to the receiver's capacity: one commit per outcome, or one
call at a time? Measured in one run against the same receiver:

    .venv/bin/python bench/lever_single_calls.py [--handoffs 2500]

1. the receiver's capacity (4 plain clients, bench/receiver_capacity.py);
2. the product path: `manage.py dispatch`, one call and one outcome commit per handoff;
3. bench/concurrent_dispatch.py with 1 call in flight: calls one after another, one outcome commit per
   claim batch (isolates the commits);
4. the same with every call of a claim batch in flight at once (adds the concurrency);
5. commit-to-receiver latency at 20/s and 60/s, with and without a delivery attempt after commit in the
   committing process.
"""

import argparse
import json
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import receiver_capacity  # noqa: E402
from e2e import latency, reset, verify, wait_for  # noqa: E402
from harness import PYTHON, Bench, insert_handoffs_sql  # noqa: E402


def run(bench: Bench, handoffs: int, tag: str, command: list[str] | None, **env: str) -> dict:
    reset(bench)
    if command is None:
        procs = bench.start_dispatchers(4, tag, **env)
    else:
        procs = [
            bench.spawn([*command, f"{tag}-{n}"], f"dispatcher-{tag}-{n}.log", **env)
            for n in range(4)
        ]
    time.sleep(2.5)
    with bench.sql() as conn:
        conn.execute(insert_handoffs_sql(1, handoffs))
        conn.execute("NOTIFY handoff_due")
    elapsed = wait_for(
        bench,
        "SELECT count(*) FROM outbox_handoff WHERE state = 'delivered'",
        handoffs,
        timeout=600,
    )
    bench.stop(procs)
    return {
        "what": tag,
        "per_second": round(handoffs / elapsed, 1),
        "check": verify(bench, handoffs)["ok"],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--handoffs", type=int, default=2500)
    args = parser.parse_args()
    bench = Bench("lever", RECEIVER_SUPPORTS_BATCH="0", HANDOFF_CLAIM_BATCH="20").setup()
    bench.start_receiver()
    try:
        capacity = receiver_capacity.measure(
            bench.receiver_url, bench.env["RECEIVER_SIGNING_SECRET"], clients=4
        )
        rows = [
            run(bench, args.handoffs, "product", None),
            run(
                bench,
                args.handoffs,
                "one-commit-per-batch",
                [PYTHON, "bench/concurrent_dispatch.py"],
                BENCH_CALLS_IN_FLIGHT="1",
            ),
            run(
                bench,
                args.handoffs,
                "one-commit-per-batch-20-in-flight",
                [PYTHON, "bench/concurrent_dispatch.py"],
                BENCH_CALLS_IN_FLIGHT="20",
            ),
        ]
        # The other lever, at rates one producer process reaches: delivery attempted after commit by the
        # committing process, against the dispatchers alone (same rate, same dispatchers).
        latencies = [
            latency(bench, rate, 2, 10, inline=inline)
            for rate in (20, 60)
            for inline in (False, True)
        ]
    finally:
        bench.stop()
    print(f"receiver capacity, 4 plain clients: {capacity['per_second']:,.0f} creates/s")
    for row in rows:
        ratio = row["per_second"] / capacity["per_second"]
        print(
            f"{row['what']:>36}: {row['per_second']:7,.0f} handoffs/s = {ratio:.2f} of capacity; "
            f"every handoff delivered once: {'ok' if row['check'] else 'FAILED'}"
        )
    for row in latencies:
        print(
            f"latency at {row['achieved_rate']:,.0f}/s (asked {row['rate']}), inline {row['inline_attempt']}: "
            f"median {row['median_ms']} ms, p99 {row['p99_ms']} ms"
        )
    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores at the end")
    print(json.dumps({"capacity": capacity, "rows": rows, "latency": latencies}))


if __name__ == "__main__":
    main()
