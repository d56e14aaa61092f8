"""The business outcome: the receiver's task status (the work), read back for delivered handoffs."""

from lib.databases import DB
from outbox.clock import db_now
from outbox.models import Handoff, HandoffState
from outbox.models.states import WORK_STATUSES

S = HandoffState

# The stored work statuses a reported one may replace. The receiver's status only moves forward, so a
# report of an earlier status is older than what is stored (a run that read the task before a status event
# arrived): it never overwrites the newer one.
WORK_REPLACES: dict[str, tuple[str, ...]] = {
    "open": ("",),
    "in_progress": ("", "open"),
    "done": ("", "open", "in_progress"),
    "failed": ("", "open", "in_progress"),
}


def handoffs_record_work_status(*, statuses: dict[str, str]) -> int:
    """Store the work status the receiver reported for delivered handoffs ({action_key: status}); returns
    how many changed. Not a state transition: the handoff stays delivered, its work moves on."""
    changed = 0
    for status in set(statuses.values()) & set(WORK_STATUSES):
        keys = [key for key, value in statuses.items() if value == status]
        changed += (
            Handoff.objects.using(DB)
            .filter(action_key__in=keys, state=S.DELIVERED, work_status__in=WORK_REPLACES[status])
            .update(work_status=status, work_checked_at=db_now())
        )
    return changed
