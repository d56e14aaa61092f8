"""Intake's records: which request a sender's reference maps to, and every trigger received."""

from django.db import models

from approvals.models.requests import Request
from approvals.models.workspaces import Workspace
from outbox.clock import DbClockDateTimeField


class RequestReference(models.Model):
    """Which request number a sender's request reference maps to, and the newest sender revision seen.

    Locked while a trigger is applied, so revisions of one reference are handled one at a time."""

    workspace = models.ForeignKey(Workspace, on_delete=models.PROTECT, related_name="+")
    workflow = models.CharField(max_length=40)
    reference = models.CharField(max_length=120)
    number = models.PositiveIntegerField()
    latest_revision = models.PositiveIntegerField(help_text="The sender's newest revision applied.")
    created_at = DbClockDateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["workspace", "workflow", "reference"], name="request_reference_unique"
            ),
            models.UniqueConstraint(
                fields=["workspace", "workflow", "number"], name="request_reference_number"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.reference} -> {self.workflow} request {self.number} (workspace {self.workspace_id})"


class TriggerOutcome(models.TextChoices):
    ACCEPTED = "accepted", "Accepted"
    DUPLICATE = "duplicate", "Duplicate"
    STALE = "stale", "Stale (ignored)"
    REJECTED_AT_INTAKE = "rejected_at_intake", "Rejected at intake"


class TriggerRecord(models.Model):
    """One signed trigger received, with what intake made of it. The webhook id is the deduplication key:
    the first trigger with an id is the original; every later one is a row pointing at it."""

    webhook_id = models.CharField(max_length=200)
    signed_at = models.DateTimeField(help_text="The webhook-timestamp the sender signed.")
    received_at = DbClockDateTimeField(auto_now_add=True)
    duplicate_of = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.PROTECT, related_name="repeats"
    )
    workflow = models.CharField(max_length=40, blank=True)
    workspace_ref = models.BigIntegerField(
        null=True, blank=True, help_text="The workspace id the trigger named."
    )
    reference = models.CharField(
        max_length=120, blank=True, help_text="The sender's request reference."
    )
    sender_revision = models.PositiveIntegerField(null=True, blank=True)
    document = models.JSONField(help_text="The trigger body as received.")
    document_hash = models.CharField(max_length=64)
    outcome = models.CharField(max_length=20, choices=TriggerOutcome.choices)
    reasons = models.JSONField(default=list)
    status_code = models.PositiveSmallIntegerField()
    response = models.JSONField(help_text="The answer sent; a duplicate gets the original's again.")
    rule_version = models.CharField(max_length=40, blank=True)
    request = models.ForeignKey(
        Request,
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="triggers",
        help_text="The request revision this trigger created.",
    )

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["webhook_id"],
                condition=models.Q(duplicate_of__isnull=True),
                name="trigger_unique_webhook_id",
            ),
            # The same id signed at the same second is the same signed message again: a replay.
            models.UniqueConstraint(
                fields=["webhook_id", "signed_at"], name="trigger_unique_signed_message"
            ),
        ]
        indexes = [
            models.Index(
                fields=["workspace_ref", "received_at", "id"], name="trigger_ws_keyset_idx"
            ),
            models.Index(fields=["reference"], name="trigger_reference_idx"),
            models.Index(fields=["outcome", "received_at"], name="trigger_outcome_idx"),
        ]

    def __str__(self) -> str:
        return f"trigger {self.webhook_id} ({self.outcome})"
