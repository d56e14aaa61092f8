"""The receiver's signed HTTP API, through Django's test client: statuses, bodies, nothing written on refusal."""

import json
from datetime import timedelta

import pytest
from django.conf import settings
from django.utils import timezone
from standardwebhooks.webhooks import Webhook

from delivery.models import ReceiverTask, SeenMessage
from delivery.services import payload_hash
from outbox.signing import signed_headers

pytestmark = pytest.mark.django_db(databases=["default", "delivery"])

KEY = "onboarding:7:42:1"
PAYLOAD = {"client_name": "Northwind Traders", "plan": "standard"}
URL = "/delivery/api/tasks"


def post(client, body: str | bytes, headers: dict | None = None, idempotency_key: str | None = KEY):
    text = body.decode() if isinstance(body, bytes) else body
    signed = signed_headers(text) if headers is None else headers
    extra = {f"HTTP_{k.upper().replace('-', '_')}": v for k, v in signed.items()}
    if idempotency_key is not None:
        extra["HTTP_IDEMPOTENCY_KEY"] = idempotency_key
    return client.post(URL, data=body, content_type="application/json", **extra)


def get(client, path: str, headers: dict | None = None):
    signed = signed_headers("") if headers is None else headers
    return client.get(path, **{f"HTTP_{k.upper().replace('-', '_')}": v for k, v in signed.items()})


def task_body(key=KEY, payload=None) -> str:
    return json.dumps({"action_key": key, "payload": PAYLOAD if payload is None else payload})


def test_new_key_creates_task_and_answers_201_with_receipt(client):
    response = post(client, task_body())
    assert response.status_code == 201
    body = response.json()
    task = ReceiverTask.objects.get(action_key=KEY)
    assert body == {
        "task_id": str(task.task_id),
        "action_key": KEY,
        "payload_hash": payload_hash(PAYLOAD),
        "status": "open",
        "created": True,
    }


def test_same_key_same_payload_answers_200_with_original_task(client):
    first = post(client, task_body()).json()
    second = post(client, task_body())
    assert second.status_code == 200, second.json()
    assert second.json()["task_id"] == first["task_id"]
    assert second.json()["created"] is False
    assert ReceiverTask.objects.count() == 1


def test_same_key_other_payload_answers_409_and_changes_nothing(client):
    first = post(client, task_body()).json()
    response = post(client, task_body(payload={**PAYLOAD, "plan": "enterprise"}))
    assert response.status_code == 409
    assert response.json()["task_id"] == first["task_id"]
    task = ReceiverTask.objects.get()
    assert task.payload == PAYLOAD


def test_invalid_payload_answers_422_with_reasons(client):
    response = post(client, task_body(payload={"plan": "standard"}))
    assert response.status_code == 422
    assert any("client_name" in reason for reason in response.json()["reasons"])
    assert ReceiverTask.objects.count() == 0


def test_malformed_json_answers_400_and_writes_no_task(client):
    response = post(client, "{not json")
    assert response.status_code == 400
    assert response.json()["error"] == "malformed_json"
    assert ReceiverTask.objects.count() == 0


def test_idempotency_key_must_equal_action_key(client):
    response = post(client, task_body(), idempotency_key="onboarding:7:42:2")
    assert response.status_code == 400
    assert ReceiverTask.objects.count() == 0


def test_oversized_body_answers_413_before_anything_is_read_or_written(client):
    body = task_body(payload={**PAYLOAD, "notes": "x" * (settings.RECEIVER_MAX_BODY_BYTES + 1)})
    response = post(client, body)
    assert response.status_code == 413
    assert ReceiverTask.objects.count() == 0
    assert SeenMessage.objects.count() == 0


def test_missing_signature_answers_401(client):
    response = post(client, task_body(), headers={})
    assert response.status_code == 401
    assert ReceiverTask.objects.count() == 0


def test_forged_signature_answers_401(client):
    body = task_body()
    wrong = "whsec_" + "QUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBQUE="
    response = post(client, body, headers=signed_headers(body, secret=wrong))
    assert response.status_code == 401
    assert ReceiverTask.objects.count() == 0


def test_signature_over_other_body_answers_401(client):
    headers = signed_headers(task_body(key="onboarding:7:1:1"))
    response = post(client, task_body(), headers=headers)
    assert response.status_code == 401
    assert ReceiverTask.objects.count() == 0


def test_stale_timestamp_answers_401(client):
    body = task_body()
    old = timezone.now() - timedelta(minutes=6)
    headers = {
        "webhook-id": "msg_stale",
        "webhook-timestamp": str(int(old.timestamp())),
        "webhook-signature": Webhook(settings.RECEIVER_SIGNING_SECRET).sign("msg_stale", old, body),
    }
    response = post(client, body, headers=headers)
    assert response.status_code == 401
    assert "too old" in response.json()["detail"]
    assert ReceiverTask.objects.count() == 0


def test_replayed_message_id_answers_401_and_writes_nothing_more(client):
    body = task_body()
    headers = signed_headers(body)
    assert post(client, body, headers=headers).status_code == 201
    replay = post(client, body, headers=headers)
    assert replay.status_code == 401
    assert replay.json()["detail"] == "replayed message id"
    assert ReceiverTask.objects.count() == 1


def test_garbled_signature_header_answers_401_not_500(client):
    body = task_body()
    headers = {**signed_headers(body), "webhook-signature": "no-comma-here"}
    response = post(client, body, headers=headers)
    assert response.status_code == 401


def test_lookup_by_action_key(client):
    created = post(client, task_body()).json()
    found = get(client, f"{URL}/{KEY}")
    assert found.status_code == 200
    assert found.json()["task_id"] == created["task_id"]
    assert found.json()["payload_hash"] == payload_hash(PAYLOAD)
    assert get(client, f"{URL}/onboarding:7:999:1").status_code == 404


def test_lookup_requires_signature(client):
    post(client, task_body())
    assert get(client, f"{URL}/{KEY}", headers={}).status_code == 401


def test_key_listing_pages_in_action_key_order(client):
    keys = [f"onboarding:7:{n}:1" for n in (5, 1, 3, 2, 4)]
    for key in keys:
        assert post(client, task_body(key=key), idempotency_key=key).status_code == 201
    first = get(client, f"{URL}?limit=2").json()
    assert [i["action_key"] for i in first["items"]] == sorted(keys)[:2]
    second = get(client, f"{URL}?limit=2&after={first['next_after']}").json()
    assert [i["action_key"] for i in second["items"]] == sorted(keys)[2:4]
    last = get(client, f"{URL}?limit=2&after={second['next_after']}").json()
    assert [i["action_key"] for i in last["items"]] == sorted(keys)[4:]
    assert last["next_after"] is None


def post_batch(client, items: list[dict]):
    body = json.dumps({"items": items})
    extra = {f"HTTP_{k.upper().replace('-', '_')}": v for k, v in signed_headers(body).items()}
    return client.post(f"{URL}/batch", data=body, content_type="application/json", **extra)


def test_batch_answers_item_by_item_and_one_failure_does_not_fail_the_others(client):
    existing = post(client, task_body()).json()
    response = post_batch(
        client,
        [
            {"action_key": "onboarding:7:1:1", "payload": PAYLOAD},
            {"action_key": KEY, "payload": PAYLOAD},
            {"action_key": KEY, "payload": {**PAYLOAD, "plan": "enterprise"}},
            {"action_key": "onboarding:7:2:1", "payload": {"plan": "standard"}},
            "not an object",
        ],
    )
    assert response.status_code == 200
    statuses = [r["http_status"] for r in response.json()["results"]]
    assert statuses == [201, 200, 409, 422, 400]
    results = response.json()["results"]
    assert results[1]["task_id"] == existing["task_id"] and results[1]["created"] is False
    assert set(ReceiverTask.objects.values_list("action_key", flat=True)) == {
        KEY,
        "onboarding:7:1:1",
    }


def test_batch_over_the_item_limit_answers_413_and_writes_nothing(client, settings):
    settings.RECEIVER_BATCH_LIMIT = 2
    items = [{"action_key": f"onboarding:7:{n}:1", "payload": PAYLOAD} for n in range(3)]
    assert post_batch(client, items).status_code == 413
    assert ReceiverTask.objects.count() == 0


def test_batch_needs_a_signature(client):
    body = json.dumps({"items": [{"action_key": KEY, "payload": PAYLOAD}]})
    response = client.post(f"{URL}/batch", data=body, content_type="application/json")
    assert response.status_code == 401
    assert ReceiverTask.objects.count() == 0
