"""Requests, their revisions and history, and the approvers' decisions."""

from django.conf import settings
from django.db import models

from approvals.models.workspaces import Workspace
from outbox.clock import DbClockDateTimeField


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


class RequestReasonCode(models.TextChoices):
    """Why a revision ended: every move to a final state (rejected, superseded, cancelled) records one
    (`approvals/services/requests.py` `request_move` refuses it without)."""

    REJECTED_BY_APPROVER = "rejected_by_approver", "rejected by an approver"
    SUPERSEDED_BY_REVISION = "superseded_by_revision", "superseded by a newer revision"
    SUPERSEDED_BY_CORRECTION = (
        "superseded_by_correction",
        "superseded by a correction after its handoff failed",
    )
    CANCELLED_BY_REQUESTER = "cancelled_by_requester", "cancelled by its requester"
    CANCELLED_BY_OPERATOR = "cancelled_by_operator", "cancelled by an operator"
    EXPIRED_UNAPPROVED = (
        "expired_unapproved",
        "closed: nobody decided it before its workflow's approval expiry",
    )


# The final states, each reached only with its reason code.
REQUEST_FINAL_STATES = frozenset(
    {RequestState.REJECTED, RequestState.SUPERSEDED, RequestState.CANCELLED}
)


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
    # Its subject's personal fields were erased on request (`approvals/services/erasure.py`); hash kept.
    erasure = models.ForeignKey(
        "outbox.Erasure",
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="+",
        db_index=False,
    )
    # What the requests list's search finds it by (`approvals/request_search.py`); on PostgreSQL a trigram
    # index serves it (migration 0015). None: recorded before that migration and not filled.
    search_text = models.TextField(null=True, blank=True, editable=False)
    created_at = DbClockDateTimeField(auto_now_add=True)
    updated_at = DbClockDateTimeField(auto_now=True)

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
            # The Requests page's keyset pages, one ordered branch per workspace (`lib.paging`).
            models.Index(fields=["workspace", "created_at", "id"], name="request_ws_age_idx"),
            # A search by a payload hash (`approvals/request_search.py`): the revisions that carried it, in
            # their workspace, then the request they belong to, whichever revision a list shows.
            models.Index(fields=["payload_hash", "workspace"], name="request_payload_hash_idx"),
        ]

    def __str__(self) -> str:
        return f"{self.workflow} request {self.number} rev {self.revision} (workspace {self.workspace_id})"

    @property
    def action_key(self) -> str:
        return f"{self.workflow}:{self.workspace_id}:{self.number}:{self.revision}"

    @property
    def source_ref(self) -> str:
        """The reference a revision's handoffs carry (`Handoff.source_ref`), searched by in both lists."""
        return f"request {self.number} revision {self.revision}"

    def can_move_to(self, state: str) -> bool:
        return state in REQUEST_TRANSITIONS[self.state]

    # What templates ask of a request's state (a template never spells a state's name).
    @property
    def is_awaiting_approval(self) -> bool:
        return self.state == RequestState.AWAITING_APPROVAL

    @property
    def is_approved(self) -> bool:
        return self.state == RequestState.APPROVED


class RequestEvent(models.Model):
    """History of a request: every state move, who made it and why."""

    request = models.ForeignKey(Request, on_delete=models.CASCADE, related_name="events")
    from_state = models.CharField(max_length=24, blank=True)
    to_state = models.CharField(max_length=24)
    actor = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+"
    )
    reason = models.TextField(blank=True)
    at = DbClockDateTimeField(auto_now_add=True)

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
    decided_at = DbClockDateTimeField(auto_now_add=True)
    # What each routed step will send, rendered from the payload when it was approved and shown to the
    # approver (approvals/route_requests.py), and the hash the decision binds to; each step's handoff
    # freezes its own. None / "": decided before request mapping, or rejected.
    requests = models.JSONField(null=True, blank=True)
    requests_hash = models.CharField(max_length=64, blank=True, default="", db_default="")

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["request"], name="approval_one_decision_per_revision"),
        ]

    def __str__(self) -> str:
        return f"{self.decision} of {self.request}"
