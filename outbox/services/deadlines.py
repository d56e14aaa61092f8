"""A workflow step past its must-finish-by goes to a person, never to its destination (issue 39, "Business
deadlines"): the claim leaves it out (`HandoffQuerySet.due`), and this sweep moves it to needs attention
with the reason code `deadline_passed`, its key untouched, so that an operator decides (cancel, correct,
or settle by hand). A call already under way when the deadline passes finishes. Database clock throughout."""

from django.db import transaction

from lib.databases import DB, rows_compiled_once
from outbox.models import FailureClass, Handoff, HandoffState
from outbox.services.transitions import handoff_transition

S = HandoffState
SWEEP = "deadline sweep"
DEADLINE_PASSED = "deadline_passed"


def handoffs_past_deadline(*, destination: str | None = None, limit: int = 500) -> int:
    """Move the pending handoffs (of `destination`, else every one) past their must-finish-by to a person,
    oldest deadline first; how many. Run by every maintenance pass (`outbox/dispatch/dispatcher.py` `maintain`)."""
    ids = _past_deadline_ids(destination, limit)
    if not ids:  # nearly every pass: no query built
        return 0
    due, moved = _past_deadline(destination), 0
    for pk in ids:
        with transaction.atomic(using=DB):
            # Locked and checked again on the database clock: a claim or an operator may have moved it.
            handoff = due.select_for_update(no_key=True).filter(pk=pk).first()
            if handoff is None:
                continue
            when = f"{handoff.finish_by:%Y-%m-%d %H:%M:%S} UTC"
            handoff_transition(
                handoff,
                S.NEEDS_ATTENTION,
                actor_label=SWEEP,
                reason=f"must finish by {when}: passed before it could be sent; not sent late",
                failure_class=FailureClass.PERMANENT,
                reason_code=DEADLINE_PASSED,
                last_error=f"its must-finish-by, {when}, passed before it was sent",
            )
            moved += 1
    return moved


def _past_deadline(destination: str | None):
    due = Handoff.objects.using(DB).past_deadline()
    return due if destination is None else due.filter(destination=destination)


def _past_deadline_ids(destination: str | None, limit: int) -> list[int]:
    """The ids, oldest deadline first. The query compiled once per destination (`rows_compiled_once`): every
    maintenance turn asks it, nearly always of no row, and compiling it through the ORM cost a settling
    dispatcher more CPU than the query (docs/benchmarks.md, the settlement section)."""
    rows = rows_compiled_once(
        ("past deadline", destination, limit),
        lambda: _past_deadline(destination).order_by("finish_by", "pk").values_list("pk")[:limit],
    )
    return [pk for (pk,) in rows]
