"""Authentication backends: the identity provider's sign-in, and passwords kept for break-glass use.

mozilla-django-oidc runs the code flow (state, nonce, PKCE) and checks the ID token's signature against
the provider's keys. It leaves the audience and the issuer unchecked and lets an expired token's error
escape as a server error; `OIDCRoleBackend` checks both and the lifetime too, and refuses a bad token as a
failed sign-in. A person is the console user bound to the token's issuer and subject
(approvals/services/identities.py), never one found by name; their workspace roles follow their groups at
each sign-in (approvals/auth/role_sync.py).
"""

import logging

import jwt
import requests
from django.conf import settings
from django.contrib.auth.backends import ModelBackend
from django.core.exceptions import SuspiciousOperation
from mozilla_django_oidc.auth import OIDCAuthenticationBackend

from approvals.auth.role_sync import memberships_sync_from_claims
from approvals.auth.sign_in_steps import PASSWORD_CHECKED
from approvals.auth.sign_on_refusals import sign_on_refusal_remember
from approvals.auth.sign_on_strength import sign_on_strength_refusal
from approvals.errors import IdentityRefused
from approvals.services.identities import identity_sign_in
from approvals.services.initial_passwords import initial_password_expired

log = logging.getLogger(__name__)


def local_passwords_mode() -> str:
    """ "all" without single sign-on; with it, "break_glass" (superusers only) or "off"."""
    return settings.OIDC_LOCAL_PASSWORDS if settings.OIDC_ENABLED else "all"


def password_changeable(user) -> bool:
    """A signed-in person may change their own password where passwords sign them in: every account
    without single sign-on, break-glass superusers with it, nobody with passwords off."""
    if not user.is_authenticated or not user.has_usable_password():
        return False
    mode = local_passwords_mode()
    return mode == "all" or (mode == "break_glass" and user.is_superuser)


class LocalPasswordBackend(ModelBackend):
    """Django's password check, refused by policy once single sign-on is on (permissions unchanged), and
    refused for an initial password past its hours (docs/security.md "Initial passwords")."""

    def authenticate(self, request, username=None, password=None, **kwargs):
        user = super().authenticate(request, username=username, password=password, **kwargs)
        if user is not None and initial_password_expired(user):
            log.warning("password sign-in refused for %s: its initial password expired", user)
            return None
        user = self._by_policy(user)
        if user is not None and request is not None:
            setattr(request, PASSWORD_CHECKED, True)
        return user

    @staticmethod
    def _by_policy(user):
        mode = local_passwords_mode()
        if user is None or mode == "all":
            return user
        if mode == "break_glass" and user.is_superuser:
            log.warning("break-glass password sign-in by %s while single sign-on is on", user)
            return user
        log.warning("password sign-in refused for %s: single sign-on only (%s)", user, mode)
        return None


class OIDCRoleBackend(OIDCAuthenticationBackend):
    """The provider's sign-in, with a strict ID token check and the roles of the person's groups."""

    def authenticate(self, request, **kwargs):
        if not settings.OIDC_ENABLED:
            return None
        try:
            return super().authenticate(request, **kwargs)
        except SuspiciousOperation as exc:
            log.warning("single sign-on refused: %s", exc)
        except requests.RequestException as exc:
            log.warning("single sign-on failed: the identity provider did not answer (%s)", exc)
        return None

    def _verify_jws(self, payload, key):
        """Signature, algorithm, audience, issuer and lifetime, or SuspiciousOperation naming why."""
        try:
            return jwt.decode(
                payload,
                key,
                algorithms=[self.OIDC_RP_SIGN_ALGO],
                audience=self.OIDC_RP_CLIENT_ID,
                issuer=settings.OIDC_OP_ISSUER,
                options={"require": ["exp", "iat", "iss", "aud", "sub"]},
                leeway=30,
            )
        except jwt.InvalidTokenError as exc:
            raise SuspiciousOperation(f"ID token refused: {exc}") from exc

    def retrieve_matching_jwk(self, token):
        try:
            return super().retrieve_matching_jwk(token)
        except (jwt.InvalidTokenError, KeyError) as exc:
            raise SuspiciousOperation(f"ID token refused: {exc!r}") from exc

    def get_userinfo(self, access_token, id_token, payload):
        """The ID token's claims, completed by the userinfo answer only where the token is silent.

        OpenID Connect Core §5.3.2: a userinfo answer whose `sub` is not the ID token's must not be used;
        it is refused, so a provider (or whoever answers for it) cannot speak for another person there."""
        info = super().get_userinfo(access_token, id_token, payload) if self._has_userinfo() else {}
        if not isinstance(info, dict):
            raise SuspiciousOperation("userinfo answer refused: not a JSON object")
        if info and info.get("sub") != payload.get("sub"):
            raise SuspiciousOperation("userinfo answer refused: its sub is not the ID token's")
        return {**info, **payload}

    def _has_userinfo(self) -> bool:
        return bool(self.OIDC_OP_USER_ENDPOINT)

    def verify_claims(self, claims):
        return isinstance(claims.get("sub"), str) and bool(claims.get("iss"))

    def describe_user_by_claims(self, claims):
        return f"subject {claims.get('sub')!r} of {claims.get('iss')}"

    def get_or_create_user(self, access_token, id_token, payload):
        """The user bound to the token's (issuer, subject), or a new one; never one found by name."""
        claims = self.get_userinfo(access_token, id_token, payload)
        if not self.verify_claims(claims):
            raise SuspiciousOperation("claims refused: no subject or issuer")
        # The strength is the ID token's word (a userinfo answer cannot raise it), checked before any account.
        if weaker := sign_on_strength_refusal(payload):
            sign_on_refusal_remember(self.request, claims=claims, refusal=IdentityRefused(weaker))
            raise SuspiciousOperation(f"sign-on refused: {weaker}")
        try:
            user = identity_sign_in(
                issuer=claims["iss"],
                subject=claims["sub"],
                username=claims.get(settings.OIDC_USERNAME_CLAIM),
                email=claims.get("email") if isinstance(claims.get("email"), str) else "",
            )
        except IdentityRefused as exc:
            sign_on_refusal_remember(self.request, claims=claims, refusal=exc)
            raise SuspiciousOperation(f"sign-on refused: {exc}") from exc
        if user.is_active:
            memberships_sync_from_claims(user=user, claims=claims)
        return user
