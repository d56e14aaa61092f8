"""Signs outgoing calls in the Standard Webhooks format: receiver calls and alert channels alike.

A receiver call gets a fresh message id each time, so the receiver can refuse replays; an alert passes its
own stable id, so a resend carries the same `webhook-id` (the receiver's deduplication key). Its timestamp is
the database's time within a dispatcher's batch (`outbox/clock.py` `calls_now`): a receiver refuses one 5
minutes off its own clock, and a dispatcher host's clock may be that far off.

The signature is the `standardwebhooks` library's, over the time as UTC: its `sign` reads any datetime's clock
as UTC, so a time given in another zone would be signed for a moment the `webhook-timestamp` header did not
state, and the receiver would refuse it.
"""

import os
from datetime import UTC, datetime
from functools import lru_cache

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from standardwebhooks.webhooks import Webhook

from outbox.clock import calls_now


@lru_cache(maxsize=16)
def _signer(secret: str) -> Webhook:
    """One signer per secret: building one decodes the secret, which every call would otherwise repeat."""
    return Webhook(secret)


def signed_headers(
    body: str,
    *,
    secret: str | None = None,
    message_id: str | None = None,
    now: datetime | None = None,
) -> dict[str, str]:
    """Headers for one call, signed with `secret` (the receiver's, from settings, when not given)."""
    secret = settings.RECEIVER_SIGNING_SECRET if secret is None else secret
    if not secret:
        raise ImproperlyConfigured("RECEIVER_SIGNING_SECRET is not set")
    # 128 random bits, as hex: a uuid4's format without its fixed version bits, at a quarter of its CPU.
    message_id = message_id or f"msg_{os.urandom(16).hex()}"
    now = (now or calls_now()).astimezone(UTC)
    return {
        "webhook-id": message_id,
        "webhook-timestamp": str(int(now.timestamp())),
        "webhook-signature": _signer(secret).sign(message_id, now, body),
    }
