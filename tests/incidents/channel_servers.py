"""Receivers of alerts written from the providers' docs, in a process of their own (`python -m` this module
`--fd N`, listening on the socket it inherits), recording what they receive and what it did.

    POST /webhook        a Standard Webhooks receiver: verifies `webhook-signature` with the secret in
                         CHANNEL_WEBHOOK_SECRET and processes each `webhook-id` once (the spec's advice:
                         "use the webhook-id as an idempotency key"); a repeat is answered 200, not processed
    POST /v2/enqueue     PagerDuty Events API v2: `routing_key` must be CHANNEL_ROUTING_KEY (else 400);
                         `event_action` trigger opens an alert for the `dedup_key` unless one is open
                         (deduplicated), acknowledge and resolve change an open one; 202
                         {"status": "success", "message": "Event processed", "dedup_key": ...}

Each request is recorded in `received` (path, id, body); each effect in `effects` (a webhook processed, a PagerDuty
alert opened, acknowledged, resolved). Test-only: GET /_test/state; POST /_test/faults with `lose_first`: the first n
requests are processed and then their connection closed without an answer (a lost answer); `hold`: the n-th
request from now is processed and its answer held until `release` (a dispatcher killed mid-call);
`release`: true lets it go. The state's `held` counts the requests held now.
"""

import argparse
import base64
import hashlib
import hmac
import json
import os
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler

from tests.processes import LOCAL_HTTP, ROOT, KernelPort, popen_listening, serve_http_on_fd

HOLD_SECONDS = 120


class Channels:
    def __init__(self, secret: str, routing_key: str):
        self.secret = base64.b64decode(secret.removeprefix("whsec_"))
        self.routing_key = routing_key
        self.lock = threading.Lock()
        self.released = threading.Event()
        self.received: list[dict] = []
        self.effects: list[dict] = []
        self.processed: set[str] = set()
        self.alerts: dict[str, str] = {}  # dedup_key -> triggered, acknowledged, resolved
        self.lose_first = 0
        self.hold_at = 0  # the n-th request from the faults' setting is held (0: none)
        self.held = 0

    def signed(self, headers, body: bytes) -> bool:
        content = f"{headers['webhook-id']}.{headers['webhook-timestamp']}.".encode() + body
        expected = base64.b64encode(hmac.new(self.secret, content, hashlib.sha256).digest())
        given = [s.split(",", 1)[1].encode() for s in headers["webhook-signature"].split()]
        return any(hmac.compare_digest(expected, each) for each in given)

    def webhook(self, headers, body: bytes) -> tuple[int, dict]:
        if not self.signed(headers, body):
            return 401, {"error": "signature"}
        webhook_id = headers["webhook-id"]
        self.received.append({"path": "/webhook", "id": webhook_id, "body": json.loads(body)})
        if webhook_id not in self.processed:
            self.processed.add(webhook_id)
            self.effects.append({"channel": "webhook", "id": webhook_id, "effect": "processed"})
        return 200, {}

    def pagerduty(self, body: bytes) -> tuple[int, dict]:
        event = json.loads(body)
        if event.get("routing_key") != self.routing_key:
            return 400, {"status": "invalid event", "message": "Event object is invalid"}
        key, action = event["dedup_key"], event["event_action"]
        self.received.append({"path": "/v2/enqueue", "id": f"{key}:{action}", "body": event})
        state = self.alerts.get(key)
        effect = ""
        if action == "trigger" and state in (None, "resolved"):
            effect = "opened"
        elif action == "acknowledge" and state == "triggered":
            effect = "acknowledged"
        elif action == "resolve" and state in ("triggered", "acknowledged"):
            effect = "resolved"
        if effect:
            self.alerts[key] = {"opened": "triggered"}.get(effect, effect)
            self.effects.append({"channel": "pagerduty", "id": key, "effect": effect})
        return 202, {"status": "success", "message": "Event processed", "dedup_key": key}

    def fate(self) -> str:
        """What happens to this request's answer: "lose", "hold" or "" (answered)."""
        if self.lose_first > 0:
            self.lose_first -= 1
            return "lose"
        if self.hold_at > 0:
            self.hold_at -= 1
            if self.hold_at == 0:
                return "hold"
        return ""


def handler_for(channels: Channels):
    class Handler(BaseHTTPRequestHandler):
        def _answer(self, status: int, document: dict) -> None:
            body = json.dumps(document).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_GET(self):  # noqa: N802 - the name http.server calls
            with channels.lock:
                state = {
                    "received": channels.received,
                    "effects": channels.effects,
                    "held": channels.held,
                }
            self._answer(200, state)

        def do_POST(self):  # noqa: N802
            body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
            headers = {k.lower(): v for k, v in self.headers.items()}
            if self.path == "/_test/faults":
                self._faults(json.loads(body))
                return
            with channels.lock:
                if self.path == "/webhook":
                    status, answer = channels.webhook(headers, body)
                elif self.path == "/v2/enqueue":
                    status, answer = channels.pagerduty(body)
                else:
                    status, answer = 404, {}
                fate = channels.fate() if status < 300 else ""
                channels.held += fate == "hold"
            if fate == "hold":
                channels.released.wait(HOLD_SECONDS)
                with channels.lock:
                    channels.held -= 1
            if fate:
                # Processed, answer never sent (lost, or to a dispatcher killed meanwhile).
                self.close_connection = True
                self.connection.shutdown(2)
                return
            self._answer(status, answer)

        def _faults(self, faults: dict) -> None:
            with channels.lock:
                channels.lose_first = faults.get("lose_first", channels.lose_first)
                channels.hold_at = faults.get("hold", channels.hold_at)
                if faults.get("release"):
                    channels.released.set()
            self._answer(200, {})

        def log_message(self, *args):
            pass

    return Handler


class ChannelServers:
    """The tests' side: the process on a port the kernel chose, its URLs, faults and state."""

    def __init__(self, *, secret: str, routing_key: str):
        self.held = KernelPort()
        self.url = f"http://127.0.0.1:{self.held.port}"
        env = {
            **os.environ,
            "PYTHONUNBUFFERED": "1",
            "CHANNEL_WEBHOOK_SECRET": secret,
            "CHANNEL_ROUTING_KEY": routing_key,
        }
        self.proc = popen_listening(
            lambda fd: [
                sys.executable,
                "-m",
                "tests.incidents.channel_servers",
                "--fd",
                str(fd),
            ],
            self.held,
            cwd=ROOT,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        self._wait_until_up()

    def _wait_until_up(self, timeout: float = 120) -> None:
        import httpx  # here: the server's own process, started from this module, never polls (tests/processes.py)

        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"channel servers exited: {self.proc.stderr.read()[-2000:]}")
            try:
                self.state()
                return
            except httpx.HTTPError:
                time.sleep(0.05)
        raise RuntimeError("the channel servers did not start")

    def state(self) -> dict:
        return LOCAL_HTTP.get(f"{self.url}/_test/state", timeout=60).json()

    def faults(self, **faults) -> None:
        LOCAL_HTTP.post(f"{self.url}/_test/faults", json=faults, timeout=60).raise_for_status()

    def stop(self) -> None:
        self.proc.kill()
        self.proc.wait(timeout=10)
        self.proc.stderr.close()
        self.held.close()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--fd", type=int, required=True)
    args = parser.parse_args()
    channels = Channels(os.environ["CHANNEL_WEBHOOK_SECRET"], os.environ["CHANNEL_ROUTING_KEY"])
    serve_http_on_fd(args.fd, handler_for(channels)).serve_forever()


if __name__ == "__main__":
    main()
