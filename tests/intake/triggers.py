"""Signed triggers, made the way a sender makes them: with the standardwebhooks package."""

import uuid
from datetime import UTC, datetime

from django.conf import settings
from standardwebhooks.webhooks import Webhook

from tests.factories import ONBOARDING_PAYLOAD

TRIGGERS_URL = "/approvals/api/triggers"


def trigger_document(
    reference: str = "crm-1001", revision: int = 1, workspace_id: int = 7, payload=None, **extra
) -> dict:
    return {
        "workflow": "onboarding",
        "workspace_id": workspace_id,
        "reference": reference,
        "revision": revision,
        "payload": dict(ONBOARDING_PAYLOAD if payload is None else payload),
        **extra,
    }


def sign(
    body: str,
    *,
    msg_id: str | None = None,
    timestamp: datetime | None = None,
    secret: str | None = None,
) -> dict[str, str]:
    msg_id = msg_id or f"msg_{uuid.uuid4().hex}"
    timestamp = timestamp or datetime.now(tz=UTC)
    signature = Webhook(secret or settings.INTAKE_SIGNING_SECRET).sign(msg_id, timestamp, body)
    return {
        "webhook-id": msg_id,
        "webhook-timestamp": str(int(timestamp.timestamp())),
        "webhook-signature": signature,
    }
