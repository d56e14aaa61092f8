"""A handoff committed while its destination's call is under way is claimed and delivered by a second lane of the
dispatcher (`outbox/dispatch/serving.py`, HANDOFF_DISPATCH_LANES), not after that call and its outcome: waiting
to be claimed was most of a handoff's latency. The receiver runs in a process of its own and holds one key's call
until the test ends."""

import pytest
from django.db import transaction

from outbox.dispatch.wakeups import wake_dispatcher_on_commit
from outbox.models import Attempt, DestinationConfig, Handoff, HandoffState
from tests.builders import record
from tests.outbox.script_receivers import dispatcher_running, script_receiver, wait_for
from tests.processes import ROOT

pytestmark = pytest.mark.django_db(databases=["default", "delivery"], transaction=True)
S = HandoffState
HELD_KEY = "onboarding:7:1:1"
# Answers every create with its receipt, except the held key's: that call is read and never answered.
GATED = f"""
import hashlib, json, sys, threading, uuid
sys.path.insert(0, {str(ROOT)!r})
from http.server import BaseHTTPRequestHandler
from tests.processes import serve_http_on_fd

class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        if body["action_key"] == {HELD_KEY!r}:
            print("holding", flush=True)
            threading.Event().wait()
        canonical = json.dumps(body["payload"], sort_keys=True, separators=(",", ":"), ensure_ascii=False)
        answer = json.dumps({{
            "task_id": uuid.uuid4().hex, "action_key": body["action_key"], "created": True, "status": "open",
            "payload_hash": hashlib.sha256(canonical.encode()).hexdigest(),
        }}).encode()
        self.send_response(201)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(answer)))
        self.end_headers()
        self.wfile.write(answer)

    def log_message(self, *args):
        pass

server = serve_http_on_fd(int(sys.argv[1]), Handler)
print("listening", flush=True)
server.serve_forever()
"""


@pytest.fixture
def gated_receiver():
    with script_receiver(GATED) as receiver:
        yield receiver


def record_for(number: int, destination: str) -> Handoff:
    """Recorded, routed to `destination`, and its dispatchers woken by name at the commit."""
    handoff = record(number)
    with transaction.atomic():
        Handoff.objects.filter(pk=handoff.pk).update(destination=destination)
        wake_dispatcher_on_commit(destination=destination)
    return handoff


@pytest.mark.postgres  # the wake-up is PostgreSQL's NOTIFY
def test_a_handoff_committed_during_a_call_is_delivered_before_that_call_returns(
    gated_receiver, settings
):
    url, receiver = gated_receiver
    # The held call outlasts the test's deadline: on one lane the second handoff would wait for it.
    settings.HANDOFF_LEASE_SECONDS = 300
    settings.HANDOFF_DISPATCH_LANES = 2
    DestinationConfig.objects.create(
        name="gated",
        kind="http",
        config={"url": url, "connect_timeout": 5.0, "read_timeout": 240.0},
    )
    held = record_for(1, "gated")
    # The held call ends with the receiver, so the loops can end.
    with dispatcher_running(on_stop=receiver.kill) as dispatcher:
        assert receiver.stdout.readline().strip() == "holding"  # the first call is under way
        following = record_for(2, "gated")
        wait_for(
            lambda: Handoff.objects.filter(pk=following.pk, state=S.DELIVERED).exists(),
            "the handoff committed during the held call is delivered",
        )
        assert Handoff.objects.get(pk=held.pk).state == S.IN_FLIGHT
        assert Attempt.objects.get(handoff=held).finished_at is None  # its call is still under way
    assert not dispatcher.is_alive()
