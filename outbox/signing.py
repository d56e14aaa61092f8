"""Signs outgoing receiver calls in the Standard Webhooks format."""

import uuid
from functools import lru_cache

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.utils import timezone
from standardwebhooks.webhooks import Webhook


@lru_cache(maxsize=4)
def _signer(secret: str) -> Webhook:
    """One signer per secret: building one decodes the secret, which every call would otherwise repeat."""
    return Webhook(secret)


def signed_headers(body: str, *, secret: str | None = None) -> dict[str, str]:
    """Headers for one call. Each call gets a fresh message id, so the receiver can refuse replays."""
    secret = settings.RECEIVER_SIGNING_SECRET if secret is None else secret
    if not secret:
        raise ImproperlyConfigured("RECEIVER_SIGNING_SECRET is not set")
    message_id = f"msg_{uuid.uuid4().hex}"
    now = timezone.now()
    return {
        "webhook-id": message_id,
        "webhook-timestamp": str(int(now.timestamp())),
        "webhook-signature": _signer(secret).sign(message_id, now, body),
    }
