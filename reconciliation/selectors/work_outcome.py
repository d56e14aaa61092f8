"""The business outcome of a handoff: three owners, three answers (approved, task created, work done)."""

from dataclasses import dataclass

from outbox.models import Handoff, HandoffState
from outbox.models.states import WORK_DONE, WORK_FAILED, WORK_UNFINISHED

S = HandoffState


@dataclass(frozen=True)
class OwnerAnswer:
    """One owner's answer about a handoff. `value` is "yes", "no", "unknown", "failed" or "not_reported"."""

    question: str
    owner: str
    value: str
    detail: str

    @property
    def label(self) -> str:
        return {"not_reported": "not reported yet"}.get(self.value, self.value)


@dataclass(frozen=True)
class WorkOutcome:
    approved: OwnerAnswer
    task_created: OwnerAnswer
    work_done: OwnerAnswer

    def __iter__(self):
        return iter((self.approved, self.task_created, self.work_done))

    @property
    def complete(self) -> bool:
        """Complete only when the work is done: an acknowledged handoff proves the task, not the work."""
        return self.work_done.value == "yes"


def _approved_answer(handoff: Handoff) -> OwnerAnswer:
    # An outbox row is written only in the transaction that approves its request revision.
    detail = f"{handoff.source_ref} approved" + (
        f" under {handoff.rule_version}" if handoff.rule_version else ""
    )
    return OwnerAnswer("Approved?", "source application", "yes", detail)


def _task_answer(handoff: Handoff) -> OwnerAnswer:
    question, owner = "Task created?", "receiving application"
    if handoff.state == S.DELIVERED:
        how = (
            "receipt validated"
            if handoff.receipt.get("found_by") != "lookup"
            else "found by lookup"
        )
        return OwnerAnswer(question, owner, "yes", f"task {handoff.destination_id} ({how})")
    if handoff.state in (S.UNCERTAIN, S.IN_FLIGHT):
        return OwnerAnswer(
            question,
            owner,
            "unknown",
            f"{handoff.get_state_display().lower()}: outcome not known yet",
        )
    return OwnerAnswer(question, owner, "no", f"handoff {handoff.get_state_display().lower()}")


def _work_answer(handoff: Handoff) -> OwnerAnswer:
    question, owner = "Work done?", "people doing the task"
    if handoff.state != S.DELIVERED:
        return OwnerAnswer(question, owner, "no", "no task at the receiver yet")
    checked = (
        f" (as of {handoff.work_checked_at:%Y-%m-%d %H:%M} UTC)" if handoff.work_checked_at else ""
    )
    status = handoff.work_status
    if status == WORK_DONE:
        return OwnerAnswer(question, owner, "yes", f"the receiver reports the task done{checked}")
    if status == WORK_FAILED:
        return OwnerAnswer(
            question, owner, "failed", f"the receiver reports the work failed{checked}"
        )
    if status in WORK_UNFINISHED:
        return OwnerAnswer(question, owner, "no", f"task {status.replace('_', ' ')}{checked}")
    return OwnerAnswer(
        question, owner, "not_reported", "the receiver has not reported the task's status yet"
    )


def work_outcome(handoff: Handoff) -> WorkOutcome:
    """Approved? (source), task created? (receiver, validated receipt), work done? (the task's status, read back
    by reconciliation). Reads only the handoff's own fields: no query."""
    return WorkOutcome(_approved_answer(handoff), _task_answer(handoff), _work_answer(handoff))
