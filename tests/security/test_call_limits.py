"""Calls that cost are limited per signed-in person, and the signed APIs per client address (ASVS 5.0 2.4.1;
outbox/services/call_limits.py): over the limit a call is 429 with Retry-After and nothing of it is done, while
another person (or address) goes on. The limiter is the destinations' slots, on the database clock."""

import json

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext

from approvals.models import AuditExport, TriggerRecord
from outbox.models import DestinationSlot, Handoff, HandoffState
from outbox.services.call_limits import call_take
from outbox.services.limits import slot_take_for
from tests.console.clients import HTMX, client_for
from tests.factories import make_user, onboarding_world
from tests.intake.triggers import TRIGGERS_URL, sign, trigger_document

pytestmark = pytest.mark.django_db(databases=["default", "delivery"])

LIMIT = 3


@pytest.fixture
def world(settings):
    settings.CALL_LIMITS = {function: (LIMIT, 60) for function in settings.CALL_LIMITS}
    return onboarding_world()


def assert_limited(answer, function: str) -> None:
    assert answer.status_code == 429, answer.content[:300]
    assert 1 <= int(answer["Retry-After"]) <= 60
    assert f"{function} is limited to {LIMIT} in 60 seconds" in answer.content.decode()


def test_a_persons_fourth_search_within_the_minute_is_429_and_another_person_still_searches(world):
    olga = client_for(world["olga"])
    for n in range(LIMIT):
        assert olga.get("/handoffs/", {"q": f"acme {n}"}).status_code == 200
    assert_limited(olga.get("/handoffs/", {"q": "acme again"}), "handoff search")
    # The list without a search costs nothing and is not counted.
    assert olga.get("/handoffs/", {"state": "pending"}).status_code == 200
    oscar = make_user("oscar", workspace=world["w7"], roles=("operator",))
    assert client_for(oscar).get("/handoffs/", {"q": "acme"}).status_code == 200


def test_an_audit_export_over_the_limit_is_429_and_records_no_export(world):
    olga = client_for(world["olga"])
    form = {"workspace": "7", "format": "jsonl", "since": "2026-01-01", "until": "2026-01-02"}
    for _ in range(LIMIT):
        assert olga.post("/audit/export", form).status_code == 200
    assert AuditExport.objects.count() == LIMIT
    assert_limited(olga.post("/audit/export", form), "audit export")
    assert AuditExport.objects.count() == LIMIT


def test_a_bulk_action_over_the_limit_is_429_and_changes_no_handoff(world):
    olga = client_for(world["olga"])
    for _ in range(LIMIT):
        olga.post("/handoffs/bulk", {"state": "pending", "bulk_action": "retry"}, **HTMX)
    before = list(Handoff.objects.order_by("pk").values_list("pk", "state", "updated_at"))
    answer = olga.post(
        "/handoffs/bulk",
        {"state": HandoffState.PENDING, "bulk_action": "cancel", "confirm": "1", "reason": "x"},
        **HTMX,
    )
    assert_limited(answer, "bulk action")
    assert list(Handoff.objects.order_by("pk").values_list("pk", "state", "updated_at")) == before


def test_a_replay_preview_over_the_limit_is_429(world):
    olga = client_for(world["olga"])
    for _ in range(LIMIT):
        assert olga.post("/incidents/replays/from-filter", {"state": "x"}).status_code != 429
    assert_limited(olga.post("/incidents/replays/from-filter", {}), "replay preview")


def _post_trigger(address: str, reference: str):
    body = json.dumps(trigger_document(reference=reference))
    return Client(REMOTE_ADDR=address).generic(
        "POST",
        TRIGGERS_URL,
        data=body.encode(),
        content_type="application/json",
        headers=sign(body),
    )


def test_a_signed_api_client_over_its_limit_is_429_in_json_and_its_trigger_is_not_recorded(world):
    for n in range(LIMIT):
        assert _post_trigger("192.0.2.1", f"crm-{n}").status_code in (200, 201, 202)
    recorded = TriggerRecord.objects.count()
    answer = _post_trigger("192.0.2.1", "crm-over")
    assert answer.status_code == 429
    assert answer.json()["error"] == "rate_limited"
    assert int(answer["Retry-After"]) == answer.json()["retry_after"]
    assert TriggerRecord.objects.count() == recorded
    # Another sender's address has its own count.
    assert _post_trigger("192.0.2.2", "crm-other").status_code in (200, 201, 202)


def test_the_limit_is_kept_in_slots_that_are_no_destinations(world):
    call_take(function="handoff search", caller="user:1")
    [slot] = DestinationSlot.objects.exclude(free_at=None)
    assert slot.destination == "call:handoff search:user:1"


def test_two_long_client_addresses_sharing_a_prefix_are_counted_apart(world):
    first, second = "addr:2001:db8:85a3::8a2e:370:7334", "addr:2001:db8:85a3::8a2e:370:7335"
    for _ in range(LIMIT):
        call_take(function="status events api", caller=first)
    call_take(function="status events api", caller=second)  # not refused: a count of its own
    keys = set(DestinationSlot.objects.exclude(free_at=None).values_list("destination", flat=True))
    assert len(keys) == 2 and all(len(key) <= 40 for key in keys)


def test_a_large_limits_slots_are_written_by_one_short_statement_whatever_the_limit(world):
    """A limit of 500 (the console bench sets 200) writes its slots in one statement as short as a limit of 3's:
    numbered by the database, not a row of parameters per slot (issue 40: a third of a search's CPU); a
    second call writes none and the limit still holds."""
    statements = {}
    for limit in (3, 500):
        with CaptureQueriesContext(connection) as queries:
            assert slot_take_for(key=f"test:{limit}", limit=limit, holder="a", seconds=60) == 0
        written = [q["sql"] for q in queries if "INSERT" in q["sql"].upper()]
        assert len(written) == 1
        statements[limit] = written[0]
        rows = DestinationSlot.objects.filter(destination=f"test:{limit}")
        assert sorted(rows.values_list("number", flat=True)) == list(range(limit))
    assert len(statements[500]) < 2 * len(statements[3]), statements[500][:300]

    for _ in range(2):
        assert slot_take_for(key="test:3", limit=3, holder="b", seconds=60) == 0
    assert DestinationSlot.objects.filter(destination="test:3").count() == 3
    assert slot_take_for(key="test:3", limit=3, holder="c", seconds=60) > 0
