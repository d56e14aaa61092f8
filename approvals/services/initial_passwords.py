"""Initial passwords (ASVS 6.4.1; docs/security.md "Initial passwords"): a password an administrator sets for
someone (admin's add user, set password) is marked; its holder must change it at their first sign-in, and it
no longer signs in `INITIAL_PASSWORD_HOURS` after it was set. Times on the database clock."""

from django.conf import settings
from django.db import transaction

from approvals.models import InitialPassword
from outbox.clock import db_now_plus


@transaction.atomic
def initial_password_set(*, user, set_by) -> InitialPassword:
    InitialPassword.objects.filter(user=user).delete()
    return InitialPassword.objects.create(user=user, set_by=set_by)


def initial_password_clear(*, user) -> None:
    """Its holder chose their own password."""
    InitialPassword.objects.filter(user=user).delete()


def initial_password_owed(user) -> bool:
    return InitialPassword.objects.filter(user=user).exists()


def initial_password_expired(user) -> bool:
    hours = settings.INITIAL_PASSWORD_HOURS
    return InitialPassword.objects.filter(user=user, set_at__lt=db_now_plus(-hours * 3600)).exists()
