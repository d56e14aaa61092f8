"""The receiver's own capacity: signed single-task creates per second from plain concurrent clients.

    .venv/bin/python bench/receiver_capacity.py URL SECRET [--clients 4] [--seconds 8]

Each client is its own process with one keep-alive HTTP connection, posting one new action key per
request in the Standard Webhooks format, as fast as the receiver answers. No outbox, no dispatcher:
this is the ceiling the one-call-per-handoff path is divided by. The clients use the HTTP library the
dispatchers use (urllib3), so that neither side spends more of the shared cores per request on its client
than the other. Prints one JSON line.
"""

import argparse
import json
import multiprocessing
import time
import uuid
from datetime import UTC, datetime

import urllib3
from standardwebhooks.webhooks import Webhook


def client(url: str, secret: str, seconds: float, index: int, results) -> None:
    signer = Webhook(secret)
    ok = other = 0
    with urllib3.connection_from_url(url, maxsize=1, retries=False, timeout=10) as http:
        path = urllib3.util.parse_url(url).path or ""
        deadline = time.monotonic() + seconds
        n = 0
        while time.monotonic() < deadline:
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
                ok += 1
            else:
                other += 1
    results.put((ok, other))


def measure(url: str, secret: str, *, clients: int = 4, seconds: float = 8.0) -> dict:
    results = multiprocessing.Queue()
    procs = [
        multiprocessing.Process(target=client, args=(url, secret, seconds, i, results))
        for i in range(clients)
    ]
    started = time.monotonic()
    for proc in procs:
        proc.start()
    answers = [results.get(timeout=seconds + 60) for _ in procs]
    for proc in procs:
        proc.join()
    elapsed = time.monotonic() - started
    created = sum(ok for ok, _ in answers)
    return {
        "clients": clients,
        "seconds": round(elapsed, 2),
        "created": created,
        "not_created": sum(other for _, other in answers),
        "per_second": round(created / elapsed, 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("url")
    parser.add_argument("secret")
    parser.add_argument("--clients", type=int, default=4)
    parser.add_argument("--seconds", type=float, default=8.0)
    args = parser.parse_args()
    print(json.dumps(measure(args.url, args.secret, clients=args.clients, seconds=args.seconds)))


if __name__ == "__main__":
    main()
