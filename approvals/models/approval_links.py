"""The link in an approver's reminder: a random token stored only as its hash, bound to one revision, its
payload hash, one approver and an expiry, usable once. Opening it decides nothing (docs/security.md)."""

from django.conf import settings
from django.db import models

from approvals.models.requests import Request
from outbox.clock import DbClockDateTimeField


class ApprovalLink(models.Model):
    token_hash = models.CharField(max_length=64, help_text="SHA-256 of the token; never the token.")
    request = models.ForeignKey(Request, on_delete=models.CASCADE, related_name="links")
    payload_hash = models.CharField(max_length=64)
    approver = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+"
    )
    expires_at = models.DateTimeField()
    used_at = models.DateTimeField(null=True, blank=True)
    created_at = DbClockDateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["token_hash"], name="approval_link_unique_token"),
        ]

    def __str__(self) -> str:
        return f"link for {self.approver_id} to {self.request}"
