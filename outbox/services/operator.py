"""The operators' actions on one handoff: retry (or run now), cancel, assign, acknowledge, a manual settle
after a check at the receiver, a note of a check, and the supersede a correction makes. Each locks the row,
checks the state under the lock and writes the move with its event."""

from django.conf import settings
from django.db import transaction
from django.utils.module_loading import import_string

from lib.databases import DB
from outbox.clock import db_now
from outbox.dispatch.wakeups import wake_dispatcher_on_commit
from outbox.errors import (
    AssigneeNotOperator,
    CompensationBlocked,
    InvalidTransition,
    ManualSettleNotAllowed,
    ReasonRequired,
    RiskNotConfirmed,
)
from outbox.guidance import retry_is_risky
from outbox.models import Handoff, HandoffEvent, HandoffState
from outbox.models.states import DeliveredCode
from outbox.services.transitions import handoff_lock, handoff_transition

S = HandoffState


def handoff_cancel(*, handoff_id: int, actor, reason: str) -> Handoff:
    if not reason.strip():
        raise ReasonRequired("a reason is required to cancel a handoff")
    with transaction.atomic(using=DB):
        handoff = handoff_lock(handoff_id)
        if not handoff.cancellable_alone:
            raise CompensationBlocked(
                f"{handoff.action_key} is a later step or a compensation of a workflow: "
                "compensate the workflow instead"
            )
        handoff_transition(
            handoff,
            S.CANCELLED,
            actor=actor,
            reason=reason,
            action="cancel",
            reason_code="cancelled_by_operator",
        )
    return handoff


def handoff_retry(
    *, handoff_id: int, actor, reason: str = "", confirm_risk: bool = False
) -> Handoff:
    """Send again with the same action key: from needs_attention, or `run now` for one in backoff.

    A handoff whose last outcome is unknown may already exist at the receiver: sending again
    without reconciling first needs `confirm_risk`.
    """
    with transaction.atomic(using=DB):
        handoff = handoff_lock(handoff_id)
        _refuse_if_erased(handoff)
        if retry_is_risky(handoff):
            _override_settlement(handoff, actor=actor, confirm_risk=confirm_risk)
        elif handoff.state == S.UNCERTAIN:
            # The destination replays the original answer to the same key: sending again settles it.
            handoff_transition(
                handoff,
                S.NEEDS_ATTENTION,
                actor=actor,
                reason=f"sent again with the same key: {handoff.destination} replays the original",
                action="retry",
            )
        if handoff.state == S.PENDING:
            handoff_transition(
                handoff,
                S.PENDING,
                actor=actor,
                action="run_now",
                reason=reason or "run now instead of waiting for the backoff",
                next_attempt_at=db_now(),
            )
        else:
            handoff_transition(
                handoff,
                S.PENDING,
                actor=actor,
                reason=reason or "retry with the same action key",
                action="retry",
                next_attempt_at=db_now(),
                failure_class="",
                reason_code="",
                # A manual retry gets a fresh allowance: attempts and retry window start again.
                attempts_in_run=0,
                run_started_at=db_now(),
            )
    wake_dispatcher_on_commit(destination=handoff.destination)
    return handoff


def _refuse_if_erased(handoff: Handoff) -> None:
    """Its personal data was erased on request: sent again it would send "[erased]" (`erasure.py`)."""
    if handoff.erasure_id:
        raise InvalidTransition(
            handoff.action_key, handoff.state, "pending: its personal data was erased"
        )


def _override_settlement(handoff: Handoff, *, actor, confirm_risk: bool) -> None:
    """A retry of a handoff whose outcome is unknown: refused unless the risk is confirmed; an uncertain one
    leaves settlement to the person (needs attention) before it is sent again."""
    if not confirm_risk:
        raise RiskNotConfirmed(
            f"{handoff.action_key}: the last outcome is unknown; the receiver may already have the "
            "task. Reconcile first, or confirm that you accept sending again."
        )
    if handoff.state == S.UNCERTAIN:
        handoff_transition(
            handoff,
            S.NEEDS_ATTENTION,
            actor=actor,
            reason="operator overrides settlement",
            action="retry",
        )


def _may_own(user_id: int, workspace_id: int) -> bool:
    # Who may own a handoff is the source application's rule (operators of the workspace); it is wired in
    # by a setting so that the outbox core imports nothing from it.
    return import_string(settings.HANDOFF_ASSIGNEE_CHECK)(user_id, workspace_id)


def handoff_assign(*, handoff_id: int, actor, owner, reason: str = "") -> Handoff:
    """Give the handoff an owner (or none). The owner must be an operator of the handoff's workspace."""
    with transaction.atomic(using=DB):
        handoff = handoff_lock(handoff_id)
        if owner is not None and not _may_own(owner.pk, handoff.workspace_id):
            raise AssigneeNotOperator(
                f"{owner.get_username()} is not an operator of workspace {handoff.workspace_id}"
            )
        previous = handoff.owner.get_username() if handoff.owner else "nobody"
        handoff_transition(
            handoff,
            handoff.state,
            actor=actor,
            action="assign",
            reason=reason
            or f"assigned from {previous} to {owner.get_username() if owner else 'nobody'}",
            owner=owner,
        )
    return handoff


def handoff_acknowledge(*, handoff_id: int, actor, reason: str = "") -> Handoff:
    """The failure is seen by a person: records who and when (time to acknowledgement is a metric)."""
    with transaction.atomic(using=DB):
        handoff = handoff_lock(handoff_id)
        if handoff.state != S.NEEDS_ATTENTION:
            raise InvalidTransition(handoff.action_key, handoff.state, "acknowledged")
        handoff_transition(
            handoff,
            handoff.state,
            actor=actor,
            action="acknowledge",
            reason=reason or "failure acknowledged",
            acknowledged_at=db_now(),
            acknowledged_by=actor,
        )
    return handoff


def _settle_changes(handoff: Handoff, receiver_task_id: str) -> tuple[str, dict]:
    """The move a person's check at the receiver makes: the target state and the fields it sets."""
    unknown_outcome = handoff.awaits_receiver_check
    if unknown_outcome and receiver_task_id:
        return S.DELIVERED, {
            "destination_id": receiver_task_id,
            "delivered_at": db_now(),
            "failure_class": "",
            "reason_code": DeliveredCode.SETTLED_BY_HAND.value,
            "last_error": "",
        }
    if unknown_outcome:
        # Nothing at the receiver: safe to send again with the same key, with a fresh allowance.
        return S.PENDING, {
            "next_attempt_at": db_now(),
            "failure_class": "",
            "reason_code": "",
            "attempts_in_run": 0,
            "run_started_at": db_now(),
        }
    if handoff.state == S.DELIVERED:
        # A repaired receiver (task re-created under the same key) or a repair that left it as it is.
        return S.DELIVERED, ({"destination_id": receiver_task_id} if receiver_task_id else {})
    raise ManualSettleNotAllowed(
        f"{handoff.action_key} is {handoff.state}"
        + (f" ({handoff.failure_class})" if handoff.failure_class else "")
        + ": a manual settle applies to a delivered handoff or to one whose outcome is unknown"
    )


def handoff_settle_manually(
    *, handoff_id: int, actor, receiver_task_id: str, reason: str
) -> Handoff:
    """Record what a person found at the receiver by hand, where no automatic path can ask it.

    Outcome unknown (no lookup, no idempotency): "the receiver has task X" -> delivered with X;
    "the receiver has nothing" -> pending again with the same key. Delivered: the task id the receiver
    holds now (re-created under the same key), or nothing changed. The state is checked under the lock.
    """
    receiver_task_id = receiver_task_id.strip()
    if not reason.strip():
        raise ReasonRequired("say what was checked or done at the receiver")
    with transaction.atomic(using=DB):
        handoff = handoff_lock(handoff_id)
        to_state, changes = _settle_changes(handoff, receiver_task_id)
        handoff_transition(
            handoff, to_state, actor=actor, action="manual_repair", reason=reason, **changes
        )
        if to_state == S.PENDING:
            wake_dispatcher_on_commit(destination=handoff.destination)
    return handoff


def handoff_note_check(
    *, handoff_id: int, actor, reason: str, action: str = "reconcile_now"
) -> HandoffEvent:
    """Write an operator's check or repair of a handoff into its history without changing its state."""
    with transaction.atomic(using=DB):
        handoff = handoff_lock(handoff_id)
        return handoff_transition(handoff, handoff.state, actor=actor, action=action, reason=reason)
