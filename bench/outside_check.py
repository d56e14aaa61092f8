"""One call per handoff driven from outside: `manage.py dispatch` as deployed, handoffs inserted by SQL.

    .venv/bin/python bench/outside_check.py [--dispatchers 4] [--handoffs 2500] [--pairs 3]
        [--json var/bench/outside.json]

Issue 40's done-when asks that one call per handoff reach 0.9 of the receiver's capacity also when nothing
of the bench drives the dispatchers. So here they are `--dispatchers` plain `manage.py dispatch` processes,
started once with the product's defaults (no argument but `--worker`, none of the bench's settings: claim
batch, idle sleep, log level, wake-ups and the destination's batch support as shipped) and left running, as
a deployment runs them. Handoffs come from another system's plain SQL: `INSERT_SQL` (the columns an enqueued
handoff needs, as `outbox.services.recording.create_handoff` writes them), in transactions of `--chunk`
rows, each with the `pg_notify('handoff_due', <destination>)` the product's own recording sends
(`outbox/dispatch/wakeups.py`). A run's rate: its handoffs over the time from the commit of the first
transaction (the first moment a dispatcher can see any of them) to the last `delivered_at`, both on the
database's clock: the reference's rate is counted once its clients are all sending, and the other system's
time writing its first transaction is no work of the product's. Before the pairs, each side runs once
uncounted (`--warm-up-handoffs`): the dispatchers' first run otherwise pays their first connections, prepared
statements and lazy imports, the reference's clients none of which. Every counted run of either side starts
settled (`bench/settle.py`; `--no-settle` only reads the state, for comparison): the receiver's tables
emptied, no autovacuum running or due on either database, a CHECKPOINT; whoever ran second in a pair did
worse before (0.81 with the reference first, 0.96 with the subject first, idle run of 2026-12-07 14:35).

The reference is the bench's: as many plain clients as dispatchers that only sign and send
(bench/receiver_capacity.py) against the same receiver. Each ratio is the median of interleaved pairs
(bench/pairs.py). Beside each run, the CPU time per handoff of the processes that did the work, from
/proc: the dispatchers, and the receiver (gunicorn and its workers); for the reference, its clients and the
receiver; and how each run's keep-alive connections fell on the receiver's workers (`receiver_placement`),
which the receiver's CPU a create follows whichever side calls it.
"""

import argparse
import hashlib
import json
import os
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import receiver_capacity  # noqa: E402
from harness import (  # noqa: E402
    PYTHON,
    ROOT,
    Bench,
    process_cpu,
    receiver_placement,
    tree_cpu,
    write_json,
)
from pairs import figure_json, measure_pairs, median_pair, print_pair  # noqa: E402
from settle import RECEIVER_TABLES, settle  # noqa: E402
from settlement_bench import database_cpu  # noqa: E402

AIM = 0.9
DESTINATION = "receiver"
# What the bench sets for its own runs and a deployment does not: the dispatchers here run without them.
BENCH_ONLY_SETTINGS = (
    "HANDOFF_WAKE_ON_COMMIT",
    "LOG_LEVEL",
    "RECEIVER_SUPPORTS_BATCH",
    "HANDOFF_CLAIM_BATCH",
)

# One due handoff of the default destination, written as `create_handoff` writes it: pending and due now,
# its own key as the instance key, the payload and the hash of its canonical JSON (`outbox/payloads.py`;
# the receiver and the lookups compare it), nothing claimed yet. Every other column has its default.
INSERT_SQL = """
    INSERT INTO outbox_handoff (action_key, instance_key, workflow, workspace_id, source_ref, source_id,
        rule_version, payload, payload_hash, destination, state, attempts, attempts_in_run,
        next_attempt_at, run_started_at, lease_owner, fencing_epoch, destination_id, failure_class,
        reason_code, last_error, created_at, updated_at, compensation_operation, compensation_state,
        kind, plan, receipt, step, step_index, work_status)
    VALUES (%(key)s, %(key)s, 'onboarding', %(workspace)s, %(ref)s, %(n)s,
        '', %(payload)s::jsonb, %(hash)s, %(destination)s, 'pending', 0, 0,
        now(), now(), '', 0, '', '',
        '', '', now(), now(), '', '',
        'action', '[]'::jsonb, '{}'::jsonb, '', 0, '')
"""


def handoff_rows(first: int, count: int, *, workspace: int = 7) -> list[dict]:
    """The parameters of `INSERT_SQL` for handoffs `first`..`first + count - 1`, distinct keys."""
    rows = []
    for n in range(first, first + count):
        payload = {"client_name": f"Client {n}", "plan": "standard"}
        canonical = json.dumps(payload, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
        rows.append(
            {
                "key": f"onboarding:{workspace}:{n}:1",
                "workspace": workspace,
                "ref": f"request {n}",
                "n": n,
                "payload": canonical,
                "hash": hashlib.sha256(canonical.encode("utf-8")).hexdigest(),
                "destination": DESTINATION,
            }
        )
    return rows


def insert_handoffs(conn, rows: list[dict], chunk: int):
    """`rows` in transactions of `chunk`, each waking the dispatchers at its commit; the database's time just
    after the first one committed (a `datetime`), from when a dispatcher can see a handoff of the run."""
    first_visible = None
    for start in range(0, len(rows), chunk):
        with conn.transaction(), conn.cursor() as cursor:
            cursor.executemany(INSERT_SQL, rows[start : start + chunk])
            cursor.execute("SELECT pg_notify('handoff_due', %s)", (DESTINATION,))
        if first_visible is None:
            first_visible = conn.execute("SELECT clock_timestamp()").fetchone()[0]
    return first_visible


def children_cpu() -> float:
    """CPU of this process's children reaped so far (the reference's client processes)."""
    times = os.times()
    return times.children_user + times.children_system


class Outside:
    """The receiver and the dispatchers, started once; each run inserts its own keys."""

    def __init__(self, bench: Bench, dispatchers: list, chunk: int):
        self.bench, self.dispatchers, self.chunk = bench, dispatchers, chunk
        self.next_first = 1

    def one_call(self, handoffs: int) -> dict:
        first, self.next_first = self.next_first, self.next_first + handoffs
        rows = handoff_rows(first, handoffs)
        last = first + handoffs - 1
        dispatchers_before = sum(process_cpu(proc.pid) for proc in self.dispatchers)
        receiver_before = tree_cpu(self.bench.receiver.pid)
        databases_before = self.databases_cpu()
        with receiver_placement(self.bench) as placed, self.bench.sql() as conn:
            first_visible = insert_handoffs(conn, rows, self.chunk)
            deadline = time.monotonic() + 600
            query = (
                "SELECT count(*) FROM outbox_handoff "
                "WHERE source_id BETWEEN %s AND %s AND state = 'delivered'"
            )
            while conn.execute(query, (first, last)).fetchone()[0] < handoffs:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"handoffs {first}..{last} not all delivered in 600 s")
                time.sleep(0.05)
            seconds, writing = conn.execute(
                "SELECT EXTRACT(EPOCH FROM max(delivered_at) - %s), "
                "EXTRACT(EPOCH FROM %s - min(created_at)) FROM outbox_handoff "
                "WHERE source_id BETWEEN %s AND %s",
                (first_visible, first_visible, first, last),
            ).fetchone()
        dispatchers_cpu = sum(process_cpu(proc.pid) for proc in self.dispatchers)
        dispatchers_cpu -= dispatchers_before
        receiver_cpu = tree_cpu(self.bench.receiver.pid) - receiver_before
        source_cpu, delivery_cpu = (
            after - before
            for after, before in zip(self.databases_cpu(), databases_before, strict=True)
        )
        return {
            "handoffs": handoffs,
            "seconds": round(float(seconds), 3),
            "per_second": round(handoffs / float(seconds), 1),
            # The other system's time writing its first transaction, before any handoff was visible: not counted.
            "first_commit_seconds": round(float(writing), 3),
            "dispatchers_cpu_ms_per_handoff": round(dispatchers_cpu * 1000 / handoffs, 3),
            "receiver_cpu_ms_per_handoff": round(receiver_cpu * 1000 / handoffs, 3),
            # PostgreSQL's processes on the source database (the dispatchers' claims and outcomes, and the
            # other system's inserts and this check's polls) and on the receiver's.
            "source_database_cpu_ms_per_handoff": round(source_cpu * 1000 / handoffs, 3),
            "receiver_database_cpu_ms_per_handoff": round(delivery_cpu * 1000 / handoffs, 3),
            "receiver_connections": placed["placement"],
            "check": self.check(rows),
        }

    def databases_cpu(self) -> tuple[float, float]:
        """CPU seconds so far of PostgreSQL's processes on the source and on the delivery database."""
        return database_cpu(self.bench.source), database_cpu(self.bench.delivery)

    def check(self, rows: list[dict]) -> dict:
        """Each of the run's keys delivered once, with the receiver's task id stored."""
        keys = [row["key"] for row in rows]
        with self.bench.sql() as src, self.bench.sql("delivery") as dst:
            ours = dict(
                src.execute(
                    "SELECT action_key, destination_id FROM outbox_handoff "
                    "WHERE action_key = ANY(%s) AND state = 'delivered'",
                    (keys,),
                ).fetchall()
            )
            theirs = dst.execute(
                "SELECT action_key, task_id::text FROM delivery_receivertask WHERE action_key = ANY(%s)",
                (keys,),
            ).fetchall()
        matched = sum(1 for key, task in theirs if ours.get(key) == task)
        return {
            "delivered": len(ours),
            "tasks": len(theirs),
            "ok": len(ours) == len(theirs) == matched == len(keys),
        }

    def capacity(self, clients: int, seconds: float) -> dict:
        clients_before = children_cpu()
        receiver_before = tree_cpu(self.bench.receiver.pid)
        delivery_before = database_cpu(self.bench.delivery)
        with receiver_placement(self.bench) as placed:
            measured = receiver_capacity.measure(
                self.bench.receiver_url,
                self.bench.env["RECEIVER_SIGNING_SECRET"],
                clients=clients,
                seconds=seconds,
            )
        created = max(measured["created"], 1)
        return {
            **measured,
            "clients_cpu_ms_per_create": round(
                (children_cpu() - clients_before) * 1000 / created, 3
            ),
            "receiver_cpu_ms_per_create": round(
                (tree_cpu(self.bench.receiver.pid) - receiver_before) * 1000 / created, 3
            ),
            "receiver_database_cpu_ms_per_create": round(
                (database_cpu(self.bench.delivery) - delivery_before) * 1000 / created, 3
            ),
            "receiver_connections": placed["placement"],
        }


def start_dispatchers(bench: Bench, count: int) -> list[subprocess.Popen]:
    """`manage.py dispatch --worker outside-<n>`, nothing else: the product's defaults."""
    env = {name: value for name, value in bench.env.items() if name not in BENCH_ONLY_SETTINGS}
    procs = []
    for n in range(count):
        log = open(bench.log_dir / f"dispatcher-outside-{n}.log", "wb")  # noqa: SIM115 - the process's
        procs.append(
            subprocess.Popen(
                [PYTHON, "manage.py", "dispatch", "--worker", f"outside-{n}"],
                cwd=ROOT,
                env=env,
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        )
    bench.procs.extend(procs)
    bench.dispatchers_started(procs)
    return procs


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dispatchers", type=int, default=4)
    parser.add_argument("--handoffs", type=int, default=2500)
    parser.add_argument("--chunk", type=int, default=500, help="handoffs inserted per transaction")
    parser.add_argument("--pairs", type=int, default=3)
    parser.add_argument(
        "--capacity-seconds", type=float, default=5, help="each reference run's length"
    )
    parser.add_argument(
        "--warm-up-handoffs",
        type=int,
        default=200,
        help="handoffs of the uncounted run each side makes before the pairs (0: none)",
    )
    parser.add_argument(
        "--no-settle",
        action="store_true",
        help="runs start from whatever the last one left (only the state is read): for comparison",
    )
    parser.add_argument("--json", type=Path, default=ROOT / "var" / "bench" / "outside.json")
    args = parser.parse_args()
    bench = Bench("outside").setup()
    runs: dict[tuple[int, str], dict] = {}
    warm_up: dict[str, dict] = {}
    try:
        bench.start_receiver()
        outside = Outside(bench, start_dispatchers(bench, args.dispatchers), args.chunk)
        if args.warm_up_handoffs:
            warm_up["one_call"] = outside.one_call(args.warm_up_handoffs)
            warm_up["capacity"] = outside.capacity(args.dispatchers, 1.0)

        def capacity(index: int) -> float:
            runs[(index, "capacity")] = outside.capacity(args.dispatchers, args.capacity_seconds)
            return runs[(index, "capacity")]["per_second"]

        def one_call(index: int) -> float:
            runs[(index, "one_call")] = outside.one_call(args.handoffs)
            return runs[(index, "one_call")]["per_second"]

        def settled() -> dict:
            return settle(
                [bench.source, bench.delivery],
                empty={bench.delivery: RECEIVER_TABLES},
                act=not args.no_settle,
            )

        figure = measure_pairs(
            "outside_receiver_capacity",
            capacity,
            one_call,
            pairs=args.pairs,
            on_pair=print_pair,
            settle=settled,
        )
    finally:
        bench.stop()
    paired = figure_json(figure, runs, ("capacity", "one_call"))
    checked = all(run["check"]["ok"] for (_, side), run in runs.items() if side == "one_call")
    result = {
        "aim": AIM,
        "dispatchers": args.dispatchers,
        "handoffs": args.handoffs,
        "chunk": args.chunk,
        "warm_up": warm_up,
        "settled": not args.no_settle,
        "met": figure.ratio is not None and figure.ratio >= AIM,
        "checked": checked,
        "median_pair": median_pair(paired),
        **paired,
        "command": " ".join([Path(sys.executable).name, *sys.argv]),
    }
    write_json(args.json, result)
    print(json.dumps({k: v for k, v in result.items() if k not in ("pairs", "median_pair")}))
    print(
        f"one call per handoff from outside / receiver capacity: {figure.describe()} "
        f"(aim {AIM}: {'met' if result['met'] else 'missed'}; every run checked: {checked})"
    )
    return 0 if checked else 1


if __name__ == "__main__":
    sys.exit(main())
