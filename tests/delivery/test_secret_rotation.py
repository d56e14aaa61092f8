"""During a rotation the receiver accepts the new and the previous secret, and no other."""

import base64
import json
import uuid
from datetime import UTC, datetime

import pytest
from standardwebhooks.webhooks import Webhook

from delivery.models import ReceiverTask
from outbox.signing import signed_headers

pytestmark = pytest.mark.django_db(databases=["default", "delivery"])

URL = "/delivery/api/tasks"


def secret(seed: bytes) -> str:
    return "whsec_" + base64.b64encode(seed.ljust(32, b"!")).decode()


NEW, PREVIOUS, UNKNOWN = (
    secret(b"rotation-new"),
    secret(b"rotation-previous"),
    secret(b"rotation-unknown"),
)


def post_signed_with(client, signing_secret: str, n: int):
    key = f"onboarding:7:{n}:1"
    body = json.dumps({"action_key": key, "payload": {"client_name": "Northwind"}})
    message_id, now = f"msg_{uuid.uuid4().hex}", datetime.now(tz=UTC)
    headers = {
        "webhook-id": message_id,
        "webhook-timestamp": str(int(now.timestamp())),
        "webhook-signature": Webhook(signing_secret).sign(message_id, now, body),
        "Idempotency-Key": key,
    }
    return client.post(URL, data=body, content_type="application/json", headers=headers)


@pytest.fixture
def rotating(settings):
    settings.RECEIVER_SIGNING_SECRET = NEW
    settings.RECEIVER_SIGNING_SECRET_PREVIOUS = PREVIOUS


def test_new_and_previous_secret_both_verify_during_a_rotation(rotating, client):
    assert post_signed_with(client, NEW, 1).status_code == 201
    assert post_signed_with(client, PREVIOUS, 2).status_code == 201
    assert ReceiverTask.objects.count() == 2


def test_a_third_secret_is_refused_during_a_rotation(rotating, client):
    response = post_signed_with(client, UNKNOWN, 3)
    assert response.status_code == 401
    assert response.json()["error"] == "signature_rejected"
    assert ReceiverTask.objects.count() == 0


def test_previous_secret_is_refused_once_the_rotation_ends(settings, client):
    settings.RECEIVER_SIGNING_SECRET = NEW
    settings.RECEIVER_SIGNING_SECRET_PREVIOUS = ""
    assert post_signed_with(client, PREVIOUS, 4).status_code == 401
    assert post_signed_with(client, NEW, 5).status_code == 201


def test_the_sender_signs_with_the_newest_secret(rotating):
    body = "{}"
    headers = signed_headers(body)
    timestamp = datetime.fromtimestamp(int(headers["webhook-timestamp"]), tz=UTC)
    assert headers["webhook-signature"] == Webhook(NEW).sign(headers["webhook-id"], timestamp, body)
