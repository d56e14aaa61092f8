"""What a handoff table and a handoff's page say about the handoff's destination when it takes no call now:
paused by its breaker (unreachable, credentials refused), paused by an operator or in a maintenance window, or
under a Retry-After hold; and why a row needs a person when its own state does not say it (a live finding).

Read once per page with the destination queryset's own annotations (`DestinationHealthQuerySet.with_window`,
and the Retry-After hold on the database clock as the Destinations page reads it): a table of 50 rows costs
the same two queries as one row, and counts nothing."""

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime

from outbox.clock import db_now
from outbox.models import DestinationHealth, DestinationState, Handoff, HoldKind, PauseReason
from reconciliation.selectors import live_findings


@dataclass(frozen=True)
class DestinationHold:
    """Why a destination takes no call now, since when and until when, as a handoff's row and page say it.
    Every time is one the database's clock wrote (the breaker's pause and probe, a window, a Retry-After).

    `health` is the destination's row annotated `in_window` and `held` (as `destination_summaries` reads it):
    the handoff's guidance (`outbox.guidance.next_step`) takes it as the paused destination."""

    name: str
    cause: str
    since: datetime | None
    until: datetime | None
    next_probe_at: datetime | None
    reason: str
    health: DestinationHealth
    # The database's time when the row was read: a probe time already past reads as due.
    now: datetime | None = None
    set_by: str = ""

    @property
    def headline(self) -> str:
        return {
            "window": f"Destination {self.name} is paused by an operator",
            "maintenance": f"Destination {self.name} is in a maintenance window",
            "credential": f"Destination {self.name} is paused: it refused our credentials",
            "unreachable": f"Destination {self.name} is paused: it cannot be reached",
            "retry_after": f"Destination {self.name} asked us to wait (Retry-After)",
        }[self.cause]

    @property
    def timing(self) -> str:
        """'since 16:25:01 UTC · next probe 16:25:31 UTC', a window's end, or a Retry-After hold's
        'held since …, until …'; 'unknown' where no time was recorded."""
        if self.cause == "retry_after":
            # Extensions keep the hold's start (`outbox.services.limits`): since when it has been held.
            since = _utc(self.since) if self.since else "a time not recorded"
            return f"held since {since}, until {_utc(self.until)}: no call before then"
        parts = [f"since {_utc(self.since)}"] if self.since else []
        if self.cause in ("window", "maintenance"):
            parts.append(
                f"until {_utc(self.until)}" if self.until else "until an operator resumes it"
            )
        else:
            if self.next_probe_at is None:
                probe = "no probe due"
            elif self.now is not None and self.next_probe_at <= self.now:
                probe = "probing now"
            else:
                probe = f"next probe {_utc(self.next_probe_at)}"
            parts.append(f"{probe}; resumes by itself when a probe succeeds")
        return " · ".join(parts)


def _utc(at: datetime | None) -> str:
    return f"{at:%Y-%m-%d %H:%M:%S} UTC" if at else "unknown"


def _hold_of(health: DestinationHealth) -> DestinationHold | None:
    common = {"name": health.name, "health": health, "now": getattr(health, "now", None)}
    if getattr(health, "in_window", False):
        return DestinationHold(
            cause="maintenance" if health.operator_kind == HoldKind.WINDOW else "window",
            since=health.operator_since,
            until=health.operator_until,
            next_probe_at=None,
            reason=health.operator_reason,
            set_by=health.operator_by,
            **common,
        )
    if health.state == DestinationState.PAUSED:
        return DestinationHold(
            cause="credential" if health.pause_reason == PauseReason.CREDENTIAL else "unreachable",
            since=health.paused_at,
            until=None,
            next_probe_at=health.next_probe_at,
            reason=health.last_error,
            **common,
        )
    if getattr(health, "held", False):
        # Its start (kept when the hold is extended), its end and the answer that set it.
        return DestinationHold(
            cause="retry_after",
            since=health.hold_since,
            until=health.hold_until,
            next_probe_at=None,
            reason=health.hold_reason,
            **common,
        )
    return None


def destination_holds(names: Iterable[str]) -> dict[str, DestinationHold]:
    """The destinations among `names` that take no call now, by name: one query whatever the number of rows
    on the page (none without names)."""
    names = sorted({n for n in names if n})
    if not names:
        return {}
    rows = DestinationHealth.objects.with_holds().annotate(now=db_now()).filter(name__in=names)
    holds = (_hold_of(health) for health in rows)
    return {hold.name: hold for hold in holds if hold is not None}


def handoff_rows(handoffs: list[Handoff], workspace_ids: Iterable[int]) -> list[Handoff]:
    """The rows of a handoff table, each with `.destination_hold` (its destination's hold, or None: only an
    open handoff waits for it) and `.finding_kinds` (the kinds of its key's live findings, the reason a
    delivered handoff needs a person). Two queries at most, whatever the number of rows."""
    workspace_ids = list(workspace_ids)
    # Every row's destination, open or not: the page runs the same queries whatever its rows' states.
    holds = destination_holds({h.destination for h in handoffs})
    kinds: dict[str, list[str]] = {}
    keys = [h.action_key for h in handoffs]
    if keys:
        for finding in live_findings(workspace_ids).filter(action_key__in=keys).order_by("kind"):
            kinds.setdefault(finding.action_key, []).append(finding.get_kind_display())
    for h in handoffs:
        h.destination_hold = holds.get(h.destination) if h.is_open else None
        h.finding_kinds = kinds.get(h.action_key, [])
    return handoffs
