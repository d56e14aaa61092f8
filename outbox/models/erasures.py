"""An erasure on request (GDPR article 17): one data subject's personal fields erased from one workspace's
requests, handoffs, attempts, archive and audit trail, by an authorised person, with a reason. The row is the
proof that keeps no erased data: who, when, why and how many rows of each kind (docs/security.md,
"Erasure"). Every row it erased points at it, so each screen can say "erased on … by …, reason …"."""

from django.conf import settings
from django.db import models

from outbox.clock import DbClockDateTimeField

# What an erased value reads as wherever it was stored.
ERASED = "[erased]"


class Erasure(models.Model):
    workspace_id = models.PositiveIntegerField()
    erased_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+"
    )
    erased_at = DbClockDateTimeField(auto_now_add=True)
    reason = models.TextField()
    # Rows changed, by kind ({"requests": 2, "handoffs": 3, "attempts": 4, ...}); never the subject's data.
    counts = models.JSONField(default=dict)

    class Meta:
        permissions = [("erase_personal_data", "Can erase a data subject's personal data")]
        indexes = [
            models.Index(fields=["workspace_id", "erased_at"], name="erasure_ws_time_idx"),
        ]

    def __str__(self) -> str:
        return f"erasure {self.pk} in workspace {self.workspace_id}"

    @property
    def words(self) -> str:
        """The sentence each screen shows where the erased data was."""
        by = self.erased_by.get_username() if self.erased_by_id else "someone"
        return f"Personal data erased on {self.erased_at:%Y-%m-%d %H:%M} UTC by {by}, reason: {self.reason}"

    @property
    def counts_words(self) -> str:
        """How many rows of each kind it erased ("requests 2, handoffs 3"), as the audit trail and the command
        write them; empty when it erased nothing."""
        return ", ".join(f"{kind} {n}" for kind, n in self.counts.items())
