"""An OAuth2 token server (RFC 6749 section 4.4, client credentials) and an API that takes only its current
tokens, or an API key, each in a process of its own: `python -m` this module `token|api SIGNING_KEY ...`
binds port 0 and prints `listening on http://127.0.0.1:<port>`.

Token server: POST /token (form: grant_type=client_credentials, scope, audience; the client by
client_secret_post or client_secret_basic) -> 200 {"access_token", "token_type": "Bearer", "expires_in"}.
A wrong client -> 400 {"error": "invalid_client"} (401 when it came as Basic, section 5.2). A token is
`<serial>.<expires at, epoch ms>.<HMAC>`: the API checks it with the shared key alone, as a resource server
checks a signed JWT. Test-only: GET /_test/state (tokens issued, the requests' client, method, scope and
audience), POST /_test/faults {"revoked": bool, "expires_in": seconds, "rate_limited": seconds, "down": status}:
`rate_limited` answers every token request 429 with that Retry-After, `down` with that status and no Retry-After.

API: POST /v1/records (any query) with Idempotency-Key and a JSON body -> 201 {"record": {"id", "key",
"body"}}, the same answer again for a repeat of the key (header Idempotent-Replayed: true). It takes
`Authorization: Bearer <a token of the server, not expired, serial not below the floor>` or, when started
with an API key, `X-Api-Key: <key>`; anything else -> 401. Test-only: GET /_test/state (records, every
request's key and whether it was let in), POST /_test/faults {"token_floor": n}: tokens of a serial below n
are refused (revoked); {"leeway": seconds}: a token is still taken that long after it expired (the clock leeway
of a resource server), so that a test can tell "renewed by itself" from "renewed once refused" on a loaded
machine, where a call can reach the API a second after the client last judged its token fresh.
"""

import base64
import hashlib
import hmac
import json
import os
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, unquote_plus

from tests.processes import LOCAL_HTTP, ROOT

CLIENT_ID = "handoff-dispatcher"
CLIENT_SECRET = "oauth2-client-secret-for-tests"
START_SECONDS = 30.0


def _sign(key: bytes, text: str) -> str:
    return hmac.new(key, text.encode(), hashlib.sha256).hexdigest()


def token_valid(key: bytes, token: str, floor: int, leeway: float = 0.0) -> bool:
    try:
        serial, expires_ms, mac = token.split(".")
        fresh = int(expires_ms) + leeway * 1000 > time.time() * 1000 and int(serial) >= floor
    except ValueError:
        return False
    return fresh and hmac.compare_digest(mac, _sign(key, f"{serial}.{expires_ms}"))


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    # Headers and body go out as two writes: without TCP_NODELAY the body waits for the client's delayed
    # ACK of the headers (40 ms a call), which would hide what the bench measures.
    disable_nagle_algorithm = True
    lock = threading.Lock()
    state: dict

    def log_message(self, format, *args):  # noqa: A002 - the base class's name
        pass

    def answer(self, status: int, body: dict, headers: dict | None = None) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)

    def body(self) -> bytes:
        return self.rfile.read(int(self.headers.get("Content-Length") or 0))

    def do_GET(self):  # noqa: N802 - http.server's name
        if self.path != "/_test/state":
            return self.answer(404, {"error": "no_route"})
        with self.lock:
            return self.answer(200, self.state)

    def do_POST(self):  # noqa: N802 - http.server's name
        raw = self.body()
        with self.lock:
            if self.path == "/_test/faults":
                self.state["faults"].update(json.loads(raw))
                return self.answer(200, {"ok": True})
            return self.serve(raw)


class TokenServer(Handler):
    def client(self, form: dict) -> tuple[str, str, str]:
        """(method, client id, secret) as the request authenticated the client."""
        basic = self.headers.get("Authorization", "")
        if basic.startswith("Basic "):
            pair = base64.b64decode(basic.removeprefix("Basic ")).decode()
            client_id, _, secret = pair.partition(":")
            return "client_secret_basic", unquote_plus(client_id), unquote_plus(secret)
        return "client_secret_post", form.get("client_id", ""), form.get("client_secret", "")

    def serve(self, raw: bytes):
        if self.path != "/token":
            return self.answer(404, {"error": "no_route"})
        form = {k: v[0] for k, v in parse_qs(raw.decode()).items()}
        method, client_id, secret = self.client(form)
        faults = self.state["faults"]
        self.state["requests"].append(
            {
                "method": method,
                "client_id": client_id,
                "scope": form.get("scope"),
                "audience": form.get("audience"),
            }
        )
        if faults.get("rate_limited") is not None:
            wait = {"Retry-After": str(faults["rate_limited"])}
            return self.answer(429, {"error": "slow_down"}, wait)
        if faults.get("down") is not None:
            return self.answer(faults["down"], {"error": "temporarily_unavailable"})
        if form.get("grant_type") != "client_credentials":
            return self.answer(400, {"error": "unsupported_grant_type"})
        if (client_id, secret) != (CLIENT_ID, CLIENT_SECRET) or faults.get("revoked"):
            status = 401 if method == "client_secret_basic" else 400
            return self.answer(status, {"error": "invalid_client", "error_description": "revoked"})
        self.state["issued"] += 1
        lifetime = faults.get("expires_in", 3600)
        expires_ms = int((time.time() + lifetime) * 1000)
        text = f"{self.state['issued']}.{expires_ms}"
        token = f"{text}.{_sign(self.key, text)}"
        answer = {"access_token": token, "token_type": "Bearer", "expires_in": lifetime}
        return self.answer(200, answer, {"Cache-Control": "no-store"})


class Api(Handler):
    api_key: str

    def let_in(self) -> bool:
        if self.api_key and self.headers.get("X-Api-Key") == self.api_key:
            return True
        token = self.headers.get("Authorization", "").removeprefix("Bearer ")
        faults = self.state["faults"]
        return token_valid(self.key, token, faults.get("token_floor", 0), faults.get("leeway", 0.0))

    def serve(self, raw: bytes):
        key = self.headers.get("Idempotency-Key")
        allowed = self.let_in()
        self.state["requests"].append({"key": key, "allowed": allowed})
        if not allowed:
            return self.answer(401, {"error": {"code": "unauthorized"}})
        if self.path.split("?")[0] != "/v1/records" or not key:
            return self.answer(400, {"error": {"code": "bad_request"}})
        records = self.state["records"]
        if key in records:
            return self.answer(201, {"record": records[key]}, {"Idempotent-Replayed": "true"})
        records[key] = {"id": f"rec_{len(records) + 1}", "key": key, "body": json.loads(raw)}
        return self.answer(201, {"record": records[key]})


@dataclass
class ServerProcess:
    url: str
    process: subprocess.Popen

    def state(self) -> dict:
        return LOCAL_HTTP.get(f"{self.url}/_test/state", timeout=START_SECONDS).json()

    def faults(self, **faults) -> None:
        LOCAL_HTTP.post(f"{self.url}/_test/faults", json=faults, timeout=START_SECONDS)

    def stop(self) -> None:
        self.process.kill()
        self.process.wait(timeout=10)
        self.process.stdout.close()


def start(role: str, key: str, api_key: str = "") -> ServerProcess:
    """The token server (`role` "token") or the API ("api") in a process of its own, once it listens."""
    process = subprocess.Popen(
        [sys.executable, "-m", "tests.outbox.destinations.oauth2_servers", role, key, api_key],
        cwd=ROOT,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
        stdout=subprocess.PIPE,
        text=True,
    )
    # The child prints its address once it is bound; a loaded machine may take a while to start it.
    line = process.stdout.readline().strip()
    if not line.startswith("listening on "):
        process.kill()
        raise RuntimeError(f"the {role} server did not start: {line!r}")
    return ServerProcess(line.removeprefix("listening on "), process)


def main() -> None:
    role, key, api_key = sys.argv[1], sys.argv[2].encode(), sys.argv[3]
    handler = TokenServer if role == "token" else Api
    handler.key = key
    handler.api_key = api_key
    handler.state = {"issued": 0, "requests": [], "records": {}, "faults": {}}
    # A listen backlog for a burst of workers connecting at once (the default 5 drops SYNs beyond it, and
    # a dropped SYN is retried after 1 s: a connect timeout).
    ThreadingHTTPServer.request_queue_size = 64
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    print(f"listening on http://127.0.0.1:{server.server_address[1]}", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
