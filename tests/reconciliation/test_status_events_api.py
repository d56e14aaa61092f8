"""The status-event endpoint refuses what it cannot use with a 4xx and a reason, and writes nothing."""

import json

import pytest
from django.conf import settings
from django.utils import timezone
from standardwebhooks.webhooks import Webhook

from incidents.causes import security_causes
from outbox.models import DestinationConfig, Handoff, StatusEvent
from reconciliation.models import SecurityEvent
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


def test_an_unknown_destination_has_no_secret_so_any_event_for_it_is_a_401(client, delivered):
    body = json.dumps(event(delivered))
    url = "/reconciliation/api/destinations/nowhere/status-events"
    assert post(client, body, url=url).status_code == 401
    assert post(client, body, url=url, **signed(body)).status_code == 401
    assert nothing_written(delivered)


SECRET_A, SECRET_B = "whsec_" + "QUFB" * 11, "whsec_" + "QkJC" * 11


@pytest.fixture
def two_destinations(monkeypatch, delivered):
    """crm-a and crm-b, each with its own status-event secret; the delivered handoff is crm-b's."""
    monkeypatch.setenv("HANDOFF_DEST_CRM_A_EVENTS", SECRET_A)
    monkeypatch.setenv("HANDOFF_DEST_CRM_B_EVENTS", SECRET_B)
    for name, variable in (
        ("crm-a", "HANDOFF_DEST_CRM_A_EVENTS"),
        ("crm-b", "HANDOFF_DEST_CRM_B_EVENTS"),
    ):
        DestinationConfig.objects.create(
            name=name, kind="in_process", config={"status_events": {"secret_env": variable}}
        )
    Handoff.objects.filter(pk=delivered.pk).update(destination="crm-b")
    return delivered


def url_of(name: str) -> str:
    return f"/reconciliation/api/destinations/{name}/status-events"


def test_an_event_signed_with_destination_as_secret_cannot_speak_for_bs_handoffs(
    client, two_destinations
):
    body = json.dumps(event(two_destinations))
    refused = post(client, body, url=url_of("crm-b"), **signed(body, secret=SECRET_A))
    assert refused.status_code == 401
    assert refused.json()["error"] == "signature_rejected"
    # A refused signature is a security event of the status-event API, as at the other signed APIs.
    recorded = SecurityEvent.objects.get()
    assert (recorded.kind, recorded.source) == ("signature_rejected", "status_events")
    assert recorded.detail.startswith("/reconciliation/api/destinations/crm-b/status-events: ")
    # At A's own address the key is none of A's handoffs: recorded as unknown, B's handoff untouched.
    at_a = post(client, body, url=url_of("crm-a"), **signed(body, secret=SECRET_A))
    assert at_a.json()["result"] == "unknown_key"
    assert Handoff.objects.get(pk=two_destinations.pk).work_status != "done"

    applied = post(client, body, url=url_of("crm-b"), **signed(body, "evt_b", secret=SECRET_B))
    assert applied.json()["result"] == "applied"
    assert Handoff.objects.get(pk=two_destinations.pk).work_status == "done"


def test_a_destination_naming_no_event_secret_refuses_the_single_secret_and_logs_why(
    client, delivered, caplog
):
    DestinationConfig.objects.create(name="legacy", kind="in_process", config={})
    Handoff.objects.filter(pk=delivered.pk).update(destination="legacy")
    body = json.dumps(event(delivered))
    refused = post(client, body, url=url_of("legacy"), **signed(body))
    assert refused.status_code == 401
    assert nothing_written(delivered)
    assert any(
        "legacy" in r.getMessage() and "RECEIVER_EVENTS_SIGNING_SECRET" in r.getMessage()
        for r in caplog.records
    )


def test_an_event_naming_a_task_the_receiver_never_gave_is_refused_and_pages(
    client, delivered, settings
):
    settings.ALERT_SECURITY_THRESHOLD = 1
    body = json.dumps(event(delivered, task_id="task-forged-1"))
    refused = post(client, body, **signed(body))
    assert refused.status_code == 422
    assert refused.json()["error"] == "task_not_given"
    assert "task-forged-1" in refused.json()["detail"]
    assert nothing_written(delivered)
    [recorded] = SecurityEvent.objects.all()
    assert (recorded.kind, recorded.source) == ("signature_rejected", "status_events")
    assert [c.cause for c in security_causes()] == ["security:signature_rejected"]


def test_get_is_not_allowed(client):
    assert client.get(URL).status_code == 405
