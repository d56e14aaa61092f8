"""A receiver whose answers hold more than the outbox row can: a task id or a work status longer than its
column. Stored cut short, the task id would not be the receiver's; so a receipt like that does not prove the
outcome (malformed, settled by lookup), and a lookup or key listing like that is a failed lookup, never a
500 or a silently shortened id. A real HTTP server on localhost answers with the canned documents."""

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from outbox.destinations.base import LookupFailed
from outbox.destinations.http.destination import HttpDestination
from outbox.failures import Outgoing
from outbox.models import FailureClass

SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
SENT = Outgoing(action_key="onboarding:7:1:1", payload={"client_name": "A"}, payload_hash="h" * 64)
TASK = {
    "task_id": "t" * 121,
    "action_key": SENT.action_key,
    "payload_hash": SENT.payload_hash,
    "status": "open",
}


class CannedAnswers(BaseHTTPRequestHandler):
    def _answer(self, status: int, document: dict) -> None:
        body = json.dumps(document).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_POST(self):  # noqa: N802 - the standard library's name
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        self._answer(201, {**TASK, "created": True})

    def do_GET(self):  # noqa: N802
        if self.path.startswith("/delivery/api/tasks/"):
            self._answer(200, {**TASK, "task_id": "t-1", "status": "s" * 17})
        else:
            self._answer(200, {"items": [TASK]})

    def log_message(self, *args):
        pass


@pytest.fixture
def destination():
    server = ThreadingHTTPServer(("127.0.0.1", 0), CannedAnswers)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    destination = HttpDestination(
        url=f"http://127.0.0.1:{server.server_address[1]}/delivery/api",
        signing_secret=SECRET,
        connect_timeout=5,
        read_timeout=5,
    )
    yield destination
    destination.close()
    server.shutdown()
    server.server_close()
    thread.join(timeout=5)


def test_a_receipt_with_a_task_id_longer_than_the_row_holds_is_malformed(destination):
    result = destination.deliver(SENT)
    assert (result.delivered, result.failure_class, result.reason_code) == (
        False,
        FailureClass.MALFORMED,
        "malformed_receipt",
    )
    assert "longer than 120" in result.detail


def test_a_lookup_with_a_status_longer_than_the_row_holds_is_a_failed_lookup(destination):
    with pytest.raises(LookupFailed, match="status"):
        destination.lookup(SENT.action_key)


def test_a_key_listing_with_a_task_id_longer_than_the_row_holds_is_a_failed_lookup(destination):
    with pytest.raises(LookupFailed, match="task_id"):
        destination.list_keys()
