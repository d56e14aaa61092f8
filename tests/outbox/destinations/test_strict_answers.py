"""A destination's or a token endpoint's answer that is JSON to Python's `json` but not strict JSON: a key
given twice (parsers disagree on which value counts), NaN or Infinity (PostgreSQL's jsonb stores neither, and a
lifetime of NaN or Infinity never ends). Each is read as no answer, with the reason in the words a person sees:
a malformed receipt, a failed lookup, a refused token; never a receipt read as the key's last value, nor a
dispatcher that crashes writing it. A real HTTP server on localhost answers with canned bytes."""

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from outbox.destinations.base import LookupFailed
from outbox.destinations.http.destination import HttpDestination
from outbox.destinations.registry import destination_from_config
from outbox.failures import Outgoing
from outbox.models import FailureClass

SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
SENT = Outgoing(action_key="onboarding:7:1:1", payload={"client_name": "A"}, payload_hash="h" * 64)
KEY, HASH = SENT.action_key, SENT.payload_hash
# The receiver's own receipt, with the task id twice: Python's json would take the second.
TWICE = (
    f'{{"task_id": "t-other", "task_id": "t-1", "action_key": "{KEY}", '
    f'"payload_hash": "{HASH}", "created": true, "status": "open"}}'
)
ENTRY_WITH_NAN = f'{{"entry": {{"ref": "r-1", "request_key": "{KEY}", "amount": NaN}}}}'
ENTRY_TWICE = f'{{"entry": {{"ref": "r-2", "ref": "r-1", "request_key": "{KEY}"}}}}'
TOKEN_FOR_EVER = '{"access_token": "tok-1", "token_type": "Bearer", "expires_in": Infinity}'
ENTRY = f'{{"entry": {{"ref": "r-1", "request_key": "{KEY}"}}}}'


class Canned(BaseHTTPRequestHandler):
    """Answers each path with the status and bytes the test put in `answers`."""

    answers: dict[str, tuple[int, str]] = {}

    def _answer(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        status, text = self.answers[self.path.split("?")[0]]
        body = text.encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_GET = do_POST = _answer  # noqa: N815 - the standard library's names

    def log_message(self, *args):
        pass


@pytest.fixture
def server():
    Canned.answers = {}
    server = ThreadingHTTPServer(("127.0.0.1", 0), Canned)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}", Canned.answers
    server.shutdown()
    server.server_close()
    thread.join(timeout=5)


@pytest.fixture
def http_kind(server):
    url, answers = server
    destination = HttpDestination(
        url=f"{url}/api", signing_secret=SECRET, connect_timeout=5, read_timeout=5
    )
    yield destination, answers
    destination.close()


@pytest.fixture
def ledger(server, monkeypatch):
    url, answers = server
    monkeypatch.setenv("HANDOFF_DEST_LEDGER_OAUTH_SECRET", "s3cret")
    monkeypatch.setenv("HANDOFF_DEST_LEDGER_TOKEN", "t0ken")
    made = []

    def build(**auth):
        made.append(
            destination_from_config(
                {
                    "kind": "idempotency_key_http",
                    "name": "ledger",
                    "url": url,
                    "create": {"method": "POST", "path": "/entries"},
                    "receipt": {"id": "entry.ref", "key": "entry.request_key"},
                    "lookup": {"method": "GET", "path": "/entries/{key}", "id": "entry.ref"},
                    "connect_timeout": 5,
                    "read_timeout": 5,
                    "auth": auth or {"scheme": "bearer", "token_env": "HANDOFF_DEST_LEDGER_TOKEN"},
                }
            )
        )
        return made[-1]

    yield build, url, answers
    for destination in made:
        destination.close()


def test_a_receipt_with_a_key_twice_is_malformed_and_says_so(http_kind):
    destination, answers = http_kind
    answers["/api/tasks"] = (201, TWICE)
    result = destination.deliver(SENT)
    assert (result.delivered, result.failure_class, result.reason_code) == (
        False,
        FailureClass.MALFORMED,
        "malformed_receipt",
    )
    assert "not strict JSON" in result.detail and "'task_id' appears twice" in result.detail


def test_a_lookup_answer_with_a_key_twice_is_a_failed_lookup_not_a_task(http_kind):
    destination, answers = http_kind
    answers[f"/api/tasks/{KEY}"] = (200, TWICE)
    with pytest.raises(LookupFailed, match="appears twice"):
        destination.lookup(KEY)


def test_a_batch_answer_with_nan_is_malformed_for_each_item(http_kind):
    destination, answers = http_kind
    destination.supports_batch = True
    other = Outgoing(action_key="onboarding:7:2:1", payload={}, payload_hash="g" * 64)
    items = ", ".join(
        f'{{"http_status": 201, "task_id": "t-{n}", "action_key": "{o.action_key}", '
        f'"payload_hash": "{o.payload_hash}", "created": true, "score": NaN}}'
        for n, o in enumerate([SENT, other])
    )
    answers["/api/tasks/batch"] = (200, f'{{"results": [{items}]}}')
    results = destination.deliver_batch([SENT, other])
    assert [(r.failure_class, r.reason_code) for r in results] == [
        (FailureClass.MALFORMED, "malformed_receipt")
    ] * 2
    assert "NaN is not JSON" in results[0].detail


def test_an_idempotency_key_receipt_with_nan_is_malformed_not_stored(ledger):
    build, _url, answers = ledger
    answers["/entries"] = (201, ENTRY_WITH_NAN)
    result = build().deliver(SENT)
    assert (result.delivered, result.failure_class, result.reason_code) == (
        False,
        FailureClass.MALFORMED,
        "malformed_receipt",
    )
    assert "NaN is not JSON" in result.detail


def test_an_idempotency_key_lookup_with_a_key_twice_proves_nothing(ledger):
    build, _url, answers = ledger
    answers[f"/entries/{KEY.replace(':', '%3A')}"] = (200, ENTRY_TWICE)
    with pytest.raises(LookupFailed, match="'ref' appears twice"):
        build().lookup(KEY)


def test_a_token_that_never_expires_by_infinity_is_refused_and_nothing_is_sent(ledger):
    build, url, answers = ledger
    answers["/token"] = (200, TOKEN_FOR_EVER)
    answers["/entries"] = (201, ENTRY)
    destination = build(
        scheme="oauth2_client_credentials",
        token_url=f"{url}/token",
        client_id="handoff",
        client_secret_env="HANDOFF_DEST_LEDGER_OAUTH_SECRET",
    )
    result = destination.deliver(SENT)
    assert (result.delivered, result.failure_class) == (False, FailureClass.CREDENTIAL)
    assert "not strict JSON" in result.detail and "Infinity is not JSON" in result.detail
