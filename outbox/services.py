"""Writes to the outbox. Each transition locks the row, checks the state, writes the event: all or nothing."""

from datetime import timedelta

from django.conf import settings
from django.db import IntegrityError, transaction
from django.utils import timezone

from outbox.clock import db_now
from outbox.errors import ActionKeyExists, HandoffNotFound, InvalidTransition, RiskNotConfirmed
from outbox.models import FailureClass, Handoff, HandoffEvent, HandoffState
from outbox.payloads import payload_hash
from outbox.wakeups import wake_dispatcher_on_commit

DB = "default"
S = HandoffState


def _lock(handoff_id: int) -> Handoff:
    handoff = Handoff.objects.using(DB).select_for_update(no_key=True).filter(pk=handoff_id).first()
    if handoff is None:
        raise HandoffNotFound(handoff_id)
    return handoff


def transition_changes(handoff: Handoff, to_state: str, changes: dict) -> dict:
    """Check the move and return every field it sets (the state's own defaults added). Changes nothing."""
    from_state = handoff.state
    if to_state != from_state and not handoff.can_move_to(to_state):
        raise InvalidTransition(handoff.action_key, from_state, to_state)
    changes = dict(changes)
    now = timezone.now()
    if to_state == S.NEEDS_ATTENTION and from_state != S.NEEDS_ATTENTION:
        changes.setdefault("attention_since", now)
        changes.setdefault("sla_due_at", now + timedelta(minutes=settings.HANDOFF_SLA_MINUTES))
        changes.setdefault("acknowledged_at", None)
        changes.setdefault("acknowledged_by", None)
    if to_state in (S.DELIVERED, S.CANCELLED, S.SUPERSEDED):
        changes.setdefault("sla_due_at", None)
    if to_state != S.IN_FLIGHT:
        changes.setdefault("lease_owner", "")
        changes.setdefault("lease_expires_at", None)
    changes["state"] = to_state
    return changes


def handoff_transition(
    handoff: Handoff,
    to_state: str,
    *,
    actor=None,
    actor_label: str = "",
    reason: str = "",
    action: str = "",
    **changes,
) -> HandoffEvent:
    """Move a locked handoff to `to_state` and write the event. Call inside an atomic block."""
    from_state = handoff.state
    changes = transition_changes(handoff, to_state, changes)
    for name, value in changes.items():
        setattr(handoff, name, value)
    handoff.save(using=DB, update_fields=[*changes, "updated_at"])
    return HandoffEvent.objects.using(DB).create(
        handoff=handoff,
        from_state=from_state,
        to_state=to_state,
        actor=actor,
        actor_label=actor_label or (actor.get_username() if actor else "system"),
        action=action,
        reason=reason,
    )


def handoff_record(
    *,
    workflow: str,
    workspace_id: int,
    source_ref: str,
    source_id: int,
    action_key: str,
    payload: dict,
    rule_version: str = "",
    owner=None,
    actor=None,
    observe_only: bool = False,
) -> Handoff:
    """Write the outbox row for an approved action. Meant to run inside the caller's transaction."""
    with transaction.atomic(using=DB):
        try:
            with transaction.atomic(using=DB):
                handoff = Handoff.objects.using(DB).create(
                    action_key=action_key,
                    workflow=workflow,
                    workspace_id=workspace_id,
                    source_ref=source_ref,
                    source_id=source_id,
                    rule_version=rule_version,
                    payload=payload,
                    payload_hash=payload_hash(payload),
                    state=S.OBSERVED if observe_only else S.PENDING,
                    next_attempt_at=None if observe_only else db_now(),
                    run_started_at=None if observe_only else db_now(),
                    owner=owner,
                )
        except IntegrityError as exc:
            raise ActionKeyExists(action_key) from exc
        HandoffEvent.objects.using(DB).create(
            handoff=handoff,
            from_state="",
            to_state=handoff.state,
            actor=actor,
            actor_label=actor.get_username() if actor else "system",
            reason="observe-only: recorded, not sent" if observe_only else "approved; handoff recorded",
        )
    if not observe_only:
        wake_dispatcher_on_commit()
    return handoff


def handoff_supersede(*, handoff_id: int, actor=None, reason: str) -> Handoff:
    with transaction.atomic(using=DB):
        handoff = _lock(handoff_id)
        handoff_transition(handoff, S.SUPERSEDED, actor=actor, reason=reason, action="correct")
    return handoff


def handoff_cancel(*, handoff_id: int, actor, reason: str) -> Handoff:
    if not reason.strip():
        raise ValueError("a reason is required to cancel a handoff")
    with transaction.atomic(using=DB):
        handoff = _lock(handoff_id)
        handoff_transition(handoff, S.CANCELLED, actor=actor, reason=reason, action="cancel")
    return handoff


def handoff_retry(*, handoff_id: int, actor, reason: str = "", confirm_risk: bool = False) -> Handoff:
    """Send again with the same action key: from needs_attention, or `run now` for one in backoff.

    A handoff whose last outcome is unknown may already exist at the receiver: sending again
    without reconciling first needs `confirm_risk`.
    """
    with transaction.atomic(using=DB):
        handoff = _lock(handoff_id)
        if handoff.state == S.UNCERTAIN or (
            handoff.state == S.NEEDS_ATTENTION
            and handoff.failure_class in (FailureClass.UNCERTAIN, FailureClass.MALFORMED)
        ):
            if not confirm_risk:
                raise RiskNotConfirmed(
                    f"{handoff.action_key}: the last outcome is unknown; the receiver may already have the "
                    "task. Reconcile first, or confirm that you accept sending again."
                )
            if handoff.state == S.UNCERTAIN:
                handoff_transition(
                    handoff, S.NEEDS_ATTENTION, actor=actor, reason="operator overrides settlement", action="retry"
                )
        if handoff.state == S.PENDING:
            handoff_transition(handoff, S.PENDING, actor=actor, action="run_now",
                               reason=reason or "run now instead of waiting for the backoff", next_attempt_at=db_now())
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
    wake_dispatcher_on_commit()
    return handoff


def handoff_assign(*, handoff_id: int, actor, owner, reason: str = "") -> Handoff:
    with transaction.atomic(using=DB):
        handoff = _lock(handoff_id)
        previous = handoff.owner.get_username() if handoff.owner else "nobody"
        handoff_transition(
            handoff,
            handoff.state,
            actor=actor,
            action="assign",
            reason=reason or f"assigned from {previous} to {owner.get_username() if owner else 'nobody'}",
            owner=owner,
        )
    return handoff


def handoff_acknowledge(*, handoff_id: int, actor, reason: str = "") -> Handoff:
    """The failure is seen by a person: records who and when (time to acknowledgement is a metric)."""
    with transaction.atomic(using=DB):
        handoff = _lock(handoff_id)
        if handoff.state != S.NEEDS_ATTENTION:
            raise InvalidTransition(handoff.action_key, handoff.state, "acknowledged")
        handoff_transition(
            handoff,
            handoff.state,
            actor=actor,
            action="acknowledge",
            reason=reason or "failure acknowledged",
            acknowledged_at=timezone.now(),
            acknowledged_by=actor,
        )
    return handoff



def manual_settle_applies(handoff: Handoff) -> bool:
    """A person's check at the receiver can settle it: delivered, or needing attention with an unknown outcome."""
    return handoff.state == S.DELIVERED or _outcome_unknown(handoff)


def _outcome_unknown(handoff: Handoff) -> bool:
    return handoff.state == S.NEEDS_ATTENTION and handoff.failure_class in (
        FailureClass.UNCERTAIN, FailureClass.MALFORMED)


def _settle_changes(handoff: Handoff, receiver_task_id: str) -> tuple[str, dict]:
    """The move a person's check at the receiver makes: the target state and the fields it sets."""
    from outbox.errors import ManualSettleNotAllowed

    unknown_outcome = _outcome_unknown(handoff)
    if unknown_outcome and receiver_task_id:
        return S.DELIVERED, {"destination_id": receiver_task_id, "delivered_at": timezone.now(),
                             "failure_class": "", "reason_code": "", "last_error": ""}
    if unknown_outcome:
        # Nothing at the receiver: safe to send again with the same key, with a fresh allowance.
        return S.PENDING, {"next_attempt_at": db_now(), "failure_class": "", "reason_code": "",
                           "attempts_in_run": 0, "run_started_at": db_now()}
    if handoff.state == S.DELIVERED:
        # A repaired receiver (task re-created under the same key) or a repair that left it as it is.
        return S.DELIVERED, ({"destination_id": receiver_task_id} if receiver_task_id else {})
    raise ManualSettleNotAllowed(
        f"{handoff.action_key} is {handoff.state}"
        + (f" ({handoff.failure_class})" if handoff.failure_class else "")
        + ": a manual settle applies to a delivered handoff or to one whose outcome is unknown"
    )


def handoff_settle_manually(*, handoff_id: int, actor, receiver_task_id: str, reason: str) -> Handoff:
    """Record what a person found at the receiver by hand, where no automatic path can ask it.

    Outcome unknown (no lookup, no idempotency): "the receiver has task X" -> delivered with X;
    "the receiver has nothing" -> pending again with the same key. Delivered: the task id the receiver
    holds now (re-created under the same key), or nothing changed. The state is checked under the lock.
    """
    receiver_task_id = receiver_task_id.strip()
    if not reason.strip():
        raise ValueError("say what was checked or done at the receiver")
    with transaction.atomic(using=DB):
        handoff = _lock(handoff_id)
        to_state, changes = _settle_changes(handoff, receiver_task_id)
        handoff_transition(handoff, to_state, actor=actor, action="manual_repair", reason=reason, **changes)
        if to_state == S.PENDING:
            wake_dispatcher_on_commit()
    return handoff


def handoff_note_check(*, handoff_id: int, actor, reason: str, action: str = "reconcile_now") -> HandoffEvent:
    """Write an operator's check or repair of a handoff into its history without changing its state."""
    with transaction.atomic(using=DB):
        handoff = _lock(handoff_id)
        return handoff_transition(handoff, handoff.state, actor=actor, action=action, reason=reason)
