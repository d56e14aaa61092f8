"""The status-event endpoint refuses what it cannot use with a 4xx and a reason, and writes nothing."""

import json

import pytest
from django.conf import settings
from django.utils import timezone
from standardwebhooks.webhooks import Webhook

from outbox.models import Handoff, StatusEvent
from tests.builders import deliver, record

pytestmark = pytest.mark.django_db(databases=["default", "delivery"])
URL = "/reconciliation/api/destinations/receiver/status-events"


def signed(body: str, webhook_id: str = "evt_1", secret: str | None = None) -> dict:
    now = timezone.now()
    signature = Webhook(secret or settings.RECEIVER_EVENTS_SIGNING_SECRET).sign(
        webhook_id, now, body
    )
    return {
        "webhook-id": webhook_id,
        "webhook-timestamp": str(int(now.timestamp())),
        "webhook-signature": signature,
    }


def event(handoff: Handoff, **data) -> dict:
    return {
        "type": "task.status_changed",
        "timestamp": "2026-12-01T16:25:28+00:00",
        "data": {
            "action_key": handoff.action_key,
            "task_id": handoff.destination_id,
            "payload_hash": handoff.payload_hash,
            "status": "done",
            "sequence": 7,
            "occurred_at": "2026-12-01T16:25:28+00:00",
            **data,
        },
    }


def post(client, body: str, url: str = URL, **headers):
    return client.post(url, body, content_type="application/json", headers=headers)


@pytest.fixture
def delivered(db) -> Handoff:
    return deliver(record(42))


def nothing_written(handoff: Handoff) -> bool:
    stored = Handoff.objects.get(pk=handoff.pk)
    return not StatusEvent.objects.exists() and stored.work_status != "done"


def test_a_signed_event_is_applied_and_its_repeat_answered_as_one(client, delivered):
    body = json.dumps(event(delivered))
    first = post(client, body, **signed(body))
    again = post(client, body, **signed(body))
    assert first.status_code == again.status_code == 200
    assert first.json()["result"] == "applied" and again.json()["repeated"] is True
    assert Handoff.objects.get(pk=delivered.pk).work_status == "done"


def test_an_unsigned_or_wrongly_signed_event_is_refused(client, delivered):
    body = json.dumps(event(delivered))
    assert post(client, body).status_code == 401
    other = "whsec_" + "b3RoZXItc2VjcmV0LW9mLTMyLWJ5dGVzLi4uLi4uLg=="
    answer = post(client, body, **signed(body, secret=other))
    assert answer.status_code == 401 and answer.json()["error"] == "signature_rejected"
    assert nothing_written(delivered)


@pytest.mark.parametrize(
    ("data", "reason"),
    [
        ({"status": "finished"}, "data.status must be one of"),
        ({"sequence": "7"}, "data.sequence must be a positive whole number"),
        ({"sequence": True}, "data.sequence must be a positive whole number"),
        ({"sequence": 0}, "data.sequence must be a positive whole number"),
        ({"occurred_at": "yesterday"}, "data.occurred_at must be an ISO 8601 time"),
        ({"occurred_at": "2026-12-01T16:25:28"}, "data.occurred_at must be an ISO 8601 time"),
        ({"action_key": ""}, "data.action_key must be a non-empty string"),
        ({"action_key": "k" * 201}, "data.action_key must be a non-empty string"),
        ({"task_id": 5}, "data.task_id must be a non-empty string"),
    ],
)
def test_an_event_that_cannot_be_used_is_a_422_with_its_reason(client, delivered, data, reason):
    body = json.dumps(event(delivered, **data))
    answer = post(client, body, **signed(body))
    assert answer.status_code == 422, answer.content
    assert any(reason in r for r in answer.json()["reasons"])
    assert nothing_written(delivered)


def test_an_unknown_type_or_a_missing_data_object_is_a_422(client, delivered):
    for document in ({**event(delivered), "type": "task.renamed"}, {"type": "task.deleted"}):
        body = json.dumps(document)
        assert post(client, body, **signed(body)).status_code == 422
    assert nothing_written(delivered)


def test_a_body_that_is_not_json_or_too_large_is_refused_before_the_signature(client, delivered):
    assert post(client, "{not json", **signed("{not json")).status_code == 400
    huge = json.dumps(event(delivered, padding="x" * (settings.STATUS_EVENTS_MAX_BODY_BYTES + 1)))
    assert post(client, huge, **signed(huge)).status_code == 413
    assert post(client, "[1]", **signed("[1]")).status_code == 400
    with_nul = json.dumps(event(delivered, action_key="a\u0000b"))
    assert post(client, with_nul, **signed(with_nul)).status_code == 400
    assert nothing_written(delivered)


def test_an_unknown_destination_is_a_404_after_the_signature(client, delivered):
    body = json.dumps(event(delivered))
    url = "/reconciliation/api/destinations/nowhere/status-events"
    assert post(client, body, url=url).status_code == 401
    assert post(client, body, url=url, **signed(body)).status_code == 404
    assert nothing_written(delivered)


def test_get_is_not_allowed(client):
    assert client.get(URL).status_code == 405
