"""A destination's holds in words, the same for the destination page, Health and `manage.py destinations
holds`: every live hold (kind, reason, since, until, who set it) and the next one scheduled.

Every hold is a row (`DestinationHold`): an operator's pause, a maintenance window, a Retry-After hold, an
unservable hold, the breaker's pause and a credential hold (these two until a probe succeeds, its next time
read from the destination's row). Every time is the database's, read in the same query as the holds: a
probe time already past reads as "probing now", never as a time gone by."""

from dataclasses import dataclass
from datetime import datetime

from outbox.clock import db_now
from outbox.models import DestinationHealth, DestinationHold, HoldKind
from outbox.models.holds import OPERATOR_KINDS


def _utc(at: datetime | None) -> str:
    return f"{at:%Y-%m-%d %H:%M:%S} UTC" if at else "a time not recorded"


@dataclass(frozen=True)
class HoldLine:
    kind: str
    reason: str
    since: datetime | None
    until: str
    who: str
    hold_id: int | None = None

    @property
    def words(self) -> str:
        return (
            f"{self.kind}: {self.reason or 'no reason given'} · since {_utc(self.since)} · "
            f"until {self.until} · set by {self.who}"
        )


@dataclass(frozen=True)
class DestinationHolds:
    name: str
    live: list[HoldLine]
    next_scheduled: HoldLine | None

    @property
    def held(self) -> bool:
        return bool(self.live)


def _until(hold: DestinationHold, health: DestinationHealth | None, now: datetime) -> str:
    if hold.until_probe:
        probe_at = health.next_probe_at if health is not None else None
        if probe_at is None or probe_at <= now:
            return "a probe succeeds (probing now)"
        return f"a probe succeeds (next probe {_utc(probe_at)})"
    if hold.ends_at is not None:
        return _utc(hold.ends_at)
    if hold.kind == HoldKind.UNSERVABLE:
        return "a dispatcher can serve it"
    return "an operator resumes it"


def _row_line(
    hold: DestinationHold, health: DestinationHealth | None = None, now: datetime | None = None
) -> HoldLine:
    return HoldLine(
        kind=hold.get_kind_display(),
        reason=hold.reason,
        since=hold.starts_at,
        until=_until(hold, health, now or hold.starts_at),
        who=hold.set_by or "an operator",
        # Only an operator's hold is ended from a screen; the system's end by themselves.
        hold_id=hold.pk if hold.kind in OPERATOR_KINDS else None,
    )


def destinations_holds(names) -> dict[str, DestinationHolds]:
    """Each named destination's live holds (oldest first) and the next hold scheduled. Two queries whatever
    the number of names."""
    names = sorted(set(names))
    health = {
        row.name: row
        for row in DestinationHealth.objects.filter(name__in=names).annotate(now=db_now())
    }
    rows: dict[str, list[DestinationHold]] = {}
    now = next((row.now for row in health.values()), None)
    for hold in (
        DestinationHold.objects.filter(destination__in=names, ended_at__isnull=True)
        .annotate(now=db_now())
        .order_by("starts_at", "pk")
    ):
        rows.setdefault(hold.destination, []).append(hold)
        now = hold.now
    return {name: _holds_of(name, health.get(name), rows.get(name, []), now) for name in names}


def destination_holds_now(name: str) -> DestinationHolds:
    return destinations_holds([name])[name]


def _holds_of(
    name: str, health: DestinationHealth | None, rows: list[DestinationHold], now: datetime | None
) -> DestinationHolds:
    if now is None:  # neither a row nor a hold: nothing holds it
        return DestinationHolds(name, [], None)
    live = [_row_line(h, health, now) for h in rows if h.starts_at <= now and not _over(h, now)]
    later = [h for h in rows if h.starts_at > now]
    return DestinationHolds(name, live, _row_line(later[0]) if later else None)


def _over(hold: DestinationHold, now: datetime) -> bool:
    return hold.ends_at is not None and hold.ends_at <= now
