"""Reconciliation runs, the findings they keep open, and the manual repairs that close them.

A finding is a durable problem identified by (kind, action key): every run that sees it again
updates it, a run that no longer sees it resolves it, and an operator can acknowledge or resolve it.
So an acknowledgement survives the next run, and an alert is sent when a finding first appears,
not once per run.
"""

from django.conf import settings
from django.db import models
from django.db.models import Q

from outbox.clock import DbClockDateTimeField
from reconciliation.models import lifecycle


class RunStatus(models.TextChoices):
    QUEUED = "queued", "Queued"
    RUNNING = "running", "Running"
    COMPLETED = "completed", "Completed"
    FAILED = "failed", "Failed"


class ReconciliationRun(models.Model):
    trigger = models.CharField(max_length=30, help_text="command, schedule, console...")
    workspace_id = models.PositiveIntegerField(
        null=True,
        blank=True,
        help_text="Set when the run compared one workspace only (Reconcile now).",
    )
    started_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    status = models.CharField(max_length=16, choices=RunStatus.choices, default=RunStatus.RUNNING)
    started_at = DbClockDateTimeField(auto_now_add=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    batch_size = models.PositiveIntegerField()
    source_keys = models.PositiveBigIntegerField(default=0)
    receiver_keys = models.PositiveBigIntegerField(default=0)
    keys_compared = models.PositiveBigIntegerField(
        default=0, help_text="Distinct keys seen on either side."
    )
    source_pages = models.PositiveIntegerField(default=0)
    receiver_pages = models.PositiveIntegerField(default=0)
    largest_page = models.PositiveIntegerField(
        default=0, help_text="Most rows held from one page of either side."
    )
    page_limits = models.JSONField(
        default=list, blank=True, help_text="Every page size asked of either side."
    )
    approved_requests_checked = models.PositiveBigIntegerField(default=0)
    findings_by_kind = models.JSONField(
        default=dict, blank=True, help_text="Problems seen in this run, by kind."
    )
    new_findings = models.PositiveIntegerField(default=0)
    resolved_findings = models.PositiveIntegerField(default=0)
    outcome_validation_failures = models.PositiveIntegerField(default=0)
    covered_by_repairs = models.PositiveIntegerField(
        default=0,
        help_text="Problems seen again exactly as a manual repair accounted for: not reopened.",
    )
    work_statuses_recorded = models.PositiveBigIntegerField(
        default=0,
        help_text="Delivered handoffs whose work status the receiver reported differently than stored.",
    )
    error = models.TextField(blank=True)

    class Meta:
        indexes = [models.Index(fields=["status", "-started_at"], name="recon_run_status_idx")]

    def __str__(self) -> str:
        return f"reconciliation run {self.pk} ({self.status})"

    @property
    def findings_total(self) -> int:
        return sum(self.findings_by_kind.values())

    @property
    def is_queued(self) -> bool:
        return self.status == RunStatus.QUEUED

    @property
    def is_failed(self) -> bool:
        return self.status == RunStatus.FAILED


class FindingKind(models.TextChoices):
    MISSING_AT_RECEIVER = "missing_at_receiver", "Missing at the receiver"
    ORPHAN_AT_RECEIVER = "orphan_at_receiver", "Orphan at the receiver"
    PAYLOAD_MISMATCH = "payload_mismatch", "Payload mismatch"
    DESTINATION_MISMATCH = "destination_mismatch", "Destination id mismatch"
    STUCK = "stuck", "Stuck"
    NOT_HANDED_OFF = "not_handed_off", "Approved, not handed off"
    # The business outcome, reported by the people doing the task: the task exists, the work is not finished.
    WORK_NOT_DONE = "work_not_done", "Work not done by the deadline"
    WORK_FAILED = "work_failed", "Work failed at the receiver"


# A finding's lifecycle is the one incidents share (`lifecycle.py`); its acknowledgement never lapses.
FindingStatus = lifecycle.LifecycleState


class FindingQuerySet(lifecycle.LifecycleQuerySet):
    pass


class Finding(lifecycle.AcknowledgedResolved):
    state_field = "status"

    kind = models.CharField(max_length=24, choices=FindingKind.choices)
    action_key = models.CharField(max_length=200)
    # Plain ids, not foreign keys: a finding must outlive the rows it is about (an orphan has no
    # handoff; a handoff may be deleted by hand, which is exactly what reconciliation reports).
    handoff_id = models.BigIntegerField(null=True, blank=True)
    workspace_id = models.PositiveIntegerField(null=True, blank=True)
    workflow = models.CharField(max_length=40, blank=True)
    source_evidence = models.JSONField(default=dict, blank=True)
    receiver_evidence = models.JSONField(default=dict, blank=True)
    next_action = models.TextField()
    outcome_validation = models.BooleanField(
        default=False,
        help_text="A delivered handoff whose task at the receiver does not prove the outcome.",
    )
    status = models.CharField(
        max_length=16, choices=FindingStatus.choices, default=FindingStatus.OPEN
    )
    # Who should act on it, set when it opens: the handoff's owner, else the workspace's on-call operator.
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    first_run = models.ForeignKey(ReconciliationRun, on_delete=models.PROTECT, related_name="+")
    last_run = models.ForeignKey(
        ReconciliationRun, on_delete=models.PROTECT, related_name="findings"
    )
    first_seen_at = DbClockDateTimeField(auto_now_add=True)
    last_seen_at = models.DateTimeField()
    note = models.TextField(blank=True)

    objects = FindingQuerySet.as_manager()

    class Meta:
        constraints = [
            # One live finding per problem; a resolved one that comes back is a new finding.
            models.UniqueConstraint(
                fields=["kind", "action_key"],
                condition=~Q(status="resolved"),
                name="finding_one_live_per_kind_key",
            ),
        ]
        indexes = [
            models.Index(fields=["last_run", "kind"], name="finding_run_kind_idx"),
            models.Index(fields=["status", "action_key"], name="finding_status_key_idx"),
            models.Index(fields=["workspace_id", "status"], name="finding_ws_status_idx"),
        ]

    def __str__(self) -> str:
        return f"{self.kind} {self.action_key} ({self.status})"


class FindingEvent(lifecycle.LifecycleEvent):
    """Who did what to a finding, when, and why: operators and runs alike."""

    finding = models.ForeignKey(Finding, on_delete=models.CASCADE, related_name="events")
    action = models.CharField(
        max_length=20, help_text="opened, acknowledged, resolved, auto_resolved"
    )
    from_status = models.CharField(max_length=16, blank=True)
    to_status = models.CharField(max_length=16)
    at = DbClockDateTimeField(auto_now_add=True)

    class Meta:
        indexes = [models.Index(fields=["finding", "at"], name="finding_event_idx")]

    def __str__(self) -> str:
        return f"{self.finding_id}: {self.action} by {self.actor_label}"


class ManualRepair(models.Model):
    """What a person did outside the system to close what no automatic path can.

    Generic on purpose: it closes a reconciliation finding, settles a handoff whose outcome a person
    checked at the receiver by hand, and (later) a residual of a multi-step workflow. Plain ids, like
    findings, so that the record outlives what it is about.

    `covered_kind` and `covered_fingerprint` remember the facts the repair accounted for: a later run
    that sees exactly those facts again does not reopen the finding, while any other discrepancy does.
    """

    workspace_id = models.PositiveIntegerField()
    action_key = models.CharField(max_length=200)
    handoff_id = models.BigIntegerField(null=True, blank=True)
    finding = models.ForeignKey(
        Finding, null=True, blank=True, on_delete=models.PROTECT, related_name="repairs"
    )
    actor = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+"
    )
    actor_label = models.CharField(max_length=120)
    at = DbClockDateTimeField(auto_now_add=True)
    what_was_done = models.TextField(
        help_text="What was done outside the system, in the person's words."
    )
    evidence = models.TextField(
        blank=True, help_text="Ticket, message or screenshot reference that proves it."
    )
    receiver_task_id = models.CharField(
        max_length=120,
        blank=True,
        help_text="The receiver's task id, where one exists or was re-created.",
    )
    resulting_state = models.CharField(
        max_length=20, blank=True, help_text="The handoff's state afterwards."
    )
    covered_kind = models.CharField(max_length=24, blank=True)
    covered_fingerprint = models.CharField(max_length=64, blank=True)

    class Meta:
        indexes = [
            models.Index(fields=["action_key", "covered_kind"], name="repair_key_kind_idx"),
            models.Index(fields=["handoff_id", "at"], name="repair_handoff_idx"),
            models.Index(fields=["workspace_id", "at"], name="repair_ws_idx"),
        ]

    def __str__(self) -> str:
        return f"manual repair of {self.action_key} by {self.actor_label}"
