"""What happened to a handoff: its attempts (calls to the destination) and its events (every transition)."""

from django.conf import settings
from django.db import models

from outbox.clock import DbClockDateTimeField
from outbox.models.handoffs import Handoff
from outbox.models.states import AttemptOutcome, FailureClass


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
    # The "sending now" mark of a destination without idempotency (`outbox/dispatch/leases.py`): False, not
    # called yet; True, the call started (written just before it, in a transaction of its own); None, calls
    # not marked, so the call may have started at any time. A lease that runs out on False was never sent.
    call_started = models.BooleanField(null=True, blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["handoff", "number"], name="attempt_unique_number"),
        ]
        indexes = [models.Index(fields=["outcome", "started_at"], name="attempt_outcome_idx")]

    def __str__(self) -> str:
        return f"attempt {self.number} of {self.handoff_id}: {self.outcome}"


class HandoffEventQuerySet(models.QuerySet):
    def interventions(self):
        """A person's actions on handoffs (retry, cancel, correct, assign, acknowledge, hold, resume, ...): an
        event with an action that names the person, or named one whose account was deleted since
        (`actor_deleted`). The receivers' status events and the sweeps' (a hold whose end passed) carry an
        action but no person. `action > ''`: a range of the (action, at) index."""
        return self.filter(action__gt="").filter(
            models.Q(actor__isnull=False) | models.Q(actor_deleted=True)
        )

    def person_deleted(self, user_id: int) -> int:
        """A user is about to be deleted: their events keep being a person's (`actor_deleted`), though their
        `actor` is set to null, so what the interventions rule counts (Health, /metrics) never drops."""
        return self.filter(actor_id=user_id).update(actor_deleted=True)


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
    # Set when the person's account is deleted (`actor` becomes null): the event stays a person's action.
    # db_default: a column added without rewriting the table, and written by the release before it too.
    actor_deleted = models.BooleanField(
        default=False, db_default=False, help_text="The person who acted was deleted since."
    )
    action = models.CharField(
        max_length=30, blank=True, help_text="Manual action, if any (retry, cancel...)."
    )
    reason = models.TextField(blank=True)
    at = DbClockDateTimeField(auto_now_add=True)

    objects = HandoffEventQuerySet.as_manager()

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
