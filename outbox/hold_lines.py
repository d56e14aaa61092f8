"""A destination's holds in words, the one wording of every screen: the destination page, Health, the handoff
list and page, the request page, the handoff's guidance and `manage.py destinations holds` list every live
hold (kind, reason, since, until, who set it) and the next one scheduled.

Every hold is a row (`DestinationHold`): an operator's pause, a maintenance window, a Retry-After hold, an
unservable hold, the breaker's pause and a credential hold (these two until a probe succeeds, its next time
read from the destination's row). Every time is the database's, read in the same query as the holds: a
probe time already past reads as "probing now", never as a time gone by."""

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime

from django.db import models

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
    # The hold's kind as stored (`HoldKind`), for advice that depends on it (a refused credential).
    code: str = ""

    @property
    def words(self) -> str:
        return (
            f"{self.kind}: {self.reason or 'no reason given'} · since {_utc(self.since)} · "
            f"until {self.until} · set by {self.who}"
        )

    @property
    def by_operator(self) -> bool:
        return self.code in OPERATOR_KINDS


@dataclass(frozen=True)
class DestinationHolds:
    name: str
    live: list[HoldLine]
    next_scheduled: HoldLine | None

    @property
    def held(self) -> bool:
        return bool(self.live)

    @property
    def shown(self) -> bool:
        """Anything to say: a live hold or one scheduled."""
        return self.held or self.next_scheduled is not None

    @property
    def text(self) -> str:
        """Every live hold and the next scheduled as one line of text (guidance, a request's step)."""
        parts = [line.words for line in self.live]
        if self.next_scheduled is not None:
            parts.append(f"next: {self.next_scheduled.words}")
        return "; ".join(parts) if parts else "no hold"

    @property
    def owner(self) -> str:
        """Who ends the holds: the operators who set theirs, else the system (they end by themselves)."""
        people = sorted({line.who for line in self.live if line.by_operator})
        if people:
            return ", ".join(people) + " (operator)"
        return "the system (its holds end by themselves)"

    def has(self, kind: str) -> bool:
        return any(line.code == kind for line in self.live)


def _until(hold: DestinationHold, probe_at: datetime | None, now: datetime) -> str:
    if hold.until_probe:
        if probe_at is None or probe_at <= now:
            return "a probe succeeds (probing now)"
        return f"a probe succeeds (next probe {_utc(probe_at)})"
    if hold.ends_at is not None:
        return _utc(hold.ends_at)
    if hold.kind == HoldKind.UNSERVABLE:
        return "a dispatcher can serve it"
    return "an operator resumes it"


def _row_line(hold: DestinationHold, now: datetime) -> HoldLine:
    return HoldLine(
        kind=hold.get_kind_display(),
        reason=hold.reason,
        since=hold.starts_at,
        until=_until(hold, hold.probe_at, now),
        who=hold.set_by or "an operator",
        # Only an operator's hold is ended from a screen; the system's end by themselves.
        hold_id=hold.pk if hold.kind in OPERATOR_KINDS else None,
        code=hold.kind,
    )


def destinations_holds(names: Iterable[str]) -> dict[str, DestinationHolds]:
    """Each named destination's live holds (oldest first) and the next hold scheduled: one query whatever
    the number of names (none without names), so a list page's rows cost no query each."""
    names = sorted({n for n in names if n})
    if not names:
        return {}
    probe = DestinationHealth.objects.filter(name=models.OuterRef("destination"))
    rows: dict[str, list[DestinationHold]] = {}
    now = None
    for hold in (
        DestinationHold.objects.not_ended()
        .filter(destination__in=names)
        .annotate(now=db_now(), probe_at=models.Subquery(probe.values("next_probe_at")[:1]))
        .order_by("starts_at", "pk")
    ):
        rows.setdefault(hold.destination, []).append(hold)
        now = hold.now
    return {name: _holds_of(name, rows.get(name, []), now) for name in names}


def destination_holds_now(name: str) -> DestinationHolds:
    return destinations_holds([name])[name]


def _holds_of(name: str, rows: list[DestinationHold], now: datetime | None) -> DestinationHolds:
    if now is None:  # no hold not ended: nothing holds it
        return DestinationHolds(name, [], None)
    live = [_row_line(h, now) for h in rows if h.starts_at <= now]
    later = [h for h in rows if h.starts_at > now]
    return DestinationHolds(name, live, _row_line(later[0], now) if later else None)
