"""What the current (manual) process did with each case a workflow observed, to compare with the product's plan.

A workflow in `observe` mode records the handoff it would have sent (outbox state `observed`) and sends
nothing. Before it goes live, the people who run the current process record what that process did with the
same case (by hand or from a CSV), and the workflow's owner explains every case where the two disagree
(seed 001: expand only after the workflow owner can explain failures). docs/observation.md."""

from django.conf import settings
from django.db import models

from approvals.models.workspaces import Workspace
from outbox.clock import DbClockDateTimeField


class PilotBrief(models.Model):
    """A workflow's pilot brief (seed 000): its business owner and its exception path. One per workflow, beside
    its mode (`WorkflowMode`, which is per workflow too). The owner explains the observed disagreements and
    is the one person who confirms the switch from observe to live."""

    workflow = models.CharField(max_length=40)
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
        help_text="The workflow's business owner.",
    )
    exception_path = models.TextField(
        blank=True, help_text="Who handles an exception of this workflow, and how."
    )
    updated_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    updated_at = DbClockDateTimeField(auto_now=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["workflow"], name="pilot_brief_unique_workflow")
        ]

    def __str__(self) -> str:
        return f"{self.workflow}: owned by {self.owner or 'nobody'}"


class OutcomeSource(models.TextChoices):
    FORM = "form", "Recorded on the console"
    CSV = "csv", "Imported from a CSV file"


class ObservedOutcomeQuerySet(models.QuerySet):
    def current(self):
        """The newest recording of each case: a case recorded again keeps its earlier rows as history."""
        return self.filter(current=True)

    def disagreeing(self):
        return self.current().filter(agrees=False)

    def unexplained(self):
        """Disagreements the workflow's owner has not explained yet: these keep a workflow from going live."""
        return self.disagreeing().filter(explained_at__isnull=True)


class ObservedOutcome(models.Model):
    """One recording of what the current process did with one observed case (an observed handoff, by its
    action key), beside the product's plan for it as it stood when recorded. Rows are never changed except
    for the owner's explanation; recording a case again adds a row and marks the older one not current."""

    workspace = models.ForeignKey(Workspace, on_delete=models.PROTECT, related_name="+")
    workflow = models.CharField(max_length=40)
    rule_version = models.CharField(max_length=40)
    action_key = models.CharField(max_length=200, help_text="The observed handoff's action key.")
    current = models.BooleanField(default=True)
    # The product's side, copied from the observed handoff: where it would have created tasks.
    planned = models.JSONField(
        default=list, help_text="The planned steps, each {'step', 'destination'}, in order."
    )
    # The current process's side.
    task_created = models.BooleanField(help_text="Did the current process create the task?")
    receiver = models.CharField(
        max_length=40, blank=True, help_text="Where the current process created it (a destination)."
    )
    outcome = models.TextField(blank=True, help_text="What the current process did, in words.")
    reference = models.CharField(
        max_length=120, blank=True, help_text="The current process's own reference (ticket, task)."
    )
    source = models.CharField(max_length=8, choices=OutcomeSource.choices)
    recorded_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+"
    )
    recorded_at = DbClockDateTimeField(auto_now_add=True)
    # The comparison, made once when recorded (`approvals.agreement.compare`).
    agrees = models.BooleanField()
    difference = models.CharField(max_length=300, blank=True)
    # The owner's explanation of a disagreement.
    explanation = models.TextField(blank=True)
    explained_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    explained_at = models.DateTimeField(null=True, blank=True)

    objects = ObservedOutcomeQuerySet.as_manager()

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["workspace", "action_key"],
                condition=models.Q(current=True),
                name="observed_outcome_one_current",
            ),
        ]
        indexes = [
            models.Index(
                fields=["workspace", "rule_version", "current", "agrees", "recorded_at", "id"],
                name="observed_outcome_version_idx",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.action_key}: {'agrees' if self.agrees else 'disagrees'}"
