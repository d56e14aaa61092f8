"""Settlement of one unknown outcome asked for by a person (a reconcile, a bulk reconcile): ask the receiver
about the action key, before any new attempt, and move the handoff as its answer says (`outbox/outcomes.py`
`settlement_for` decides). The dispatchers' settlement of a backlog claims batches instead, so that two of them
never ask about one key, and asks many keys a request where the destination can (`outbox/settlement/passes.py`)."""

from django.db import transaction

from lib.databases import DB
from lib.telemetry import handoff_span
from outbox.destinations import Destination, LookupFailed, Lookups, RemoteTask, destination_named
from outbox.models import NEEDS_PERSON_STATES, Handoff, HandoffState
from outbox.models.states import DeliveredCode
from outbox.outcomes import Unanswered, settlement_for, settlement_without_answer
from outbox.services.lookup_limits import LimitedLookups, lookups_under_limits
from outbox.services.transitions import handoff_transition

S = HandoffState

# How long a person's reconcile waits for the destination's limits (or its Retry-After hold) before it reports
# that the receiver could not be asked.
PERSON_LOOKUP_WAIT_SECONDS = 5.0


def _ask_receiver(
    destination: Lookups, action_key: str
) -> tuple[RemoteTask | None, Unanswered | None]:
    """The receiver's task for the key and None, or None and why nothing is known (whether it was asked
    carried from the failure's flag, `LookupFailed.asked`: a lookup its limits, a hold or its token endpoint
    refused was not)."""
    if not destination.supports_lookup:
        return None, Unanswered(
            "the destination cannot be asked about a key; check at the receiver by hand"
        )
    try:
        return destination.lookup(action_key), None
    except LookupFailed as exc:
        return None, Unanswered.of(exc)


def handoff_settle(
    *,
    handoff_id: int,
    destination: Destination | LimitedLookups | None = None,
    actor=None,
    actor_label: str = "settlement",
    reason: str = "",
    delivered_code: str = DeliveredCode.SETTLED_BY_LOOKUP,
) -> str:
    """Settle an unknown outcome by asking the receiver about the action key, before any new attempt.
    Also serves an operator's `reconcile` on a handoff that needs attention. Returns the state after.
    The destination (the handoff's own without a `destination`; DestinationUnavailable when it is unknown or
    disabled) is asked under its limits, waiting a few seconds for them unless the caller's are already
    applied (`lookups_under_limits`). A handoff found delivered records `delivered_code` as its reason code
    (a replay's run: `settled_by_replay`)."""
    handoff = Handoff.objects.using(DB).get(pk=handoff_id)
    if handoff.state not in NEEDS_PERSON_STATES:
        return handoff.state
    with handoff_span("handoff.settle", handoff.action_key, actor=actor_label):
        return _settle(
            handoff,
            destination,
            actor=actor,
            actor_label=actor_label,
            reason=reason,
            delivered_code=delivered_code,
        )


def _settle(
    handoff: Handoff,
    destination: Destination | LimitedLookups | None,
    *,
    actor,
    actor_label: str,
    reason: str,
    delivered_code: str,
) -> str:
    handoff_id = handoff.pk
    destination = lookups_under_limits(
        destination or destination_named(handoff.destination),
        worker=actor_label,
        wait_seconds=PERSON_LOOKUP_WAIT_SECONDS,
    )
    remote, lookup_error = _ask_receiver(destination, handoff.action_key)
    with transaction.atomic(using=DB):
        # Only if nothing moved the handoff while the receiver was asked (no lock was held meanwhile).
        locked = (
            Handoff.objects.using(DB)
            .select_for_update(no_key=True)
            .filter(pk=handoff_id, state=handoff.state, fencing_epoch=handoff.fencing_epoch)
            .first()
        )
        return _apply_settlement(
            locked,
            handoff_id,
            destination,
            remote,
            lookup_error,
            actor=actor,
            actor_label=actor_label,
            note=reason,
            delivered_code=delivered_code,
        )


def _apply_settlement(
    locked: Handoff | None,
    handoff_id: int,
    destination: Lookups,
    remote: RemoteTask | None,
    lookup_error: Unanswered | None,
    *,
    actor,
    actor_label: str,
    note: str,
    delivered_code: str,
) -> str:
    if locked is None:
        return Handoff.objects.using(DB).values_list("state", flat=True).get(pk=handoff_id)
    settled = (
        settlement_without_answer(locked, destination, lookup_error)
        if lookup_error is not None
        else settlement_for(locked, remote, destination)
    )
    if settled.to_state is None and lookup_error is not None and actor is None:
        return locked.state  # nothing learnt, nobody asked: no event
    handoff_transition(
        locked,
        settled.to_state or locked.state,
        actor=actor,
        actor_label=actor_label if actor is None else "",
        action="reconcile" if actor is not None else "",
        reason=f"{settled.reason} (note: {note})" if note else settled.reason,
        **_coded(settled.to_state, settled.changes, delivered_code),
    )
    return locked.state


def _coded(to_state: str | None, changes: dict, delivered_code: str) -> dict:
    """A settlement's changes, with the caller's code when it found the handoff delivered."""
    return {**changes, "reason_code": delivered_code} if to_state == S.DELIVERED else changes
