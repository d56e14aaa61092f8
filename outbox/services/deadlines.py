"""A workflow step past its must-finish-by goes to a person, never to its destination (issue 39, "Business
deadlines"): the claim leaves it out (`HandoffQuerySet.due`), and this sweep moves it to needs attention
with the reason code `deadline_passed`, its key untouched, so that an operator decides (cancel, correct,
or settle by hand). A call already under way when the deadline passes finishes. Database clock throughout."""

from django.db import transaction

from lib.databases import DB
from outbox.models import FailureClass, Handoff, HandoffState
from outbox.services.transitions import handoff_transition

S = HandoffState
SWEEP = "deadline sweep"
DEADLINE_PASSED = "deadline_passed"


def handoffs_past_deadline(*, destination: str | None = None, limit: int = 500) -> int:
    """Move the pending handoffs (of `destination`, else every one) past their must-finish-by to a person,
    oldest deadline first; how many. Run by every maintenance pass (`outbox/dispatch/dispatcher.py` `maintain`)."""
    due = Handoff.objects.using(DB).past_deadline()
    if destination is not None:
        due = due.filter(destination=destination)
    moved = 0
    for pk in due.order_by("finish_by", "pk").values_list("pk", flat=True)[:limit]:
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
