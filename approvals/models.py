from django.conf import settings
from django.db import models


class Workspace(models.Model):
    name = models.CharField(max_length=120)
    on_call = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
        help_text="Operator who owns handoffs of this workspace that need attention.",
    )
    created_at = models.DateTimeField(auto_now_add=True)

    def __str__(self) -> str:
        return f"{self.name} (#{self.pk})"


class Role(models.TextChoices):
    REQUESTER = "requester", "Requester"
    APPROVER = "approver", "Approver"
    OPERATOR = "operator", "Operator"


class Membership(models.Model):
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="memberships"
    )
    workspace = models.ForeignKey(Workspace, on_delete=models.CASCADE, related_name="memberships")
    role = models.CharField(max_length=16, choices=Role.choices)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["user", "workspace", "role"], name="membership_unique_role"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.user} is {self.role} in {self.workspace}"


class RequestState(models.TextChoices):
    RECEIVED = "received", "Received"
    VALIDATED = "validated", "Validated"
    AWAITING_APPROVAL = "awaiting_approval", "Awaiting approval"
    APPROVED = "approved", "Approved"
    REJECTED = "rejected", "Rejected"
    CANCELLED = "cancelled", "Cancelled"
    SUPERSEDED = "superseded", "Superseded"


# The allowed moves of a request revision, readable in one place.
REQUEST_TRANSITIONS: dict[str, frozenset[str]] = {
    RequestState.RECEIVED: frozenset(
        {
            RequestState.VALIDATED,
            RequestState.REJECTED,
            RequestState.SUPERSEDED,
            RequestState.CANCELLED,
        }
    ),
    RequestState.VALIDATED: frozenset(
        {RequestState.AWAITING_APPROVAL, RequestState.SUPERSEDED, RequestState.CANCELLED}
    ),
    RequestState.AWAITING_APPROVAL: frozenset(
        {
            RequestState.APPROVED,
            RequestState.REJECTED,
            RequestState.CANCELLED,
            RequestState.SUPERSEDED,
        }
    ),
    # An approved request is cancelled only while nothing of it was delivered (else it is compensated).
    RequestState.APPROVED: frozenset({RequestState.SUPERSEDED, RequestState.CANCELLED}),
    RequestState.REJECTED: frozenset(),
    RequestState.CANCELLED: frozenset(),
    RequestState.SUPERSEDED: frozenset(),
}


class Request(models.Model):
    """One revision of a business request. A new revision is a new row; decided rows never change."""

    workflow = models.CharField(max_length=40, default="onboarding")
    workspace = models.ForeignKey(Workspace, on_delete=models.PROTECT, related_name="requests")
    number = models.PositiveIntegerField(help_text="The request's number within its workspace.")
    revision = models.PositiveIntegerField(default=1)
    payload = models.JSONField()
    payload_hash = models.CharField(max_length=64)
    state = models.CharField(
        max_length=24, choices=RequestState.choices, default=RequestState.AWAITING_APPROVAL
    )
    requested_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+"
    )
    # An approver who corrected the request made this revision: a fresh approval by someone else decides it.
    corrected_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    # Why a request ended without being carried out (cancelled, rejected, superseded): searchable.
    reason_code = models.CharField(max_length=40, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["workspace", "workflow", "number", "revision"],
                name="request_unique_revision",
            ),
        ]
        indexes = [
            models.Index(fields=["state", "created_at", "id"], name="request_state_age_idx"),
            models.Index(fields=["workspace", "state", "created_at"], name="request_ws_state_idx"),
        ]

    def __str__(self) -> str:
        return f"{self.workflow} request {self.number} rev {self.revision} (workspace {self.workspace_id})"

    @property
    def action_key(self) -> str:
        return f"{self.workflow}:{self.workspace_id}:{self.number}:{self.revision}"

    def can_move_to(self, state: str) -> bool:
        return state in REQUEST_TRANSITIONS[self.state]


class RequestEvent(models.Model):
    """History of a request: every state move, who made it and why."""

    request = models.ForeignKey(Request, on_delete=models.CASCADE, related_name="events")
    from_state = models.CharField(max_length=24, blank=True)
    to_state = models.CharField(max_length=24)
    actor = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+"
    )
    reason = models.TextField(blank=True)
    at = models.DateTimeField(auto_now_add=True)

    class Meta:
        indexes = [models.Index(fields=["request", "at"], name="request_event_idx")]

    def __str__(self) -> str:
        return f"{self.request}: {self.from_state or '-'} -> {self.to_state}"


class Decision(models.TextChoices):
    APPROVE = "approve", "Approve"
    REJECT = "reject", "Reject"


class Approval(models.Model):
    """The decision on one request revision, bound to the payload hash the approver saw."""

    request = models.ForeignKey(Request, on_delete=models.PROTECT, related_name="decisions")
    revision = models.PositiveIntegerField()
    decision = models.CharField(max_length=8, choices=Decision.choices)
    reason = models.TextField(blank=True)
    decided_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+"
    )
    payload_hash = models.CharField(max_length=64)
    rule_version = models.CharField(max_length=40)
    decided_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["request"], name="approval_one_decision_per_revision"),
        ]

    def __str__(self) -> str:
        return f"{self.decision} of {self.request}"


# --- Intake: triggers from other systems, rule versions, delivery modes -------------------------


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
    created_at = models.DateTimeField(auto_now_add=True)

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
    updated_at = models.DateTimeField(auto_now=True)

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
    changed_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        indexes = [models.Index(fields=["workflow", "changed_at"], name="mode_change_idx")]

    def __str__(self) -> str:
        return f"{self.workflow}: {self.from_mode or '-'} -> {self.to_mode} by {self.changed_by}"


class RequestReference(models.Model):
    """Which request number a sender's request reference maps to, and the newest sender revision seen.

    Locked while a trigger is applied, so revisions of one reference are handled one at a time."""

    workspace = models.ForeignKey(Workspace, on_delete=models.PROTECT, related_name="+")
    workflow = models.CharField(max_length=40)
    reference = models.CharField(max_length=120)
    number = models.PositiveIntegerField()
    latest_revision = models.PositiveIntegerField(help_text="The sender's newest revision applied.")
    created_at = models.DateTimeField(auto_now_add=True)

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
    received_at = models.DateTimeField(auto_now_add=True)
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


class RoleChange(models.Model):
    """Audit of every role granted or revoked in a workspace: who, whose role, which, when, why.

    Operators of the workspace see these in the console; rows are never changed or deleted."""

    class Action(models.TextChoices):
        GRANT = "grant", "Granted"
        REVOKE = "revoke", "Revoked"

    workspace = models.ForeignKey(Workspace, on_delete=models.PROTECT, related_name="role_changes")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+")
    role = models.CharField(max_length=16, choices=Role.choices)
    action = models.CharField(max_length=8, choices=Action.choices)
    changed_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+"
    )
    reason = models.TextField()
    changed_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        indexes = [
            models.Index(fields=["workspace", "changed_at", "id"], name="role_change_ws_idx")
        ]

    def __str__(self) -> str:
        return f"{self.changed_by} {self.action}ed {self.role} of {self.user} in workspace {self.workspace_id}"
