"""Signed triggers for the intake tests, made the way a sender makes them: with the standardwebhooks package."""

import json
import uuid
from datetime import UTC, datetime

import pytest
from django.conf import settings
from standardwebhooks.webhooks import Webhook

from tests.factories import ONBOARDING_PAYLOAD, onboarding_world

TRIGGERS_URL = "/approvals/api/triggers"


def trigger_document(reference: str = "crm-1001", revision: int = 1, workspace_id: int = 7, payload=None,
                     **extra) -> dict:
    return {"workflow": "onboarding", "workspace_id": workspace_id, "reference": reference, "revision": revision,
            "payload": dict(ONBOARDING_PAYLOAD if payload is None else payload), **extra}


def sign(body: str, *, msg_id: str | None = None, timestamp: datetime | None = None,
         secret: str | None = None) -> dict[str, str]:
    msg_id = msg_id or f"msg_{uuid.uuid4().hex}"
    timestamp = timestamp or datetime.now(tz=UTC)
    signature = Webhook(secret or settings.INTAKE_SIGNING_SECRET).sign(msg_id, timestamp, body)
    return {"webhook-id": msg_id, "webhook-timestamp": str(int(timestamp.timestamp())), "webhook-signature": signature}


@pytest.fixture
def world():
    return onboarding_world()


@pytest.fixture
def post_signed(client):
    """POST a body with the given headers (or signed now with the intake secret)."""

    def _post(document=None, *, body: str | None = None, headers: dict | None = None, **sign_kwargs):
        body = json.dumps(document) if body is None else body
        headers = sign(body, **sign_kwargs) if headers is None else headers
        return client.generic("POST", TRIGGERS_URL, data=body.encode("utf-8"), content_type="application/json",
                              headers=headers)

    return _post


@pytest.fixture
def send(post_signed):
    """Send a trigger document, freshly signed, with an optional fixed webhook id."""

    def _send(document: dict, *, msg_id: str | None = None, **sign_kwargs):
        return post_signed(document, msg_id=msg_id, **sign_kwargs)

    return _send
