"""Per workflow: its rule versions, which workspaces take its triggers, and how far it acts (its mode)."""

from django.conf import settings
from django.db import models

from approvals.models.workspaces import Workspace
from outbox.clock import DbClockDateTimeField


class RuleVersion(models.Model):
    """One version of a workflow's eligibility rules. Publishing new rules adds a row; rows never change,
    so a decision that stored `version` can always be explained by the rules it was made under."""

    workflow = models.CharField(max_length=40)
    number = models.PositiveIntegerField()
    version = models.CharField(
        max_length=40, help_text="The label stored on decisions and handoffs."
    )
    schema = models.JSONField(
        help_text="JSON Schema (draft 2020-12) the request payload must satisfy."
    )
    steps = models.JSONField(
        default=list,
        blank=True,
        help_text='Ordered steps, each {"name", "operation", "compensation"}; none: one handoff.',
    )
    notes = models.TextField(blank=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = DbClockDateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["workflow", "number"], name="rule_version_unique_number"
            ),
            models.UniqueConstraint(fields=["version"], name="rule_version_unique_label"),
        ]

    def __str__(self) -> str:
        return self.version


class WorkspaceWorkflow(models.Model):
    """Whether a workspace takes triggers for a workflow. A workspace without a row for a workflow that
    has rules accepts it; a row with `accepts_triggers` off makes intake refuse it with a reason."""

    workspace = models.ForeignKey(Workspace, on_delete=models.CASCADE, related_name="workflows")
    workflow = models.CharField(max_length=40)
    accepts_triggers = models.BooleanField(default=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["workspace", "workflow"], name="workspace_workflow_unique"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.workflow} in {self.workspace}: {'accepts' if self.accepts_triggers else 'refuses'} triggers"


class Mode(models.TextChoices):
    OBSERVE = "observe", "Observe only"
    LIMITED = "limited", "Limited to allowed workspaces"
    LIVE = "live", "Live"


class WorkflowModeQuerySet(models.QuerySet):
    def effective(self, workflow: str, workspace_id: int | None) -> tuple[str, bool]:
        """(mode of the workflow, whether approved handoffs of this workspace are sent).

        Without a stored row the workflow runs in settings.WORKFLOW_DEFAULT_MODE."""
        row = self.filter(workflow=workflow).values("pk", "mode").first()
        mode = row["mode"] if row else settings.WORKFLOW_DEFAULT_MODE
        if mode == Mode.LIVE:
            return mode, True
        if mode == Mode.LIMITED and row is not None and workspace_id is not None:
            allowed = WorkflowMode.allowed_workspaces.through.objects.filter(
                workflowmode_id=row["pk"], workspace_id=workspace_id
            ).exists()
            return mode, allowed
        return mode, False


class WorkflowMode(models.Model):
    """How far a workflow acts: `observe` records what would be handed off without calling the
    destination; `limited` sends only for the allowed workspaces and observes the others; `live` sends."""

    workflow = models.CharField(max_length=40)
    mode = models.CharField(max_length=12, choices=Mode.choices)
    allowed_workspaces = models.ManyToManyField(
        Workspace,
        blank=True,
        related_name="+",
        help_text="Workspaces whose handoffs are sent in limited mode.",
    )
    updated_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    updated_at = DbClockDateTimeField(auto_now=True)

    objects = WorkflowModeQuerySet.as_manager()

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["workflow"], name="workflow_mode_unique_workflow")
        ]

    def __str__(self) -> str:
        return f"{self.workflow}: {self.mode}"


class WorkflowModeChange(models.Model):
    """Audit of every mode change: who, when, from, to, why."""

    workflow = models.CharField(max_length=40)
    from_mode = models.CharField(max_length=12, blank=True)
    to_mode = models.CharField(max_length=12, choices=Mode.choices)
    from_allowed = models.JSONField(
        default=list, help_text="Allowed workspace ids before the change."
    )
    to_allowed = models.JSONField(default=list, help_text="Allowed workspace ids after the change.")
    changed_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+"
    )
    reason = models.TextField()
    changed_at = DbClockDateTimeField(auto_now_add=True)

    class Meta:
        indexes = [models.Index(fields=["workflow", "changed_at"], name="mode_change_idx")]

    def __str__(self) -> str:
        return f"{self.workflow}: {self.from_mode or '-'} -> {self.to_mode} by {self.changed_by}"
