"""Alerts that were sent: one record per alertable episode, grouped by its unique key."""

from django.db import models

from outbox.clock import DbClockDateTimeField
from reconciliation.models.findings import Finding


class AlertKind(models.TextChoices):
    NEEDS_ATTENTION = "needs_attention", "Handoff needs attention"
    SLA_BREACH = "sla_breach", "SLA breached"
    RECONCILIATION = "reconciliation", "Reconciliation found problems"
    DESTINATION_PAUSED = (
        "destination_paused",
        "Destination paused (unreachable or credentials refused)",
    )
    WIDESPREAD = "widespread", "Many handoffs failing at once"


class AlertSeverity(models.TextChoices):
    # Pages go to the paging webhook and the on-call addresses: the destination or many handoffs are down.
    PAGE = "page", "Page"
    # One handoff's problem: the grouped e-mail of its workspace.
    EMAIL = "email", "E-mail"


# Sends of one alert before it is given up (and counted as failed on Health and in /metrics).
MAX_SEND_ATTEMPTS = 3


class AlertRecordQuerySet(models.QuerySet):
    def unsent_due(self):
        return self.filter(sent_at__isnull=True, send_attempts__lt=MAX_SEND_ATTEMPTS)

    def gave_up(self):
        """Never sent, and not tried again: each send failed. Shown on Health and in /metrics."""
        return self.filter(sent_at__isnull=True, send_attempts__gte=MAX_SEND_ATTEMPTS)


class AlertRecord(models.Model):
    """One alertable episode, recorded once: the unique key is what groups repeats.

    For a handoff the episode is the moment it entered needs_attention (or its SLA due time), so a
    handoff that stays broken is alerted once; one that fails again later is a new episode. For a
    reconciliation finding the episode is the finding itself.
    """

    kind = models.CharField(max_length=20, choices=AlertKind.choices)
    severity = models.CharField(
        max_length=8, choices=AlertSeverity.choices, default=AlertSeverity.EMAIL
    )
    workspace_id = models.PositiveIntegerField(
        null=True,
        blank=True,
        help_text="The one workspace whose items this alert may carry; none for a destination.",
    )
    destination = models.CharField(max_length=40, blank=True)
    handoff_id = models.BigIntegerField(null=True, blank=True)
    finding = models.ForeignKey(
        Finding, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    episode_at = models.DateTimeField(null=True, blank=True)
    group_key = models.CharField(max_length=200)
    action_key = models.CharField(max_length=200, blank=True)
    workflow = models.CharField(max_length=40, blank=True)
    failure_class = models.CharField(max_length=24, blank=True)
    message_id = models.CharField(
        max_length=64, blank=True, help_text="The notification this was sent in."
    )
    recipients = models.TextField(blank=True)
    created_at = DbClockDateTimeField(auto_now_add=True)
    sent_at = models.DateTimeField(null=True, blank=True)
    send_attempts = models.PositiveSmallIntegerField(default=0)
    webhook_status = models.CharField(max_length=40, blank=True)
    last_error = models.TextField(blank=True)

    objects = AlertRecordQuerySet.as_manager()

    class Meta:
        constraints = [models.UniqueConstraint(fields=["group_key"], name="alert_unique_group_key")]
        indexes = [
            models.Index(fields=["kind", "handoff_id"], name="alert_kind_handoff_idx"),
            models.Index(fields=["sent_at", "created_at"], name="alert_unsent_idx"),
        ]

    def __str__(self) -> str:
        return f"{self.kind} alert {self.group_key}"
