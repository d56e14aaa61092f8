"""The PostgreSQL timeline the source database was last seen on (one row). A promoted replica starts a new
timeline, and what the old primary committed without shipping it is not on it: seeing the number change is how
the product knows a failover happened (`outbox/failover.py`)."""

from django.db import models
from django.db.models.functions import Now


class DatabaseTimeline(models.Model):
    timeline = models.PositiveBigIntegerField()
    seen_at = models.DateTimeField(db_default=Now())

    def __str__(self) -> str:
        return f"timeline {self.timeline}"
