"""The machine's ceiling for the product's share of the latency (issue 40): a minimal dispatcher, no product.

    DATABASE_URL=… RECEIVER_URL=… RECEIVER_SIGNING_SECRET=… .venv/bin/python bench/reference_dispatcher.py \
        --worker NAME [--destination receiver]

graphile-worker's path (the anchor of the aim, 4.16 ms from enqueue to start) and nothing else: LISTEN on the
product's channel; at a wake-up (or a 0.5 s poll, as the product's) one statement claims due rows, `UPDATE …
WHERE id IN (SELECT … FOR NO KEY UPDATE SKIP LOCKED LIMIT n) RETURNING`, on the product's claim index; the
claimed rows are signed (Standard Webhooks, the product's library) and sent on a kept connection (urllib3, the
product's HTTP library), one create call for one row and a batch call for more, as the product sends them
(with `--one-call`, or RECEIVER_SUPPORTS_BATCH=0 as the bench's one-call runs set it, one create call a row,
one after another: the machine's ceiling for one call per handoff, `bench/e2e.py` `one_call_ceiling_pairs`);
one statement records the outcome, each row delivered and its attempt written (the latency runs read the attempt's
start); then it claims again at once, and waits for a wake-up only when nothing was due. As many such loops as
the product's lanes of one destination (HANDOFF_DISPATCH_LANES, 2) share one LISTEN session: a wake-up goes to
one idle lane, so a handoff committed during another lane's call is claimed at once, as the product's second
lane claims it (one loop alone made every such handoff wait for the call and its outcome). Run against the same
producers, at the same asked rate and on the same receiver as the product's dispatchers (`bench/e2e.py`
`latency_pairs`), its share of the latency is what this machine allows a dispatcher: the product's share is
judged against it.

Left out on purpose, because the product must have them and the reference shows what they cost: the limits'
permit and the breaker, the claim's attempt and event rows, holds, ordering keys, deadlines, leases renewed,
fencing checked by the outcome's services, the maintenance thread, spans. Its own outcome is fenced (the epoch
it claimed with) so that a reference never marks a row someone else holds.
"""

import argparse
import json
import os
import signal
import threading
import time
import uuid
from datetime import UTC, datetime

import psycopg
import urllib3
from standardwebhooks.webhooks import Webhook

CHANNEL = "handoff_due"  # outbox/dispatch/wakeups.py
POLL_SECONDS = 0.5
# Its sessions' name in pg_stat_activity: the bench waits for them to LISTEN before a run.
APPLICATION = "bench-reference"

CLAIM = """
UPDATE outbox_handoff SET state = 'in_flight', lease_owner = %(worker)s,
  lease_expires_at = STATEMENT_TIMESTAMP() + make_interval(secs => %(lease)s),
  fencing_epoch = fencing_epoch + 1, attempts = attempts + 1, attempts_in_run = attempts_in_run + 1,
  updated_at = STATEMENT_TIMESTAMP()
WHERE id IN (
  SELECT id FROM outbox_handoff
  WHERE destination = %(destination)s AND case_hold_id IS NULL AND state = 'pending'
    AND next_attempt_at <= STATEMENT_TIMESTAMP()
  ORDER BY next_attempt_at, id LIMIT %(limit)s FOR NO KEY UPDATE SKIP LOCKED)
RETURNING id, action_key, payload, attempts, fencing_epoch, STATEMENT_TIMESTAMP()
"""

RECORD = """
WITH done AS (
  UPDATE outbox_handoff AS h SET state = 'delivered', lease_owner = '', lease_expires_at = NULL,
    updated_at = STATEMENT_TIMESTAMP()
  FROM unnest(%(ids)s::bigint[], %(epochs)s::bigint[]) AS c(id, epoch)
  WHERE h.id = c.id AND h.fencing_epoch = c.epoch AND h.state = 'in_flight'
  RETURNING h.id, h.attempts, h.fencing_epoch)
INSERT INTO outbox_attempt (handoff_id, number, fencing_epoch, worker, started_at, finished_at, outcome,
  failure_class, reason_code, status_code, latency_ms, detail, call_started)
SELECT id, attempts, fencing_epoch, %(worker)s, %(started)s, STATEMENT_TIMESTAMP(), 'created', '', '',
  %(status)s, %(latency)s, '', true FROM done
"""

GIVE_BACK = """
UPDATE outbox_handoff AS h SET state = 'pending', lease_owner = '', lease_expires_at = NULL,
  attempts = attempts - 1, attempts_in_run = attempts_in_run - 1, updated_at = STATEMENT_TIMESTAMP()
FROM unnest(%(ids)s::bigint[], %(epochs)s::bigint[]) AS c(id, epoch)
WHERE h.id = c.id AND h.fencing_epoch = c.epoch AND h.state = 'in_flight'
"""


def canonical(document: dict) -> str:
    """The product's body (`outbox/payloads.py` canonical_json)."""
    return json.dumps(document, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


class Wakeups:
    """One LISTEN session for the process (as the product's); a wake-up goes to one idle lane."""

    def __init__(self, dsn: str):
        self.listener = psycopg.connect(dsn, autocommit=True, application_name=APPLICATION)
        self.changed = threading.Condition()
        self.woken = False
        self.stopping = False

    def listen(self) -> None:
        """LISTEN once the lanes are up (the bench waits for it before a run), then hand on each wake-up."""
        self.listener.execute(f"LISTEN {CHANNEL}")
        while not self.stopping:
            for _ in self.listener.notifies(timeout=POLL_SECONDS, stop_after=1):
                with self.changed:
                    self.woken = True
                    self.changed.notify()

    def wait(self) -> None:
        """Until a wake-up (the ones that came meanwhile with it), the stop or the poll's interval."""
        with self.changed:
            self.changed.wait_for(lambda: self.woken or self.stopping, POLL_SECONDS)
            self.woken = False

    def stop(self) -> None:
        with self.changed:
            self.stopping = True
            self.changed.notify_all()


class Lane:
    """One loop of claim, send, record, with its own database session and kept HTTP connection."""

    def __init__(self, args: argparse.Namespace, dsn: str, url: str, wakeups: Wakeups):
        self.args, self.wakeups = args, wakeups
        self.signer = Webhook(os.environ["RECEIVER_SIGNING_SECRET"])
        self.db = psycopg.connect(dsn, autocommit=True, application_name=APPLICATION)
        self.http = urllib3.connection_from_url(url, maxsize=1, retries=False, timeout=30)
        self.path = urllib3.util.parse_url(url).path or ""

    def claim(self) -> list[tuple]:
        return self.db.execute(
            CLAIM,
            {
                "worker": self.args.worker,
                "lease": self.args.lease_seconds,
                "destination": self.args.destination,
                "limit": self.args.limit,
            },
            prepare=True,
        ).fetchall()

    def send(self, rows: list[tuple]) -> tuple[int, int]:
        """One call for the rows, signed now: its HTTP status and its milliseconds."""
        if len(rows) == 1:
            path, extra = "/tasks", {"Idempotency-Key": rows[0][1]}
            body = canonical({"action_key": rows[0][1], "payload": rows[0][2]})
        else:
            path, extra = "/tasks/batch", {}
            body = canonical({"items": [{"action_key": r[1], "payload": r[2]} for r in rows]})
        message_id, now = f"msg_{uuid.uuid4().hex}", datetime.now(tz=UTC)
        headers = {
            "webhook-id": message_id,
            "webhook-timestamp": str(int(now.timestamp())),
            "webhook-signature": self.signer.sign(message_id, now, body),
            "Content-Type": "application/json",
            **extra,
        }
        started = time.monotonic()
        response = self.http.urlopen(
            "POST", self.path + path, body=body.encode(), headers=headers, retries=False
        )
        return response.status, round((time.monotonic() - started) * 1000)

    def record(self, rows: list[tuple], status: int, latency_ms: int) -> None:
        ids, epochs = [r[0] for r in rows], [r[4] for r in rows]
        if 200 <= status < 300:
            self.db.execute(
                RECORD,
                {
                    "ids": ids,
                    "epochs": epochs,
                    "worker": self.args.worker,
                    "started": rows[0][5],
                    "status": status,
                    "latency": latency_ms,
                },
                prepare=True,
            )
        else:  # the reference measures the happy path: anything else goes back, to be claimed again
            self.db.execute(GIVE_BACK, {"ids": ids, "epochs": epochs})

    def run(self) -> None:
        while not self.wakeups.stopping:
            rows = self.claim()
            if not rows:
                self.wakeups.wait()
                continue
            if self.args.one_call:
                self.send_each(rows)
            else:
                self.record(rows, *self.send(rows))

    def send_each(self, rows: list[tuple]) -> None:
        """One call a row, one after another, then one outcome statement for those answered with success
        (and one giving the rest back): the product's one-call path with a claim batch, and nothing else."""
        answered = [(row, *self.send([row])) for row in rows]
        done = [row for row, status, _ms in answered if 200 <= status < 300]
        if done:
            self.record(done, 200, max(ms for _row, _status, ms in answered))
        if len(done) < len(rows):
            self.record([row for row, status, _ms in answered if not 200 <= status < 300], 0, 0)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--worker", default="reference")
    parser.add_argument("--destination", default="receiver")
    parser.add_argument(
        "--limit",
        type=int,
        default=int(os.environ.get("HANDOFF_CLAIM_BATCH", "20")),
        help="rows a claim takes (the product's HANDOFF_CLAIM_BATCH)",
    )
    parser.add_argument(
        "--lanes",
        type=int,
        default=int(os.environ.get("HANDOFF_DISPATCH_LANES", "2")),
        help="loops at once, as the product's lanes of one destination (HANDOFF_DISPATCH_LANES)",
    )
    parser.add_argument("--lease-seconds", type=int, default=30)
    parser.add_argument(
        "--one-call",
        action="store_true",
        default=os.environ.get("RECEIVER_SUPPORTS_BATCH") == "0",
        help="one call a row even for a claim of several (the product's path when the destination has no "
        "batch call: RECEIVER_SUPPORTS_BATCH=0, as the bench's one-call runs set it)",
    )
    args = parser.parse_args()
    # The bench's environment, as the product's dispatchers read it.
    dsn, url = os.environ["DATABASE_URL"], os.environ["RECEIVER_URL"]
    wakeups = Wakeups(dsn)
    lanes = [Lane(args, dsn, url, wakeups) for _ in range(args.lanes)]
    signal.signal(signal.SIGTERM, lambda _signum, _frame: wakeups.stop())
    threads = [threading.Thread(target=lane.run, daemon=True) for lane in lanes]
    for thread in threads:
        thread.start()
    wakeups.listen()
    for thread in threads:
        thread.join(timeout=30)


if __name__ == "__main__":
    main()
