"""Which secrets verify the status events that name a destination: its own (`status_events.secret_env` in
its configuration, outbox/destinations/status_events_config.py), never another destination's.

The seed destination (built from settings while no row has the default name: a fresh checkout, the test
suite) keeps settings.RECEIVER_EVENTS_SIGNING_SECRET, the one secret of the time before destinations were
data. A row that names no secret of its own has none: its events are refused, and an event the single
secret would have verified is logged as such, so that the operator knows what to name.
"""

import logging

from django.conf import settings

from httpapi.signatures import SignatureInvalid, verify_signature
from lib.databases import DB
from outbox.destinations.registry import default_destination_name, row_config
from outbox.destinations.status_events_config import SINGLE_SECRET_ENV, status_event_secrets
from outbox.models import DestinationConfig

log = logging.getLogger(__name__)


def _single_secrets() -> list[str]:
    pair = (
        settings.RECEIVER_EVENTS_SIGNING_SECRET,
        settings.RECEIVER_EVENTS_SIGNING_SECRET_PREVIOUS,
    )
    return [secret.strip() for secret in pair if secret.strip()]


def status_event_secrets_of(name: str) -> list[str]:
    """The secrets, current first, that may sign an event about `name`'s handoffs; [] for a destination
    that is unknown, disabled or names none."""
    row = DestinationConfig.objects.using(DB).filter(name=name).first()
    if row is None:
        return _single_secrets() if name == default_destination_name() else []
    return status_event_secrets(row_config(row)) if row.enabled else []


def note_if_signed_with_single_secret(*, name: str, body: str, headers: dict) -> None:
    """An event about `name`, which has no secret of its own: if the single secret signed it, say in the
    log which step of the migration is left (the event is refused all the same)."""
    secrets = _single_secrets()
    try:
        verify_signature(secrets=secrets, body=body, headers=headers) if secrets else None
    except SignatureInvalid:
        return
    if secrets:
        log.warning(
            "status event for destination %s refused: it is signed with %s, which no longer speaks for "
            "every destination; name the destination's own secret in its configuration "
            "(status_events.secret_env)",
            name,
            SINGLE_SECRET_ENV,
        )
