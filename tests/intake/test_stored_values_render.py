"""Whatever is stored, its pages render: a payload nested deeper than redaction could once recurse
(accepted before intake limited depth) is shown cut at a marker, never as a 500."""

import pytest

from approvals.models import TriggerOutcome, TriggerRecord
from outbox.models import HandoffState
from outbox.redaction import MAX_DEPTH, TOO_DEEP, redact
from tests.factories import ONBOARDING_PAYLOAD, HandoffFactory, make_request, onboarding_world

pytestmark = pytest.mark.django_db

# Deep enough that the former recursive redaction (two frames a level) passed Python's recursion limit,
# shallow enough that Django's JSON encoder (one frame a level) still stores it.
STORED_DEPTH = 600


def nested(depth: int) -> dict:
    value: dict = {"leaf": "contact: someone@example.com"}
    for _ in range(depth - 1):
        value = {"deeper": value}
    return value


def deep_payload() -> dict:
    return {**ONBOARDING_PAYLOAD, "notes": nested(STORED_DEPTH)}


def depth_of(value) -> int:
    depth = 0
    while isinstance(value, dict) and value:
        value = next(iter(value.values()))
        depth += 1
    return depth


def test_redaction_of_a_value_deeper_than_the_recursion_limit_is_cut_at_a_marker():
    shown = redact({"notes": nested(5000)})
    assert depth_of(shown) == MAX_DEPTH
    leaf = shown
    for _ in range(MAX_DEPTH - 1):
        leaf = leaf.get("notes", leaf.get("deeper"))
    assert leaf == {"deeper": TOO_DEEP}


def test_redaction_within_the_bound_still_masks_secrets_at_every_level():
    shown = redact(nested(MAX_DEPTH - 1))
    assert "someone@example.com" not in str(shown) and "[redacted]" in str(shown)


@pytest.fixture
def world():
    return onboarding_world()


def test_trigger_page_renders_a_stored_document_nested_600_deep(world, client):
    record = TriggerRecord.objects.create(
        webhook_id="evt_deep",
        signed_at="2026-01-01T00:00:00Z",
        workflow="onboarding",
        workspace_ref=7,
        reference="crm-deep",
        sender_revision=1,
        document={"payload": deep_payload()},
        document_hash="x" * 64,
        outcome=TriggerOutcome.ACCEPTED,
        reasons=[],
        status_code=202,
        response={},
    )
    client.force_login(world["alice"])
    page = client.get(f"/approvals/api/triggers/{record.pk}/")
    assert page.status_code == 200
    assert TOO_DEEP in page.content.decode()


def test_request_page_renders_a_stored_payload_nested_600_deep(world, client):
    make_request(world["w7"], 43, world["bob"], payload=deep_payload())
    client.force_login(world["alice"])
    page = client.get("/approvals/7/43/1/")
    assert page.status_code == 200
    assert TOO_DEEP in page.content.decode()


def test_handoff_page_renders_a_stored_payload_nested_600_deep(world, client):
    payload = deep_payload()
    handoff = HandoffFactory(number=43, payload=payload, state=HandoffState.NEEDS_ATTENTION)
    client.force_login(world["olga"])
    page = client.get(f"/handoffs/{handoff.pk}/")
    assert page.status_code == 200
    assert TOO_DEEP in page.content.decode()
