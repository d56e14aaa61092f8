"""Workspaces, the roles people hold in them, and the audit of every role change."""

from django.conf import settings
from django.db import models

from outbox.clock import DbClockDateTimeField


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
    created_at = DbClockDateTimeField(auto_now_add=True)

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
    changed_at = DbClockDateTimeField(auto_now_add=True)

    class Meta:
        indexes = [
            models.Index(fields=["workspace", "changed_at", "id"], name="role_change_ws_idx")
        ]

    def __str__(self) -> str:
        return f"{self.changed_by} {self.action}ed {self.role} of {self.user} in workspace {self.workspace_id}"
