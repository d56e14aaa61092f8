"""The handoff's side of a correction: a handoff that needs attention is replaced by a corrected request revision.

The correction is the source's (`approvals.services.corrections.handoff_correct`): it checks who corrects
and what, locks the request, calls `handoff_supersede_corrected` and records the new revision, all in one
transaction. Request first, then handoff: the order `request_cancel` takes too.
"""

from django.db import transaction

from lib.databases import DB
from outbox.errors import InvalidTransition
from outbox.models import Handoff, HandoffState
from outbox.services.transitions import handoff_lock, handoff_transition

# A handoff still pending or in flight may yet be delivered: only one that waits for a person is corrected.
CORRECTABLE_STATES = (HandoffState.NEEDS_ATTENTION,)


def handoff_supersede_corrected(*, handoff_id: int, actor, reason: str) -> Handoff:
    """Supersede a handoff that needs attention, with its event (action "correct", reason code "corrected").

    The state is checked under the row lock: InvalidTransition when the handoff is no longer correctable."""
    with transaction.atomic(using=DB):
        handoff = handoff_lock(handoff_id)
        if handoff.state not in CORRECTABLE_STATES:
            raise InvalidTransition(handoff.action_key, handoff.state, HandoffState.SUPERSEDED)
        handoff_transition(
            handoff,
            HandoffState.SUPERSEDED,
            actor=actor,
            reason=f"corrected: {reason}",
            action="correct",
            reason_code="corrected",
        )
    return handoff
