"""The destinations on the health page: breaker, limits, Retry-After hold, slots in use."""

import functools
from dataclasses import dataclass

from django.db.models import Count

from outbox.clock import db_now
from outbox.destinations.registry import enabled_destination_names
from outbox.hold_lines import DestinationHolds, destinations_holds
from outbox.models import DestinationHealth, DestinationSlot, SlotKind


@dataclass(frozen=True)
class DestinationOverview:
    """One destination on the health page: its breaker, the limits its operators set, the Retry-After hold,
    and the slots in use now (calls in flight, requests within the last second)."""

    health: DestinationHealth
    held: bool
    calls_in_flight: int
    requests_last_second: int
    # Every live hold and the next scheduled (`outbox/hold_lines.py`), as the destination page says them.
    holds: DestinationHolds | None = None

    @property
    def name(self) -> str:
        return self.health.name


def destination_names() -> set[str]:
    """The destinations operators may set limits for: every enabled one and every one seen so far."""
    return {*enabled_destination_names(), *DestinationHealth.objects.values_list("name", flat=True)}


@functools.cache
def _overview_rows():
    """The destinations' rows with their Retry-After hold and breaker annotated, built once per process (seven
    subqueries: building them was a tenth of the health page's CPU) and only ever cloned: every time in it is
    the statement's own (the database clock), none Python's."""
    return DestinationHealth.objects.with_retry_after().with_breaker().order_by("name")


def destinations_overview(name: str | None = None) -> list[DestinationOverview]:
    """Every destination (or one), in name order, in four queries whatever their number. A destination not
    seen yet shows the configured default limits."""
    rows = _overview_rows().all()
    slots = DestinationSlot.objects.filter(
        free_at__gt=db_now(),
    ).order_by()
    if name is not None:
        rows, slots = rows.filter(name=name), slots.filter(destination=name)
    health = {row.name: row for row in rows}
    in_use = {
        (d, kind): n
        for d, kind, n in slots.values_list("destination", "kind").annotate(n=Count("id"))
    }
    names = sorted({name} if name is not None else {*health, *enabled_destination_names()})
    holds = destinations_holds(names)
    return [
        DestinationOverview(
            health=health.get(n) or DestinationHealth.not_seen(n),
            held=bool(getattr(health.get(n), "held", False)),
            calls_in_flight=in_use.get((n, SlotKind.CONCURRENCY), 0),
            requests_last_second=in_use.get((n, SlotKind.RATE), 0),
            holds=holds[n],
        )
        for n in names
    ]


def paused_by_breaker(overview: list[DestinationOverview]) -> list[DestinationHealth]:
    """The destinations of `overview` that their breaker pauses now, in its (name) order: what
    `incidents.causes.paused_destinations` reads, taken from the rows the overview read with the breaker's
    hold annotated (the same statement, so the notice and the table agree), not read again."""
    return [row.health for row in overview if row.health.paused_by_breaker]
