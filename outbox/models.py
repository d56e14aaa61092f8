"""The outbox: one row per approved action to hand off, its attempts and its history.

A handoff carries everything it needs (workspace id, source reference, action key, payload)
so that this app depends on no other app of the product.
"""

from datetime import timedelta

from django.conf import settings
from django.db import models
from django.utils import timezone

from outbox.clock import db_now


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
# makes an in-flight handoff uncertain, never pending; only settlement moves an uncertain one.
HANDOFF_TRANSITIONS: dict[str, frozenset[str]] = {
    S.PENDING: frozenset({S.IN_FLIGHT, S.SUPERSEDED, S.CANCELLED, S.NEEDS_ATTENTION, S.OBSERVED}),
    S.IN_FLIGHT: frozenset({S.DELIVERED, S.PENDING, S.UNCERTAIN, S.NEEDS_ATTENTION}),
    S.UNCERTAIN: frozenset({S.DELIVERED, S.PENDING, S.NEEDS_ATTENTION}),
    S.NEEDS_ATTENTION: frozenset({S.PENDING, S.DELIVERED, S.SUPERSEDED, S.CANCELLED}),
    S.DELIVERED: frozenset(),
    S.SUPERSEDED: frozenset(),
    S.CANCELLED: frozenset(),
    S.OBSERVED: frozenset(),
}

OPEN_STATES = frozenset({S.PENDING, S.IN_FLIGHT, S.UNCERTAIN, S.NEEDS_ATTENTION})
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


# The age choices of every handoff list (console filter, admin filter): code, label, age.
HANDOFF_AGES: dict[str, tuple[str, timedelta]] = {
    "15m": ("older than 15 minutes", timedelta(minutes=15)),
    "1h": ("older than 1 hour", timedelta(hours=1)),
    "1d": ("older than 1 day", timedelta(days=1)),
    "7d": ("older than 7 days", timedelta(days=7)),
}
AGE_CHOICES = [(code, label) for code, (label, _age) in HANDOFF_AGES.items()]


class HandoffQuerySet(models.QuerySet):
    """The derived rules over handoffs, each defined once. Times are compared on the database clock."""

    def due(self):
        return self.filter(state=S.PENDING, next_attempt_at__lte=db_now())

    def lease_expired(self):
        return self.filter(state=S.IN_FLIGHT, lease_expires_at__lt=db_now())

    def retrying(self):
        """Pending after a failed attempt, waiting for its backoff to pass (`Handoff.in_backoff`, per row)."""
        return self.filter(state=S.PENDING, attempts__gt=0, next_attempt_at__gt=db_now())

    def open(self):
        return self.filter(state__in=OPEN_STATES)

    def older_than(self, age_code: str):
        # created_at is written from Python (auto_now_add), so the age is measured on the same clock.
        return self.filter(created_at__lt=timezone.now() - HANDOFF_AGES[age_code][1])


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


class Handoff(models.Model):
    action_key = models.CharField(max_length=200)
    # A workflow instance (one approved request revision) runs as one handoff per step, each with its own
    # key `<instance>:<step>`; a workflow of one step keeps the instance key itself.
    instance_key = models.CharField(
        max_length=200, blank=True, help_text="The workflow instance, e.g. onboarding:7:42:1."
    )
    step = models.CharField(
        max_length=60, blank=True, help_text="The logical step; blank for a one-step workflow."
    )
    step_index = models.PositiveSmallIntegerField(default=0)
    kind = models.CharField(max_length=16, choices=HandoffKind.choices, default=HandoffKind.ACTION)
    # What to record when this handoff is delivered, in the same transaction: the following steps (or, for
    # a compensation, the compensations of the earlier steps), each {"step", "operation", "compensation"}.
    plan = models.JSONField(default=list, blank=True)
    compensates = models.ForeignKey(
        "self",
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="compensations",
        db_index=False,
    )
    compensation_state = models.CharField(
        max_length=12, choices=CompensationState.choices, blank=True
    )
    compensation_operation = models.CharField(
        max_length=60,
        blank=True,
        help_text="The operation that reverses this step; blank if nothing can.",
    )
    # The business outcome, owned by the people doing the task: the receiver task's status as last read back
    # through the destination (open, in_progress, done, failed). "Task created" is not "work done".
    work_status = models.CharField(max_length=16, blank=True)
    work_checked_at = models.DateTimeField(null=True, blank=True)
    receipt = models.JSONField(
        default=dict, blank=True, help_text="The validated receipt, as received."
    )
    workflow = models.CharField(max_length=40)
    workspace_id = models.PositiveIntegerField()  # indexed first in handoff_ws_keyset_idx
    source_ref = models.CharField(
        max_length=120, help_text="The source record, e.g. request 42 revision 1."
    )
    source_id = models.PositiveBigIntegerField(
        help_text="Primary key of the source request revision."
    )
    rule_version = models.CharField(max_length=40, blank=True)
    payload = models.JSONField()
    payload_hash = models.CharField(max_length=64)
    destination = models.CharField(max_length=40, default="receiver")

    state = models.CharField(
        max_length=20, choices=HandoffState.choices, default=HandoffState.PENDING
    )
    attempts = models.PositiveIntegerField(
        default=0, help_text="Every attempt ever made; numbers the attempts."
    )
    attempts_in_run = models.PositiveIntegerField(
        default=0,
        help_text="Automatic attempts since the handoff was recorded or an operator retried it.",
    )
    next_attempt_at = models.DateTimeField(null=True, blank=True)
    run_started_at = models.DateTimeField(
        null=True,
        blank=True,
        help_text="Start of the retry window: when the handoff was recorded or an operator last retried it.",
    )

    # The lease: who holds the row, until when, and a fencing epoch that grows with every claim so
    # that an outcome from a worker whose lease was taken over is refused.
    lease_owner = models.CharField(max_length=120, blank=True)
    lease_expires_at = models.DateTimeField(null=True, blank=True)
    fencing_epoch = models.PositiveBigIntegerField(default=0)

    destination_id = models.CharField(
        max_length=120, blank=True, help_text="Task id the receiver returned."
    )
    failure_class = models.CharField(max_length=16, choices=FailureClass.choices, blank=True)
    reason_code = models.CharField(max_length=60, blank=True)
    last_error = models.TextField(blank=True)

    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
        db_index=False,
    )
    sla_due_at = models.DateTimeField(null=True, blank=True)
    attention_since = models.DateTimeField(null=True, blank=True)
    acknowledged_at = models.DateTimeField(null=True, blank=True)
    acknowledged_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
        db_index=False,
    )

    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)
    delivered_at = models.DateTimeField(null=True, blank=True)

    objects = HandoffQuerySet.as_manager()

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["action_key"], name="handoff_unique_action_key"),
        ]
        # Rows in a working state are few; delivered ones pile up for ever. Every state change rewrites the row
        # (state is indexed, so no HOT update) and adds an entry to every full index, so the indexes that only
        # the dispatcher and the console's state lists read are partial: a row leaves them when it leaves the
        # states they cover, and they stay small however many rows are delivered. A query reaches a partial
        # index only when its WHERE implies the index's condition (`HandoffQuerySet` writes them so).
        indexes = [
            # The claim (`HandoffQuerySet.due`, per destination): due pending rows, oldest due first.
            models.Index(
                fields=["destination", "next_attempt_at", "id"],
                name="handoff_claim_idx",
                condition=models.Q(state=S.PENDING),
            ),
            # Expired leases (`HandoffQuerySet.lease_expired`).
            models.Index(
                fields=["lease_expires_at"],
                name="handoff_lease_expiry_idx",
                condition=models.Q(state=S.IN_FLIGHT),
            ),
            # Settlement of unknown outcomes, longest unsettled first (`dispatcher.settle_uncertain`).
            models.Index(
                fields=["updated_at"],
                name="handoff_uncertain_idx",
                condition=models.Q(state=S.UNCERTAIN),
            ),
            # Console lists: keyset pagination, per workspace.
            models.Index(fields=["workspace_id", "created_at", "id"], name="handoff_ws_keyset_idx"),
            # Every state but delivered, which the keyset index serves as well as the bulk of the rows: the
            # console's state lists and the header's count of handoffs needing a person (per workspace, newest
            # first), and the reads of one state across workspaces (alerts, /metrics, the health page).
            models.Index(
                fields=["state", "workspace_id", "created_at", "id"],
                name="handoff_state_open_idx",
                condition=~models.Q(state=S.DELIVERED),
            ),
            # The console's "retrying" list (`HandoffQuerySet.retrying`): pending after a failed attempt, newest
            # first. The due time is a key too, so the index itself skips the rows whose backoff has passed: the
            # planner then prefers it to range-scanning the claim index over every row in backoff and sorting.
            models.Index(
                fields=["workspace_id", "created_at", "id", "next_attempt_at"],
                name="handoff_retrying_idx",
                condition=models.Q(state=S.PENDING, attempts__gt=0),
            ),
            # Console search by request number ("request 42 …" prefix) and reconciliation's source check.
            models.Index(
                fields=["source_ref"],
                name="handoff_source_ref_idx",
                opclasses=["varchar_pattern_ops"],
            ),
            models.Index(fields=["source_id"], name="handoff_source_id_idx"),
            models.Index(fields=["instance_key", "step_index"], name="handoff_instance_idx"),
            # Rarely set references (an owner, an acknowledgement, the step a compensation reverses): indexed only
            # where set, so that the millions of rows without one (every delivered handoff) are not in them.
            # Every claim and outcome writes a new row version and so an entry in every full index.
            models.Index(
                fields=["owner"], name="handoff_owner_idx", condition=models.Q(owner__isnull=False)
            ),
            models.Index(
                fields=["acknowledged_by"],
                name="handoff_acknowledged_by_idx",
                condition=models.Q(acknowledged_by__isnull=False),
            ),
            models.Index(
                fields=["compensates"],
                name="handoff_compensates_idx",
                condition=models.Q(compensates__isnull=False),
            ),
        ]

    def __str__(self) -> str:
        return f"{self.action_key} ({self.state})"

    def can_move_to(self, state: str) -> bool:
        return state in HANDOFF_TRANSITIONS[self.state]

    @property
    def is_open(self) -> bool:
        return self.state in OPEN_STATES

    @property
    def with_dispatcher(self) -> bool:
        return self.state in DISPATCHER_STATES

    @property
    def cancellable_alone(self) -> bool:
        """Only a workflow's first step (or a one-step handoff) is cancelled alone. Cancelling a later step, or a
        compensation, would leave the workflow half done or half reversed with nobody asked to finish it: the
        workflow is compensated instead, and a compensation that cannot go through gets a manual repair."""
        return self.kind == HandoffKind.ACTION and self.step_index == 0

    @property
    def correctable_alone(self) -> bool:
        """A correction is a new request revision, whose approval runs the workflow again from its first step
        under new keys. A later step's predecessors were delivered (it was recorded when they were), so
        correcting it would do them twice: that workflow is compensated instead. The same rows as
        `cancellable_alone`: a workflow's first step or a one-step handoff."""
        return self.cancellable_alone

    @property
    def in_backoff(self) -> bool:
        """`HandoffQuerySet.retrying` for a row already read, measured on the clock that renders the page."""
        return (
            self.state == S.PENDING
            and self.attempts > 0
            and self.next_attempt_at is not None
            and self.next_attempt_at > timezone.now()
        )


class AttemptOutcome(models.TextChoices):
    IN_PROGRESS = "in_progress", "In progress"
    CREATED = "created", "Created"
    DUPLICATE = "duplicate", "Existing task returned"
    FAILED = "failed", "Failed"
    UNCERTAIN = "uncertain", "Outcome unknown"
    ABANDONED = "abandoned", "Lease expired mid-call"
    SKIPPED = "skipped", "Not sent"


class Attempt(models.Model):
    """One call to the destination. Written when claimed, finished when the outcome is recorded."""

    # No index of its own: `attempt_unique_number (handoff, number)` leads with it (one index fewer to write per
    # attempt).
    handoff = models.ForeignKey(
        Handoff, on_delete=models.CASCADE, related_name="attempt_set", db_index=False
    )
    number = models.PositiveIntegerField()
    fencing_epoch = models.PositiveBigIntegerField()
    worker = models.CharField(max_length=120)
    started_at = models.DateTimeField()
    finished_at = models.DateTimeField(null=True, blank=True)
    outcome = models.CharField(
        max_length=16, choices=AttemptOutcome.choices, default=AttemptOutcome.IN_PROGRESS
    )
    failure_class = models.CharField(max_length=16, choices=FailureClass.choices, blank=True)
    reason_code = models.CharField(max_length=60, blank=True)
    status_code = models.PositiveSmallIntegerField(null=True, blank=True)
    latency_ms = models.PositiveIntegerField(null=True, blank=True)
    detail = models.TextField(blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["handoff", "number"], name="attempt_unique_number"),
        ]
        indexes = [models.Index(fields=["outcome", "started_at"], name="attempt_outcome_idx")]

    def __str__(self) -> str:
        return f"attempt {self.number} of {self.handoff_id}: {self.outcome}"


class HandoffEvent(models.Model):
    """Every transition: who or what, when, from, to, why. Written in the transition's transaction."""

    # Indexed by `handoff_event_idx (handoff, at)` and, only where a person acted, `handoff_event_actor_idx`:
    # most events are the dispatcher's, and each index is one more write per event.
    handoff = models.ForeignKey(
        Handoff, on_delete=models.CASCADE, related_name="events", db_index=False
    )
    from_state = models.CharField(max_length=20, blank=True)
    to_state = models.CharField(max_length=20)
    actor = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        on_delete=models.SET_NULL,
        related_name="+",
        db_index=False,
    )
    actor_label = models.CharField(
        max_length=120, help_text="A user name or a process (dispatcher, sweep)."
    )
    action = models.CharField(
        max_length=30, blank=True, help_text="Manual action, if any (retry, cancel...)."
    )
    reason = models.TextField(blank=True)
    at = models.DateTimeField(auto_now_add=True)

    class Meta:
        indexes = [
            models.Index(fields=["handoff", "at"], name="handoff_event_idx"),
            models.Index(fields=["action", "at"], name="handoff_event_action_idx"),
            models.Index(
                fields=["actor"],
                name="handoff_event_actor_idx",
                condition=models.Q(actor__isnull=False),
            ),
        ]

    def __str__(self) -> str:
        return (
            f"{self.handoff_id}: {self.from_state or '-'} -> {self.to_state} by {self.actor_label}"
        )


class DestinationState(models.TextChoices):
    ACTIVE = "active", "Active"
    PAUSED = "paused", "Paused"


class PauseReason(models.TextChoices):
    UNREACHABLE = "unreachable", "Unreachable (connection failures or 5xx)"
    CREDENTIAL = "credential", "Credentials refused (401/403)"


# Every allowed move of a destination's circuit breaker: paused after consecutive failures across
# handoffs (or one refused credential), active again when a single probe call succeeds.
DESTINATION_TRANSITIONS: dict[str, frozenset[str]] = {
    DestinationState.ACTIVE: frozenset({DestinationState.PAUSED}),
    DestinationState.PAUSED: frozenset({DestinationState.ACTIVE}),
}


def default_max_concurrency() -> int | None:
    """The concurrency limit a destination gets when it is first seen (HANDOFF_DESTINATION_MAX_CONCURRENCY)."""
    return settings.HANDOFF_DESTINATION_MAX_CONCURRENCY


def default_max_requests_per_second() -> int | None:
    """The rate limit a destination gets when it is first seen (HANDOFF_DESTINATION_MAX_REQUESTS_PER_SECOND)."""
    return settings.HANDOFF_DESTINATION_MAX_REQUESTS_PER_SECOND


class DestinationHealth(models.Model):
    """The circuit breaker of one destination, and the limits its operator set. An outage is the destination's
    problem, not each handoff's: while it is paused no handoff spends an attempt on it; one probe call at a time
    tests it. The limits and the hold are enforced by `outbox/limits.py` across every dispatcher."""

    name = models.CharField(max_length=40)
    state = models.CharField(
        max_length=10, choices=DestinationState.choices, default=DestinationState.ACTIVE
    )
    pause_reason = models.CharField(max_length=16, choices=PauseReason.choices, blank=True)
    consecutive_failures = models.PositiveIntegerField(default=0)
    failing_since = models.DateTimeField(
        null=True, blank=True, help_text="First failure of the current run."
    )
    paused_at = models.DateTimeField(null=True, blank=True)
    next_probe_at = models.DateTimeField(null=True, blank=True, help_text="On the database clock.")
    probes = models.PositiveIntegerField(default=0, help_text="Probe calls since the pause.")
    last_error = models.TextField(blank=True)
    # Operator-set limits (empty = unlimited), and the hold a Retry-After answer puts on the whole destination.
    max_concurrency = models.PositiveIntegerField(
        null=True,
        blank=True,
        default=default_max_concurrency,
        help_text="Calls in flight at once, across every dispatcher; empty = unlimited.",
    )
    max_requests_per_second = models.PositiveIntegerField(
        null=True,
        blank=True,
        default=default_max_requests_per_second,
        help_text="Requests that reach the receiver in any one second; empty = unlimited.",
    )
    hold_until = models.DateTimeField(
        null=True, blank=True, help_text="Retry-After: no call before this time (database clock)."
    )
    hold_reason = models.CharField(max_length=200, blank=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["name"], name="destination_health_unique_name")
        ]
        # Limits bind every workspace's deliveries, so an operator role in one workspace is not enough to set
        # them (reconciliation/views.py::destination_limits asks for both).
        permissions = [
            (
                "set_destination_limits",
                "Can set a destination's limits (they apply to every workspace)",
            )
        ]

    def __str__(self) -> str:
        return f"{self.name} ({self.state})"

    def can_move_to(self, state: str) -> bool:
        return state in DESTINATION_TRANSITIONS[self.state]


class DestinationEvent(models.Model):
    """Every pause and resume of a destination, and every change of its limits: who or what, when, from, to,
    why."""

    destination = models.CharField(max_length=40)
    from_state = models.CharField(max_length=10)
    to_state = models.CharField(max_length=10)
    actor = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    actor_label = models.CharField(
        max_length=120, blank=True, help_text="A user name, or blank for the dispatcher."
    )
    action = models.CharField(
        max_length=30, blank=True, help_text="Operator action, if any (set_limits)."
    )
    reason = models.TextField(blank=True)
    at = models.DateTimeField(auto_now_add=True)

    class Meta:
        indexes = [models.Index(fields=["destination", "at"], name="destination_event_idx")]

    def __str__(self) -> str:
        return f"{self.destination}: {self.from_state} -> {self.to_state}"


class SlotKind(models.TextChoices):
    CONCURRENCY = "concurrency", "Call in flight"
    RATE = "rate", "Request in the last second"


class DestinationSlot(models.Model):
    """One unit of a destination's limit, shared by every dispatcher through the database.

    A concurrency slot is held for the length of one call (or of a claim batch's calls one after another)
    and free again right after it. A rate slot is held for one request and free again one second after its
    answer came back, so that however the network delays requests, no more than the limit can reach the
    receiver within any one second. A holder that dies gives its slots back when their lease
    (`free_at`, on the database clock) runs out.
    """

    destination = models.CharField(max_length=40)
    kind = models.CharField(max_length=12, choices=SlotKind.choices)
    number = models.PositiveIntegerField(
        help_text="Slots numbered at or above the limit are not used."
    )
    free_at = models.DateTimeField(
        null=True, blank=True, help_text="Free from this time (database clock); empty = free."
    )
    holder = models.CharField(max_length=160, blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["destination", "kind", "number"], name="destination_slot_unique_number"
            )
        ]

    def __str__(self) -> str:
        return f"{self.destination} {self.kind} slot {self.number}"


class BulkJobState(models.TextChoices):
    QUEUED = "queued", "Queued"
    RUNNING = "running", "Running"
    DONE = "done", "Done"


class BulkJob(models.Model):
    """A bulk action over more handoffs than one web request should touch, run by the workers. The ids are
    frozen when the operator confirms; each handoff is still changed by its own service, in its own
    transaction, and `position` lets a job that was interrupted continue where it stopped."""

    action = models.CharField(max_length=16)
    actor = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+")
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    reason = models.TextField(blank=True)
    handoff_ids = models.JSONField(default=list)
    state = models.CharField(
        max_length=10, choices=BulkJobState.choices, default=BulkJobState.QUEUED
    )
    position = models.PositiveIntegerField(
        default=0, help_text="How many of the ids were processed."
    )
    done = models.PositiveIntegerField(default=0)
    skipped = models.JSONField(
        default=dict, blank=True, help_text="Why handoffs were skipped: reason -> count."
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(
        auto_now=True,
        help_text="Written with every chunk: a job whose worker died "
        "stops moving, and the sweep resumes it.",
    )
    finished_at = models.DateTimeField(null=True, blank=True)

    def __str__(self) -> str:
        return f"bulk {self.action} #{self.pk} ({self.state}, {self.position}/{self.total})"

    @property
    def total(self) -> int:
        return len(self.handoff_ids)
