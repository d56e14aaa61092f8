"""Who the identity provider signs in: a provider's (issuer, subject) pair bound to one console user.

OpenID Connect Core §5.7: only `iss` with `sub` identifies a person; `preferred_username` and `email` are
not unique and may be reassigned. A first sign-on creates its own user; an existing account is bound only
by an explicit, audited act (docs/sso.md).
"""

from django.conf import settings
from django.db import models

from outbox.clock import DbClockDateTimeField


class SignOnIdentity(models.Model):
    issuer = models.CharField(max_length=255)
    subject = models.CharField(max_length=255)
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="sign_on_identities"
    )
    created_at = DbClockDateTimeField(auto_now_add=True)
    last_sign_in_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        verbose_name = "sign-on identity"
        verbose_name_plural = "sign-on identities"
        constraints = [
            models.UniqueConstraint(fields=["issuer", "subject"], name="identity_unique_subject"),
            # One identity per provider a person: a second subject of the same issuer is another person.
            models.UniqueConstraint(fields=["user", "issuer"], name="identity_unique_user_issuer"),
        ]

    def __str__(self) -> str:
        return f"{self.subject} at {self.issuer} is {self.user}"


class SignOnIdentityEvent(models.Model):
    """Audit of every binding made or removed: which identity, which user, how, by whom, when."""

    class Action(models.TextChoices):
        CREATED = "created", "Created at a first sign-on"
        LINKED_BY_ADMIN = "linked_by_admin", "Linked to an existing account by an administrator"
        LINKED_BY_PASSWORD = "linked_by_password", "Linked by the account holder with its password"
        UNLINKED = "unlinked", "Unlinked by an administrator"

    issuer = models.CharField(max_length=255)
    subject = models.CharField(max_length=255)
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+")
    action = models.CharField(max_length=24, choices=Action.choices)
    actor = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, on_delete=models.PROTECT, related_name="+"
    )
    reason = models.TextField(blank=True)
    at = DbClockDateTimeField(auto_now_add=True)

    def __str__(self) -> str:
        return f"{self.action}: {self.subject} at {self.issuer} and {self.user}"
