"""Why a step that is not sent yet waits, when its destination takes no calls now: an operator's pause or
maintenance window, a pause by the destination's breaker (an outage, a refused credential) or the
destination's Retry-After hold. Each with when it started and when it ends or is tried again, so a
requester is not told "being sent" while nothing is being sent."""

from dataclasses import dataclass
from datetime import datetime

from outbox.models import DestinationHealth


@dataclass(frozen=True)
class Held:
    why: str
    next: str
    owner: str


def _at(moment: datetime | None, now: datetime) -> str:
    if moment is None:
        return "an unknown time"
    return f"{moment:%H:%M} UTC" if moment.date() == now.date() else f"{moment:%Y-%m-%d %H:%M} UTC"


def _window(health: DestinationHealth, now: datetime) -> Held:
    name, ends = health.name, health.operator_until
    until = f"until {_at(ends, now)}" if ends else "until resumed"
    who = health.operator_by or "an operator"
    why = f" ({health.operator_reason})" if health.operator_reason else ""
    return Held(
        f"{name} is paused by {who} from {_at(health.operator_since, now)} {until}{why}",
        f"{name} resumes {'at ' + _at(ends, now) if ends else 'when an operator resumes it'} "
        "and the step is sent then",
        f"{who} (operator)" if health.operator_by else "the operators",
    )


def _breaker(health: DestinationHealth, now: datetime) -> Held:
    name = health.name
    return Held(
        f"{name} takes no calls since {_at(health.paused_at, now)} "
        f"({health.get_pause_reason_display().lower()}); {_next_probe(health.next_probe_at, now)}",
        f"the system probes {name} and sends the step when it answers",
        "the system (it probes the destination and resumes by itself)",
    )


def _next_probe(at: datetime | None, now: datetime) -> str:
    """A probe time already past reads as due: the probe is being made, not in the past."""
    if at is not None and at <= now:
        return "probing now"
    return f"next probe at {_at(at, now)}"


def _hold(health: DestinationHealth, now: datetime) -> Held:
    return Held(
        f"{health.name} asked to wait (Retry-After) until {_at(health.hold_until, now)}",
        f"the system sends it after {_at(health.hold_until, now)}",
        "the system (it honours the destination's wait)",
    )


def held(health: DestinationHealth | None, now: datetime) -> Held | None:
    """How `health` (annotated `with_holds`) holds its handoffs back at `now`, or None when it takes calls."""
    if health is None:
        return None
    if getattr(health, "in_window", False):
        return _window(health, now)
    if health.paused_by_breaker:
        return _breaker(health, now)
    if health.hold_until and health.hold_until > now:
        return _hold(health, now)
    return None


def case_held(hold, now: datetime) -> Held:
    """An operator's hold of the step's case (`outbox/models/case_holds.py`): by whom, since when, until
    when and why; nothing of it is sent until it ends."""
    ends = hold.ends_at
    until = f"until {_at(ends, now)}" if ends else "until an operator resumes it"
    what = "its workflow instance" if hold.whole_case else "this step"
    return Held(
        f"{what} is held by {hold.set_by} since {_at(hold.created_at, now)} {until}: {hold.reason}",
        "nothing of it is sent while it is held; it is sent "
        + (f"after {_at(ends, now)}" if ends else "once an operator resumes it")
        + ", under the same key",
        f"{hold.set_by} (operator)",
    )
