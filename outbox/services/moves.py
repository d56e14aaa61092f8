"""Whether a handoff may move from one state to another, and every field the move sets (its needs-attention
clocks on the database clock, its SLA, its lease cleared): decided here once, for `handoff_transition` and
for every service that writes moves of several rows or of a row it just created (`workflows.py`, `outcomes.py`,
`bulk.py`, the settlement's claims). It imports no other service, so any of them may use it."""

from django.conf import settings

from outbox.clock import db_now, db_now_plus
from outbox.errors import InvalidTransition
from outbox.models import HANDOFF_TRANSITIONS, Handoff, HandoffState

S = HandoffState
# The states no move leaves (HANDOFF_TRANSITIONS), other than observed, which a handoff is recorded in.
FINAL_STATES = frozenset({S.DELIVERED, S.CANCELLED, S.SUPERSEDED})


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
