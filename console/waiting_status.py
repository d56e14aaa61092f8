"""Why a step that is not sent yet waits: its destination's holds (an operator's pause or maintenance window,
the breaker's pause, a credential or Retry-After hold, worded once by `outbox/hold_lines.py`) or an
operator's hold of its own case. Each with when it started and when it ends, so a requester is not told
"being sent" while nothing is being sent."""

from dataclasses import dataclass
from datetime import datetime


@dataclass(frozen=True)
class Held:
    why: str
    next: str
    owner: str


def _at(moment: datetime | None, now: datetime) -> str:
    if moment is None:
        return "an unknown time"
    return f"{moment:%H:%M} UTC" if moment.date() == now.date() else f"{moment:%Y-%m-%d %H:%M} UTC"


def held(holds) -> Held | None:
    """How its destination's holds (`outbox.hold_lines.DestinationHolds`) keep a step back, in the words of
    the destination's page (every live hold and the next scheduled), or None when none is live."""
    if holds is None or not holds.held:
        return None
    return Held(
        f"{holds.name} is held: {holds.text}",
        f"the system sends it once no hold on {holds.name} is live",
        holds.owner,
    )


def sent_at_release(handoff, release: str) -> str:
    """What the end of its case's hold (`release`: "once an operator resumes it", "after 18:00 UTC") does
    for a held handoff, by what it waits for; the hold line and the resume's confirmation
    (`console/handoff_action_words.py`) both say it from here. Needing attention: a person's decision,
    which the end does not make (a retry while held is queued, sent at the release). Uncertain: a lookup
    at its receiver settles it, held or not (it sends nothing; a task found is delivered, and the hold has
    nothing left of it); only a task not found is sent at the release."""
    if handoff.needs_attention:
        return f"it waits for an operator's decision; a retry is sent {release}"
    if handoff.outcome_unknown:
        return (
            "its outcome is unknown: a lookup at its receiver settles it, held or not (a lookup sends "
            f"nothing); it is sent {release} only if the receiver has no task for its key"
        )
    return f"it is sent {release}"


def case_held(hold, now: datetime, *, handoff=None) -> Held:
    """An operator's hold of the step's case (`outbox/models/case_holds.py`): by whom, since when, until
    when and why; nothing of it is sent until it ends. With `handoff` (the handoff page), what the end does
    for it (`sent_at_release`)."""
    ends = hold.ends_at
    until = f"until {_at(ends, now)}" if ends else "until an operator resumes it"
    what = "its workflow instance" if hold.whole_case else "this step"
    release = f"after {_at(ends, now)}" if ends else "once an operator resumes it"
    sent = sent_at_release(handoff, release) if handoff else f"it is sent {release}"
    return Held(
        f"{what} is held by {hold.set_by} since {_at(hold.created_at, now)} {until}: {hold.reason}",
        f"nothing of it is sent while it is held; {sent}, under the same key",
        f"{hold.set_by} (operator)",
    )


def handoff_case_held(handoff, now: datetime) -> Held | None:
    """`case_held` of the handoff page: None when no hold covers it."""
    if not handoff.is_held:
        return None
    return case_held(handoff.case_hold, now, handoff=handoff)


def case_hold_mark(hold, now: datetime) -> str:
    """A held handoff's mark on the handoff list: the hold's reason and since when (the page says more)."""
    return f"held (case hold: {hold.reason}, since {_at(hold.created_at, now)})"
