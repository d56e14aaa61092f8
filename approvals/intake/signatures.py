"""Signed triggers: the Standard Webhooks signature, its timestamp tolerance and the secrets in force."""

import math
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime

from django.conf import settings

from approvals.errors import ApprovalsError
from httpapi.signatures import SignatureInvalid, secrets_in_force, verify_signature

WEBHOOK_ID_MAX_LENGTH = 200


class TriggerSignatureRejected(ApprovalsError):
    """Missing, forged or stale signature: nothing is written."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


class TriggerReplayed(TriggerSignatureRejected):
    """The very message already received (same id, same signed timestamp) sent again."""


@dataclass(frozen=True)
class SignedMessage:
    webhook_id: str
    signed_at: datetime


def trigger_signature_verify(*, body: str, headers: Mapping[str, str]) -> SignedMessage:
    """Check the signature and its timestamp (the package's 5-minute tolerance). Writes nothing.

    During a secret rotation both INTAKE_SIGNING_SECRET and INTAKE_SIGNING_SECRET_PREVIOUS verify.
    """
    secrets = secrets_in_force(
        settings.INTAKE_SIGNING_SECRET,
        settings.INTAKE_SIGNING_SECRET_PREVIOUS,
        name="INTAKE_SIGNING_SECRET",
    )
    headers = {k.lower(): v for k, v in headers.items()}
    try:
        verify_signature(secrets=secrets, body=body, headers=headers)
    except SignatureInvalid as exc:
        raise TriggerSignatureRejected(exc.reason) from exc
    # The signature covers the timestamp to the second: the same id and second is the same message.
    signed_at = datetime.fromtimestamp(math.floor(float(headers["webhook-timestamp"])), tz=UTC)
    return SignedMessage(webhook_id=headers["webhook-id"], signed_at=signed_at)
