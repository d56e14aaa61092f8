"""No destination holds up another: a healthy destination's rate beside one that is down and one that is slow.

    .venv/bin/python bench/destinations_bench.py [--handoffs 1500] [--others 200] [--pairs 6]

Three destinations as rows, applied by `manage.py destinations apply` from a file written under var/bench:
"healthy" (the bundled receiver under gunicorn), "down" (a 127.0.0.1 port nothing listens on: connection
refused) and "slow" (a server of this bench in a process of its own that waits `--slow-seconds`, then passes
the request on to the receiver, so that every call takes that long and ends in a real receipt). One
`manage.py dispatch` process per run serves the enabled ones.

Each pair is two runs back to back: the healthy destination alone (the other two rows disabled, nothing
queued for them) and the same `--handoffs` to it while `--others` handoffs each wait for "down" and "slow"
(queued first; the healthy ones are committed once the slow destination is in a call and the down one has
failed). The order alternates from pair to pair, so that a machine getting busier or quieter favours
neither side. A run's rate: its healthy handoffs over the span from the first to the last `delivered_at`
(written by the dispatcher, on the database's host). The figure is the median of the quiet pairs' ratios
(with the others / alone), taken and judged by bench/pairs.py; every pair is kept in the JSON, with the
dispatcher's CPU per healthy handoff.
"""

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from e2e import reset, wait_for  # noqa: E402
from harness import PYTHON, ROOT, Bench, insert_handoffs_sql, write_json  # noqa: E402
from pairs import figure_json, measure_pairs, print_pair  # noqa: E402

AIM = 0.9
# Each destination's handoffs in a workspace of their own: distinct action keys, and a column to tell them apart.
WORKSPACES = {"healthy": 7, "down": 8, "slow": 9}

# Waits, then passes the request on to the receiver unchanged (signed headers and body) and relays its answer.
SLOW_SERVER = """
import http.client, socket, sys, time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
fd, delay, upstream = int(sys.argv[1]), float(sys.argv[2]), int(sys.argv[3])
HOP = {"host", "connection", "keep-alive", "transfer-encoding", "content-length", "server", "date"}

class Slow(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def answer(self):
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        time.sleep(delay)
        conn = http.client.HTTPConnection("127.0.0.1", upstream, timeout=30)
        conn.request(self.command, self.path, body=body,
                     headers={k: v for k, v in self.headers.items() if k.lower() not in HOP})
        reply = conn.getresponse()
        data = reply.read()
        conn.close()
        self.send_response(reply.status)
        for k, v in reply.getheaders():
            if k.lower() not in HOP:
                self.send_header(k, v)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    do_GET = do_POST = answer

    def log_message(self, *args):
        pass

class Server(ThreadingHTTPServer):
    def handle_error(self, request, client_address):
        if not isinstance(sys.exc_info()[1], ConnectionError):  # a dispatcher killed mid-call is no news
            super().handle_error(request, client_address)

server = Server(("127.0.0.1", 0), Slow, bind_and_activate=False)
server.socket.close()
server.socket = socket.socket(fileno=fd)  # bound by the bench, inherited
server.server_activate()
server.serve_forever()
"""


def start_slow_server(bench: Bench, seconds: float) -> str:
    port = bench.port()
    bench.spawn(
        [PYTHON, "-c", SLOW_SERVER, "{fd}", str(seconds), str(bench.receiver_port)],
        "slow-destination.log",
        listen=port,
    )
    for _ in range(100):
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return f"http://127.0.0.1:{port}/delivery/api"
        except OSError:
            time.sleep(0.1)
    raise RuntimeError("the slow destination's server did not start")


def apply_destinations(bench: Bench, urls: dict[str, str], *, enabled: set[str]) -> None:
    """The three rows, as a file for `manage.py destinations apply`; those not in `enabled` disabled."""
    document = {
        "destinations": [
            {
                "name": name,
                "kind": "http",
                "enabled": name in enabled,
                "url": url,
                "connect_timeout": 1.0,
                # The slow destination's answer must come within the read timeout: a receipt, not a timeout.
                "read_timeout": 10.0,
            }
            for name, url in urls.items()
        ]
    }
    path = bench.log_dir / "destinations-bench.json"
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


def queue(bench: Bench, destination: str, count: int) -> None:
    """`count` handoffs due now for `destination`, and a wake-up for the dispatcher."""
    with bench.sql() as conn:
        with conn.transaction():
            conn.execute(insert_handoffs_sql(1, count, workspace=WORKSPACES[destination]))
            conn.execute(
                "UPDATE outbox_handoff SET destination = %s WHERE workspace_id = %s",
                (destination, WORKSPACES[destination]),
            )
        conn.execute("NOTIFY handoff_due")


def cpu_seconds(proc: subprocess.Popen) -> float:
    """User and system CPU the process has used so far (its threads included)."""
    fields = Path(f"/proc/{proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def run(
    bench: Bench, urls: dict[str, str], handoffs: int, others: dict[str, int], tag: str
) -> dict:
    """One dispatcher process; `handoffs` to "healthy", and `others[name]` waiting for each other one
    (enabled, with its handoffs queued first); the destinations not in `others` disabled."""
    reset(bench)
    with bench.sql() as conn:  # the breakers and limits of an earlier run start afresh
        conn.execute("TRUNCATE outbox_destinationhealth, outbox_destinationslot")
    apply_destinations(bench, urls, enabled={"healthy", *others})
    procs = bench.start_dispatchers(1, tag)
    bench.dispatchers_started(procs)
    for name, count in others.items():
        if count:
            queue(bench, name, count)
    # The slow destination in a call (its claims leased), the down one failed at least once.
    if others.get("slow"):
        wait_for(
            bench,
            "SELECT count(*) FROM outbox_handoff WHERE destination = 'slow' "
            "AND state = 'in_flight'",
            1,
            timeout=30,
        )
    if others.get("down"):
        wait_for(
            bench,
            "SELECT count(*) FROM outbox_attempt a JOIN outbox_handoff h "
            "ON h.id = a.handoff_id WHERE h.destination = 'down'",
            1,
            timeout=30,
        )
    cpu_before = cpu_seconds(procs[0])
    queue(bench, "healthy", handoffs)
    wait_for(
        bench,
        "SELECT count(*) FROM outbox_handoff WHERE destination = 'healthy' AND state = 'delivered'",
        handoffs,
        timeout=600,
    )
    cpu = cpu_seconds(procs[0]) - cpu_before
    with bench.sql() as conn:
        span, down_failed_calls, slow_in_flight = conn.execute(
            "SELECT extract(epoch FROM max(delivered_at) FILTER (WHERE destination = 'healthy') "
            "- min(delivered_at) FILTER (WHERE destination = 'healthy')), "
            "(SELECT count(*) FROM outbox_attempt a JOIN outbox_handoff d ON d.id = a.handoff_id "
            " WHERE d.destination = 'down' AND a.outcome = 'failed'), "
            "count(*) FILTER (WHERE destination = 'slow' AND state = 'in_flight') FROM outbox_handoff"
        ).fetchone()
    # Killed, not stopped: a SIGTERM waits for the slow destination's batch of calls (up to 30 s), and what
    # becomes of its handoffs is no part of this figure (the next run starts from empty tables).
    for proc in procs:
        proc.kill()
    bench.stop(procs)
    return {
        "handoffs": handoffs,
        "others": others,
        "seconds": round(float(span), 2),
        "per_second": round((handoffs - 1) / float(span), 1),
        "dispatcher_cpu_ms_per_handoff": round(1000 * cpu / handoffs, 3),
        # What the other two were doing: calls that failed at "down" (until its breaker paused it), and the
        # claims "slow" held in its calls at the end.
        "down_failed_calls": down_failed_calls,
        "slow_in_flight": slow_in_flight,
        "check": verify_healthy(bench, handoffs),
    }


def verify_healthy(bench: Bench, handoffs: int) -> dict:
    """Every healthy handoff delivered once: `e2e.verify` over the healthy workspace's keys only."""
    with bench.sql() as src, bench.sql("delivery") as dst:
        ours = dict(
            src.execute(
                "SELECT action_key, destination_id FROM outbox_handoff WHERE destination = 'healthy' "
                "AND state = 'delivered'"
            ).fetchall()
        )
        prefix = f"onboarding:{WORKSPACES['healthy']}:%"
        theirs = dst.execute(
            "SELECT action_key, task_id::text FROM delivery_receivertask WHERE action_key LIKE %s",
            (prefix,),
        ).fetchall()
    mismatched = sum(1 for key, task in theirs if ours.get(key) != task)
    ok = len(ours) == len(theirs) == len(dict(theirs)) == handoffs and mismatched == 0
    return {"delivered": len(ours), "tasks": len(theirs), "mismatched": mismatched, "ok": ok}


def measure(bench: Bench, urls: dict[str, str], args: argparse.Namespace) -> dict:
    """`args.pairs` pairs of runs taken and judged by bench/pairs.py (alone is the reference)."""
    runs: dict[tuple[int, str], dict] = {}

    def side(name: str, queued: dict):
        def one(n: int) -> float:
            runs[(n, name)] = run(bench, urls, args.handoffs, queued, f"{name}{n}")
            return runs[(n, name)]["per_second"]

        return one

    others = {"down": args.others, "slow": args.others}
    figure = measure_pairs(
        "destinations_alone",
        side("alone", {}),
        side("with_others", others),
        pairs=args.pairs,
        on_pair=print_pair,
    )
    return figure_json(figure, runs, ("alone", "with_others"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--handoffs", type=int, default=1500)
    parser.add_argument(
        "--others", type=int, default=200, help="handoffs waiting for down and slow, each"
    )
    parser.add_argument("--slow-seconds", type=float, default=4.0)
    parser.add_argument("--pairs", type=int, default=6)
    parser.add_argument("--json", default=str(ROOT / "var" / "bench" / "destinations.json"))
    args = parser.parse_args()

    bench = Bench("dest", HANDOFF_DESTINATION_NAME="healthy").setup()
    try:
        bench.start_receiver()
        urls = {
            "healthy": bench.receiver_url,
            # Held and never listened on: refused for the whole run.
            "down": f"http://127.0.0.1:{bench.port()}/delivery/api",
            "slow": start_slow_server(bench, args.slow_seconds),
        }
        paired = measure(bench, urls, args)
    finally:
        bench.stop()
    pairs, ratio = paired["pairs"], paired["ratio"]
    report = {
        "handoffs": args.handoffs,
        "others_each": args.others,
        "slow_seconds": args.slow_seconds,
        "alone_per_second": round(statistics.median(p["alone"]["per_second"] for p in pairs), 1),
        "with_others_per_second": round(
            statistics.median(p["with_others"]["per_second"] for p in pairs), 1
        ),
        "cpu_ms_per_handoff": {
            side: round(
                statistics.median(p[side]["dispatcher_cpu_ms_per_handoff"] for p in pairs), 3
            )
            for side in ("alone", "with_others")
        },
        **paired,
        "ratios": [pair["ratio"] for pair in pairs],
        "aim": AIM,
        "all_delivered_once": all(
            p[s]["check"]["ok"] for p in pairs for s in ("alone", "with_others")
        ),
        "command": " ".join([".venv/bin/python", "bench/destinations_bench.py", *sys.argv[1:]]),
    }
    report["met"] = ratio is not None and ratio >= AIM and report["all_delivered_once"]
    write_json(Path(args.json), report)
    print(json.dumps({k: v for k, v in report.items() if k != "pairs"}))


if __name__ == "__main__":
    sys.exit(main())
