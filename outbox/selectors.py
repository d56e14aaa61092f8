"""Reads of the outbox shared by console views and metrics. Callers pass the workspaces in scope."""

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime

from django.db.models import Count, Min, QuerySet

from outbox.hold_lines import DestinationHolds, destinations_holds
from outbox.models import (
    NEEDS_PERSON_STATES,
    Attempt,
    AttemptOutcome,
    DestinationHealth,
    Handoff,
    HandoffEvent,
    HandoffState,
    HoldKind,
    PauseReason,
)


def handoffs_in(workspace_ids: Iterable[int]) -> QuerySet[Handoff]:
    return Handoff.objects.filter(workspace_id__in=list(workspace_ids)).select_related("owner")


def handoff_timeline(handoff: Handoff) -> tuple[QuerySet[Attempt], QuerySet[HandoffEvent]]:
    return (
        handoff.attempt_set.order_by("number"),
        handoff.events.select_related("actor").order_by("at", "id"),
    )


def handoff_visible(workspace_ids: Iterable[int], pk: int) -> Handoff | None:
    """The handoff if it belongs to one of the workspaces, else None (the console answers 404)."""
    return handoffs_in(workspace_ids).filter(pk=pk).first()


def instance_handoffs(instance_key: str) -> list[Handoff]:
    """Every handoff of a workflow instance: its steps in order, then their compensations (latest first)."""
    rows = list(Handoff.objects.filter(instance_key=instance_key).select_related("owner"))
    return sorted(
        rows,
        key=lambda h: (h.kind != "action", h.step_index if h.kind == "action" else -h.step_index),
    )


def _compensation_status(steps: list[Handoff]) -> str:
    from outbox.models import CompensationState

    return (
        "compensating"
        if any(h.compensation_state == CompensationState.PLANNED for h in steps)
        else "compensated"
    )


def _progress_status(steps: list[Handoff]) -> str:
    last = max(steps, key=lambda h: h.step_index, default=None)
    if last is None or last.state != HandoffState.DELIVERED or last.plan:
        return "running"
    return "complete" if all(h.work_done for h in steps) else "delivered, work not done yet"


def _needs_person(handoff: Handoff) -> bool:
    from outbox.models import CompensationState

    # An uncertain step is the system's until its settlement pass hands it to a person (needs attention).
    return (
        handoff.state in NEEDS_PERSON_STATES - {HandoffState.UNCERTAIN}
        or handoff.compensation_state == CompensationState.RESIDUAL
    )


def _compensated(handoffs: list[Handoff], steps: list[Handoff]) -> bool:
    return len(steps) < len(handoffs) or any(h.compensation_state for h in steps)


def _cancelled(steps: list[Handoff]) -> bool:
    return bool(steps) and all(h.state == HandoffState.CANCELLED for h in steps)


def instance_status(handoffs: list[Handoff]) -> str:
    """Where a workflow instance stands, from its handoffs: complete only when every step's work is done."""
    from outbox.models import HandoffKind

    if any(_needs_person(h) for h in handoffs):
        return "needs a person"
    if any(h.state == HandoffState.UNCERTAIN for h in handoffs):
        # The settlement pass asks the receiver by itself (or hands the step to a person, who then owns it).
        return "outcome unknown: the system is asking the receiver"
    steps = [h for h in handoffs if h.kind == HandoffKind.ACTION]
    if _compensated(handoffs, steps):
        return _compensation_status(steps)
    return "cancelled" if _cancelled(steps) else _progress_status(steps)


def last_successful_step(handoff: Handoff, attempts: Iterable[Attempt] | None = None) -> str:
    """The furthest step of approve -> record -> send -> validated receipt that the handoff completed.
    `attempts`: every attempt of the handoff when the caller has read them (the handoff page's timeline), so
    that they are not read again; else the last answered one is read."""
    if handoff.state == HandoffState.DELIVERED:
        return f"receipt validated at {handoff.delivered_at:%Y-%m-%d %H:%M} UTC: task {handoff.destination_id}"
    answered = (
        _last_answered(handoff)
        if attempts is None
        else max((a for a in attempts if _was_answered(a)), key=lambda a: a.number, default=None)
    )
    if answered is not None:
        return (
            f"sent: attempt {answered.number} reached the receiver at {answered.started_at:%Y-%m-%d %H:%M} UTC "
            f"and was answered HTTP {answered.status_code}"
        )
    return (
        f"approved and recorded in the outbox at {handoff.created_at:%Y-%m-%d %H:%M} UTC; "
        f"{handoff.attempts_made} attempt(s), none answered by the receiver"
    )


_NOT_ANSWERS = (AttemptOutcome.IN_PROGRESS, AttemptOutcome.SKIPPED)


def _was_answered(attempt: Attempt) -> bool:
    return attempt.status_code is not None and attempt.outcome not in _NOT_ANSWERS


def _last_answered(handoff: Handoff) -> Attempt | None:
    return (
        Attempt.objects.filter(handoff_id=handoff.pk, status_code__isnull=False)
        .exclude(outcome__in=_NOT_ANSWERS)
        .order_by("-number")
        .first()
    )


@dataclass(frozen=True)
class DestinationSummary:
    """One destination as the Destinations page shows it: its health row, its holds worded by
    `outbox/hold_lines.py` (every live one and the next scheduled, as on its own page), and the handoffs of
    the viewer's workspaces waiting for it."""

    name: str
    health: DestinationHealth
    holds: DestinationHolds
    queued: int
    in_flight: int
    oldest_waiting: datetime | None

    @property
    def state_kind(self) -> str:
        """What the state words say (the claim `destination.state`): `window` (an operator's pause or
        window now), `unservable`, `breaker`, `retry_after` or `active`."""
        if any(line.by_operator for line in self.holds.live):
            return "window"
        if self.health.paused_by_breaker:
            unservable = self.health.breaker_pause_reason == PauseReason.UNSERVABLE
            return "unservable" if unservable else "breaker"
        return "retry_after" if self.holds.has(HoldKind.RETRY_AFTER) else "active"

    @property
    def state_words(self) -> str:
        """Every live hold and the next scheduled, in the words of every other screen; "active" without."""
        return self.holds.text if self.holds.shown else "active"


def destination_summaries(
    names: Iterable[str], workspace_ids: Iterable[int]
) -> list[DestinationSummary]:
    """The destinations named, in name order, in three queries whatever their number (health, holds,
    counts); the counts are of the handoffs in `workspace_ids` only."""
    names = sorted(set(names))
    health = {
        row.name: row for row in DestinationHealth.objects.filter(name__in=names).with_breaker()
    }
    holds = destinations_holds(names)
    waiting = (
        Handoff.objects.filter(
            workspace_id__in=list(workspace_ids),
            destination__in=names,
            state__in=(HandoffState.PENDING, HandoffState.IN_FLIGHT),
        )
        .order_by()
        .values_list("destination", "state")
        .annotate(n=Count("id"), oldest=Min("created_at"))
    )
    counts = {(d, state): (n, oldest) for d, state, n, oldest in waiting}
    return [
        DestinationSummary(
            name=name,
            health=health.get(name) or DestinationHealth.not_seen(name),
            holds=holds.get(name) or DestinationHolds(name, [], None),
            queued=counts.get((name, HandoffState.PENDING), (0, None))[0],
            in_flight=counts.get((name, HandoffState.IN_FLIGHT), (0, None))[0],
            oldest_waiting=counts.get((name, HandoffState.PENDING), (0, None))[1],
        )
        for name in names
    ]
