"""A real HTTP receiver of alerts on 127.0.0.1, in a thread of its own: it records every request it reads
(path, headers, body) and can lose its answer to the first ones (read the request, close without a reply),
as a pager whose answer is lost in the network."""

import json
import threading
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


@dataclass(frozen=True)
class Received:
    path: str
    headers: dict[str, str]
    body: str

    @property
    def document(self) -> dict:
        return json.loads(self.body)


class AlertReceiver:
    def __init__(self, *, lose_first: int = 0, status: int = 202):
        self.received: list[Received] = []
        self.lose_first = lose_first
        self.status = status
        self._lock = threading.Lock()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802 - the name http.server calls
                length = int(self.headers.get("Content-Length", "0"))
                body = self.rfile.read(length).decode()
                headers = {k.lower(): v for k, v in self.headers.items()}
                with receiver._lock:
                    receiver.received.append(Received(self.path, headers, body))
                    lose = receiver.lose_first > 0
                    receiver.lose_first -= 1 if lose else 0
                if lose:
                    self.close_connection = True
                    self.connection.shutdown(2)
                    return
                self.send_response(receiver.status)
                self.send_header("Content-Length", "2")
                self.end_headers()
                self.wfile.write(b"{}")

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/alerts"

    def __enter__(self) -> "AlertReceiver":
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(timeout=5)

    def documents(self) -> list[dict]:
        with self._lock:
            return [r.document for r in self.received]
