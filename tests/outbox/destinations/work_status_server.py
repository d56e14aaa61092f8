"""An accounts API written for the work-status tests, run as a process of its own (`python -m` this module
`--fd N`, listening on the socket it inherits): it creates accounts under an Idempotency-Key and answers
each account's status, which the test sets, and counts every read of it.

    POST /v1/accounts                 header Idempotency-Key, JSON body -> 201 {"account": {"id": ...}}
    GET  /v1/accounts/<id>            -> 200 {"account": {"id": ..., "status": ...}}, or 404
    POST /_test/status                {"id": ..., "status": <any JSON value>} sets what the read answers;
                                      {"id": ..., "gone": true} forgets the account (404 after)
                                      {"id": ..., "refused": [429, "300"]} answers its reads with that
                                      status and Retry-After (null: answered again)
    GET  /_test/reads                 -> {<id>: reads of it}

A new account's status is "pending".
"""

import argparse
import json
import os
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler

from tests.processes import LOCAL_HTTP, ROOT, KernelPort, popen_listening, serve_http_on_fd

ACCOUNTS = "/v1/accounts"


class Accounts:
    def __init__(self):
        self.lock = threading.Lock()
        self.by_key: dict[str, str] = {}
        self.status: dict[str, object] = {}
        self.reads: dict[str, int] = {}
        self.refused: dict[str, tuple[int, str]] = {}


class Handler(BaseHTTPRequestHandler):
    accounts: Accounts

    def log_message(self, *args):
        pass

    def _answer(self, status: int, document: object, retry_after: str | None = None) -> None:
        body = json.dumps(document).encode()
        self.send_response(status)
        if retry_after is not None:
            self.send_header("Retry-After", retry_after)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _body(self) -> dict:
        return json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")

    def do_POST(self):
        accounts, body = self.accounts, self._body()
        with accounts.lock:
            if self.path == "/_test/status":
                if "refused" in body:
                    refused = body["refused"]
                    if refused:
                        accounts.refused[body["id"]] = tuple(refused)
                    else:
                        accounts.refused.pop(body["id"], None)
                elif body.get("gone"):
                    accounts.status.pop(body["id"], None)
                else:
                    accounts.status[body["id"]] = body["status"]
                return self._answer(200, {})
            key = self.headers.get("Idempotency-Key", "")
            account_id = accounts.by_key.setdefault(key, f"acc_{len(accounts.by_key) + 1}")
            accounts.status.setdefault(account_id, "pending")
        return self._answer(201, {"account": {"id": account_id, "idempotency_key": key}})

    def do_GET(self):
        accounts = self.accounts
        with accounts.lock:
            if self.path == "/_test/reads":
                return self._answer(200, dict(accounts.reads))
            account_id = self.path.removeprefix(f"{ACCOUNTS}/")
            accounts.reads[account_id] = accounts.reads.get(account_id, 0) + 1
            if refused := accounts.refused.get(account_id):
                return self._answer(refused[0], {"error": {"code": "rate_limited"}}, refused[1])
            if account_id not in accounts.status:
                return self._answer(404, {"error": {"code": "not_found"}})
            status = accounts.status[account_id]
        return self._answer(200, {"account": {"id": account_id, "status": status}})


class AccountsProcess:
    """The accounts API in a process of its own on a port the kernel chose (tests/processes.py)."""

    def __init__(self):
        self.held = KernelPort()
        self.port = self.held.port
        self.url = f"http://127.0.0.1:{self.port}"
        self.proc = popen_listening(
            lambda fd: [
                sys.executable,
                "-m",
                "tests.outbox.destinations.work_status_server",
                "--fd",
                str(fd),
            ],
            self.held,
            cwd=ROOT,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        import httpx  # here: the server's own process, started from this module, never polls (tests/processes.py)

        deadline = time.monotonic() + 120
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError(f"accounts exited: {self.proc.stderr.read().decode()[-2000:]}")
            try:
                self.reads()
                return
            except httpx.HTTPError:
                if time.monotonic() > deadline:
                    self.stop()
                    raise
                time.sleep(0.05)

    def reads(self) -> dict[str, int]:
        return LOCAL_HTTP.get(f"{self.url}/_test/reads", timeout=60).json()

    def set_status(self, account_id: str, status: object) -> None:
        LOCAL_HTTP.post(
            f"{self.url}/_test/status", json={"id": account_id, "status": status}, timeout=5
        ).raise_for_status()

    def refuse(self, account_id: str, refused: list | None) -> None:
        """Its reads answered `refused` [status, Retry-After] from now on; None: answered again."""
        LOCAL_HTTP.post(
            f"{self.url}/_test/status", json={"id": account_id, "refused": refused}, timeout=5
        ).raise_for_status()

    def forget(self, account_id: str) -> None:
        LOCAL_HTTP.post(
            f"{self.url}/_test/status", json={"id": account_id, "gone": True}, timeout=5
        ).raise_for_status()

    def stop(self) -> None:
        self.proc.kill()
        self.proc.wait(timeout=10)
        self.proc.stderr.close()
        self.held.close()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--fd", type=int, required=True)
    args = parser.parse_args()
    Handler.accounts = Accounts()
    server = serve_http_on_fd(args.fd, Handler)
    server.daemon_threads = True
    server.serve_forever()


if __name__ == "__main__":
    main()
