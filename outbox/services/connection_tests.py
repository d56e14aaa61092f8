"""A person's connection test of a destination (the console's "Test connection"): one lookup of a key no
handoff has, under the destination's limits, which creates nothing and says whether the destination
answers our credentials.

Each test is a call to a system that serves every workspace, so it is refused for a disabled destination
and taken at most once per CONNECTION_TEST_EVERY_SECONDS per destination, whoever asks and from whichever
web process: the turn is a conditional UPDATE of the destination's row on the database clock, so two
processes cannot both take it. Who may ask is the caller's check (the destination permission).
"""

import math
from dataclasses import dataclass

from django.db.models import Q

from lib.databases import DB
from outbox.clock import DbNow, db_now, db_time
from outbox.destinations import LookupFailed
from outbox.destinations.registry import (
    DestinationDisabled,
    DestinationUnavailable,
    destination_named,
)
from outbox.errors import OutboxError
from outbox.models import DestinationHealth
from outbox.services.breaker import destination_health_get_or_create
from outbox.services.lookup_limits import lookups_under_limits
from outbox.services.recovery import CONNECTION_TEST_KEY
from outbox.services.settlement import PERSON_LOOKUP_WAIT_SECONDS

CONNECTION_TEST_EVERY_SECONDS = 10


class ConnectionTestRefused(OutboxError):
    """The destination is not asked (it is disabled); the message says why."""


class ConnectionTestTooSoon(OutboxError):
    """The destination was tested less than CONNECTION_TEST_EVERY_SECONDS ago; `retry_after` in seconds."""

    def __init__(self, name: str, retry_after: int):
        self.retry_after = retry_after
        super().__init__(
            f"{name} was tested less than {CONNECTION_TEST_EVERY_SECONDS} seconds ago (a test is taken at "
            f"most once every {CONNECTION_TEST_EVERY_SECONDS} seconds per destination, whoever asks): "
            f"try again in {retry_after} second{'s' if retry_after != 1 else ''}"
        )


@dataclass(frozen=True)
class ConnectionTestResult:
    level: str  # success, warning, info, error: how the page shows it
    text: str


def _take_turn(name: str) -> None:
    """Take the destination's test turn, or raise ConnectionTestTooSoon with the seconds left."""
    health = destination_health_get_or_create(name)
    free = Q(connection_tested_at__isnull=True) | Q(
        connection_tested_at__lte=DbNow(-CONNECTION_TEST_EVERY_SECONDS)
    )
    rows = DestinationHealth.objects.using(DB).filter(pk=health.pk)
    if rows.filter(free).update(connection_tested_at=db_now()):
        return
    tested_at = rows.values_list("connection_tested_at", flat=True).get()
    left = CONNECTION_TEST_EVERY_SECONDS - (db_time() - tested_at).total_seconds()
    raise ConnectionTestTooSoon(name, max(1, math.ceil(left)))


def destination_connection_test(*, name: str, asked_by: str) -> ConnectionTestResult:
    """Ask the destination about CONNECTION_TEST_KEY once, if its turn is free. Raises
    ConnectionTestRefused (disabled) or ConnectionTestTooSoon; a paused destination is not asked."""
    try:
        destination = destination_named(name)
    except DestinationDisabled as exc:
        raise ConnectionTestRefused(
            f"{exc}: the dispatchers do not serve it, so it is not asked"
        ) from None
    except DestinationUnavailable as exc:
        return ConnectionTestResult("error", f"Cannot be used: {exc}.")
    if DestinationHealth.objects.using(DB).held_back().filter(name=name).exists():
        return ConnectionTestResult("info", "Paused: not asked. Resume it, or wait for its probe.")
    if not destination.supports_lookup:
        return ConnectionTestResult(
            "warning",
            "This destination cannot be asked without sending something (it has no lookup): "
            "nothing was sent.",
        )
    _take_turn(name)
    try:
        lookups_under_limits(
            destination, worker=asked_by, wait_seconds=PERSON_LOOKUP_WAIT_SECONDS
        ).lookup(CONNECTION_TEST_KEY)
    except LookupFailed as exc:
        return ConnectionTestResult("error", f"The destination could not be asked: {exc}.")
    return ConnectionTestResult(
        "success", "Reachable: it answered a lookup with our credentials (nothing was created)."
    )
