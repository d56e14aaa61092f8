"""How long a receiver's status change takes to reach the source's record: median and p99.

    .venv/bin/python bench/status_events_bench.py [--changes 400] [--rate 20] [--json var/bench/status_events.json]

The whole product under gunicorn on its own PostgreSQL databases (the bundled receiver and the source's
status-event endpoint in one app, as `make run` serves them), `--changes` delivered handoffs with their
receiver tasks. The bench moves each task's status forward through the receiver's signed API
(`POST /delivery/api/tasks/<key>/status`), `--rate` a second, one after the other; the receiver's worker
writes the event with the change and sends it after the commit. A change's time is the event's
`occurred_at` (the receiver's clock, at the change), its record the source's `StatusEvent.received_at`
(the database's clock, in the transaction that applies it): both clocks of this one machine.
"""

import argparse
import json
import statistics
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

import httpx
from standardwebhooks.webhooks import Webhook

sys.path.insert(0, str(Path(__file__).resolve().parent))

from e2e import wait_for  # noqa: E402
from harness import (  # noqa: E402
    SECRET,
    Bench,
    insert_handoffs_sql,
    insert_receiver_tasks_sql,
    write_json,
)
from pairs import watched, watched_line  # noqa: E402

EVENTS_PATH = "/reconciliation/api/destinations/receiver/status-events"


def signed_post(client: httpx.Client, url: str, document: dict) -> httpx.Response:
    body = json.dumps(document)
    message_id = f"msg_{time.monotonic_ns()}"
    now = time.time()
    at = datetime.fromtimestamp(now, tz=UTC)
    headers = {
        "webhook-id": message_id,
        "webhook-timestamp": str(int(now)),
        "webhook-signature": Webhook(SECRET).sign(message_id, at, body),
        "content-type": "application/json",
    }
    return client.post(url, content=body, headers=headers)


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(share * (len(ordered) - 1)))]


def run(changes: int, rate: float) -> dict:
    bench = Bench("status_events").setup()
    port = bench.port()
    bench.env["RECEIVER_STATUS_EVENTS_URL"] = f"http://127.0.0.1:{port}{EVENTS_PATH}"
    with bench.sql() as conn:
        conn.execute(insert_handoffs_sql(1, changes, state="delivered"))
    with bench.sql("delivery") as conn:
        conn.execute(insert_receiver_tasks_sql(1, changes))
    receiver = bench.start_receiver(port=port)
    try:
        started = time.monotonic()
        with httpx.Client(timeout=10) as client:
            for n in range(1, changes + 1):
                due = started + (n - 1) / rate
                if (wait := due - time.monotonic()) > 0:
                    time.sleep(wait)
                answer = signed_post(
                    client, f"{receiver}/tasks/onboarding:7:{n}:1/status", {"status": "done"}
                )
                answer.raise_for_status()
        wait_for(bench, "SELECT count(*) FROM outbox_statusevent", changes, timeout=120)
        with bench.sql() as conn:
            rows = conn.execute(
                "SELECT extract(epoch FROM received_at - occurred_at) * 1000, result"
                " FROM outbox_statusevent"
            ).fetchall()
            done = conn.execute(
                "SELECT count(*) FROM outbox_handoff WHERE work_status = 'done'"
            ).fetchone()[0]
    finally:
        bench.stop()
    millis = [float(ms) for ms, _result in rows]
    return {
        "changes": changes,
        "rate_per_second": rate,
        "applied": sum(1 for _ms, result in rows if result == "applied"),
        "handoffs_done": done,
        "median_ms": round(statistics.median(millis), 1),
        "p99_ms": round(percentile(millis, 0.99), 1),
        "max_ms": round(max(millis), 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--changes", type=int, default=400)
    parser.add_argument("--rate", type=float, default=20.0)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    with watched() as machine:
        result = run(args.changes, args.rate)
    result["machine"] = machine
    print(
        f"status events: {result['changes']} changes at {result['rate_per_second']:g}/s, "
        f"{result['applied']} applied, {result['handoffs_done']} handoffs done; "
        f"change to the source's record: median {result['median_ms']} ms, p99 {result['p99_ms']} ms, "
        f"max {result['max_ms']} ms; {watched_line(machine)}"
    )
    if args.json:
        write_json(args.json, result)


if __name__ == "__main__":
    main()
