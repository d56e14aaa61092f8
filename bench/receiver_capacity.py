"""The receiver's own capacity: signed single-task creates per second from plain concurrent clients.

    .venv/bin/python bench/receiver_capacity.py URL SECRET [--clients 4] [--seconds 8]

Each client is its own process with one keep-alive HTTP connection, posting one new action key per
request in the Standard Webhooks format, as fast as the receiver answers. No outbox, no dispatcher:
this is the ceiling the one-call-per-handoff path is divided by. The clients use the HTTP library the
dispatchers use (urllib3), so that neither side spends more of the shared cores per request on its client
than the other. Prints one JSON line.

The clients connect the way the dispatchers do: one after another, `--stagger` seconds apart (each connection
made by its client's first call, while the earlier clients are already sending), and the rate counts only the
creates started once the last one has made its first call. The receiver's CPU a create depends on how the
keep-alive connections fall on gunicorn's workers (a worker holding several answers each for less): clients
that all connected within a millisecond landed on fewer workers than the dispatchers do and made the
reference cheaper for the receiver than the product's runs it is divided by (docs/benchmarks.md, the outside
check's section).
"""

import argparse
import json
import multiprocessing
import time
import uuid
from datetime import UTC, datetime

import urllib3
from standardwebhooks.webhooks import Webhook

# How far apart the clients make their first call (`measure`): as far apart as the dispatchers' first calls of a
# run (bench/outside_check.py, 14 runs on 2 loaded cores, 2026-12-07: the four within 8-138 ms, median 22 ms, about
# 7 ms apart). In 16 interleaved rounds at a load of 10-22 the receiver's CPU a create, over the dispatchers' of the
# same round, was 0.98 (median) with clients 0.01 s apart, 0.91 all at once, 0.93 at 0.03 s, 0.89 at 0.1 s, each
# spread by 0.15-0.21 (standard deviation): at that load the load moves the reference more than the stagger.
STAGGER_SECONDS = 0.01


def client(url: str, secret: str, start_at: float, until: float, index: int, results) -> None:
    """From `start_at` until `until` (monotonic, the machine's clock), one create after another; puts the
    monotonic start of each create answered 201, and the count of the others."""
    signer = Webhook(secret)
    created, other = [], 0
    time.sleep(max(0.0, start_at - time.monotonic()))
    with urllib3.connection_from_url(url, maxsize=1, retries=False, timeout=10) as http:
        path = urllib3.util.parse_url(url).path or ""
        n = 0
        while (began := time.monotonic()) < until:
            n += 1
            key = f"capacity:{index}:{n}:{uuid.uuid4().hex[:8]}"
            body = json.dumps(
                {"action_key": key, "payload": {"client_name": f"Client {n}", "plan": "standard"}},
                separators=(",", ":"),
                sort_keys=True,
            )
            message_id, now = f"msg_{uuid.uuid4().hex}", datetime.now(tz=UTC)
            headers = {
                "webhook-id": message_id,
                "webhook-timestamp": str(int(now.timestamp())),
                "webhook-signature": signer.sign(message_id, now, body),
                "Content-Type": "application/json",
                "Idempotency-Key": key,
            }
            status = http.urlopen(
                "POST", f"{path}/tasks", body=body.encode(), headers=headers, retries=False
            ).status
            if status == 201:
                created.append(began)
            else:
                other += 1
    results.put((created, other))


def measure(
    url: str,
    secret: str,
    *,
    clients: int = 4,
    seconds: float = 8.0,
    stagger: float = STAGGER_SECONDS,
) -> dict:
    """Creates a second over `seconds`, counted from the last client's first call (`stagger` apart); "created":
    every create of the run, the ramp's too (the CPU a create is taken over all of them)."""
    results = multiprocessing.Queue()
    # The first call a little after the starts: a process started late on a busy machine keeps its turn.
    first = time.monotonic() + 0.2
    counted_from = first + (clients - 1) * stagger
    until = counted_from + seconds
    procs = [
        multiprocessing.Process(
            target=client, args=(url, secret, first + i * stagger, until, i, results)
        )
        for i in range(clients)
    ]
    for proc in procs:
        proc.start()
    answers = [results.get(timeout=until - time.monotonic() + 60) for _ in procs]
    for proc in procs:
        proc.join()
    starts = [began for created, _ in answers for began in created]
    counted = sum(1 for began in starts if began >= counted_from)
    return {
        "clients": clients,
        "stagger_seconds": stagger,
        "seconds": seconds,
        "created": len(starts),
        "counted": counted,
        "not_created": sum(other for _, other in answers),
        "per_second": round(counted / seconds, 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("url")
    parser.add_argument("secret")
    parser.add_argument("--clients", type=int, default=4)
    parser.add_argument("--seconds", type=float, default=8.0)
    parser.add_argument("--stagger", type=float, default=STAGGER_SECONDS)
    args = parser.parse_args()
    measured = measure(
        args.url, args.secret, clients=args.clients, seconds=args.seconds, stagger=args.stagger
    )
    print(json.dumps(measured))


if __name__ == "__main__":
    main()
