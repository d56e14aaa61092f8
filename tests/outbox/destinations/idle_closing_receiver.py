"""A receiver in a process of its own whose keep-alive connections are closed as they go idle, at the worst
moment: each connection carries one answer (HTTP/1.1, kept alive), and the next request on it is read and the
connection closed without a byte of an answer, as a server does when its idle timeout fires just as the
client's next request arrives (gunicorn under load dropping a pooled connection). Every request is logged,
one line each (`answered GET /tasks/k`, `dropped POST /tasks`), to the file named by the second argument.

Run as `python -m tests.outbox.destinations.idle_closing_receiver <listening fd> <log path>`."""

import json
import sys
import threading
from http.server import BaseHTTPRequestHandler
from urllib.parse import unquote

from tests.processes import serve_http_on_fd


def task(action_key: str) -> dict:
    return {
        "action_key": action_key,
        "task_id": f"task-{action_key}",
        "payload_hash": "0" * 64,
        "status": "done",
    }


class IdleClosing(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    log_path = ""
    log_lock = threading.Lock()

    def setup(self):
        super().setup()
        self.answers_on_connection = 0

    def log_message(self, *args):
        pass

    def _log(self, line: str) -> None:
        with self.log_lock, open(self.log_path, "a") as log:
            log.write(line + "\n")

    def _body(self) -> bytes:
        return self.rfile.read(int(self.headers.get("Content-Length") or 0))

    def _answer(self, document: dict) -> None:
        body = json.dumps(document).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
        self.answers_on_connection += 1

    def _dropped(self) -> bool:
        """The connection's one answer is spent: close it, answering nothing."""
        if self.answers_on_connection:
            self._log(f"dropped {self.command} {self.path}")
            self.close_connection = True
            return True
        self._log(f"answered {self.command} {self.path}")
        return False

    def do_GET(self):
        if self._dropped():
            return
        self._answer(task(unquote(self.path.rsplit("/", 1)[1])))

    def do_POST(self):
        body = self._body()
        if self._dropped():
            return
        if self.path.endswith("/tasks/lookup"):
            keys = json.loads(body)["action_keys"]
            self._answer({"items": [task(key) for key in keys], "missing": []})
        else:
            self._answer({"error": "this receiver only answers lookups"})


def main() -> None:
    IdleClosing.log_path = sys.argv[2]
    serve_http_on_fd(int(sys.argv[1]), IdleClosing).serve_forever()


if __name__ == "__main__":
    main()
