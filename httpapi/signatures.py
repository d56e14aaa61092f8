"""Standard Webhooks verification against one or more secrets, so that a secret can be rotated.

During a rotation the receiving side accepts the new and the previous secret while senders move to
the new one (the Standard Webhooks scheme allows several signatures and several secrets for this).
"""

from collections.abc import Mapping, Sequence

from django.core.exceptions import ImproperlyConfigured
from standardwebhooks.webhooks import Webhook, WebhookVerificationError


class SignatureInvalid(Exception):
    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


def secrets_in_force(newest: str, previous: str = "", *, name: str) -> list[str]:
    """The secrets to verify with, newest first. `name` is the setting named in the error."""
    secrets = [s for s in (newest.strip(), previous.strip()) if s]
    if not secrets or not newest.strip():
        raise ImproperlyConfigured(f"{name} is not set")
    return secrets


def verify_signature(*, secrets: Sequence[str], body: str, headers: Mapping[str, str]) -> None:
    """Accept the message if any secret verifies it (timestamp within the package's 5 minutes).

    Raises SignatureInvalid with the reason of the newest secret's refusal.
    """
    headers = {k.lower(): v for k, v in headers.items()}
    reasons = []
    for secret in secrets:
        try:
            Webhook(secret).verify(body, headers, json_parse=False)
        except WebhookVerificationError as exc:
            reasons.append(str(exc))
        except (ValueError, TypeError):
            # The package trusts the header format; a garbled header is a bad signature, not a crash.
            reasons.append("unreadable signature headers")
        else:
            return
    raise SignatureInvalid(reasons[0])
