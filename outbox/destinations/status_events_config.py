"""A destination's status-event secret: which secret signs the status events its receiver sends us
(`{"status_events": {"secret_env": "...", "previous_secret_env": "..."}}` in its configuration).

Each destination has its own, read from the environment at each event like its other secrets, so an event
signed with destination A's secret cannot speak for destination B's handoffs. The key belongs to no kind:
the registry takes it off before the kind reads its configuration (docs/destinations.md).
"""

import os

from lib.databases import DB
from outbox.destinations.http.destination import secret_named
from outbox.models import DestinationConfig

STATUS_EVENTS_KEY = "status_events"
# The one secret that verified every destination's events before each had its own; now only the seed's
# (the destination built from settings while no row has the default name).
SINGLE_SECRET_ENV = "RECEIVER_EVENTS_SIGNING_SECRET"  # noqa: S105 - a variable name
_KEYS = ("secret_env", "previous_secret_env")


def status_events_problem(value: object) -> str:
    """Why a configuration's `status_events` cannot be used ("" when it can)."""
    if not isinstance(value, dict) or not isinstance(value.get("secret_env"), str):
        return f"{STATUS_EVENTS_KEY} must be an object naming its secret's variable in secret_env"
    unknown = sorted(set(value) - set(_KEYS))
    if unknown:
        return (
            f"{STATUS_EVENTS_KEY}: unknown key(s) {', '.join(unknown)} (known: {', '.join(_KEYS)})"
        )
    if not all(isinstance(value.get(key, ""), str) for key in _KEYS):
        return f"{STATUS_EVENTS_KEY}: secret_env and previous_secret_env name variables (strings)"
    return ""


def destinations_left_on_the_single_secret() -> list[str]:
    """The enabled destinations naming no status-event secret while the single one is still set: their
    events, verified by it before, are refused now (said by `manage.py destinations check`)."""
    if not os.environ.get(SINGLE_SECRET_ENV):
        return []
    rows = DestinationConfig.objects.using(DB).filter(enabled=True).order_by("name")
    return [row.name for row in rows if not isinstance(row.config.get(STATUS_EVENTS_KEY), dict)]


def status_event_secrets(config: dict) -> list[str]:
    """The secrets that verify the destination's status events, current first; [] when it names none or
    its current one is not set (a rotation's previous one alone speaks for nobody)."""
    named = config.get(STATUS_EVENTS_KEY)
    if not isinstance(named, dict) or not named.get("secret_env"):
        return []
    current = secret_named(named["secret_env"], "").strip()
    previous = (
        secret_named(named["previous_secret_env"], "").strip()
        if named.get("previous_secret_env")
        else ""
    )
    return [secret for secret in (current, previous) if secret] if current else []
