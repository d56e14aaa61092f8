"""A `Retry-After` given as an HTTP date is on the receiver's clock: the wait is measured from the answer's own
`Date` header, not from this host's clock (RFC 9110 §10.2.3). A real HTTP server on localhost whose clock is an
hour behind this host's answers 503 with "retry 30 s after my now"; the destination waits 30 s, where measuring
from this host's clock would make it 0 (a retry storm) or, a receiver an hour ahead, an hour."""

import json
import threading
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from outbox.destinations.http.destination import HttpDestination
from outbox.failures import Outgoing
from outbox.models import FailureClass

SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
SENT = Outgoing(action_key="onboarding:7:1:1", payload={"client_name": "A"}, payload_hash="h" * 64)
WAIT = 30


def receiver_on_a_clock(offset: timedelta):
    class Unavailable(BaseHTTPRequestHandler):
        def date_time_string(self, timestamp=None):
            return format_datetime(datetime.now(UTC) + offset, usegmt=True)

        def do_POST(self):  # noqa: N802 - the standard library's name
            self.rfile.read(int(self.headers.get("Content-Length", 0)))
            now = datetime.now(UTC) + offset
            body = json.dumps({"error": "maintenance"}).encode()
            self.send_response(503)  # sends Date: from date_time_string, the receiver's clock
            self.send_header(
                "Retry-After", format_datetime(now + timedelta(seconds=WAIT), usegmt=True)
            )
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    return Unavailable


@pytest.mark.parametrize(
    "hours", [-1, 1], ids=["receiver an hour behind", "receiver an hour ahead"]
)
def test_a_retry_after_date_is_measured_from_the_answers_date(hours):
    server = ThreadingHTTPServer(("127.0.0.1", 0), receiver_on_a_clock(timedelta(hours=hours)))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    destination = HttpDestination(
        url=f"http://127.0.0.1:{server.server_address[1]}/delivery/api",
        signing_secret=SECRET,
        connect_timeout=5,
        read_timeout=5,
    )
    try:
        result = destination.deliver(SENT)
    finally:
        destination.close()
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)
    assert (result.delivered, result.failure_class) == (False, FailureClass.TRANSIENT)
    # HTTP dates have whole seconds: the two headers were written within one.
    assert WAIT - 1 <= result.retry_after <= WAIT + 1, result.retry_after
