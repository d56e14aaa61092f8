"""A bulk action over many handoffs, run by the workers."""

from django.conf import settings
from django.db import models

from outbox.clock import DbClockDateTimeField
from outbox.models.states import BulkJobState


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
    created_at = DbClockDateTimeField(auto_now_add=True)
    updated_at = DbClockDateTimeField(
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

    @property
    def is_finished(self) -> bool:
        return self.state == BulkJobState.DONE
