"""Many destinations: 100 configured destinations with the traffic spread over them, against one.

    .venv/bin/python bench/many_destinations_bench.py [--destinations 100] [--handoffs 2000] [--pairs 3]

`--destinations` rows of the http kind, all pointing at the bundled receiver (under gunicorn), applied by
`manage.py destinations apply` from a file written under var/bench. One `manage.py dispatch` process per run.
Each pair is two runs back to back, the order alternated from pair to pair: "one" (the first row enabled,
the others disabled, every handoff for it) and "many" (every row enabled, the handoffs spread evenly over
them). A run's rate: its handoffs over the span from the first to the last `delivered_at` (written by the
dispatcher, on the database's host). The figure is the median of the quiet pairs' ratios (many / one),
taken and judged by bench/pairs.py, with the
dispatcher's connections to the database at the end of each run (the pool's, not one per destination).
"""

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from destinations_bench import cpu_seconds  # noqa: E402
from e2e import reset, wait_for  # noqa: E402
from harness import PYTHON, ROOT, Bench, insert_handoffs_sql, write_json  # noqa: E402
from pairs import figure_json, measure_pairs, print_pair  # noqa: E402

AIM = 0.8
WORKSPACE = 7


def names(count: int) -> list[str]:
    return [f"system-{n:03d}" for n in range(count)]


def apply(bench: Bench, url: str, all_names: list[str], enabled: set[str]) -> None:
    document = {
        "destinations": [
            {
                "name": name,
                "kind": "http",
                "enabled": name in enabled,
                "url": url,
                "connect_timeout": 1.0,
                "read_timeout": 10.0,
            }
            for name in all_names
        ]
    }
    path = bench.log_dir / "many-destinations.json"
    write_json(path, document)
    done = subprocess.run(
        [PYTHON, "manage.py", "destinations", "apply", str(path)],
        cwd=ROOT,
        env=bench.env,
        capture_output=True,
        text=True,
    )
    if done.returncode:
        raise SystemExit(f"manage.py destinations apply {path} refused: {done.stderr.strip()}")


def queue(bench: Bench, count: int, spread_over: list[str]) -> None:
    """`count` handoffs due now, spread evenly over the destinations, and a wake-up for the dispatcher."""
    with bench.sql() as conn:
        with conn.transaction():
            conn.execute(insert_handoffs_sql(1, count, workspace=WORKSPACE))
            conn.execute(
                "UPDATE outbox_handoff SET destination = (%s::text[])[1 + id %% %s]",
                (spread_over, len(spread_over)),
            )
        conn.execute("NOTIFY handoff_due")


def run(bench: Bench, url: str, all_names: list[str], served: list[str], count: int, tag: str):
    reset(bench)
    with bench.sql() as conn:
        conn.execute("TRUNCATE outbox_destinationhealth, outbox_destinationslot")
    apply(bench, url, all_names, set(served))
    # libpq names every connection of the dispatcher after the run: its pool's, its LISTEN connection's.
    [proc] = bench.start_dispatchers(1, tag, PGAPPNAME=f"bench-{tag}")
    bench.dispatchers_started([proc])
    cpu_before = cpu_seconds(proc)
    queue(bench, count, served)
    wait_for(
        bench, "SELECT count(*) FROM outbox_handoff WHERE state = 'delivered'", count, timeout=600
    )
    cpu = cpu_seconds(proc) - cpu_before
    with bench.sql() as conn:
        span, destinations = conn.execute(
            "SELECT extract(epoch FROM max(delivered_at) - min(delivered_at)), "
            "count(DISTINCT destination) FROM outbox_handoff"
        ).fetchone()
        [connections] = conn.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE application_name = %s",
            (f"bench-{tag}",),
        ).fetchone()
    with bench.sql("delivery") as conn:
        tasks = conn.execute(
            "SELECT count(*), count(DISTINCT action_key) FROM delivery_receivertask"
        ).fetchone()
    bench.stop([proc])
    return {
        "handoffs": count,
        "destinations": destinations,
        "seconds": round(float(span), 2),
        "per_second": round((count - 1) / float(span), 1),
        "dispatcher_cpu_ms_per_handoff": round(1000 * cpu / count, 3),
        "dispatcher_connections": connections,
        "delivered_once": tuple(tasks) == (count, count),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--destinations", type=int, default=100)
    parser.add_argument("--handoffs", type=int, default=2000)
    parser.add_argument("--pairs", type=int, default=3)
    parser.add_argument("--json", default=str(ROOT / "var" / "bench" / "many_destinations.json"))
    args = parser.parse_args()

    all_names = names(args.destinations)
    bench = Bench("many", HANDOFF_DESTINATION_NAME=all_names[0]).setup()
    runs: dict[tuple[int, str], dict] = {}

    def side(name: str, served: list[str]):
        def one(n: int) -> float:
            runs[(n, name)] = run(
                bench, bench.receiver_url, all_names, served, args.handoffs, f"{name}{n}"
            )
            return runs[(n, name)]["per_second"]

        return one

    try:
        bench.start_receiver()
        figure = measure_pairs(
            "many_destinations_one",
            side("one", all_names[:1]),
            side("many", all_names),
            pairs=args.pairs,
            on_pair=print_pair,
        )
    finally:
        bench.stop()
    paired = figure_json(figure, runs, ("one", "many"))
    pairs, ratio = paired["pairs"], paired["ratio"]
    report = {
        "destinations": args.destinations,
        "handoffs": args.handoffs,
        "one_per_second": round(statistics.median(p["one"]["per_second"] for p in pairs), 1),
        "many_per_second": round(statistics.median(p["many"]["per_second"] for p in pairs), 1),
        "cpu_ms_per_handoff": {
            side: round(
                statistics.median(p[side]["dispatcher_cpu_ms_per_handoff"] for p in pairs), 3
            )
            for side in ("one", "many")
        },
        "connections": {
            side: max(p[side]["dispatcher_connections"] for p in pairs) for side in ("one", "many")
        },
        **paired,
        "ratios": [pair["ratio"] for pair in pairs],
        "aim": AIM,
        "all_delivered_once": all(p[s]["delivered_once"] for p in pairs for s in ("one", "many")),
        "command": " ".join(
            [".venv/bin/python", "bench/many_destinations_bench.py", *sys.argv[1:]]
        ),
    }
    report["met"] = ratio is not None and ratio >= AIM and report["all_delivered_once"]
    write_json(Path(args.json), report)
    print(json.dumps({k: v for k, v in report.items() if k != "pairs"}))


if __name__ == "__main__":
    sys.exit(main())
