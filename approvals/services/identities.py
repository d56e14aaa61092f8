"""Sign-on identities: the provider's (issuer, subject) bound to one console user, and the audited acts
that bind or unbind an existing account (docs/sso.md, "Who a sign-on is")."""

from django.contrib.auth import get_user_model
from django.db import IntegrityError, transaction

from approvals.auth.usernames import UsernameRefused, username_normalised, username_taken_by
from approvals.errors import ApprovalDenied, IdentityRefused, InvalidPayload
from approvals.models import SignOnIdentity, SignOnIdentityEvent
from lib.databases import DB
from outbox.clock import DbNow

Action = SignOnIdentityEvent.Action


def _not_break_glass(user) -> None:
    if user.is_superuser:
        # Break-glass accounts sign in with their password only: an identity at the provider must
        # never become a superuser's session, whoever bound it.
        raise IdentityRefused(f"{user} is a break-glass account, not signed in by the provider")


def _record(*, identity_of: tuple[str, str], user, action: str, actor=None, reason="") -> None:
    issuer, subject = identity_of
    SignOnIdentityEvent.objects.create(
        issuer=issuer, subject=subject, user=user, action=action, actor=actor, reason=reason
    )


def _new_user(*, issuer: str, subject: str, username, email: str):
    try:
        name = username_normalised(username)
    except UsernameRefused as exc:
        raise IdentityRefused(f"{exc}: ask an administrator to link your account") from exc
    taken = username_taken_by(name)
    if taken is not None:
        raise IdentityRefused(
            f"an account named {taken!r} already exists here and is not linked to this sign-on",
            existing=taken,
        )
    # Never staff, never superuser: those flags are this console's, not the provider's.
    user = get_user_model().objects.create_user(name, email=email or "")
    user.set_unusable_password()
    user.save(update_fields=["password"])
    SignOnIdentity.objects.create(
        issuer=issuer, subject=subject, user=user, last_sign_in_at=DbNow()
    )
    _record(identity_of=(issuer, subject), user=user, action=Action.CREATED)
    return user


def identity_sign_in(*, issuer: str, subject: str, username, email: str = ""):
    """The user the provider's (issuer, subject) is bound to; at a first sign-on, a new user of its own.

    Raises IdentityRefused: a break-glass account, or a new user name that is malformed or reads as an
    existing account's (which only an explicit link may bind)."""
    if not issuer or not isinstance(subject, str) or not subject or len(subject) > 255:
        raise IdentityRefused("the provider's answer names no usable subject")
    try:
        with transaction.atomic(using=DB):
            identity = (
                SignOnIdentity.objects.select_related("user")
                .filter(issuer=issuer, subject=subject)
                .first()
            )
            if identity is None:
                return _new_user(issuer=issuer, subject=subject, username=username, email=email)
            _not_break_glass(identity.user)
            SignOnIdentity.objects.filter(pk=identity.pk).update(last_sign_in_at=DbNow())
            return identity.user
    except IntegrityError as exc:
        # The same subject, or the same new name, signing in twice at once: the other one won.
        raise IdentityRefused("a sign-on of the same identity was under way; try again") from exc


def identity_link(*, user, issuer: str, subject: str, action: str, actor=None, reason: str = ""):
    """Bind an existing account to a provider identity, audited: by an administrator (`actor`, with a
    reason) or by the account's holder, who proved it with the account's password."""
    if action == Action.LINKED_BY_ADMIN:
        if actor is None or not actor.is_superuser:
            raise ApprovalDenied(f"{actor} may not link sign-on identities")
        if not reason.strip():
            raise InvalidPayload(["a reason is required to link an account"])
    elif action != Action.LINKED_BY_PASSWORD:
        raise InvalidPayload([f"{action!r} is not a way to link an account"])
    _not_break_glass(user)
    if not subject or len(subject) > 255 or not issuer:
        raise InvalidPayload(["an issuer and a subject of at most 255 characters are required"])
    try:
        with transaction.atomic(using=DB):
            identity = SignOnIdentity.objects.create(issuer=issuer, subject=subject, user=user)
            _record(
                identity_of=(issuer, subject), user=user, action=action, actor=actor, reason=reason
            )
    except IntegrityError as exc:
        raise IdentityRefused(
            f"{subject!r} at {issuer} is already linked, or {user} already has an identity there"
        ) from exc
    return identity


def identity_unlink(*, issuer: str, subject: str, actor, reason: str) -> None:
    """Remove a binding (a person left, a subject was reassigned), audited; the user stays."""
    if not actor.is_superuser:
        raise ApprovalDenied(f"{actor} may not unlink sign-on identities")
    if not reason.strip():
        raise InvalidPayload(["a reason is required to unlink an account"])
    with transaction.atomic(using=DB):
        identity = SignOnIdentity.objects.filter(issuer=issuer, subject=subject).first()
        if identity is None:
            raise IdentityRefused(f"{subject!r} at {issuer} is not linked to any account")
        identity.delete()
        _record(
            identity_of=(issuer, subject),
            user=identity.user,
            action=Action.UNLINKED,
            actor=actor,
            reason=reason,
        )
