"""What retention took out of the hot tables, per counter of /metrics and label set: a counter (`*_total`) is the
hot rows' count plus the archived rows' count kept here, so it never goes down when rows leave (Prometheus would
read a drop as a reset and `rate()` as a burst)."""

from django.db import models


class ArchivedTotal(models.Model):
    """One counter's archived rows for one label set: workflow, workspace and (failed attempts) failure class."""

    metric = models.CharField(max_length=40)
    workflow = models.CharField(max_length=40)
    workspace = models.CharField(max_length=20)
    label = models.CharField(max_length=40, blank=True)
    n = models.PositiveBigIntegerField(default=0)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["metric", "workflow", "workspace", "label"], name="archived_total_unique"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.metric} {self.workflow}/{self.workspace}/{self.label}: {self.n}"
