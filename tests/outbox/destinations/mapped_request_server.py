"""A CRM-like API for the request-mapping tests, in a process of its own (`python -m` this module): it binds
port 0 and prints `listening on http://127.0.0.1:N`. Records its own field names, so only a mapped request
fits it:

    POST|PUT|PATCH <any path>   header Idempotency-Key, a JSON object -> 201 {"id": "rec_N", "record": <body>}

The same key and body again: the stored answer (`Idempotent-Replayed: true`); the same key with another body:
422. GET /_test/state lists each request received (method, path with its query, headers, body) and the records.
"""

import hashlib
import json
import subprocess
import sys
import threading
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from tests.processes import LOCAL_HTTP, ROOT

WRITE_METHODS = ("POST", "PUT", "PATCH")


class Records:
    def __init__(self):
        self.lock = threading.Lock()
        self.by_key: dict[str, tuple[str, dict]] = {}
        self.requests: list[dict] = []

    def create(self, key: str, body: dict) -> tuple[int, dict, bool]:
        fingerprint = hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()
        if key in self.by_key:
            stored_fingerprint, answer = self.by_key[key]
            if stored_fingerprint != fingerprint:
                return 422, {"error": "key reused with another body"}, False
            return 201, answer, True
        answer = {"id": f"rec_{len(self.by_key) + 1}", "record": body}
        self.by_key[key] = (fingerprint, answer)
        return 201, answer, False


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    records = Records()

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

    def do_GET(self):  # noqa: N802 - http.server's name
        with self.records.lock:
            state = {
                "requests": list(self.records.requests),
                "records": [answer for _, answer in self.records.by_key.values()],
            }
        self._answer(200 if self.path == "/_test/state" else 404, state)

    def _write(self):
        raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        try:
            body = json.loads(raw)
        except ValueError:
            body = None
        key = self.headers.get("Idempotency-Key")
        with self.records.lock:
            self.records.requests.append(
                {
                    "method": self.command,
                    "path": self.path,
                    "headers": {name.lower(): value for name, value in self.headers.items()},
                    "body": body,
                }
            )
            if not key:
                return self._answer(400, {"error": "Idempotency-Key is required"})
            if not isinstance(body, dict):
                return self._answer(400, {"error": "a JSON object is required"})
            status, answer, replayed = self.records.create(key, body)
        return self._answer(status, answer, {"Idempotent-Replayed": "true"} if replayed else None)

    do_POST = do_PUT = do_PATCH = _write  # noqa: N815 - http.server's names


@dataclass
class MappedRequestServer:
    url: str
    process: subprocess.Popen

    def state(self) -> dict:
        return LOCAL_HTTP.get(f"{self.url}/_test/state", timeout=60).json()

    def writes(self) -> list[dict]:
        return [r for r in self.state()["requests"] if r["method"] in WRITE_METHODS]

    def stop(self) -> None:
        self.process.kill()
        self.process.wait(timeout=10)
        self.process.stdout.close()


def mapped_request_server_start() -> MappedRequestServer:
    process = subprocess.Popen(
        [sys.executable, "-m", "tests.outbox.destinations.mapped_request_server"],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        text=True,
    )
    line = process.stdout.readline().strip()
    if not line.startswith("listening on "):
        process.kill()
        raise RuntimeError(f"the mapped-request server did not start: {line!r}")
    return MappedRequestServer(line.removeprefix("listening on "), process)


def main() -> None:
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    print(f"listening on http://127.0.0.1:{server.server_address[1]}", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
