"""The safest next action for a finding or a failed handoff, in words an on-call person can follow.

Safest means: nothing here ever suggests an action that could create a second business effect
without first checking the receiver.
"""

from collections.abc import Callable

from outbox.guidance import advice_text
from outbox.models import Handoff, HandoffState
from reconciliation.models import FindingKind

S = HandoffState


def _missing_at_receiver(source: dict, receiver: dict) -> str:
    return (
        f"Do not resend: the handoff is delivered and is never sent again automatically. Ask the receiving "
        f"team what happened to task {source.get('destination_id') or '(none recorded)'} for this key (deleted, "
        "restored from backup?). If it must exist, they recreate it under the same action key; then record a "
        "manual repair on the handoff with the new task id."
    )


def _orphan_at_receiver(source: dict, receiver: dict) -> str:
    state = source.get("state", "")
    if state:
        return (
            f"The source handoff for this key is {state}, so no task was expected. Check with the receiving "
            "team whether the task was acted on before closing it there; do not re-approve."
        )
    return (
        "No source handoff has this key. Find out who created the task (another sender, a restored or "
        "rolled-back source database); leave it in place until the receiving team confirms it is unwanted."
    )


def _payload_mismatch(source: dict, receiver: dict) -> str:
    return (
        f"The receiver holds different content under this key (ours {source.get('payload_hash', '')[:12]}, "
        f"theirs {receiver.get('payload_hash', '')[:12]}). Never overwrite: compare both with the receiving team; "
        "if ours is right, correct the request (new revision, new key) and ask them to close their task."
    )


def _destination_mismatch(source: dict, receiver: dict) -> str:
    return (
        f"The receiver's task for this key is {receiver.get('task_id')}, the handoff recorded "
        f"{source.get('destination_id') or 'nothing'}. Check that no second task exists for this client at the "
        "receiver, then record a manual repair on the handoff with the receiver's task id (console, handoff page)."
    )


# A stuck handoff in one of these states needs the workers looked at, not the handoff itself.
_STUCK_WHILE = {
    S.PENDING: "Due but not claimed: check that the django-q2 cluster and the dispatch sweep are running.",
    S.IN_FLIGHT: "Claimed but not finished: the sweep turns an expired lease into uncertain; check the workers.",
    S.UNCERTAIN: "Outcome unknown: reconcile it (looks the key up at the receiver) before any retry.",
}


def _stuck(source: dict, receiver: dict) -> str:
    state = source.get("state", "")
    if state in _STUCK_WHILE:
        return _STUCK_WHILE[state]
    return for_handoff(
        Handoff(
            action_key=source.get("action_key", "this key"),
            state=state,
            failure_class=source.get("failure_class", ""),
            reason_code=source.get("reason_code", ""),
        )
    )


def _not_handed_off(source: dict, receiver: dict) -> str:
    return (
        "The request is approved but has no outbox row: the approval and the handoff were not written "
        "together. Do not re-approve; escalate to the engineers with this request id."
    )


def _work_not_done(source: dict, receiver: dict) -> str:
    return (
        f"The task exists ({receiver.get('task_id')}), but the work is still {receiver.get('status', 'open')} past "
        "its deadline. Do not resend: nothing is missing at the receiver. Ask the receiving team who is doing it and "
        "by when; the finding closes by itself once they mark the task done."
    )


def _work_failed(source: dict, receiver: dict) -> str:
    return (
        f"The receiving team marked task {receiver.get('task_id')} failed: the work was attempted and did not "
        "succeed. Do not resend under the same key (the receiver would return the failed task). Ask them why; if "
        "the request itself must change, correct it (new revision, new key); if the work was finished another "
        "way, record a manual repair saying how."
    )


_ADVICE_BY_KIND: dict[str, Callable[[dict, dict], str]] = {
    FindingKind.MISSING_AT_RECEIVER: _missing_at_receiver,
    FindingKind.ORPHAN_AT_RECEIVER: _orphan_at_receiver,
    FindingKind.PAYLOAD_MISMATCH: _payload_mismatch,
    FindingKind.DESTINATION_MISMATCH: _destination_mismatch,
    FindingKind.STUCK: _stuck,
    FindingKind.NOT_HANDED_OFF: _not_handed_off,
    FindingKind.WORK_NOT_DONE: _work_not_done,
    FindingKind.WORK_FAILED: _work_failed,
}


def for_finding(kind: str, source: dict, receiver: dict) -> str:
    advise = _ADVICE_BY_KIND.get(kind)
    if advise is None:
        return "Investigate with the evidence shown."
    return advise(source, receiver)


def for_handoff(handoff: Handoff) -> str:
    """A handoff's advice is the console's (`outbox.guidance.next_step`), never worded twice."""
    return advice_text(handoff)
