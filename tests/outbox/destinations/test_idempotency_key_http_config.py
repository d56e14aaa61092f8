"""The idempotency_key_http kind's configuration (refused with the name of what is wrong) and its contract (the
draft's status meanings, overrides, dotted paths), without a network."""

import pytest

from outbox.destinations.idempotency_key.auth import MissingSecret, credentials_from_config
from outbox.destinations.idempotency_key.contract import (
    Contract,
    FieldMissing,
    Fields,
    NoEntry,
    SeveralEntries,
    dig,
    receipt_entry,
)
from outbox.destinations.idempotency_key.destination import IdempotencyKeyHttpDestination
from outbox.destinations.registry import KINDS
from outbox.failures import MalformedReceipt, Outgoing
from outbox.payloads import payload_hash


def minimal(**overrides) -> dict:
    config = {
        "name": "crm",
        "url": "https://crm.example.com/api",
        "create": {"path": "/v1/clients"},
        "receipt": {"id": "data.id"},
        "auth": {"scheme": "bearer", "token_env": "HANDOFF_DEST_CRM_TOKEN"},
    }
    config.update(overrides)
    return config


def refused(config: dict) -> str:
    with pytest.raises(ValueError) as raised:
        IdempotencyKeyHttpDestination.from_config(config)
    return str(raised.value)


def test_the_kind_is_registered_by_its_name():
    assert KINDS["idempotency_key_http"] is IdempotencyKeyHttpDestination


def test_a_minimal_configuration_builds_a_destination_without_lookup():
    destination = IdempotencyKeyHttpDestination.from_config(minimal())
    assert destination.name == "crm"
    assert destination.supports_idempotency and not destination.supports_lookup
    assert destination.config.idempotency_header == "Idempotency-Key"
    assert destination.call_seconds == 7.0
    assert "idempotent by header Idempotency-Key; no lookup" in destination.describe_contract()


def test_unknown_keys_are_refused_with_their_names():
    assert "unknown key(s) colour, timeout" in refused(minimal(colour="red", timeout=3))
    assert "create: unknown key(s) verb" in refused(minimal(create={"path": "/x", "verb": "POST"}))
    assert "receipt: unknown key(s) ref" in refused(minimal(receipt={"id": "a", "ref": "b"}))
    assert "auth: unknown key(s) token" in refused(
        minimal(auth={"scheme": "bearer", "token_env": "T", "token": "secret"})
    )
    lookup = {"path": "/v1/clients/{key}", "id": "id", "found": "x"}
    assert "lookup: unknown key(s) found" in refused(minimal(lookup=lookup))
    assert "retry:" in refused(minimal(retry={"attempts": 3}))


def test_missing_keys_are_refused_with_their_names():
    config = minimal()
    del config["auth"], config["receipt"]
    assert "missing key(s) auth, receipt" in refused(config)
    assert "lookup: missing key(s) id" in refused(minimal(lookup={"path": "/c/{key}"}))


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"url": "crm.example.com"}, "url must be an http"),
        ({"create": {"path": "v1/clients"}}, "create.path must start with '/'"),
        ({"create": {"path": "/c", "method": "GET"}}, "create.method must be one of"),
        ({"lookup": {"path": "/c", "id": "id"}}, "'{key}'"),
        ({"lookup": {"path": "/c/{key}/{id}", "id": "id"}}, "'{key}'"),
        ({"lookup": {"path": "/c/{key}", "id": "id", "not_found": 404}}, "not_found"),
        ({"receipt": {"id": "data..id"}}, "receipt.id must be a dotted path"),
        ({"statuses": {"409": ["maybe", "x"]}}, "statuses.409 must be [failure class"),
        ({"statuses": {"200": ["conflict", "x"]}}, "not an HTTP error status"),
        ({"error_code": "error.code"}, "error_code and error_codes go together"),
        ({"headers": {"Authorization": "Bearer x"}}, "Authorization cannot be set here"),
        ({"auth": {"scheme": "oauth"}}, "auth.scheme must be one of"),
        ({"auth": {"scheme": "bearer"}}, "exactly one of token_env, token_file"),
        ({"auth": {"scheme": "basic", "username": "u"}}, "password_env, password_file"),
        ({"read_timeout": 0}, "read_timeout must be a positive number"),
    ],
)
def test_wrong_values_are_refused_saying_what_is_wrong(overrides, message):
    assert message in refused(minimal(**overrides))


def test_the_drafts_status_meanings_by_default():
    contract = Contract.from_config(None, None, None)
    meanings = {status: contract.classify(status, None) for status in (400, 401, 403, 409, 422)}
    assert meanings == {
        400: ("permanent", "bad_request"),
        401: ("credential", "credential_rejected"),
        403: ("credential", "credential_rejected"),
        409: ("transient", "request_in_progress"),
        422: ("conflict", "key_reused_with_other_payload"),
    }
    assert contract.classify(429, None) == ("transient", "rate_limited")
    assert contract.classify(500, None) == ("uncertain", "http_500")
    assert [contract.classify(s, None)[0] for s in (502, 503, 504)] == ["transient"] * 3
    assert contract.classify(404, None) == ("permanent", "http_404")


def test_an_error_code_decides_before_an_overridden_status():
    contract = Contract.from_config(
        {"409": ["conflict", "key_reused"]},
        "error.code",
        {"idempotency_key_in_use": ["transient", "request_in_progress"]},
    )
    assert contract.classify(409, {"error": {"code": "idempotency_key_in_use"}}) == (
        "transient",
        "request_in_progress",
    )
    assert contract.classify(409, {"error": {"code": "other"}}) == ("conflict", "key_reused")
    assert contract.classify(409, "not json") == ("conflict", "key_reused")
    assert contract.classify(422, None) == ("conflict", "key_reused_with_other_payload")


def test_dotted_paths_index_objects_and_lists():
    answer = {"results": [{"id": 7}], "none": [], "two": [{"id": 1}, {"id": 2}]}
    assert dig(answer, "results.0.id") == 7
    with pytest.raises(NoEntry):
        dig(answer, "none.0.id")
    with pytest.raises(SeveralEntries):
        dig(answer, "two.0.id", single=True)
    with pytest.raises(FieldMissing):
        dig(answer, "results.0.ref")
    with pytest.raises(FieldMissing):
        dig(answer, "results.first.id")


def test_a_receipt_proves_nothing_when_it_echoes_another_key_or_payload():
    payload = {"client": "Fabrikam"}
    sent = Outgoing(action_key="k:1", payload=payload, payload_hash=payload_hash(payload))
    fields = Fields(id="data.id", key="data.key", payload="data.body")
    entry = receipt_entry(fields, {"data": {"id": 12, "key": "k:1", "body": payload}}, sent)
    assert (entry.task_id, entry.payload_hash) == ("12", sent.payload_hash)
    for wrong in (
        {"data": {"id": 12, "key": "k:2", "body": payload}},
        {"data": {"id": 12, "key": "k:1", "body": {"client": "Contoso"}}},
        {"data": {"id": "", "key": "k:1", "body": payload}},
        {"data": {"id": True, "key": "k:1", "body": payload}},
        {"data": {"id": "x" * 500, "key": "k:1", "body": payload}},
        {"data": {}},
        None,
    ):
        with pytest.raises(MalformedReceipt):
            receipt_entry(fields, wrong, sent)


def test_credentials_are_read_when_asked_and_a_missing_one_names_its_place(
    tmp_path, monkeypatch, settings
):
    settings.HANDOFF_SECRETS_DIR = tmp_path
    monkeypatch.delenv("HANDOFF_DEST_CRM_USER", raising=False)
    password = tmp_path / "password"
    basic = credentials_from_config(
        {"scheme": "basic", "username_env": "HANDOFF_DEST_CRM_USER", "password_file": str(password)}
    )
    with pytest.raises(MissingSecret, match="environment variable HANDOFF_DEST_CRM_USER"):
        basic.headers()
    monkeypatch.setenv("HANDOFF_DEST_CRM_USER", "svc")
    with pytest.raises(MissingSecret, match=f"secrets file {password}"):
        basic.headers()
    password.write_text("pw\n")
    assert basic.headers() == {"Authorization": "Basic c3ZjOnB3"}
    keyed = credentials_from_config(
        {"scheme": "header", "header": "X-Api-Key", "token_env": "HANDOFF_DEST_K"}
    )
    monkeypatch.setenv("HANDOFF_DEST_K", "abc")
    assert keyed.headers() == {"X-Api-Key": "abc"}
    assert credentials_from_config({"scheme": "none"}).headers() == {}
