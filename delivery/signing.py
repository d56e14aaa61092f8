"""Verifies Standard Webhooks signatures on every receiver call and refuses replays."""

from datetime import timedelta

from django.conf import settings
from django.db import connections
from django.utils import timezone

from delivery.models import SeenMessage
from httpapi.signatures import SignatureInvalid, secrets_in_force, verify_signature


class SignatureRejected(Exception):
    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


def receiver_secrets() -> list[str]:
    """The current secret and, during a rotation, the previous one (docs/security.md, "Secret rotation")."""
    return secrets_in_force(
        settings.RECEIVER_SIGNING_SECRET,
        settings.RECEIVER_SIGNING_SECRET_PREVIOUS,
        name="RECEIVER_SIGNING_SECRET",
    )


def verify_signed_request(*, body: str, headers: dict[str, str]) -> str:
    """Check signature and timestamp (the package's 5-minute tolerance), then record the message id.

    Returns the message id. Raises SignatureRejected for a missing, wrong, stale or replayed signature.
    """
    try:
        verify_signature(secrets=receiver_secrets(), body=body, headers=headers)
    except SignatureInvalid as exc:
        raise SignatureRejected(exc.reason) from exc
    message_id = {k.lower(): v for k, v in headers.items()}.get("webhook-id", "")
    if not message_id or len(message_id) > 120:
        raise SignatureRejected("missing or overlong message id")
    # One statement, no savepoint: a message id already seen inserts nothing.
    connection = connections["delivery"]
    table = connection.ops.quote_name(SeenMessage._meta.db_table)
    with connection.cursor() as cursor:
        cursor.execute(
            f"INSERT INTO {table} (message_id, received_at) VALUES (%s, %s) ON CONFLICT DO NOTHING",  # noqa: S608
            [
                message_id,
                SeenMessage._meta.get_field("received_at").get_db_prep_value(
                    timezone.now(), connection
                ),
            ],
        )
        if cursor.rowcount != 1:
            raise SignatureRejected("replayed message id")
    return message_id


def seen_messages_prune() -> int:
    """Forget message ids older than twice the tolerance: the timestamp check refuses those anyway."""
    horizon = timezone.now() - timedelta(seconds=2 * settings.RECEIVER_SIGNATURE_TOLERANCE_SECONDS)
    deleted, _ = SeenMessage.objects.using("delivery").filter(received_at__lt=horizon).delete()
    return deleted
