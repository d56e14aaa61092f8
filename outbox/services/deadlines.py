"""A workflow step past its must-finish-by goes to a person, never to its destination (issue 39, "Business
deadlines"): the claim leaves it out (`HandoffQuerySet.due`), and this sweep moves it to needs attention
with the reason code `deadline_passed`, its key untouched, so that an operator decides (cancel, correct,
or settle by hand). A call already under way when the deadline passes finishes. The deadline holds whatever
the destination's state: paused, in a window, held, disabled or served by no dispatcher; an operator's hold
of the step's case ends for it with the move. Database clock throughout."""

from django.db import transaction

from lib.databases import DB, rows_compiled_once
from outbox.models import FailureClass, Handoff, HandoffState
from outbox.services.case_holds import case_hold_lock_of, case_hold_passed_deadline
from outbox.services.transitions import handoff_transition

S = HandoffState
SWEEP = "deadline sweep"
DEADLINE_PASSED = "deadline_passed"


def handoffs_past_deadline(*, limit: int = 500) -> int:
    """Move the pending handoffs past their must-finish-by to a person, oldest deadline first; how many. Every
    destination's at once, whatever its state, where a dispatcher ends what ran out
    (`outbox/dispatch/dispatcher.py` `lapsed_expire`)."""
    ids = _past_deadline_ids(limit)
    if not ids:  # nearly every pass: no query built
        return 0
    due, moved = Handoff.objects.using(DB).past_deadline(), 0
    for pk in ids:
        with transaction.atomic(using=DB):
            moved += _move_past_deadline(due, pk)
    return moved


def _move_past_deadline(due, pk: int) -> int:
    """Move one row (1) or leave it (0). Locked and checked again on the database clock: a claim or an
    operator may have moved it. An operator's hold of its case is locked first (`case_hold_lock_of`); the
    step is never sent, so the hold no longer keeps it back: its mark goes with the move, and the hold ends
    unless it keeps back more of its case (`case_hold_passed_deadline`), the event saying who held it and why."""
    hold = case_hold_lock_of(pk)
    handoff = due.select_for_update(no_key=True).filter(pk=pk).first()
    if handoff is None or handoff.case_hold_id != (hold.pk if hold else None):
        return 0  # moved, or held or resumed between the two locks: the next pass sees it settled
    when = f"{handoff.finish_by:%Y-%m-%d %H:%M:%S} UTC"
    held = {"case_hold": None} if hold else {}
    handoff_transition(
        handoff,
        S.NEEDS_ATTENTION,
        actor_label=SWEEP,
        reason=f"must finish by {when}: passed before it could be sent; not sent late"
        + (case_hold_passed_deadline(hold, handoff, by=SWEEP) if hold else ""),
        failure_class=FailureClass.PERMANENT,
        reason_code=DEADLINE_PASSED,
        last_error=f"its must-finish-by, {when}, passed before it was sent",
        **held,
    )
    return 1


def _past_deadline_ids(limit: int) -> list[int]:
    """The ids, oldest deadline first. The query compiled once (`rows_compiled_once`): every supervision turn
    asks it, nearly always of no row, and compiling it through the ORM cost a settling dispatcher more CPU
    than the query (docs/benchmarks.md, the settlement section)."""
    rows = rows_compiled_once(
        ("past deadline", limit),
        lambda: (
            Handoff.objects.using(DB)
            .past_deadline()
            .order_by("finish_by", "pk")
            .values_list("pk")[:limit]
        ),
    )
    return [pk for (pk,) in rows]
