"""The safest next action for a finding or a failed handoff, in words an on-call person can follow.

Safest means: nothing here ever suggests an action that could create a second business effect
without first checking the receiver.
"""

from outbox.models import FailureClass, HandoffState
from reconciliation.models import FindingKind

S = HandoffState


def for_finding(kind: str, source: dict, receiver: dict) -> str:
    state = source.get("state", "")
    if kind == FindingKind.MISSING_AT_RECEIVER:
        return (
            f"Do not resend: the handoff is delivered and is never sent again automatically. Ask the receiving "
            f"team what happened to task {source.get('destination_id') or '(none recorded)'} for this key (deleted, "
            "restored from backup?). If it must exist, they recreate it under the same action key; then record a "
            "manual repair on the handoff with the new task id."
        )
    if kind == FindingKind.ORPHAN_AT_RECEIVER:
        if state:
            return (
                f"The source handoff for this key is {state}, so no task was expected. Check with the receiving "
                "team whether the task was acted on before closing it there; do not re-approve."
            )
        return (
            "No source handoff has this key. Find out who created the task (another sender, a restored or "
            "rolled-back source database); leave it in place until the receiving team confirms it is unwanted."
        )
    if kind == FindingKind.PAYLOAD_MISMATCH:
        return (
            f"The receiver holds different content under this key (ours {source.get('payload_hash', '')[:12]}, "
            f"theirs {receiver.get('payload_hash', '')[:12]}). Never overwrite: compare both with the receiving team; "
            "if ours is right, correct the request (new revision, new key) and ask them to close their task."
        )
    if kind == FindingKind.DESTINATION_MISMATCH:
        return (
            f"The receiver's task for this key is {receiver.get('task_id')}, the handoff recorded "
            f"{source.get('destination_id') or 'nothing'}. Check that no second task exists for this client at the "
            "receiver, then record a manual repair on the handoff with the receiver's task id (console, handoff page)."
        )
    if kind == FindingKind.STUCK:
        if state == S.PENDING:
            return "Due but not claimed: check that the django-q2 cluster and the dispatch sweep are running."
        if state == S.IN_FLIGHT:
            return "Claimed but not finished: the sweep turns an expired lease into uncertain; check the workers."
        if state == S.UNCERTAIN:
            return "Outcome unknown: reconcile it (looks the key up at the receiver) before any retry."
        return for_handoff(failure_class=source.get("failure_class", ""), reason_code=source.get("reason_code", ""))
    if kind == FindingKind.NOT_HANDED_OFF:
        return (
            "The request is approved but has no outbox row: the approval and the handoff were not written "
            "together. Do not re-approve; escalate to the engineers with this request id."
        )
    return "Investigate with the evidence shown."


def for_handoff(*, failure_class: str, reason_code: str, state: str = S.NEEDS_ATTENTION) -> str:
    if state == S.UNCERTAIN or failure_class in (FailureClass.UNCERTAIN, FailureClass.MALFORMED):
        return "Reconcile first (look the key up at the receiver); retry only if the receiver has no task."
    if reason_code == "retries_exhausted":
        return "Check that the receiver is up, then retry with the same action key (safe: the key is idempotent)."
    if failure_class == FailureClass.CREDENTIAL:
        return "Renew or fix the receiver credential, then retry with the same action key."
    if failure_class == FailureClass.PERMANENT:
        return "The receiver rejected the content: correct the request (new revision, new approval); do not retry."
    if failure_class == FailureClass.CONFLICT:
        return ("The receiver holds other content under this key: never overwrite. Compare with the receiving team; "
                "correct the request or cancel the handoff.")
    if failure_class == FailureClass.TRANSIENT:
        return "Check that the receiver is up, then retry with the same action key."
    return "Open the handoff, read its attempts and history, then reconcile before any retry."
