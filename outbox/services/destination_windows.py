"""An operator's pause of a destination, and a maintenance window scheduled ahead: each a hold of its own
(`DestinationHold`).

Holds overlap: a window scheduled during a pause is a second hold, and the destination is held while either
is live; ending or expiring one never ends the other (issue 36, item 1). While any is live, the destination's
limits give no permit (`outbox/services/limits.py`): nothing is claimed, no attempt, retry window or probe is
spent, nothing pages; waiting handoffs say why and until when. When the last ends the permits come back by
themselves and the destination drains. Each change is a `DestinationEvent` with the actor and the reason.

Times are the database's: a pause starts at the database's now, and a window's end must be later than it.
Only a destination is held: a name with no row (other than the seed's) is refused, as its console page is a
404, so that a typo on the command line holds nothing and says so.
"""

from datetime import datetime

from django.db import transaction

from lib.databases import DB
from outbox.clock import db_now, db_now_plus, db_time
from outbox.destinations.registry import default_destination_name
from outbox.errors import InvalidActionInput
from outbox.models import (
    DestinationConfig,
    DestinationEvent,
    DestinationHealth,
    DestinationHold,
    HoldKind,
)
from outbox.services.breaker import destination_health_locked, destination_resume
from outbox.services.recovery import destination_probe_now

REASON_MAX = 200
# The longest pause with an end: a year (a longer one is "until resumed").
MAX_PAUSE_MINUTES = 525_600


class InvalidWindow(InvalidActionInput):
    """A pause or window that cannot be set as asked; nothing was written."""


def _checked_reason(reason: str) -> str:
    if not reason.strip():
        raise InvalidWindow("a reason is required to pause a destination or schedule a window")
    return reason.strip()[:REASON_MAX]


def destination_known(name: str) -> None:
    """A destination the console knows: a row, enabled or not, or the seed's name; any other name is
    refused (`InvalidWindow`), as its page is a 404. Pause, window and `manage.py destinations holds` ask
    here."""
    if name != default_destination_name() and not (
        DestinationConfig.objects.using(DB).filter(name=name).exists()
    ):
        raise InvalidWindow(f"no destination named {name!r}")


def _label(actor, actor_label: str = "") -> str:
    """Who acted: the signed-in person, else the label of the command that acted (`manage.py
    destinations`), else "system"."""
    return actor.get_username() if actor else (actor_label or "system")


def _event(health: DestinationHealth, *, actor, action: str, text: str, label: str = "") -> None:
    DestinationEvent.objects.using(DB).create(
        destination=health.name,
        from_state=health.state,
        to_state=health.state,
        actor=actor,
        actor_label=_label(actor, label),
        action=action,
        reason=text[:2000],
    )


def destination_pause_by_operator(
    *, name: str, actor, reason: str, for_seconds: float | None = None, actor_label: str = ""
) -> DestinationHold:
    """Pause the destination from now, until an operator resumes it or for `for_seconds`: a hold of its
    own, beside any other."""
    reason = _checked_reason(reason)
    destination_known(name)
    if for_seconds is not None and for_seconds <= 0:
        raise InvalidWindow("a pause must last a positive number of seconds")
    if for_seconds is not None and for_seconds > MAX_PAUSE_MINUTES * 60:
        raise InvalidWindow(
            f"a pause lasts at most {MAX_PAUSE_MINUTES} minutes (a year); longer: until resumed"
        )
    with transaction.atomic(using=DB):
        health = destination_health_locked(name)
        hold = DestinationHold.objects.using(DB).create(
            destination=name,
            kind=HoldKind.OPERATOR_PAUSE,
            reason=reason,
            starts_at=db_now(),
            ends_at=db_now_plus(for_seconds) if for_seconds is not None else None,
            set_by=_label(actor, actor_label),
        )
        until = f"for {int(for_seconds)} s" if for_seconds is not None else "until resumed"
        _event(
            health,
            actor=actor,
            action="operator_pause",
            text=f"paused by an operator {until}: {reason}",
            label=actor_label,
        )
    hold.refresh_from_db(using=DB)
    return hold


def destination_schedule_window(
    *,
    name: str,
    actor,
    reason: str,
    starts_at: datetime,
    ends_at: datetime,
    actor_label: str = "",
) -> DestinationHold:
    """Schedule a maintenance window: a hold of its own, beside a pause or another window (it ends
    neither, and neither ends it)."""
    reason = _checked_reason(reason)
    destination_known(name)
    if ends_at <= starts_at:
        raise InvalidWindow("a window must end after it starts")
    with transaction.atomic(using=DB):
        health = destination_health_locked(name)
        if ends_at <= db_time():
            raise InvalidWindow("a window must end in the future")
        hold = DestinationHold.objects.using(DB).create(
            destination=name,
            kind=HoldKind.WINDOW,
            reason=reason,
            starts_at=starts_at,
            ends_at=ends_at,
            set_by=_label(actor, actor_label),
        )
        _event(
            health,
            actor=actor,
            action="window_scheduled",
            text=f"maintenance window {starts_at:%Y-%m-%d %H:%M} to {ends_at:%Y-%m-%d %H:%M} UTC: "
            f"{reason}",
            label=actor_label,
        )
    return hold


def _to_end(name: str, hold_id: int | None):
    """The operator's holds a resume ends (never the system's): the one named; else the live pauses; else
    the live windows; else the windows scheduled ahead (a cancel). A pause's resume never ends a window,
    nor the reverse."""
    holds = DestinationHold.objects.using(DB).filter(destination=name).by_operators()
    if hold_id is not None:
        return list(holds.not_ended().filter(pk=hold_id))
    live = holds.live()
    for rows in (
        live.filter(kind=HoldKind.OPERATOR_PAUSE),
        live.filter(kind=HoldKind.WINDOW),
        holds.scheduled(),
    ):
        # In the order they started: the resume's event names them so, whatever the heap's order.
        found = list(rows.order_by("starts_at", "pk"))
        if found:
            return found
    return []


def destination_resume_by_operator(
    *,
    name: str,
    actor,
    reason: str,
    hold_id: int | None = None,
    probe: bool = False,
    actor_label: str = "",
) -> DestinationHealth:
    """End an operator's hold now (`hold_id`, or as `_to_end` picks: a pause before a window, a window
    scheduled ahead last); the destination drains once no other hold is live. A destination paused by its
    breaker (an outage, a refused credential) and held by no operator is asked at once, after the commit
    (`outbox/services/recovery.py`): it resumes on that answer, or else when its next probe succeeds, which
    is the next claim (`outbox/services/breaker.py`). `probe`: only that, whatever an operator holds."""
    reason = _checked_reason(reason)
    label = _label(actor, actor_label)
    with transaction.atomic(using=DB):
        health = destination_health_locked(name)
        ending = [] if probe else _to_end(name, hold_id)
        if not ending and health.paused_by_breaker and hold_id is None:
            destination_resume(name=name, actor_label=label)
        elif not ending:
            raise InvalidWindow(f"destination {name} has no pause or window to end")
        else:
            DestinationHold.objects.using(DB).filter(pk__in=[h.pk for h in ending]).update(
                ended_at=db_now(), ended_by=label
            )
            what = ", ".join(
                f"{h.get_kind_display().lower()} from {h.starts_at:%Y-%m-%d %H:%M} UTC"
                for h in ending
            )
            _event(
                health,
                actor=actor,
                action="operator_resume",
                text=f"ended by an operator ({what}): {reason}",
                label=actor_label,
            )
    others = (
        DestinationHold.objects.using(DB).held_without_probe().filter(destination=name).exists()
    )
    if health.paused_by_breaker and not others:
        destination_probe_now(name=name, asked_by=f"resume by {label}")
    # As it stands now: its breaker's hold read again (`with_breaker`), after the probe's answer if any.
    return DestinationHealth.objects.using(DB).with_breaker().get(name=name)
