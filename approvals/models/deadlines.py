"""How long an approval may wait (a workflow's policy), the reminders and escalations sent about it, and the
approvers' delegates for a period."""

from django.conf import settings
from django.contrib.auth.models import Group
from django.db import models

from approvals.models.requests import Request
from outbox.clock import DbClockDateTimeField


class ApprovalPolicy(models.Model):
    """A workflow's approval deadline, from its file (`manage.py workflows apply`, the `approval` part):
    reminders `remind_before_hours` before it is due, escalation to `escalate_to` once it is overdue, and the
    request closed (`expired_unapproved`) `expire_after_hours` after it was submitted."""

    workflow = models.CharField(max_length=40)
    due_after_hours = models.PositiveIntegerField()
    remind_before_hours = models.PositiveIntegerField()
    expire_after_hours = models.PositiveIntegerField()
    escalate_to = models.ForeignKey(Group, on_delete=models.PROTECT, related_name="+")
    updated_at = DbClockDateTimeField(auto_now=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["workflow"], name="approval_policy_unique_workflow")
        ]

    def __str__(self) -> str:
        return f"{self.workflow}: due after {self.due_after_hours} h"


class NoticeKind(models.TextChoices):
    REMINDER = "reminder", "Reminder before the approval is due"
    ESCALATION = "escalation", "Escalation of an overdue approval"
    EXPIRED = "expired", "The request closed unapproved"


class ApprovalNotice(models.Model):
    """One e-mail about one revision to one person at one moment. The unique constraint makes the sweep
    idempotent under concurrent workers: whoever inserts the row sends the mail; the others skip it."""

    request = models.ForeignKey(Request, on_delete=models.CASCADE, related_name="notices")
    person = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    kind = models.CharField(max_length=12, choices=NoticeKind.choices)
    created_at = DbClockDateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["request", "person", "kind"], name="approval_notice_once"
            )
        ]

    def __str__(self) -> str:
        return f"{self.kind} to {self.person_id} about {self.request}"


class ApprovalDelegation(models.Model):
    """An approver's delegate for a bounded period. Rows are never deleted (the audit); a revoked one keeps
    who revoked it and when."""

    approver = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+"
    )
    delegate = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+"
    )
    starts_at = models.DateTimeField()
    ends_at = models.DateTimeField()
    reason = models.TextField()
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+"
    )
    created_at = DbClockDateTimeField(auto_now_add=True)
    revoked_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    revoked_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [
            models.CheckConstraint(
                condition=models.Q(ends_at__gt=models.F("starts_at")),
                name="approval_delegation_bounded",
            ),
            models.CheckConstraint(
                condition=~models.Q(approver=models.F("delegate")),
                name="approval_delegation_not_self",
            ),
        ]
        indexes = [
            models.Index(fields=["delegate", "ends_at"], name="approval_delegation_idx"),
        ]

    def __str__(self) -> str:
        return f"{self.delegate_id} for {self.approver_id} {self.starts_at:%Y-%m-%d}–{self.ends_at:%Y-%m-%d}"
