"""The idempotency_key_http kind against a ledger API written for the test (`idempotency_key_server`, a
process of its own), reached by configuration alone: the acceptance scenario of seed 000 for this kind, driven
through real handoffs, the dispatcher and settlement. Runs on both backends."""

import pytest

from outbox.clock import db_now
from outbox.destinations import LookupFailed
from outbox.destinations.registry import destination_from_config
from outbox.dispatch.dispatcher import dispatch_batch, settle_uncertain, sweep
from outbox.failures import Outgoing
from outbox.models import Attempt, FailureClass, Handoff, HandoffState
from outbox.payloads import payload_hash
from reconciliation.models import RunStatus
from reconciliation.services.runs import reconciliation_run
from tests.factories import ONBOARDING_PAYLOAD, HandoffFactory
from tests.outbox.destinations.idempotency_key_server import LedgerProcess

pytestmark = pytest.mark.django_db(databases=["default", "delivery"])
S = HandoffState
KEY = "onboarding:7:42:1"
NAME = "ledger"
TOKEN = "ledger-token-1"


def ledger_config(url: str, **overrides) -> dict:
    """The whole configuration of the ledger, as a destination row would hold it: nothing else is needed."""
    config = {
        "kind": "idempotency_key_http",
        "name": NAME,
        "url": url,
        "create": {"method": "POST", "path": "/v2/ledger/entries"},
        "idempotency_header": "X-Request-Key",
        "auth": {"scheme": "bearer", "token_env": "HANDOFF_DEST_LEDGER_CLIENT_TOKEN"},
        "receipt": {"id": "entry.ref", "key": "entry.request_key", "payload": "entry.body"},
        "lookup": {
            "method": "GET",
            "path": "/v2/ledger/entries?request_key={key}",
            "id": "entries.0.ref",
            "key": "entries.0.request_key",
            "payload": "entries.0.body",
        },
        "connect_timeout": 1,
        "read_timeout": 5,
        "retry": {"base_delay": 0, "max_delay": 0},
    }
    config.update(overrides)
    return {k: v for k, v in config.items() if v is not None}


def ledger_destination(ledger: LedgerProcess, **overrides):
    return destination_from_config(ledger_config(ledger.url, **overrides))


@pytest.fixture
def ledger(monkeypatch):
    monkeypatch.setenv("HANDOFF_DEST_LEDGER_CLIENT_TOKEN", TOKEN)
    server = LedgerProcess(token=TOKEN)
    try:
        server.wait_until_up()
        yield server
    finally:
        server.stop()


@pytest.fixture
def destination(ledger):
    destination = ledger_destination(ledger)
    yield destination
    destination.close()


@pytest.fixture
def outgoing():
    def make(key: str, **changes) -> Outgoing:
        payload = {**ONBOARDING_PAYLOAD, **changes}
        return Outgoing(action_key=key, payload=payload, payload_hash=payload_hash(payload))

    return make


def handoff_42(**fields) -> Handoff:
    return HandoffFactory(number=42, destination=NAME, **fields)


def stored(handoff: Handoff) -> Handoff:
    return Handoff.objects.get(pk=handoff.pk)


def attempt_outcomes(handoff: Handoff) -> list[str]:
    return list(
        Attempt.objects.filter(handoff=handoff).order_by("number").values_list("outcome", flat=True)
    )


def test_lost_answer_after_commit_is_settled_by_lookup_before_any_new_attempt(ledger, destination):
    handoff = handoff_42()
    ledger.faults(drop_answer_for=[KEY])

    dispatch_batch(destination=destination)
    assert stored(handoff).state == S.UNCERTAIN
    assert len(ledger.entries()) == 1, "the ledger committed the entry before the answer was lost"

    assert settle_uncertain(destination=destination) == {S.DELIVERED: 1}
    after = stored(handoff)
    [entry] = ledger.entries()
    assert after.state == S.DELIVERED
    assert after.destination_id == entry["ref"]
    assert after.receipt["found_by"] == "lookup"
    assert [c["key"] for c in ledger.creates()] == [KEY], "settled by asking, not by sending again"
    assert attempt_outcomes(handoff) == ["uncertain"]


def test_a_sweep_settles_a_lost_answer_in_its_own_pass(ledger, destination):
    handoff = handoff_42()
    ledger.faults(drop_answer_for=[KEY])
    sweep(destination=destination)
    assert stored(handoff).state == S.DELIVERED
    assert len(ledger.entries()) == 1 and len(ledger.creates()) == 1


def test_the_same_key_with_a_changed_payload_is_a_conflict_and_changes_nothing(ledger, destination):
    handoff = handoff_42()
    dispatch_batch(destination=destination)
    [original] = ledger.entries()
    assert stored(handoff).destination_id == original["ref"]
    # The same key reaches the destination again with another payload.
    changed = {**handoff.payload, "plan": "enterprise"}
    Handoff.objects.filter(pk=handoff.pk).update(
        state=S.PENDING,
        payload=changed,
        payload_hash=payload_hash(changed),
        next_attempt_at=db_now(),
    )

    dispatch_batch(destination=destination)
    after = stored(handoff)
    assert after.state == S.NEEDS_ATTENTION
    assert after.failure_class == FailureClass.CONFLICT
    assert after.reason_code == "key_reused_with_other_payload"
    assert ledger.entries() == [original], "the entry is neither replaced nor doubled"


def test_a_later_distinct_request_gets_a_distinct_entry(ledger, destination):
    first = handoff_42()
    later = HandoffFactory(number=43, destination=NAME)
    dispatch_batch(destination=destination)
    refs = {entry["request_key"]: entry["ref"] for entry in ledger.entries()}
    assert set(refs) == {first.action_key, later.action_key}
    assert stored(first).destination_id == refs[first.action_key]
    assert stored(later).destination_id == refs[later.action_key]
    assert refs[first.action_key] != refs[later.action_key]


def test_a_request_still_in_progress_is_retried_later_with_the_same_key(ledger, destination):
    handoff = handoff_42()
    ledger.faults(in_progress={KEY: 1})
    dispatch_batch(destination=destination)
    waiting = stored(handoff)
    assert waiting.state == S.PENDING
    assert (waiting.failure_class, waiting.reason_code) == ("transient", "request_in_progress")

    dispatch_batch(destination=destination)
    assert stored(handoff).state == S.DELIVERED
    assert [c["key"] for c in ledger.creates()] == [KEY, KEY]
    assert len(ledger.entries()) == 1
    assert attempt_outcomes(handoff) == ["failed", "created"]


def test_a_refused_token_is_a_credential_failure_that_pauses_the_destination(
    ledger, destination, monkeypatch
):
    handoff = handoff_42()
    monkeypatch.setenv("HANDOFF_DEST_LEDGER_CLIENT_TOKEN", "not-the-token")
    stats = dispatch_batch(destination=destination)
    waiting = stored(handoff)
    assert waiting.state == S.PENDING
    assert (waiting.failure_class, waiting.reason_code) == ("credential", "credential_rejected")
    assert ledger.entries() == []
    assert dispatch_batch(destination=destination).paused and not stats.paused


def test_a_missing_secret_is_refused_naming_the_variable_and_sends_nothing(
    ledger, destination, monkeypatch
):
    handoff = handoff_42()
    monkeypatch.delenv("HANDOFF_DEST_LEDGER_CLIENT_TOKEN")
    dispatch_batch(destination=destination)
    waiting = stored(handoff)
    assert (waiting.failure_class, waiting.reason_code) == ("credential", "credential_missing")
    assert "HANDOFF_DEST_LEDGER_CLIENT_TOKEN" in waiting.last_error
    assert destination.credentials_missing() == [
        "bearer token: environment variable HANDOFF_DEST_LEDGER_CLIENT_TOKEN is not set or empty"
    ]
    assert ledger.state()["requests"] == [], "no request goes out without its credentials"


def test_a_token_rotated_in_the_environment_is_used_by_the_same_destination(
    ledger, destination, monkeypatch, outgoing
):
    assert destination.deliver(outgoing("a:1")).delivered
    ledger.faults(token="rotated")
    assert destination.deliver(outgoing("a:2")).failure_class == FailureClass.CREDENTIAL
    monkeypatch.setenv("HANDOFF_DEST_LEDGER_CLIENT_TOKEN", "rotated")
    assert destination.deliver(outgoing("a:3")).delivered
    assert [r["authorization"] for r in ledger.state()["requests"]] == [
        f"Bearer {TOKEN}",
        f"Bearer {TOKEN}",
        "Bearer rotated",
    ]


def test_a_token_rotated_in_its_secrets_file_is_used_by_the_same_destination(
    ledger, tmp_path, outgoing, settings
):
    settings.HANDOFF_SECRETS_DIR = tmp_path
    token_file = tmp_path / "ledger-token"
    token_file.write_text(f"{TOKEN}\n")
    destination = ledger_destination(
        ledger, auth={"scheme": "bearer", "token_file": str(token_file)}
    )
    try:
        assert destination.deliver(outgoing("a:1")).delivered
        ledger.faults(token="rotated")
        token_file.write_text("rotated\n")
        assert destination.deliver(outgoing("a:2")).delivered
        token_file.unlink()
        missing = destination.deliver(outgoing("a:3"))
        assert missing.reason_code == "credential_missing" and str(token_file) in missing.detail
    finally:
        destination.close()
    assert len(ledger.creates()) == 2


STRIPE_LIKE = {
    "statuses": {"409": ["conflict", "key_reused_with_other_payload"]},
    "error_code": "error.code",
    "error_codes": {"idempotency_key_in_use": ["transient", "request_in_progress"]},
}


def test_a_stripe_like_override_tells_a_reused_key_from_one_in_progress_by_its_error_code(
    ledger, outgoing
):
    ledger.faults(stripe=True, in_progress={"b:1": 1})
    destination = ledger_destination(ledger, **STRIPE_LIKE)
    try:
        assert destination.deliver(outgoing("a:1", plan="basic")).delivered
        reused = destination.deliver(outgoing("a:1", plan="enterprise"))
        in_progress = destination.deliver(outgoing("b:1"))
    finally:
        destination.close()
    assert (reused.failure_class, reused.reason_code, reused.status_code) == (
        "conflict",
        "key_reused_with_other_payload",
        409,
    )
    assert (in_progress.failure_class, in_progress.reason_code, in_progress.status_code) == (
        "transient",
        "request_in_progress",
        409,
    )
    assert [e["body"]["plan"] for e in ledger.entries()] == ["basic"]


def test_without_the_override_a_stripe_like_reuse_would_be_retried(ledger, destination, outgoing):
    """Why the override exists: by the draft's default a 409 is a request in progress."""
    ledger.faults(stripe=True)
    assert destination.deliver(outgoing("a:1", plan="basic")).delivered
    reused = destination.deliver(outgoing("a:1", plan="enterprise"))
    assert (reused.failure_class, reused.reason_code) == ("transient", "request_in_progress")


def test_a_path_lookup_finds_the_entry_and_a_404_means_none(ledger, outgoing):
    destination = ledger_destination(
        ledger,
        lookup={
            "path": "/v2/ledger/entries/by-key/{key}",
            "id": "entry.ref",
            "key": "entry.request_key",
            "payload": "entry.body",
            "not_found": [404],
        },
    )
    try:
        sent = outgoing("onboarding:7:42:1")
        assert destination.lookup(sent.action_key) is None
        delivered = destination.deliver(sent)
        found = destination.lookup(sent.action_key)
    finally:
        destination.close()
    assert (found.task_id, found.payload_hash) == (delivered.task_id, sent.payload_hash)


def test_a_lookup_answering_another_keys_entry_is_not_taken_for_ours(ledger, outgoing):
    """An API that ignores the lookup's filter (here: a template whose filter names a fixed key) answers with
    another key's entry; the echoed key shows it, and nothing is concluded."""
    lookup = {
        "path": f"/v2/ledger/entries?request_key={KEY}&also={{key}}",
        "id": "entries.0.ref",
        "key": "entries.0.request_key",
        "payload": "entries.0.body",
    }
    destination = ledger_destination(ledger, lookup=lookup)
    try:
        assert destination.deliver(outgoing(KEY)).delivered
        with pytest.raises(LookupFailed, match="another key"):
            destination.lookup("onboarding:7:43:1")
    finally:
        destination.close()


def test_a_query_lookup_answering_an_empty_list_means_none(destination):
    assert destination.lookup("onboarding:7:404:1") is None


def test_a_receipt_without_its_id_is_malformed_and_settled_by_lookup(ledger):
    handoff = handoff_42()
    destination = ledger_destination(ledger, receipt={"id": "entry.reference"})
    try:
        dispatch_batch(destination=destination)
        assert stored(handoff).reason_code == "malformed_receipt"
        assert stored(handoff).state == S.UNCERTAIN
        settle_uncertain(destination=destination)
    finally:
        destination.close()
    [entry] = ledger.entries()
    assert (stored(handoff).state, stored(handoff).destination_id) == (S.DELIVERED, entry["ref"])
    assert len(ledger.creates()) == 1


def test_a_lookup_that_cannot_compare_payloads_sends_the_found_entry_to_a_person(ledger):
    handoff = handoff_42()
    ledger.faults(drop_answer_for=[KEY])
    lookup = {"path": "/v2/ledger/entries?request_key={key}", "id": "entries.0.ref"}
    destination = ledger_destination(ledger, lookup=lookup)
    try:
        dispatch_batch(destination=destination)
        settle_uncertain(destination=destination)
    finally:
        destination.close()
    after = stored(handoff)
    assert after.state == S.NEEDS_ATTENTION
    assert "not reported by the destination" in after.last_error
    assert len(ledger.creates()) == 1, "never sent again on a found entry"


def test_without_a_lookup_an_unknown_outcome_goes_to_a_person(ledger):
    handoff = handoff_42()
    ledger.faults(drop_answer_for=[KEY])
    # A destination that replays the same key settles by sending again instead (test_undo_and_replay.py).
    destination = ledger_destination(ledger, lookup=None, replays_same_key=False)
    try:
        assert not destination.supports_lookup
        dispatch_batch(destination=destination)
        settle_uncertain(destination=destination)
    finally:
        destination.close()
    after = stored(handoff)
    assert (after.state, after.reason_code) == (S.NEEDS_ATTENTION, "lookup_unsupported")
    assert len(ledger.creates()) == 1


def test_a_reconciliation_run_of_this_destination_fails_saying_it_cannot_list_keys(destination):
    run = reconciliation_run(destination=destination)
    assert run.status == RunStatus.FAILED
    assert "cannot list its keys" in run.error


def test_a_missing_key_header_is_a_permanent_bad_request(ledger):
    handoff = handoff_42()
    destination = ledger_destination(ledger, idempotency_header="Idempotency-Key")
    try:
        dispatch_batch(destination=destination)
    finally:
        destination.close()
    after = stored(handoff)
    assert (after.state, after.failure_class, after.reason_code) == (
        S.NEEDS_ATTENTION,
        "permanent",
        "bad_request",
    )
    assert ledger.entries() == []


def test_a_refused_connection_is_transient(outgoing, monkeypatch, refused_port):
    monkeypatch.setenv("HANDOFF_DEST_LEDGER_CLIENT_TOKEN", TOKEN)
    destination = destination_from_config(ledger_config(f"http://127.0.0.1:{refused_port}"))
    try:
        result = destination.deliver(outgoing("a:1"))
    finally:
        destination.close()
    assert (result.failure_class, result.reason_code) == ("transient", "connect_failed")
