"""What a sign-in leaves behind besides Django's session: an index of each account's sessions, and the mark of
a password an administrator set, which its holder must replace (docs/security.md "Sessions of an account",
"Initial passwords").

Django's session store has no index by user: `SignedInSession` is one, a row written at each sign-in and
removed at sign-out, when the session is ended here, or when it is found expired.
"""

from django.conf import settings
from django.db import models

from outbox.clock import DbClockDateTimeField


class SignedInSession(models.Model):
    class Method(models.TextChoices):
        PASSWORD = "password", "Password"
        SINGLE_SIGN_ON = "single_sign_on", "Single sign-on"

    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="signed_in_sessions"
    )
    session_key = models.CharField(max_length=40, unique=True)
    method = models.CharField(max_length=16, choices=Method.choices)
    address = models.GenericIPAddressField(null=True, blank=True)
    user_agent = models.CharField(max_length=300, blank=True)
    signed_in_at = DbClockDateTimeField(auto_now_add=True)

    class Meta:
        verbose_name = "signed-in session"
        permissions = [("end_sessions", "Can end any user's sessions")]
        indexes = [models.Index(fields=["user", "signed_in_at"], name="signed_in_user_time")]

    def __str__(self) -> str:
        return f"{self.user} since {self.signed_in_at:%Y-%m-%d %H:%M} from {self.address}"


class InitialPassword(models.Model):
    """A password an administrator set (admin's add user or set password): its holder must change it at their
    first sign-in, and it no longer signs in `INITIAL_PASSWORD_HOURS` after it was set."""

    user = models.OneToOneField(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="initial_password"
    )
    set_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+"
    )
    set_at = DbClockDateTimeField(auto_now_add=True)

    def __str__(self) -> str:
        return f"initial password of {self.user}, set {self.set_at:%Y-%m-%d %H:%M}"
