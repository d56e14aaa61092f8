"""Security events: a refused signed call (intake, the receiver, a destination's status events), a sign-in
lockout or a password-spraying pause, recorded where they are refused (`reconciliation/security_events.py`);
the incidents' sweep pages when one kind passes a rate (docs/incidents.md)."""

from django.db import models
from django.db.models.functions import Now


class SecurityEventKind(models.TextChoices):
    SIGNATURE_REJECTED = "signature_rejected", "Signature refused"
    REPLAY = "replay", "Replayed message refused"
    LOCKOUT = "lockout", "Sign-in locked out"
    # Many user names failing from one address: already a rate, so its first event pages.
    PASSWORD_SPRAYING = "password_spraying", "Password spraying paused"


class SecurityEvent(models.Model):
    """A refused signed call (intake or receiver), a sign-in lockout or a spraying pause: for paging."""

    kind = models.CharField(max_length=20, choices=SecurityEventKind.choices)
    source = models.CharField(max_length=40, help_text="intake, receiver, sign_in")
    detail = models.CharField(max_length=300, blank=True)
    at = models.DateTimeField(db_default=Now())

    class Meta:
        indexes = [models.Index(fields=["kind", "at"], name="security_event_kind_at_idx")]

    def __str__(self) -> str:
        return f"{self.kind} at {self.source}"
