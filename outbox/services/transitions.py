"""The row lock and the one way a handoff changes state: `handoff_lock` locks it (the step a compensation
reversed first), `handoff_transition` checks the move against `HANDOFF_TRANSITIONS`, writes it and its
event, and records what a delivery leads to (`outbox/services/workflows.py`)."""

from django.conf import settings

from lib.databases import DB
from outbox.clock import db_now, db_now_plus
from outbox.errors import HandoffNotFound, InvalidTransition
from outbox.models import HANDOFF_TRANSITIONS, Handoff, HandoffEvent, HandoffState
from outbox.services.workflows import record_successors

S = HandoffState
# The states no move leaves (HANDOFF_TRANSITIONS), other than observed, which a handoff is recorded in.
FINAL_STATES = frozenset({S.DELIVERED, S.CANCELLED, S.SUPERSEDED})


def lock_with_compensated_steps(ids: list[int]) -> None:
    """A delivered compensation marks the step it reversed (`mark_compensation`), under that step's row lock.
    Take those locks first, with the rows themselves and in one id order: the step's id is below its compensation's,
    and `instance_compensate` locks an instance's rows in id order, so taking the step after the rows
    could deadlock against it. A row's `compensates_id` never changes, so it is read before the lock."""
    steps = set(
        Handoff.objects.using(DB)
        .filter(pk__in=ids, compensates_id__isnull=False)
        .values_list("compensates_id", flat=True)
    )
    if steps:
        list(
            Handoff.objects.using(DB)
            .select_for_update(no_key=True)
            .filter(pk__in=sorted(set(ids) | steps))
            .order_by("pk")
            .values_list("pk", flat=True)
        )


def handoff_lock(handoff_id: int) -> Handoff:
    """The handoff's row, locked for a write in the caller's transaction; a compensation's step is locked
    first (a compensation settled as delivered marks it). Every service that writes one handoff locks it
    here, and so must any other app that locks a handoff before calling them. HandoffNotFound when absent."""
    lock_with_compensated_steps([handoff_id])
    handoff = Handoff.objects.using(DB).select_for_update(no_key=True).filter(pk=handoff_id).first()
    if handoff is None:
        raise HandoffNotFound(handoff_id)
    return handoff


def transition_changes(handoff: Handoff, to_state: str, changes: dict) -> dict:
    """Check the move and return every field it sets (the state's own defaults added). Changes nothing."""
    return move_changes(handoff.state, to_state, changes, action_key=handoff.action_key)


def move_changes(from_state: str, to_state: str, changes: dict, *, action_key: str = "") -> dict:
    """`transition_changes` for a row known to be in `from_state` (locked, or written under its fencing token)."""
    if to_state != from_state and to_state not in HANDOFF_TRANSITIONS[from_state]:
        raise InvalidTransition(action_key, from_state, to_state)
    if to_state != from_state and to_state in FINAL_STATES and not changes.get("reason_code"):
        # Every final state says why (DeliveredCode, cancelled_by_operator, compensated, corrected, ...): a
        # path that forgets its code fails here, not later on a screen that cannot tell the ways apart.
        raise ValueError(f"{action_key}: a move to {to_state} needs its reason code")
    changes = dict(changes)
    if to_state == S.NEEDS_ATTENTION and from_state != S.NEEDS_ATTENTION:
        # On the database clock, as the event beside it: the SLA's breach is judged against it.
        changes.setdefault("attention_since", db_now())
        changes.setdefault("sla_due_at", db_now_plus(60.0 * settings.HANDOFF_SLA_MINUTES))
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
    event = HandoffEvent.objects.using(DB).create(
        handoff=handoff,
        from_state=from_state,
        to_state=to_state,
        actor=actor,
        actor_label=actor_label or (actor.get_username() if actor else "system"),
        action=action,
        reason=reason,
    )
    if to_state == S.DELIVERED and from_state != S.DELIVERED:
        record_successors([handoff], actor_label=event.actor_label)
    return event
