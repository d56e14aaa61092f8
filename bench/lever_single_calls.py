"""Where the one-call-per-handoff path loses to the receiver's capacity: one commit per outcome, or one
call at a time? Measured in one run against the same receiver:

    .venv/bin/python bench/lever_single_calls.py [--handoffs 2500]

1. the receiver's capacity (4 plain clients, bench/receiver_capacity.py), the reference of each of 2-4
   in pairs taken and judged by bench/pairs.py (alternating, loaded pairs left out, a collapsed capacity
   refuses the figure);
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
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import receiver_capacity  # noqa: E402
from e2e import latency, reset, verify, wait_for  # noqa: E402
from harness import PYTHON, Bench, insert_handoffs_sql  # noqa: E402
from pairs import figure_json, measure_pairs, print_pair  # noqa: E402

CONCURRENT = [PYTHON, "bench/concurrent_dispatch.py"]
VARIANTS = (
    ("product", None, {}),
    ("one-commit-per-batch", CONCURRENT, {"BENCH_CALLS_IN_FLIGHT": "1"}),
    ("one-commit-per-batch-20-in-flight", CONCURRENT, {"BENCH_CALLS_IN_FLIGHT": "20"}),
)


def run(bench: Bench, handoffs: int, tag: str, command: list[str] | None, **env: str) -> dict:
    reset(bench)
    if command is None:
        procs = bench.start_dispatchers(4, tag, **env)
    else:
        procs = [
            bench.spawn([*command, "--worker", f"{tag}-{n}"], f"dispatcher-{tag}-{n}.log", **env)
            for n in range(4)
        ]
    bench.dispatchers_started(procs)
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


def paired(bench: Bench, args: argparse.Namespace, what: str, command, env: dict) -> dict:
    """One variant against the receiver's capacity, in pairs (bench/pairs.py)."""
    runs: dict[tuple[int, str], dict] = {}

    def capacity(n: int) -> float:
        runs[(n, "capacity")] = receiver_capacity.measure(
            bench.receiver_url, bench.env["RECEIVER_SIGNING_SECRET"], clients=4
        )
        return runs[(n, "capacity")]["per_second"]

    def lever(n: int) -> float:
        runs[(n, what)] = run(bench, args.handoffs, f"{what}-{n}", command, **env)
        return runs[(n, what)]["per_second"]

    figure = measure_pairs(
        "receiver_capacity_lever", capacity, lever, pairs=args.pairs, on_pair=print_pair
    )
    return figure_json(figure, runs, ("capacity", what))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--handoffs", type=int, default=2500)
    parser.add_argument("--pairs", type=int, default=3)
    args = parser.parse_args()
    bench = Bench("lever", RECEIVER_SUPPORTS_BATCH="0", HANDOFF_CLAIM_BATCH="20").setup()
    bench.start_receiver()
    try:
        figures = {what: paired(bench, args, what, command, env) for what, command, env in VARIANTS}
        # The other lever, at rates one producer process reaches: delivery attempted after commit by the
        # committing process, against the dispatchers alone (same rate, same dispatchers).
        latencies = [
            latency(bench, rate, 2, 10, inline=inline)
            for rate in (20, 60)
            for inline in (False, True)
        ]
    finally:
        bench.stop()
    for what, figure in figures.items():
        each = "; ".join(
            f"{pair[what]['per_second']:,.0f}/s against {pair['capacity']['per_second']:,.0f}/s"
            for pair in figure["pairs"]
        )
        delivered = all(pair[what]["check"] for pair in figure["pairs"])
        print(
            f"{what:>36}: {figure['describe']} of the receiver's capacity (4 plain clients) [{each}]; "
            f"every handoff delivered once: {'ok' if delivered else 'FAILED'}"
        )
    for row in latencies:
        print(
            f"latency at {row['achieved_rate']:,.0f}/s (asked {row['rate']}), inline {row['inline_attempt']}: "
            f"median {row['median_ms']} ms, p99 {row['p99_ms']} ms"
        )
    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores at the end")
    print(json.dumps({"levers": figures, "latency": latencies}))


if __name__ == "__main__":
    main()
