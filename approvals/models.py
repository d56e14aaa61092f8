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
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="memberships")
    workspace = models.ForeignKey(Workspace, on_delete=models.CASCADE, related_name="memberships")
    role = models.CharField(max_length=16, choices=Role.choices)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["user", "workspace", "role"], name="membership_unique_role"),
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
    RequestState.RECEIVED: frozenset({RequestState.VALIDATED, RequestState.REJECTED, RequestState.SUPERSEDED}),
    RequestState.VALIDATED: frozenset({RequestState.AWAITING_APPROVAL, RequestState.SUPERSEDED}),
    RequestState.AWAITING_APPROVAL: frozenset(
        {RequestState.APPROVED, RequestState.REJECTED, RequestState.CANCELLED, RequestState.SUPERSEDED}
    ),
    RequestState.APPROVED: frozenset({RequestState.SUPERSEDED}),
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
    state = models.CharField(max_length=24, choices=RequestState.choices, default=RequestState.AWAITING_APPROVAL)
    requested_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["workspace", "workflow", "number", "revision"], name="request_unique_revision"
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
    actor = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+")
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
    decided_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+")
    payload_hash = models.CharField(max_length=64)
    rule_version = models.CharField(max_length=40)
    decided_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["request"], name="approval_one_decision_per_revision"),
        ]

    def __str__(self) -> str:
        return f"{self.decision} of {self.request}"
