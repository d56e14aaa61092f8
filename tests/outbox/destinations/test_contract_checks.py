"""Issue 35, "check before, prove after": each mistake of a realistic list is refused by `manage.py
destinations apply` (or `check`, for a row already there) with the field named, and nothing is written.

Two mistakes of the list are pinned where their rule lives: a route to a disabled destination in
tests/approvals/test_routed_destinations.py (test_disabling_a_routed_destination_is_refused_naming_the_steps)
and a compensating step at a destination with no undo and no 'manual' in
tests/outbox/destinations/test_undo_and_replay.py
(test_publishing_a_compensation_at_a_destination_without_undo_is_refused_naming_step_and_destination).
"""

import copy
import json
from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from outbox.models import DestinationConfig, DestinationEvent

pytestmark = pytest.mark.django_db
TOKEN_ENV = "HANDOFF_DEST_LEDGER_TOKEN"
LEDGER = {
    "name": "ledger",
    "kind": "idempotency_key_http",
    "url": "http://127.0.0.1:9",
    "auth": {"scheme": "bearer", "token_env": TOKEN_ENV},
    "create": {"path": "/v1/entries"},
    "receipt": {"id": "id"},
    "lookup": {"path": "/v1/entries/{key}", "id": "id", "key": "key"},
    "connect_timeout": 1,
    "read_timeout": 2,
}
SEARCHED = {
    "search": {"path": "/v1/entries?key={key}"},
    "results": "results",
    "match": "key",
    "id": "id",
}


@pytest.fixture(autouse=True)
def token(monkeypatch):
    monkeypatch.setenv(TOKEN_ENV, "sk_test_ledger")


def entry(**changes) -> dict:
    return {**copy.deepcopy(LEDGER), **changes}


def apply(tmp_path, *entries) -> str:
    path = tmp_path / "destinations.json"
    path.write_text(json.dumps({"destinations": list(entries)}))
    out = StringIO()
    call_command("destinations", "apply", str(path), stdout=out)
    return out.getvalue()


def refused(tmp_path, *entries) -> str:
    with pytest.raises(CommandError) as refusal:
        apply(tmp_path, *entries)
    assert not DestinationConfig.objects.exists(), "nothing written"
    assert not DestinationEvent.objects.exists(), "nothing audited"
    return str(refusal.value)


def check() -> tuple[str, str]:
    out = StringIO()
    try:
        call_command("destinations", "check", stdout=out)
    except CommandError as exc:
        return out.getvalue(), str(exc)
    return out.getvalue(), ""


def test_a_typo_in_a_key_is_refused_naming_the_key(tmp_path):
    typo = entry(reciept={"id": "id"})
    del typo["receipt"]
    problem = refused(tmp_path, typo)
    assert "destinations[0]" in problem and "unknown key(s) reciept" in problem


def test_a_missing_secret_is_refused_naming_its_variable(tmp_path, monkeypatch):
    monkeypatch.delenv(TOKEN_ENV)
    problem = refused(tmp_path, entry())
    assert "destinations[0]" in problem
    assert f"environment variable {TOKEN_ENV} is not set" in problem


@pytest.mark.parametrize(
    ("status", "made", "meaning"),
    [
        ("422", "transient", "this key was used with another payload"),
        ("409", "permanent", "a request with this key is still in progress"),
        ("401", "permanent", "the credential is refused"),
        ("403", "transient", "the credential is refused"),
    ],
)
def test_an_override_contradicting_what_a_status_means_is_refused_naming_the_field(
    tmp_path, status, made, meaning
):
    problem = refused(tmp_path, entry(statuses={status: [made, "provider_says_so"]}))
    assert f"destinations[0] (ledger).statuses.{status}: {made} contradicts" in problem
    assert meaning in problem
    assert f'override_reasons["statuses.{status}"]' in problem


def test_a_contradicting_override_with_a_stated_reason_is_applied(tmp_path):
    why = "this provider answers 422 while its replica catches up (support case 4711)"
    out = apply(
        tmp_path,
        entry(
            statuses={"422": ["transient", "replica_lag"]},
            override_reasons={"statuses.422": why},
        ),
    )
    assert "1 destination(s) changed" in out
    row = DestinationConfig.objects.get(name="ledger")
    assert row.config["override_reasons"] == {"statuses.422": why}
    assert why in DestinationEvent.objects.get(destination="ledger").reason


def test_a_reason_for_an_override_that_is_not_there_is_refused_naming_it(tmp_path):
    problem = refused(tmp_path, entry(override_reasons={"statuses.422": "a stale reason"}))
    assert "override_reasons.statuses.422: names no override of this destination" in problem


def test_a_409_where_the_key_is_a_unique_property_is_the_providers_own_word(tmp_path):
    """The draft's 409 ("in progress") speaks of a key in a header: elsewhere it is no contradiction."""
    unique = entry(
        key={"in": "body", "property": "key", "duplicate": {"status": 400, "id": "existing"}},
        statuses={"409": ["conflict", "contact_conflict"]},
    )
    assert "1 destination(s) changed" in apply(tmp_path, unique)


def test_a_receipt_path_the_create_sample_lacks_is_refused_naming_field_and_sample(tmp_path):
    wrong = entry(
        receipt={"id": "data.id"},
        samples={"create": {"id": "le_1", "object": "entry", "created": True}},
    )
    problem = refused(tmp_path, wrong)
    assert "destinations[0] (ledger).receipt.id: 'data.id' is not in samples.create" in problem
    assert "it holds created, id, object" in problem


def test_a_lookup_path_the_lookup_sample_lacks_is_refused_naming_it(tmp_path):
    wrong = entry(
        lookup=SEARCHED,
        samples={"lookup": {"data": [{"id": "le_1", "key": "k"}], "has_more": False}},
    )
    problem = refused(tmp_path, wrong)
    assert "destinations[0] (ledger).lookup.results: 'results' is not in samples.lookup" in problem


def test_a_search_entry_without_the_match_path_is_refused_naming_it(tmp_path):
    wrong = entry(
        lookup=SEARCHED, samples={"lookup": {"results": [{"id": "le_1", "metadata": {"key": "k"}}]}}
    )
    problem = refused(tmp_path, wrong)
    assert "(ledger).lookup.match: 'key' is not in samples.lookup" in problem


def test_a_duplicate_id_the_duplicate_sample_lacks_is_refused_naming_it(tmp_path):
    unique = entry(
        key={"in": "body", "property": "key", "duplicate": {"status": 409, "id": "message"}},
        samples={"duplicate": {"error": {"message": "Contact already exists. Existing ID: 5"}}},
    )
    problem = refused(tmp_path, unique)
    assert "(ledger).key.duplicate.id: 'message' is not in samples.duplicate" in problem


def test_samples_that_hold_every_path_are_applied(tmp_path):
    good = entry(
        lookup=SEARCHED,
        samples={
            "create": {"id": "le_1", "key": "k"},
            "lookup": {"results": [{"id": "le_1", "key": "k"}]},
        },
    )
    assert "1 destination(s) changed" in apply(tmp_path, good)


def test_check_refuses_a_row_with_a_contradicting_override_naming_the_field():
    config = {k: v for k, v in entry(statuses={"422": ["transient", "x"]}).items()}
    DestinationConfig.objects.create(
        name="ledger",
        kind="idempotency_key_http",
        config={k: v for k, v in config.items() if k not in ("name", "kind")},
    )
    out, problem = check()
    assert "destination 'ledger': statuses.422: transient contradicts" in problem
    assert "ok  ledger" not in out


def test_check_notes_each_path_no_sample_answer_checks_without_refusing():
    config = {k: v for k, v in LEDGER.items() if k not in ("name", "kind")}
    DestinationConfig.objects.create(name="ledger", kind="idempotency_key_http", config=config)
    out, problem = check()
    assert "note  ledger: receipt.id 'id' (no samples.create) unchecked" in out
    assert "note  ledger: lookup.id 'id' (no samples.lookup) unchecked" in out
    assert "note  ledger: lookup.key 'key' (no samples.lookup) unchecked" in out
    assert "ok  ledger" in out and "ledger" not in problem
