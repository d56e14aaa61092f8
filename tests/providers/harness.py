"""What the provider-style test servers share: a threaded JSON HTTP server in a process of its own (started
as `python -m tests.providers.<provider> --fd N`, listening on the socket it inherits), the test-only
switches, and the test's handle on it.

Each provider module defines a `Provider` subclass whose `route(request)` answers one call. Test-only
endpoints, the same at every provider:

    GET  /_test/state       {"records": [...], "effects": {key: n}, "requests": [...]}
    POST /_test/drop-next   {"count": 1}: the next `count` committed writes lose their answer (the
                            connection closes after the commit, before any byte of the answer)
    POST /_test/hold-next   {"count": 1}: the next `count` committed writes hold their answer (other calls
                            are answered meanwhile) until POST /_test/release, or HOLD_SECONDS; the
                            state's `held` is how many are held now
    POST /_test/faults      provider-specific switches (`Provider.set_faults`)
"""

import argparse
import contextlib
import json
import os
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler
from urllib.parse import parse_qs, unquote, urlsplit

from tests.processes import LOCAL_HTTP, ROOT, KernelPort, popen_listening, serve_http_on_fd

# The longest an answer is held when nobody releases it.
HOLD_SECONDS = 120.0


@dataclass
class Call:
    method: str
    path: str  # percent-decoded, without the query
    query: dict[str, str]
    headers: dict[str, str]  # lower-case names
    body: object


@dataclass
class Answer:
    status: int
    body: object = None
    headers: dict | None = None
    # A write the provider committed: its answer is lost when a drop is armed.
    committed: bool = False


class Provider:
    """The provider's state under one lock; subclasses answer calls and count effects per key."""

    def __init__(self, token: str | None):
        self.lock = threading.Lock()
        self.token = token
        self.drops = 0
        self.holds = 0
        self.held: list[threading.Event] = []
        self.requests: list[dict] = []

    def authorized(self, call: Call) -> bool:
        return self.token is None or call.headers.get("authorization") == f"Bearer {self.token}"

    def unauthorized(self) -> Answer:
        return Answer(401, {"message": "not authorized"})

    def route(self, call: Call) -> Answer:
        raise NotImplementedError

    def records(self) -> list[dict]:
        raise NotImplementedError

    def effects(self) -> dict[str, int]:
        raise NotImplementedError

    def set_faults(self, faults: dict) -> None:
        return None


def serve(provider: Provider) -> None:
    """Parse `--fd`, serve `provider` for ever on that inherited socket (the child's main)."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--fd", type=int, required=True)
    args = parser.parse_args()
    Handler.provider = provider
    server = serve_http_on_fd(args.fd, Handler)
    server.daemon_threads = True
    server.serve_forever()


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    provider: Provider

    def log_message(self, format, *args):  # noqa: A002 - the base class's name
        pass

    def _send(self, answer: Answer) -> None:
        data = b"" if answer.body is None else json.dumps(answer.body).encode()
        self.send_response(answer.status)
        if answer.body is not None:
            self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for name, value in (answer.headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)

    def _call(self) -> Call:
        raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        try:
            body = json.loads(raw) if raw else None
        except ValueError:
            body = raw.decode(errors="replace")
        parts = urlsplit(self.path)
        return Call(
            method=self.command,
            path=unquote(parts.path),
            query={k: v[0] for k, v in parse_qs(parts.query).items()},
            headers={k.lower(): v for k, v in self.headers.items()},
            body=body,
        )

    def _test(self, call: Call) -> Answer:
        provider = self.provider
        if call.path == "/_test/state":
            return Answer(
                200,
                {
                    "records": provider.records(),
                    "effects": provider.effects(),
                    "requests": provider.requests,
                    "held": len(provider.held),
                },
            )
        if call.path == "/_test/drop-next":
            provider.drops += int((call.body or {}).get("count", 1))
            return Answer(200, {"drops": provider.drops})
        if call.path == "/_test/hold-next":
            provider.holds += int((call.body or {}).get("count", 1))
            return Answer(200, {"holds": provider.holds})
        if call.path == "/_test/release":
            for event in provider.held:
                event.set()
            return Answer(200, {"released": len(provider.held)})
        if call.path == "/_test/faults":
            provider.set_faults(call.body or {})
            return Answer(200, {"ok": True})
        return Answer(404, {"message": "no such test endpoint"})

    def _handle(self) -> None:
        call = self._call()
        provider = self.provider
        held = None
        with provider.lock:
            if call.path.startswith("/_test/"):
                return self._send(self._test(call))
            provider.requests.append(
                {"method": call.method, "path": call.path, "query": call.query, "body": call.body}
            )
            answer = provider.route(call) if provider.authorized(call) else provider.unauthorized()
            if answer.committed and provider.drops > 0:
                # Committed; the answer is lost on the way back.
                provider.drops -= 1
                self.close_connection = True
                return None
            if answer.committed and provider.holds > 0:
                provider.holds -= 1
                held = threading.Event()
                provider.held.append(held)
        if held is not None:
            # Committed; the answer waits outside the lock (it may go to a caller that is gone).
            held.wait(timeout=HOLD_SECONDS)
            with provider.lock:
                provider.held.remove(held)
        with contextlib.suppress(OSError):
            self._send(answer)

    do_GET = do_POST = do_PATCH = do_DELETE = do_PUT = _handle  # noqa: N815 - http.server's names


class ProviderProcess:
    """A provider module served in a process of its own on a port the kernel chose (tests/processes.py)."""

    def __init__(self, module: str, *, token: str | None = None):
        self.held = KernelPort()
        self.port = self.held.port
        self.url = f"http://127.0.0.1:{self.port}"
        env = {**os.environ, "PYTHONUNBUFFERED": "1", "PROVIDER_TOKEN": token or ""}
        self.proc = popen_listening(
            lambda fd: [sys.executable, "-m", f"tests.providers.{module}", "--fd", str(fd)],
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
                raise RuntimeError(f"provider exited: {self.proc.stderr.read().decode()[-2000:]}")
            try:
                self.state()
                return
            except httpx.HTTPError:
                time.sleep(0.05)
        self.stop()
        raise RuntimeError("provider did not start")

    def state(self) -> dict:
        return LOCAL_HTTP.get(f"{self.url}/_test/state", timeout=60).json()

    def effects(self) -> dict[str, int]:
        """The effects the provider holds now, per key (an undone effect is not counted)."""
        return self.state()["effects"]

    def records(self) -> list[dict]:
        return self.state()["records"]

    def requests(self, method: str | None = None) -> list[dict]:
        return [r for r in self.state()["requests"] if method in (None, r["method"])]

    def drop_next(self, count: int = 1) -> None:
        LOCAL_HTTP.post(f"{self.url}/_test/drop-next", json={"count": count}, timeout=60)

    def hold_next(self, count: int = 1) -> None:
        LOCAL_HTTP.post(f"{self.url}/_test/hold-next", json={"count": count}, timeout=60)

    def release(self) -> None:
        LOCAL_HTTP.post(f"{self.url}/_test/release", json={}, timeout=60)

    def faults(self, **faults) -> None:
        LOCAL_HTTP.post(f"{self.url}/_test/faults", json=faults, timeout=60).raise_for_status()

    def stop(self) -> None:
        self.proc.kill()
        self.proc.wait(timeout=10)
        self.proc.stderr.close()
        self.held.close()


def token_from_environment() -> str | None:
    return os.environ.get("PROVIDER_TOKEN") or None
