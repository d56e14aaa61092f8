"""The receiver's status events: written in the transaction of the change they tell of, sent signed to the
source over real HTTP after the commit, resent under the same webhook-id (a repeat there), and kept unsent
with the reason when the source cannot be reached."""

import io
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from django.core.management import call_command
from django.db import transaction

from delivery.models import ReceiverTask, TaskEvent, TaskEventKind
from delivery.services import task_delete, task_status_set
from delivery.status_events import sender_idle, status_events_send_due
from outbox.models import Handoff, StatusEvent
from tests.builders import deliver, record

EVENTS_PATH = "/reconciliation/api/destinations/receiver/status-events"


def events() -> list[TaskEvent]:
    return list(TaskEvent.objects.using("delivery").order_by("id"))


@pytest.mark.django_db(databases=["default", "delivery"])
def test_each_change_writes_one_event_in_its_transaction_numbered_in_order(settings):
    settings.RECEIVER_STATUS_EVENTS_URL = ""
    key = deliver(record(42)).action_key
    task_status_set(action_key=key, status="in_progress")
    task_status_set(action_key=key, status="in_progress")  # a repeated report changes nothing
    task_status_set(action_key=key, status="done")
    with pytest.raises(RuntimeError), transaction.atomic(using="delivery"):
        task_delete(action_key=key)
        raise RuntimeError("the deletion rolls back")
    assert ReceiverTask.objects.using("delivery").filter(action_key=key).exists()
    task_delete(action_key=key)
    written = events()
    assert [(e.kind, e.status) for e in written] == [
        (TaskEventKind.STATUS_CHANGED, "in_progress"),
        (TaskEventKind.STATUS_CHANGED, "done"),
        (TaskEventKind.DELETED, ""),
    ]
    assert written[0].pk < written[1].pk < written[2].pk
    assert all(e.sent_at is None for e in written)  # no source to send to


@pytest.mark.django_db(databases=["default", "delivery"], transaction=True)
def test_a_change_reaches_the_source_signed_after_the_commit_and_a_resend_is_a_repeat(
    live_server, settings
):
    settings.RECEIVER_STATUS_EVENTS_URL = f"{live_server.url}{EVENTS_PATH}"
    handoff = deliver(record(42))
    task_status_set(action_key=handoff.action_key, status="in_progress")
    task_status_set(action_key=handoff.action_key, status="done")
    # The sender's thread ends once nothing is due (2 s after its last send): a loaded machine's deadline.
    assert sender_idle(timeout=120)
    assert Handoff.objects.get(pk=handoff.pk).work_status == "done"
    assert all(e.sent_at is not None and not e.last_error for e in events())
    assert StatusEvent.objects.count() == 2
    # Sent again (a lost answer, say): the same webhook-ids, answered as repeats, nothing recorded twice.
    TaskEvent.objects.using("delivery").update(sent_at=None)
    assert status_events_send_due().sent == 2
    assert StatusEvent.objects.count() == 2


class _Refusing(BaseHTTPRequestHandler):
    """A source that refuses every signature, as one with another secret does."""

    def do_POST(self):
        self.rfile.read(int(self.headers["Content-Length"]))
        self.send_response(401)
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        self.wfile.write(b'{"error": "signature_rejected"}')

    def log_message(self, *args):
        pass


@pytest.fixture
def refusing_source():
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Refusing)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}{EVENTS_PATH}"
    server.shutdown()
    server.server_close()


@pytest.mark.django_db(databases=["default", "delivery"])
def test_a_refused_signature_leaves_the_event_to_be_sent_again(refusing_source, settings):
    key = deliver(record(42)).action_key
    task_status_set(action_key=key, status="done")
    settings.RECEIVER_STATUS_EVENTS_URL = refusing_source
    assert status_events_send_due().failed == 1
    assert status_events_send_due().failed == 1  # still due: the secret is fixed, then it goes
    [event] = events()
    assert event.sent_at is None and event.attempts == 2 and event.last_error.startswith("401")


@pytest.mark.django_db(databases=["default", "delivery"], transaction=True)
def test_an_event_the_source_refuses_for_good_is_kept_with_the_answer(live_server, settings):
    key = deliver(record(42)).action_key
    task_status_set(action_key=key, status="done")
    # No such address at the source (a mistyped URL): it answers 404 and will never take these events. (An
    # unknown destination's name answers 401 since each destination has its own secret: a secret to fix,
    # after which the event is worth sending, so that one is retried.)
    settings.RECEIVER_STATUS_EVENTS_URL = (
        f"{live_server.url}/reconciliation/api/destinations/nowhere/status-event"
    )
    assert status_events_send_due().failed == 1
    [event] = events()
    assert event.sent_at is not None and event.last_error.startswith("refused: 404")
    assert status_events_send_due() == (0, 0)


@pytest.mark.django_db(databases=["default", "delivery"])
def test_an_unreachable_source_leaves_the_event_unsent_with_the_reason(settings, refused_port):
    key = deliver(record(42)).action_key
    task_status_set(action_key=key, status="done")
    settings.RECEIVER_STATUS_EVENTS_URL = f"http://127.0.0.1:{refused_port}{EVENTS_PATH}"
    result = status_events_send_due()
    [event] = events()
    assert (result.sent, result.failed) == (0, 1)
    assert event.sent_at is None and event.attempts == 1 and "Connect" in event.last_error


@pytest.mark.django_db(databases=["default", "delivery"], transaction=True)
def test_the_demo_commands_return_once_the_source_has_their_event(live_server, settings):
    settings.RECEIVER_STATUS_EVENTS_URL = f"{live_server.url}{EVENTS_PATH}"
    handoff = deliver(record(42))
    call_command("task_status", handoff.action_key, "done", stdout=io.StringIO())
    assert Handoff.objects.get(pk=handoff.pk).work_status == "done"
    call_command("task_delete", handoff.action_key, stdout=io.StringIO())
    assert Handoff.objects.get(pk=handoff.pk).task_seen is False
    assert all(e.sent_at is not None for e in events())
