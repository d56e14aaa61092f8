"""A ledger API written for the tests, following the IETF Idempotency-Key header draft, with paths and field
names unlike the bundled receiver's: run as a process of its own (`python -m` this module `--fd N`,
listening on the socket it inherits), it keeps its entries in memory.

    POST /v2/ledger/entries                   header X-Request-Key, JSON body -> 201 {"entry": {...}}
    GET  /v2/ledger/entries?request_key=K     -> 200 {"entries": [...]}  (empty when none)
    GET  /v2/ledger/entries/by-key/K          -> 200 {"entry": {...}} or 404
    DELETE /v2/ledger/entries/<ref>           -> 200 {"entry": {...}, "deleted": true}, or 404 when none
    an entry: {"ref": "le_1", "request_key": K, "body": <the JSON sent>}

The draft's answers: no key -> 400; the same key and body again -> the stored answer (header
`Idempotent-Replayed: true`); the same key with another body -> 422; a request with a key still in progress ->
409. In "stripe" mode both of the latter are 409, told apart by `error.code` (`idempotency_key_reused`,
`idempotency_key_in_use`). A bearer token is required when one is set (from LEDGER_SERVER_TOKEN at start, or
through the test-only endpoint).

Test-only endpoints: GET /_test/state (entries and the requests received), POST /_test/faults (JSON:
`drop_answer_for`: keys whose answer is dropped once after the entry is committed; `hold_answer_for`: keys whose
answer is held once after the entry is committed, until `release` (or HOLD_SECONDS), while other requests are
answered; `release`: true lets every held answer go; `in_progress`: {key: n}, answer 409 n times; `stripe`: bool;
`token`: the bearer token required, null for none; `lookups_refused`: [status, Retry-After] every lookup (GET)
is answered with, null for none; `provider_fields`: bool, an entry's body then adds the
provider's own `id`, `object` and `created` to the JSON sent, as Stripe-style APIs answer). The state's `held`
lists the keys whose answer is held now.
"""

import argparse
import hashlib
import json
import os
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler
from urllib.parse import parse_qs, unquote, urlsplit

from tests.processes import LOCAL_HTTP, ROOT, KernelPort, popen_listening, serve_http_on_fd

ENTRIES = "/v2/ledger/entries"
BY_KEY = "/v2/ledger/entries/by-key/"
# The longest an answer is held when nobody releases it.
HOLD_SECONDS = 120.0


class Ledger:
    def __init__(self, token: str | None):
        self.lock = threading.Lock()
        self.entries: dict[str, dict] = {}
        self.fingerprints: dict[str, str] = {}
        self.requests: list[dict] = []
        self.drop_answer_for: set[str] = set()
        self.hold_answer_for: set[str] = set()
        self.holding: dict[str, threading.Event] = {}
        self.in_progress: dict[str, int] = {}
        self.created = 0
        self.stripe = False
        self.provider_fields = False
        self.token = token
        # (status, Retry-After) every lookup is answered with, None for none (`lookups_refused`).
        self.lookups_refused: tuple[int, str] | None = None

    def state(self) -> dict:
        return {
            "entries": list(self.entries.values()),
            "requests": list(self.requests),
            "held": sorted(self.holding),
        }

    def set_faults(self, faults: dict) -> None:
        self.drop_answer_for |= set(faults.get("drop_answer_for", []))
        self.hold_answer_for |= set(faults.get("hold_answer_for", []))
        if faults.get("release"):
            for event in self.holding.values():
                event.set()
        self.in_progress.update(faults.get("in_progress", {}))
        self.stripe = faults.get("stripe", self.stripe)
        self.provider_fields = faults.get("provider_fields", self.provider_fields)
        if "token" in faults:
            self.token = faults["token"]
        if "lookups_refused" in faults:
            refused = faults["lookups_refused"]
            self.lookups_refused = tuple(refused) if refused else None

    def hold(self, key: str) -> threading.Event | None:
        """What a committed entry's answer waits for when its key's answer is held; under the lock."""
        if key not in self.hold_answer_for:
            return None
        self.hold_answer_for.discard(key)
        self.holding[key] = threading.Event()
        return self.holding[key]

    def create(self, key: str, body: object) -> tuple[int, dict, bool]:
        """(status, answer, replayed) for a create with `key`; under the lock."""
        fingerprint = hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()
        if self.in_progress.get(key, 0) > 0:
            self.in_progress[key] -= 1
            code = "idempotency_key_in_use" if self.stripe else "request_in_progress"
            return 409, _error(code, "a request with this key is being processed"), False
        if key in self.entries:
            if self.fingerprints[key] != fingerprint:
                code = "idempotency_key_reused"
                return (
                    (409 if self.stripe else 422),
                    _error(code, "key used with another body"),
                    False,
                )
            return 201, {"entry": self.entries[key]}, True
        self.created += 1
        ref = f"le_{self.created}"
        if self.provider_fields:
            body = {**body, "id": ref, "object": "ledger_entry", "created": 1767225600}
        entry = {"ref": ref, "request_key": key, "body": body}
        self.entries[key], self.fingerprints[key] = entry, fingerprint
        return 201, {"entry": entry}, False

    def delete(self, ref: str) -> tuple[int, dict]:
        """(status, answer) for a DELETE of the entry `ref`; under the lock."""
        for key, entry in list(self.entries.items()):
            if entry["ref"] == ref:
                del self.entries[key]
                return 200, {"entry": entry, "deleted": True}
        return 404, _error("not_found", f"no entry {ref}")


def _error(code: str, message: str) -> dict:
    return {"error": {"code": code, "message": message}}


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    ledger: Ledger

    def log_message(self, format, *args):  # noqa: A002 - the base class's name
        pass

    def _answer(self, status: int, body: dict, headers: dict | None = None) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)

    def _body(self) -> object:
        raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        try:
            return json.loads(raw)
        except ValueError:
            return None

    def _authorized(self) -> bool:
        token = self.ledger.token
        if token is None or self.headers.get("Authorization") == f"Bearer {token}":
            return True
        self._answer(401, _error("unauthorized", "bearer token missing or wrong"))
        return False

    def _log(self) -> None:
        self.ledger.requests.append(
            {
                "method": self.command,
                "path": self.path,
                "key": self.headers.get("X-Request-Key"),
                "authorization": self.headers.get("Authorization"),
            }
        )

    def do_GET(self):  # noqa: N802 - http.server's name
        parts = urlsplit(self.path)
        with self.ledger.lock:
            if parts.path == "/_test/state":
                return self._answer(200, self.ledger.state())
            self._log()
            if not self._authorized():
                return None
            if self.ledger.lookups_refused is not None:
                status, wait = self.ledger.lookups_refused
                return self._answer(status, _error("slow_down", "try later"), {"Retry-After": wait})
            if parts.path == ENTRIES:
                keys = parse_qs(parts.query).get("request_key")
                if not keys:
                    return self._answer(400, _error("missing_request_key", "request_key needed"))
                found = [e for e in self.ledger.entries.values() if e["request_key"] == keys[0]]
                return self._answer(200, {"entries": found})
            if parts.path.startswith(BY_KEY):
                entry = self.ledger.entries.get(unquote(parts.path[len(BY_KEY) :]))
                if entry is None:
                    return self._answer(404, _error("not_found", "no entry for this key"))
                return self._answer(200, {"entry": entry})
            return self._answer(404, _error("no_route", self.path))

    def do_DELETE(self):  # noqa: N802 - http.server's name
        with self.ledger.lock:
            self._log()
            if not self._authorized():
                return None
            if not self.path.startswith(ENTRIES + "/"):
                return self._answer(404, _error("no_route", self.path))
            status, answer = self.ledger.delete(unquote(self.path[len(ENTRIES) + 1 :]))
            key = self.headers.get("X-Request-Key")
            if key in self.ledger.drop_answer_for and status == 200:
                # The entry is removed; the answer is lost on the way back.
                self.ledger.drop_answer_for.discard(key)
                self.close_connection = True
                return None
        return self._answer(status, answer)

    def do_POST(self):  # noqa: N802 - http.server's name
        body = self._body()
        with self.ledger.lock:
            if self.path == "/_test/faults":
                self.ledger.set_faults(body or {})
                return self._answer(200, {"ok": True})
            self._log()
            if not self._authorized():
                return None
            if self.path != ENTRIES:
                return self._answer(404, _error("no_route", self.path))
            key = self.headers.get("X-Request-Key")
            if not key:
                return self._answer(400, _error("missing_key", "X-Request-Key is required"))
            if not isinstance(body, dict):
                return self._answer(400, _error("invalid_body", "a JSON object is required"))
            status, answer, replayed = self.ledger.create(key, body)
            if key in self.ledger.drop_answer_for and status == 201:
                # The entry is committed; the answer is lost on the way back.
                self.ledger.drop_answer_for.discard(key)
                self.close_connection = True
                return None
            held = self.ledger.hold(key) if status == 201 else None
        if held is not None:
            # The entry is committed; its answer waits outside the lock: lookups are answered meanwhile.
            held.wait(timeout=HOLD_SECONDS)
            with self.ledger.lock:
                del self.ledger.holding[key]
        return self._answer(status, answer, {"Idempotent-Replayed": "true"} if replayed else None)


class LedgerProcess:
    """The ledger in a process of its own on a port the kernel chose (tests/processes.py); `token` is the
    bearer token it requires."""

    def __init__(self, *, token: str | None = None):
        self.held = KernelPort()
        self.port = self.held.port
        self.url = f"http://127.0.0.1:{self.port}"
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        env.pop("LEDGER_SERVER_TOKEN", None)
        if token:
            env["LEDGER_SERVER_TOKEN"] = token
        self.proc = popen_listening(
            lambda fd: [
                sys.executable,
                "-m",
                "tests.outbox.destinations.idempotency_key_server",
                "--fd",
                str(fd),
            ],
            self.held,
            cwd=ROOT,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )

    def wait_until_up(self, timeout: float = 120) -> None:
        import httpx  # here: the server's own process, started from this module, never polls (tests/processes.py)

        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"ledger exited: {self.proc.stderr.read().decode()[-2000:]}")
            try:
                self.state()
                return
            except httpx.HTTPError:
                time.sleep(0.05)
        raise RuntimeError("ledger did not start")

    def state(self) -> dict:
        return LOCAL_HTTP.get(f"{self.url}/_test/state", timeout=60).json()

    def entries(self) -> list[dict]:
        return self.state()["entries"]

    def deletes(self) -> list[dict]:
        """The DELETE requests received (path and X-Request-Key), in order."""
        return [r for r in self.state()["requests"] if r["method"] == "DELETE"]

    def creates(self) -> list[dict]:
        """The create requests received (each with its X-Request-Key), in order."""
        return [r for r in self.state()["requests"] if r["method"] == "POST"]

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
    Handler.ledger = Ledger(os.environ.get("LEDGER_SERVER_TOKEN") or None)
    server = serve_http_on_fd(args.fd, Handler)
    server.daemon_threads = True
    server.serve_forever()


if __name__ == "__main__":
    main()
