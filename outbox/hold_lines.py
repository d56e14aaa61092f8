"""A destination's holds in words, the same for the destination page, Health and `manage.py destinations
holds`: every live hold (kind, reason, since, until, who set it) and the next one scheduled.

An operator's pause and a maintenance window are rows (`DestinationHold`); the breaker's pause (an outage, a
refused credential, a dispatcher that cannot serve it) and a Retry-After hold are read from the destination's
row. Every time is the database's, read in the same query as the holds: a probe time already past reads as
"probing now", never as a time gone by."""

from dataclasses import dataclass
from datetime import datetime

from outbox.clock import db_now
from outbox.models import (
    DestinationHealth,
    DestinationHold,
    DestinationState,
    PauseReason,
)

BREAKER_KINDS = {
    PauseReason.CREDENTIAL: "Credential hold",
    PauseReason.UNREACHABLE: "Breaker pause",
    PauseReason.UNSERVABLE: "Cannot be served",
}


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


def _row_line(hold: DestinationHold) -> HoldLine:
    return HoldLine(
        kind=hold.get_kind_display(),
        reason=hold.reason,
        since=hold.starts_at,
        until=_utc(hold.ends_at) if hold.ends_at else "an operator resumes it",
        who=hold.set_by or "an operator",
        hold_id=hold.pk,
    )


def _breaker_line(health: DestinationHealth, now: datetime) -> HoldLine:
    if health.pause_reason == PauseReason.UNSERVABLE:
        until, who = "a dispatcher can serve it", "a dispatcher"
    elif health.next_probe_at is None or health.next_probe_at <= now:
        until, who = "a probe succeeds (probing now)", "the breaker"
    else:
        until, who = f"a probe succeeds (next probe {_utc(health.next_probe_at)})", "the breaker"
    return HoldLine(
        kind=BREAKER_KINDS.get(health.pause_reason, "Breaker pause"),
        reason=health.last_error,
        since=health.paused_at,
        until=until,
        who=who,
    )


def _retry_after_line(health: DestinationHealth) -> HoldLine:
    return HoldLine(
        kind="Retry-After hold",
        reason=health.hold_reason,
        since=health.hold_since,
        until=_utc(health.hold_until),
        who="the destination (its answer)",
    )


def destinations_holds(names) -> dict[str, DestinationHolds]:
    """Each named destination's live holds (the operators' oldest first, then the breaker's and the
    Retry-After) and the next hold scheduled. Two queries whatever the number of names."""
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
    live = [_row_line(h) for h in rows if h.starts_at <= now and not _over(h, now)]
    live += _row_holds(health, now) if health is not None else []
    later = [h for h in rows if h.starts_at > now]
    return DestinationHolds(name, live, _row_line(later[0]) if later else None)


def _over(hold: DestinationHold, now: datetime) -> bool:
    return hold.ends_at is not None and hold.ends_at <= now


def _row_holds(health: DestinationHealth, now: datetime) -> list[HoldLine]:
    """The holds kept on the destination's row: the breaker's pause and the Retry-After hold."""
    lines = []
    if health.state == DestinationState.PAUSED:
        lines.append(_breaker_line(health, now))
    if health.hold_until and health.hold_until > now:
        lines.append(_retry_after_line(health))
    return lines
