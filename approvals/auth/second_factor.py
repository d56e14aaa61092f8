"""The second factor of password users (ASVS 6.3.3; docs/security.md "Second factor"): a TOTP authenticator
(RFC 6238) held by django-otp's `TOTPDevice`, which also refuses a code used before (6.5.1) and slows
repeated wrong codes (1, 2, 4 ... seconds).

Who owes one after their password: staff and superusers always (admin is theirs), every password user with
`SECOND_FACTOR_REQUIRED=all`, and anyone who enrolled. Single sign-on users get their factors from the
provider (docs/sso.md "Authentication strength"). An administrator resets a lost authenticator; its holder
enrols a new one at their next sign-in.
"""

import base64
import logging

from django.conf import settings
from django.db import transaction
from django.utils import timezone
from django_otp.plugins.otp_totp.models import TOTPDevice

log = logging.getLogger(__name__)

DEVICE_NAME = "authenticator"


def totp_device(user, *, confirmed: bool = True) -> TOTPDevice | None:
    return TOTPDevice.objects.filter(user=user, confirmed=confirmed).order_by("-id").first()


def second_factor_owed(user) -> bool:
    """Whether a password sign-in of `user` must be followed by a second factor."""
    return (
        settings.SECOND_FACTOR_REQUIRED == "all"
        or user.is_staff
        or user.is_superuser
        or totp_device(user) is not None
    )


def totp_secret(device: TOTPDevice) -> str:
    """The key as an authenticator app takes it typed: base32, without padding."""
    return base64.b32encode(device.bin_key).decode().rstrip("=")


@transaction.atomic
def totp_enrolment_start(*, user) -> TOTPDevice:
    """A new, unconfirmed authenticator with a fresh random key (os.urandom); any earlier unconfirmed one
    is dropped, so a key is shown once and only the last one shown can be confirmed."""
    TOTPDevice.objects.filter(user=user, confirmed=False).delete()
    return TOTPDevice.objects.create(user=user, name=DEVICE_NAME, confirmed=False)


@transaction.atomic
def totp_enrolment_confirm(*, user, code: str) -> bool:
    """The code proves the person holds the new key: it becomes their one authenticator."""
    device = totp_device(user, confirmed=False)
    if device is None or not device.verify_token(code.strip()):
        return False
    TOTPDevice.objects.filter(user=user, confirmed=True).delete()
    device.confirmed = True
    device.save(update_fields=["confirmed"])
    log.warning("second factor enrolled for %s", user)
    return True


def totp_verify(*, user, code: str) -> bool:
    device = totp_device(user)
    return device is not None and device.verify_token(code.strip())


def totp_wait_seconds(user) -> int:
    """How long wrong codes hold this user's authenticator back (0: a code may be tried now)."""
    device = totp_device(user)
    if device is None:
        return 0
    allowed, details = device.verify_is_allowed()
    if allowed or not details or "locked_until" not in details:
        return 0
    return max(1, int((details["locked_until"] - timezone.now()).total_seconds()) + 1)


@transaction.atomic
def second_factor_reset(*, users, actor) -> int:
    """An administrator removes the authenticators of `users` (a lost phone): each enrols anew at their next
    password sign-in. Logged, with who did it."""
    removed, _ = TOTPDevice.objects.filter(user__in=users).delete()
    for user in users:
        log.warning("second factor of %s reset by %s", user, actor)
    return removed
