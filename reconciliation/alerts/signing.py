"""Standard Webhooks headers for an alert whose message id is stable: a resend carries the same
`webhook-id` (the receiver's deduplication key), unlike a receiver call, which gets a fresh one."""

from datetime import datetime

from django.utils import timezone
from standardwebhooks.webhooks import Webhook


def signed_headers(
    body: str, *, secret: str, message_id: str, now: datetime | None = None
) -> dict[str, str]:
    now = now or timezone.now()
    return {
        "webhook-id": message_id,
        "webhook-timestamp": str(int(now.timestamp())),
        "webhook-signature": Webhook(secret).sign(message_id, now, body),
    }
