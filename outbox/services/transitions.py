"""The row lock and the one way a handoff changes state: `handoff_lock` locks it (the step a compensation
reversed first), `handoff_transition` checks the move against `HANDOFF_TRANSITIONS` (`moves.py`), writes it
and its event, and records what a delivery leads to (`outbox/services/workflows.py`)."""

from lib.databases import DB
from outbox.errors import HandoffNotFound
from outbox.models import Handoff, HandoffEvent, HandoffState
from outbox.services.moves import transition_changes
from outbox.services.workflows import record_successors

S = HandoffState


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
