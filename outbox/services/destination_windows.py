"""An operator's pause of a destination, and a maintenance window scheduled ahead.

Both are one window on the destination's row (`DestinationHealth.window_*`): from its start until its end
(a pause has no end until an operator resumes it). While it is on, the destination's limits give no permit
(`outbox/services/limits.py`): nothing is claimed, no attempt, retry window or probe is spent, nothing
pages; waiting handoffs say why and until when. At the end the permits come back by themselves and the
destination drains. Each change is a `DestinationEvent` with the actor and the reason.

Times are the database's: a pause starts at the database's now, and a window's end must be later than it.
"""

from datetime import datetime

from django.db import transaction

from lib.databases import DB
from outbox.clock import db_now, db_now_plus
from outbox.errors import InvalidActionInput
from outbox.models import DestinationEvent, DestinationHealth, DestinationState
from outbox.services.breaker import destination_health_locked, destination_resume
from outbox.services.recovery import destination_probe_now

REASON_MAX = 200


class InvalidWindow(InvalidActionInput):
    """A pause or window that cannot be set as asked; nothing was written."""


def _checked_reason(reason: str) -> str:
    if not reason.strip():
        raise InvalidWindow("a reason is required to pause a destination or schedule a window")
    return reason.strip()[:REASON_MAX]


def _event(health: DestinationHealth, *, actor, action: str, text: str) -> None:
    DestinationEvent.objects.using(DB).create(
        destination=health.name,
        from_state=health.state,
        to_state=health.state,
        actor=actor,
        actor_label=actor.get_username() if actor else "system",
        action=action,
        reason=text[:2000],
    )


def _write_window(
    health: DestinationHealth, *, starts, ends, reason: str, actor, action: str, text: str
) -> DestinationHealth:
    DestinationHealth.objects.using(DB).filter(pk=health.pk).update(
        window_starts_at=starts,
        window_ends_at=ends,
        window_reason=reason,
        window_set_by=actor.get_username() if actor else "",
    )
    _event(health, actor=actor, action=action, text=text)
    health.refresh_from_db(using=DB)
    return health


def destination_pause_by_operator(
    *, name: str, actor, reason: str, for_seconds: float | None = None
) -> DestinationHealth:
    """Pause the destination from now, until an operator resumes it or for `for_seconds`."""
    reason = _checked_reason(reason)
    if for_seconds is not None and for_seconds <= 0:
        raise InvalidWindow("a pause must last a positive number of seconds")
    with transaction.atomic(using=DB):
        health = destination_health_locked(name)
        ends = db_now_plus(for_seconds) if for_seconds is not None else None
        until = f"for {int(for_seconds)} s" if for_seconds is not None else "until resumed"
        return _write_window(
            health,
            starts=db_now(),
            ends=ends,
            reason=reason,
            actor=actor,
            action="operator_pause",
            text=f"paused by an operator {until}: {reason}",
        )


def _on_now(health: DestinationHealth, now: datetime) -> bool:
    """An operator's pause or a window holds the destination at the database's `now`."""
    starts, ends = health.window_starts_at, health.window_ends_at
    return starts is not None and starts <= now and (ends is None or ends > now)


def destination_schedule_window(
    *, name: str, actor, reason: str, starts_at: datetime, ends_at: datetime
) -> DestinationHealth:
    """Schedule a maintenance window; it replaces a window scheduled ahead, and the event says which.

    Refused while a pause or a window is on: the destination has one window, so a new one would end the
    pause, and deliveries would start inside it (issue 36: a step delivered during a pause)."""
    reason = _checked_reason(reason)
    if ends_at <= starts_at:
        raise InvalidWindow("a window must end after it starts")
    with transaction.atomic(using=DB):
        health = destination_health_locked(name)
        now = (
            DestinationHealth.objects.using(DB)
            .filter(pk=health.pk)
            .annotate(now=db_now())
            .values_list("now", flat=True)
            .get()
        )
        if ends_at <= now:
            raise InvalidWindow("a window must end in the future")
        if _on_now(health, now):
            raise InvalidWindow(_held_now_refusal(health))
        replaced = (
            f" (replaces the window scheduled from {health.window_starts_at:%Y-%m-%d %H:%M} UTC)"
            if health.window_starts_at is not None and health.window_starts_at > now
            else ""
        )
        return _write_window(
            health,
            starts=starts_at,
            ends=ends_at,
            reason=reason,
            actor=actor,
            action="window_scheduled",
            text=f"maintenance window {starts_at:%Y-%m-%d %H:%M} to {ends_at:%Y-%m-%d %H:%M} UTC: "
            f"{reason}{replaced}",
        )


def _held_now_refusal(health: DestinationHealth) -> str:
    by = f" by {health.window_set_by}" if health.window_set_by else ""
    until = (
        f"until {health.window_ends_at:%Y-%m-%d %H:%M} UTC"
        if health.window_ends_at
        else "until it is resumed"
    )
    return (
        f"{health.name} is paused{by} {until} ({health.window_reason}); a window now would end that "
        "pause: schedule it once the pause is over, or resume first"
    )


def destination_resume_by_operator(*, name: str, actor, reason: str) -> DestinationHealth:
    """End an operator's pause or window now (or cancel one scheduled ahead); the destination drains. A
    destination paused by its breaker (an outage, a refused credential) is asked at once, after the commit
    (`outbox/services/recovery.py`): it resumes on that answer, or else when its next probe succeeds, which
    is the next claim (`outbox/services/breaker.py`)."""
    reason = _checked_reason(reason)
    label = actor.get_username() if actor else "system"
    with transaction.atomic(using=DB):
        health = destination_health_locked(name)
        if health.window_starts_at is None and health.state == DestinationState.PAUSED:
            destination_resume(name=name, actor_label=label)
        elif health.window_starts_at is None:
            raise InvalidWindow(f"destination {name} has no pause or window to end")
        else:
            _write_window(
                health,
                starts=None,
                ends=None,
                reason="",
                actor=actor,
                action="operator_resume",
                text=f"resumed by an operator: {reason}",
            )
    health.refresh_from_db(using=DB)
    if health.state == DestinationState.PAUSED:
        destination_probe_now(name=name, asked_by=f"resume by {label}")
        health.refresh_from_db(using=DB)
    return health
