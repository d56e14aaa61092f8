"""One lifecycle for what a person acknowledges and resolves: reconciliation findings and incidents.

Open, acknowledged, resolved; who acknowledged and resolved it, and when; the moves allowed, read in one
table. A resolved record that comes back is a new one. Acknowledged goes back to open only where an
acknowledgement lapses (an incident whose cause still holds pages again); a finding's never does.
"""

from typing import ClassVar

from django.conf import settings
from django.db import models


class LifecycleState(models.TextChoices):
    OPEN = "open", "Open"
    ACKNOWLEDGED = "acknowledged", "Acknowledged"
    RESOLVED = "resolved", "Resolved"


# Every allowed move. ACKNOWLEDGED -> OPEN is the lapse of an acknowledgement, guarded in `can_move_to`.
LIFECYCLE_TRANSITIONS: dict[str, frozenset[str]] = {
    LifecycleState.OPEN: frozenset({LifecycleState.ACKNOWLEDGED, LifecycleState.RESOLVED}),
    LifecycleState.ACKNOWLEDGED: frozenset({LifecycleState.OPEN, LifecycleState.RESOLVED}),
    LifecycleState.RESOLVED: frozenset(),
}


class LifecycleQuerySet(models.QuerySet):
    def live(self):
        """Not resolved (open or acknowledged): what a person may still act on."""
        return self.exclude(**{self.model.state_field: LifecycleState.RESOLVED})


class AcknowledgedResolved(models.Model):
    """Abstract: the lifecycle's fields and rules. A subclass names its state field (`state_field`) and
    says whether its acknowledgement lapses; the tables keep their columns."""

    state_field: ClassVar[str] = "state"
    acknowledgement_lapses: ClassVar[bool] = False

    acknowledged_at = models.DateTimeField(null=True, blank=True)
    acknowledged_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    resolved_at = models.DateTimeField(null=True, blank=True)
    resolved_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )

    class Meta:
        abstract = True

    @property
    def lifecycle_state(self) -> str:
        return getattr(self, self.state_field)

    def can_move_to(self, state: str) -> bool:
        current = self.lifecycle_state
        if current == LifecycleState.ACKNOWLEDGED and state == LifecycleState.OPEN:
            return self.acknowledgement_lapses
        return state in LIFECYCLE_TRANSITIONS[current]

    # What templates ask (a template never spells a state's name).
    @property
    def is_open(self) -> bool:
        return self.lifecycle_state == LifecycleState.OPEN

    @property
    def is_live(self) -> bool:
        """Not resolved: the rule of `LifecycleQuerySet.live`, for one row."""
        return self.lifecycle_state != LifecycleState.RESOLVED


class LifecycleEvent(models.Model):
    """Abstract: one line of a record's timeline, who did what and why (operators and the system alike)."""

    actor = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+"
    )
    actor_label = models.CharField(max_length=120)
    note = models.TextField(blank=True)

    class Meta:
        abstract = True
