"""The audit of audit exports: who took which workspace's trail, for which period, in which format.

An export hands records to someone outside the product, so it is itself an event of the trail (and
appears in later exports). Rows are never changed or deleted."""

from django.conf import settings
from django.db import models

from approvals.models.workspaces import Workspace
from outbox.clock import DbClockDateTimeField


class AuditExport(models.Model):
    class Format(models.TextChoices):
        CSV = "csv", "CSV"
        JSONL = "jsonl", "JSON Lines"

    workspace = models.ForeignKey(Workspace, on_delete=models.PROTECT, related_name="audit_exports")
    exported_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+"
    )
    exported_at = DbClockDateTimeField(auto_now_add=True)
    period_start = models.DateTimeField()
    period_end = models.DateTimeField(help_text="Exclusive.")
    format = models.CharField(max_length=8, choices=Format.choices)
    channel = models.CharField(max_length=16, help_text="console or command")
    kinds = models.JSONField(default=list, help_text="The kinds of event the exporter may see.")
    event_count = models.PositiveIntegerField()

    class Meta:
        indexes = [
            models.Index(fields=["workspace", "exported_at", "id"], name="audit_export_ws_idx")
        ]

    def __str__(self) -> str:
        return f"{self.exported_by} exported workspace {self.workspace_id}'s audit ({self.format})"
