"""A person's connection test of a destination (the console's "Test connection"): one lookup of a key no
handoff has, under the destination's limits, which creates nothing and says whether the destination
answers our credentials.

Each test is a call to a system that serves every workspace, so it is refused for a disabled destination
and taken at most once per CONNECTION_TEST_EVERY_SECONDS per destination, whoever asks and from whichever
web process: the turn is a conditional UPDATE of the destination's row on the database clock, so two
processes cannot both take it. Who may ask is the caller's check (the destination permission).

"Run the whole contract" takes the same turn and runs `destinations probe` (destination_probes.py): it creates
an entry with a probe key, so it is meant for a destination pointed at its provider's sandbox.
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
from outbox.services.destination_probes import (
    ProbeRefused,
    destination_probe,
    probe_holds,
    probeable,
)
from outbox.services.lookup_limits import lookups_under_limits
from outbox.services.recovery import CONNECTION_TEST_KEY
from outbox.settlement.asked import PERSON_LOOKUP_WAIT_SECONDS

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
    # A probe's parts, each "name: verdict: evidence" (the whole contract run).
    lines: tuple[str, ...] = ()


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


def _askable(name: str) -> ConnectionTestResult | None:
    """Why the destination is not asked now (a result to show), None when it may be; ConnectionTestRefused
    for a disabled one."""
    try:
        destination_named(name)
    except DestinationDisabled as exc:
        raise ConnectionTestRefused(
            f"{exc}: the dispatchers do not serve it, so it is not asked"
        ) from None
    except DestinationUnavailable as exc:
        return ConnectionTestResult("error", f"Cannot be used: {exc}.")
    if held := probe_holds(name):
        # The same rule as `manage.py destinations probe` (which a person may override there, knowingly).
        return ConnectionTestResult(
            "info", f"Held: not asked ({held}). Resume it, or wait for the hold's end or its probe."
        )
    return None


def destination_connection_test(*, name: str, asked_by: str) -> ConnectionTestResult:
    """Ask the destination about CONNECTION_TEST_KEY once, if its turn is free. Raises
    ConnectionTestRefused (disabled) or ConnectionTestTooSoon; a paused destination is not asked."""
    if (not_asked := _askable(name)) is not None:
        return not_asked
    destination = destination_named(name)
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


def destination_contract_test(*, name: str, asked_by: str, actor=None) -> ConnectionTestResult:
    """Run the destination's whole contract with a probe key (`destination_probe`) once, if its turn is free:
    each part's verdict in `lines`. Raises as `destination_connection_test`."""
    if (not_asked := _askable(name)) is not None:
        return not_asked
    if not probeable(destination_named(name)):
        return ConnectionTestResult(
            "warning", "Its contract cannot be run by a probe (its kind): nothing was sent."
        )
    _take_turn(name)
    try:
        report = destination_probe(name=name, actor_label=asked_by, actor=actor)
    except ProbeRefused as exc:
        return ConnectionTestResult("error", f"Not probed: {exc}.")
    verdict = "failed" if report.failed else "passed"
    return ConnectionTestResult(
        "error" if report.failed else "success",
        f"The whole contract {verdict} its probe ({report.key}); each part is in the events below.",
        tuple(report.lines()),
    )
