"""The states of the outbox's rows and every allowed move between them, each table readable in one screen."""

from datetime import timedelta

from django.db import models


class HandoffState(models.TextChoices):
    PENDING = "pending", "Pending"
    IN_FLIGHT = "in_flight", "In flight"
    DELIVERED = "delivered", "Delivered"
    UNCERTAIN = "uncertain", "Uncertain"
    NEEDS_ATTENTION = "needs_attention", "Needs attention"
    SUPERSEDED = "superseded", "Superseded"
    CANCELLED = "cancelled", "Cancelled"
    OBSERVED = "observed", "Observed (not sent)"


S = HandoffState

# Every allowed move of a handoff. A delivered handoff is never sent again; an expired lease
# makes an in-flight handoff uncertain, never pending, unless its call was marked as not started
# yet (a destination without idempotency marks each call, `outbox/dispatch/leases.py`): it was
# never sent, and is pending again. Only settlement moves an uncertain one.
HANDOFF_TRANSITIONS: dict[str, frozenset[str]] = {
    # pending -> uncertain: the source was restored from a backup (outbox/services/restore.py); the row may
    # have been delivered since, so it is asked about before any new attempt.
    S.PENDING: frozenset(
        {S.IN_FLIGHT, S.UNCERTAIN, S.SUPERSEDED, S.CANCELLED, S.NEEDS_ATTENTION, S.OBSERVED}
    ),
    S.IN_FLIGHT: frozenset({S.DELIVERED, S.PENDING, S.UNCERTAIN, S.NEEDS_ATTENTION}),
    S.UNCERTAIN: frozenset({S.DELIVERED, S.PENDING, S.NEEDS_ATTENTION}),
    S.NEEDS_ATTENTION: frozenset({S.PENDING, S.DELIVERED, S.SUPERSEDED, S.CANCELLED}),
    S.DELIVERED: frozenset(),
    S.SUPERSEDED: frozenset(),
    S.CANCELLED: frozenset(),
    S.OBSERVED: frozenset(),
}

OPEN_STATES = frozenset({S.PENDING, S.IN_FLIGHT, S.UNCERTAIN, S.NEEDS_ATTENTION})
# Final states that retention may move out of the hot tables once old enough (`outbox/services/retention.py`).
# Observed handoffs (observation mode, never sent) are left alone: they are a trial run a person reviews. A
# tuple, in a fixed order, so the partial index it defines has one SQL text.
SETTLED_STATES = (S.CANCELLED, S.DELIVERED, S.SUPERSEDED)
# Handoffs a person has to look at: nothing automatic will move them on (uncertain ones are settled
# automatically when the destination can be asked, but until then nobody can say what happened).
NEEDS_PERSON_STATES = frozenset({S.NEEDS_ATTENTION, S.UNCERTAIN})
# The dispatcher is working on these: no person's action is needed, screens watch them change.
DISPATCHER_STATES = frozenset({S.PENDING, S.IN_FLIGHT})


class FailureClass(models.TextChoices):
    TRANSIENT = "transient", "Transient"
    UNCERTAIN = "uncertain", "Uncertain"
    PERMANENT = "permanent", "Permanent"
    CREDENTIAL = "credential", "Credential"
    CONFLICT = "conflict", "Conflict"
    MALFORMED = "malformed", "Malformed receipt"


class DeliveredCode(models.TextChoices):
    """The reason code of a delivered handoff: how its outcome became known. Every path to delivered sets
    one (`outbox/outcomes.py` `delivered_plan` and `settlement_for`, `outbox/services/operator.py`'s settle, a
    replay's settle through `handoff_settle`'s `delivered_code`),
    so that the screens (the list's reason code filter) and reports tell them apart."""

    CREATED = "created", "the receiver created it"
    DUPLICATE_PREVENTED = (
        "duplicate_prevented",
        "duplicate prevented: the receiver answered the original",
    )
    SETTLED_BY_LOOKUP = "settled_by_lookup", "settled by looking the key up at the receiver"
    # A replay's run settles what its preview found already there (`incidents/services/replay_run.py`).
    SETTLED_BY_REPLAY = (
        "settled_by_replay",
        "settled by a replay, which looked the key up at the receiver",
    )
    SETTLED_BY_HAND = "settled_by_hand", "settled by a person's check at the receiver"


# Failure classes that leave the outcome unknown: the call may or may not have created the task.
UNKNOWN_OUTCOME_CLASSES = frozenset({FailureClass.UNCERTAIN, FailureClass.MALFORMED})


# The age choices of every handoff list (console filter, admin filter): code, label, age.
HANDOFF_AGES: dict[str, tuple[str, timedelta]] = {
    "15m": ("older than 15 minutes", timedelta(minutes=15)),
    "1h": ("older than 1 hour", timedelta(hours=1)),
    "1d": ("older than 1 day", timedelta(days=1)),
    "7d": ("older than 7 days", timedelta(days=7)),
}
AGE_CHOICES = [(code, label) for code, (label, _age) in HANDOFF_AGES.items()]


class HandoffKind(models.TextChoices):
    ACTION = "action", "Step"
    COMPENSATION = "compensation", "Compensation"


class CompensationState(models.TextChoices):
    NONE = "", "—"
    PLANNED = "planned", "Compensation planned"
    COMPENSATED = "compensated", "Compensated"
    RESIDUAL = "residual", "Residual: cannot be undone automatically"
    REPAIRED = "repaired", "Residual closed by a manual repair"


# Every allowed move of a delivered step once its workflow instance is compensated: reversed by its
# compensating handoff, or a residual that only a manual-repair record closes.
COMPENSATION_TRANSITIONS: dict[str, frozenset[str]] = {
    CompensationState.NONE: frozenset({CompensationState.PLANNED, CompensationState.RESIDUAL}),
    CompensationState.PLANNED: frozenset({CompensationState.COMPENSATED}),
    CompensationState.RESIDUAL: frozenset({CompensationState.REPAIRED}),
    CompensationState.COMPENSATED: frozenset(),
    CompensationState.REPAIRED: frozenset(),
}


class AttemptOutcome(models.TextChoices):
    IN_PROGRESS = "in_progress", "In progress"
    CREATED = "created", "Created"
    DUPLICATE = "duplicate", "Existing task returned"
    FAILED = "failed", "Failed"
    UNCERTAIN = "uncertain", "Outcome unknown"
    ABANDONED = "abandoned", "Lease expired mid-call"
    SKIPPED = "skipped", "Not sent"


class DestinationState(models.TextChoices):
    ACTIVE = "active", "Active"
    PAUSED = "paused", "Paused"


class PauseReason(models.TextChoices):
    UNREACHABLE = "unreachable", "Unreachable (connection failures or 5xx)"
    # Its OAuth2 token endpoint's outage (`outbox/failures.py` TOKEN_ENDPOINT_UNAVAILABLE_REASONS): no call can
    # reach the API without a token, so it pauses the destination as an outage does, but the API was not
    # called and may well be up. A pause of the breaker's kind (`HoldKind.BREAKER`), its hold's `pause_reason`.
    TOKEN_ENDPOINT = "token_endpoint", "Token endpoint unavailable (the API was not called)"
    CREDENTIAL = "credential", "Credentials refused (401/403)"
    # Held by a dispatcher that cannot serve it (`outbox/services/breaker.py` destination_hold): it cannot
    # be built, a secret it names is missing, or one call may outlive a lease. No probe: it is released
    # when a dispatcher finds it servable.
    UNSERVABLE = "unservable", "Cannot be served (configuration, secret or timeouts)"


# Every allowed move of a destination's circuit breaker: paused after consecutive failures across
# handoffs (or one refused credential), active again when a single probe call succeeds.
DESTINATION_TRANSITIONS: dict[str, frozenset[str]] = {
    DestinationState.ACTIVE: frozenset({DestinationState.PAUSED}),
    DestinationState.PAUSED: frozenset({DestinationState.ACTIVE}),
}


class SlotKind(models.TextChoices):
    CONCURRENCY = "concurrency", "Call in flight"
    RATE = "rate", "Request in the last second"


# The work a receiver's task stands for, as the receiver reports it (`Handoff.work_status`). Unfinished work
# past the deadline and failed work are findings; "done" closes them. Defined once for the outbox, the
# reconciliation merge, its checks and selectors.
WORK_DONE = "done"
WORK_FAILED = "failed"
WORK_UNFINISHED = frozenset({"open", "in_progress"})
WORK_STATUSES = ("open", "in_progress", WORK_DONE, WORK_FAILED)


class BulkJobState(models.TextChoices):
    QUEUED = "queued", "Queued"
    RUNNING = "running", "Running"
    DONE = "done", "Done"
