"""Status events a destination sent about its tasks: one row per webhook-id, so a resent event is a repeat."""

from django.db import models
from django.db.models.functions import Now


class StatusEventResult(models.TextChoices):
    APPLIED = "applied", "Applied"
    STALE = "stale", "Older than what is recorded"
    UNKNOWN_KEY = "unknown_key", "No handoff has this key"


class StatusEvent(models.Model):
    """A signed status event as received: what the destination said (kind, status, its own time and sequence)
    and what it changed here. Unique per destination and webhook-id: the same event sent again is answered
    from this row and changes nothing."""

    destination = models.CharField(max_length=40)
    webhook_id = models.CharField(max_length=200)
    kind = models.CharField(max_length=32)
    action_key = models.CharField(max_length=200)
    task_id = models.CharField(max_length=120, blank=True)
    status = models.CharField(max_length=16, blank=True)
    sequence = models.BigIntegerField()
    occurred_at = models.DateTimeField()
    received_at = models.DateTimeField(db_default=Now())
    result = models.CharField(max_length=16, choices=StatusEventResult.choices)
    # The handoff it was applied to (or would have been, when stale); none for an unknown key.
    handoff = models.ForeignKey(
        "outbox.Handoff",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
        db_index=False,
    )

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["destination", "webhook_id"], name="status_event_unique_webhook_id"
            )
        ]
        indexes = [
            models.Index(fields=["received_at"], name="status_event_age_idx"),
            # Retention deletes a handoff's status events with it (and PostgreSQL checks the foreign key on
            # every handoff deleted): only the events that name a handoff are in it.
            models.Index(
                fields=["handoff"],
                name="status_event_handoff_idx",
                condition=models.Q(handoff__isnull=False),
            ),
        ]

    def __str__(self) -> str:
        return f"{self.kind} of {self.action_key} from {self.destination}"
