"""Where an idempotency_key_http destination's key travels (`key`), a lookup by search, and the refusals of
combinations that cannot work, each naming its field; without a network (the providers' own servers are in
tests/providers/)."""

import pytest

from outbox.destinations.idempotency_key.contract import SeveralEntries
from outbox.destinations.idempotency_key.destination import IdempotencyKeyHttpDestination
from outbox.destinations.idempotency_key.placement import KeyNotPlaced

UPSERT = "/services/data/v60.0/sobjects/Account/External_Id__c/{key}"
DUPLICATE = {"status": 409, "id": "message", "pattern": "Existing ID: (\\d+)"}


def config(**overrides) -> dict:
    base = {
        "name": "crm",
        "url": "https://crm.example.com",
        "create": {"path": "/v1/contacts"},
        "receipt": {"id": "id"},
        "auth": {"scheme": "none"},
    }
    return {**base, **overrides}


def built(**overrides) -> IdempotencyKeyHttpDestination:
    return IdempotencyKeyHttpDestination.from_config(config(**overrides))


def refused(**overrides) -> str:
    with pytest.raises(ValueError) as raised:
        built(**overrides)
    return str(raised.value)


def test_the_key_travels_in_the_named_header_by_default_and_as_configured():
    assert built().config.key.headers("k1") == {"Idempotency-Key": "k1"}
    named = built(key={"in": "header", "name": "X-Request-Key"})
    assert named.config.key.headers("k1") == {"X-Request-Key": "k1"}
    assert named.supports_idempotency and named.replays_same_key


def test_an_upsert_carries_the_key_in_its_path_and_no_header():
    upsert = built(create={"method": "PATCH", "path": UPSERT}, key={"in": "path"})
    key = upsert.config.key
    assert key.headers("onboarding:7:1:1") == {}
    assert key.path(UPSERT, "onboarding:7:1:1").endswith("/External_Id__c/onboarding%3A7%3A1%3A1")
    assert "idempotent by upsert" in upsert.describe_contract()


def test_a_unique_body_property_is_written_into_a_copy_of_the_payload():
    unique = built(key={"in": "body", "property": "properties.handoff_key", "duplicate": DUPLICATE})
    payload = {"properties": {"email": "a@example.com"}}
    body = unique.config.key.body(payload, "k1", {})
    assert body == {"properties": {"email": "a@example.com", "handoff_key": "k1"}}
    assert payload == {"properties": {"email": "a@example.com"}}, (
        "the approved payload is not changed"
    )
    with pytest.raises(KeyNotPlaced):
        unique.config.key.body({"properties": {"handoff_key": "another"}}, "k1", {})


def test_a_duplicate_answer_names_the_existing_id_by_its_pattern():
    duplicate = built(
        key={"in": "body", "property": "properties.handoff_key", "duplicate": DUPLICATE}
    ).config.key.duplicate
    answer = {"status": "error", "message": "Contact already exists. Existing ID: 5101"}
    assert duplicate.existing_id(409, answer) == "5101"
    assert duplicate.existing_id(409, {"message": "another conflict"}) is None
    assert duplicate.existing_id(400, answer) is None


def test_without_idempotency_nothing_replays_and_the_ledger_decides():
    mail = built(key={"in": "none", "property": "Metadata.handoff_key"})
    assert not mail.supports_idempotency and not mail.replays_same_key
    assert mail.config.key.headers("k1") == {}
    assert mail.config.key.body({"To": "a@example.com"}, "k1", {"Metadata.h": "x"}) == {
        "To": "a@example.com",
        "Metadata": {"handoff_key": "k1", "h": "x"},
    }
    assert "no idempotency" in mail.describe_contract()


def test_a_search_lookup_picks_the_entry_whose_echoed_key_is_ours():
    searched = built(
        lookup={
            "search": {"path": "/messages/outbound?count=10&offset=0&metadata_handoff_key={key}"},
            "results": "Messages",
            "match": "Metadata.handoff_key",
            "id": "MessageID",
        }
    )
    search = searched.config.lookup.search
    assert search.request("a:b") == (
        "/messages/outbound?count=10&offset=0&metadata_handoff_key=a%3Ab",
        None,
    )
    answer = {
        "Messages": [
            {"MessageID": "m1", "Metadata": {"handoff_key": "other"}},
            {"MessageID": "m2", "Metadata": {"handoff_key": "a:b"}},
        ]
    }
    assert search.entries(answer, "a:b") == [answer["Messages"][1]]
    assert search.entry(answer, "a:b") == answer["Messages"][1]
    assert search.entry(answer, "c:d") is None
    twice = {"Messages": [answer["Messages"][1], answer["Messages"][1]]}
    with pytest.raises(SeveralEntries):
        search.entry(twice, "a:b")


@pytest.mark.parametrize(
    ("overrides", "said"),
    [
        ({"key": {"in": "path"}}, "create.path must hold '{key}' where key.in is 'path'"),
        ({"create": {"path": UPSERT}}, "create.path may hold '{key}' only where key.in is 'path'"),
        ({"key": {"in": "body", "property": "p"}}, "key (in body): missing key(s) duplicate"),
        (
            {"key": {"in": "none", "duplicate": DUPLICATE}},
            "key (in none): unknown key(s) duplicate",
        ),
        ({"key": {"in": "query"}}, "key.in must be one of header, path, body, none"),
        (
            {"key": {"in": "header"}, "idempotency_header": "X-Key"},
            "idempotency_header: name the header in key.name instead",
        ),
        (
            {"key": {"in": "none"}, "replays_same_key": True},
            "replays_same_key cannot be true where key.in is 'none'",
        ),
        (
            {
                "key": {
                    "in": "body",
                    "property": "p",
                    "duplicate": {**DUPLICATE, "pattern": "no group"},
                }
            },
            "key.duplicate.pattern must be a regular expression whose first group is the id",
        ),
        (
            {"key": {"in": "body", "property": "p", "duplicate": {**DUPLICATE, "status": 200}}},
            "key.duplicate.status must be a 4xx status",
        ),
        (
            {"lookup": {"search": {"path": "/s"}, "results": "r", "match": "m", "id": "id"}},
            "lookup.search must hold '{key}' in its path or its body",
        ),
        (
            {
                "lookup": {
                    "search": {"path": "/s?k={key}"},
                    "path": "/x/{key}",
                    "results": "r",
                    "match": "m",
                    "id": "id",
                }
            },
            "lookup: a search names its request in lookup.search, not lookup.path",
        ),
        (
            {"lookup": {"search": {"path": "/s?k={key}"}, "match": "m", "id": "id"}},
            "lookup: missing key(s) results",
        ),
        (
            {
                "lookup": {
                    "search": {"path": "/s", "body": {"q": "{key}"}},
                    "results": "r",
                    "match": "m",
                    "id": "id",
                }
            },
            "lookup.search.body must be a JSON object, sent with method POST",
        ),
    ],
)
def test_impossible_combinations_are_refused_naming_the_field(overrides, said):
    assert said in refused(**overrides)
