"""An operator holds one case and resumes it: one handoff, or one workflow instance with every step of it
(`outbox/models/case_holds.py`). Holding marks the case's open rows with the hold, so the claim leaves them
out; a step recorded while it holds carries it too (`record_planned`). Keys, payloads, approvals and states
are not touched: resuming lifts the mark and the dispatcher goes on where it stopped, a delivered step never
sent again, a failed one with its own key. Every row held or resumed gets an event (who, why), in the same
transaction."""

from datetime import datetime
from typing import NamedTuple

from django.db import transaction
from django.db.models import Subquery

from lib.databases import DB, rows_compiled_once
from lib.moments import BadMoment, parse_moment
from outbox.clock import db_now, db_time
from outbox.dispatch.wakeups import wake_dispatcher_on_commit
from outbox.errors import CaseHoldRefused, HandoffNotFound, InvalidActionInput, ReasonRequired
from outbox.models import CaseHold, Handoff, HandoffEvent, HandoffState

SWEEP = "case hold sweep"
# Why the sweep ends a hold that keeps nothing back: no open row carries it any more.
NOTHING_LEFT = "nothing left to hold"


def _label(actor) -> str:
    return actor.get_username() if actor else SWEEP


def _handoff(handoff_id: int) -> Handoff:
    handoff = Handoff.objects.using(DB).filter(pk=handoff_id).first()
    if handoff is None:
        raise HandoffNotFound(handoff_id)
    return handoff


def _case_rows(handoff: Handoff, whole_case: bool):
    """The case's rows, locked in id order (as `instance_compensate` locks them): an outcome recording a
    step delivered holds its row, so the rows read after this lock include the step it recorded."""
    rows = Handoff.objects.using(DB).filter(pk=handoff.pk)
    if whole_case and handoff.instance_key:
        rows = Handoff.objects.using(DB).filter(instance_key=handoff.instance_key)
    list(rows.select_for_update(no_key=True).order_by("pk").values_list("pk", flat=True))
    return rows


def _events(handoffs: list[Handoff], *, actor, action: str, reason: str) -> None:
    HandoffEvent.objects.using(DB).bulk_create(
        HandoffEvent(
            handoff_id=h.pk,
            from_state=h.state,
            to_state=h.state,
            actor=actor,
            actor_label=_label(actor),
            action=action,
            reason=reason,
        )
        for h in handoffs
    )


def hold_end_from_text(raw: str) -> datetime | None:
    """A hold's end as typed (`2026-12-24 18:00`, UTC unless it names its zone; `lib.moments`, the one
    parser, with its ranges); None when empty."""
    raw = raw.strip()
    if not raw:
        return None
    try:
        return parse_moment(raw, field="until")
    except BadMoment as exc:
        raise InvalidActionInput(
            f"until: {raw!r} is not a time such as 2026-12-24 18:00 (UTC): {exc}"
        ) from exc


def case_hold(
    *, handoff_id: int, actor, reason: str, until: datetime | None = None, whole_case: bool
) -> CaseHold:
    """Hold the handoff (or, `whole_case`, its workflow instance) with a reason, until `until` or until
    resumed. Refused when its case is held already or nothing of it is left to send."""
    reason = reason.strip()
    if not reason:
        raise ReasonRequired("a reason is required to hold a case")
    if until is not None and until <= db_time():
        raise InvalidActionInput("until: the end of a hold must be later than now")
    with transaction.atomic(using=DB):
        handoff = _handoff(handoff_id)
        rows = _case_rows(handoff, whole_case)
        if rows.held().exists():
            raise CaseHoldRefused(f"{handoff.action_key}: its case is held already")
        open_rows = list(rows.left_to_send().order_by("pk"))
        if not open_rows:
            raise CaseHoldRefused(
                f"{handoff.action_key}: nothing of this case is left to send (sent, settled, or past its "
                "must-finish-by), so there is nothing to hold"
            )
        hold = CaseHold.objects.using(DB).create(
            workspace_id=handoff.workspace_id,
            instance_key=handoff.instance_key if whole_case else "",
            handoff_id=handoff.pk,
            action_key=handoff.action_key,
            reason=reason,
            ends_at=until,
            set_by=_label(actor),
        )
        Handoff.objects.using(DB).filter(pk__in=[h.pk for h in open_rows]).update(
            case_hold=hold, updated_at=db_now()
        )
        until_words = f" until {until:%Y-%m-%d %H:%M} UTC" if until else " until resumed"
        _events(open_rows, actor=actor, action="hold", reason=f"held{until_words}: {reason}")
    return hold


class Resumed(NamedTuple):
    """A hold an operator ended, and what it kept back: `settled` names the rows it still marked when
    nothing of them was open any more (`<key> delivered`), so nothing goes back to the dispatcher; empty
    while it held back an open row."""

    hold: CaseHold
    settled: str


def case_resume(*, handoff_id: int, actor, reason: str = "") -> Resumed:
    """End the hold that covers the handoff: its rows go back to the dispatcher as they are (none, when
    every row it marked settled while it held, before the sweep ended it)."""
    with transaction.atomic(using=DB):
        handoff = _handoff(handoff_id)
        hold = (
            CaseHold.objects.using(DB)
            .select_for_update()
            .filter(pk=handoff.case_hold_id, ended_at__isnull=True)
            .first()
        )
        if hold is None:
            raise CaseHoldRefused(f"{handoff.action_key} is not held")
        settled = _settled(hold) or ""
        _end(hold, actor=actor, reason=reason.strip() or "resumed")
    return Resumed(hold, settled)


def _end(hold: CaseHold, *, actor, reason: str, words: str = "resumed") -> int:
    """Lift the hold from its rows (locked in id order) and close it; its rows' events say why (`words`)."""
    rows = Handoff.objects.using(DB).filter(case_hold_id=hold.pk)
    held = list(rows.select_for_update(no_key=True).order_by("pk"))
    # A retry whose time fell inside the hold is tried at the release, in the release's place in the order
    # of due rows (one clock: the database's); a retry time after the release stands.
    rows.filter(state=HandoffState.PENDING, next_attempt_at__lt=db_now()).update(
        next_attempt_at=db_now()
    )
    rows.update(case_hold=None, updated_at=db_now())
    _close(hold, by=_label(actor), reason=reason)
    _events(held, actor=actor, action="resume", reason=f"{words}: {reason}")
    for destination in {h.destination for h in held}:
        wake_dispatcher_on_commit(destination=destination)
    return len(held)


def _close(hold: CaseHold, *, by: str, reason: str) -> None:
    """Record the hold's end (database clock), by whom or what and why; its rows' marks are lifted by the
    caller."""
    hold.ended_at, hold.ended_by, hold.end_reason = db_time(), by, reason
    hold.save(using=DB, update_fields=["ended_at", "ended_by", "end_reason"])


def case_hold_lock_of(handoff_id: int) -> CaseHold | None:
    """The hold that covers the handoff, locked; taken before the handoff's row, as resume and expiry take
    a hold before its rows (`_end`), so that the two orders never cross."""
    covering = Handoff.objects.using(DB).filter(pk=handoff_id).values("case_hold_id")
    return CaseHold.objects.using(DB).select_for_update().filter(pk=Subquery(covering)).first()


def case_hold_passed_deadline(hold: CaseHold, handoff: Handoff, *, by: str) -> str:
    """`handoff` (locked, its hold `hold` locked before it) passed its must-finish-by and goes to a person
    (`outbox/services/deadlines.py`): it is never sent, so no hold keeps it back; the caller's move lifts its
    mark. The hold ends with it (`by`, and why) unless it still keeps back another row of its case that may
    be sent. The words the move's event adds: who held the case, since when and why, and what became of it."""
    held = f"its case was held by {hold.set_by} since {hold.created_at:%Y-%m-%d %H:%M} UTC: {hold.reason}"
    rows = Handoff.objects.using(DB).filter(case_hold_id=hold.pk).exclude(pk=handoff.pk)
    if rows.left_to_send().exists():
        return f"; {held}; the hold stays on the rest of its case"
    rows.update(case_hold=None, updated_at=db_now())
    _close(
        hold,
        by=by,
        reason=f"{handoff.action_key} passed its must-finish-by while held: it went to a person",
    )
    return f"; {held}; the hold ended with this move"


def hold_of_successor(after: Handoff) -> int | None:
    """The hold a step recorded after `after` carries: the live hold of the whole case `after` is a step of,
    whether or not `after` carries it. A delivered step is never marked (only open rows are), yet the
    compensation recorded after it belongs to the held case: it waits for the release like any step."""
    if not after.instance_key:
        return None
    live = CaseHold.objects.using(DB).live().filter(instance_key=after.instance_key)
    return live.order_by("pk").values_list("pk", flat=True).first()


def _settled(hold: CaseHold) -> str | None:
    """The rows the hold (locked) still marks, all settled (a call under way at hold time delivered, a held
    failed row cancelled: `<key> delivered`), or None while an open row carries it."""
    rows = Handoff.objects.using(DB).filter(case_hold_id=hold.pk)
    if rows.open().exists():
        return None
    marked = list(rows.order_by("pk"))
    settled = ", ".join(f"{h.action_key} {h.get_state_display().lower()}" for h in marked[:3])
    more = f" and {len(marked) - 3} more" if len(marked) > 3 else ""
    return f"{settled}{more}" if marked else "no row of its case is open"


def _nothing_left(hold: CaseHold) -> str | None:
    """Why the hold (locked) keeps nothing back, or None while an open row carries it."""
    settled = _settled(hold)
    return None if settled is None else f"{NOTHING_LEFT}: {settled}"[:200]


def case_holds_expire() -> int:
    """End every live hold whose end has passed (database clock), or that keeps nothing back any more (no
    open row carries it: `NOTHING_LEFT`); how many rows went back to the dispatcher."""
    resumed = 0
    # Compiled once: supervision asks at every turn, and the ORM's compile cost four times the read.
    ending = rows_compiled_once(
        ("case holds to end",),
        lambda: CaseHold.objects.using(DB).to_end().values_list("pk"),
    )
    for (pk,) in ending:
        with transaction.atomic(using=DB):
            hold = CaseHold.objects.using(DB).select_for_update().filter(pk=pk).first()
            if hold is None or hold.ended_at is not None:
                continue
            # Chosen for its end or for nothing left; an open row carrying it means its end passed.
            if (nothing := _nothing_left(hold)) is not None:
                _end(hold, actor=None, reason=nothing, words="hold ended")
            else:
                resumed += _end(hold, actor=None, reason="its end passed")
    return resumed
