"""Authentication backends: the identity provider's sign-in, and passwords kept for break-glass use.

mozilla-django-oidc runs the code flow (state, nonce, PKCE) and checks the ID token's signature against
the provider's keys. It leaves the audience and the issuer unchecked and lets an expired token's error
escape as a server error; `OIDCRoleBackend` checks both and the lifetime too, and refuses a bad token as a
failed sign-in. A person is the console user named by `OIDC_USERNAME_CLAIM`; their workspace roles
follow their groups at each sign-in (approvals/auth/role_sync.py).
"""

import logging

import jwt
import requests
from django.conf import settings
from django.contrib.auth.backends import ModelBackend
from django.core.exceptions import SuspiciousOperation
from mozilla_django_oidc.auth import OIDCAuthenticationBackend

from approvals.auth.role_sync import memberships_sync_from_claims

log = logging.getLogger(__name__)

USERNAME_MAX = 150


def local_passwords_mode() -> str:
    """ "all" without single sign-on; with it, "break_glass" (superusers only) or "off"."""
    return settings.OIDC_LOCAL_PASSWORDS if settings.OIDC_ENABLED else "all"


class LocalPasswordBackend(ModelBackend):
    """Django's password check, refused by policy once single sign-on is on (permissions unchanged)."""

    def authenticate(self, request, username=None, password=None, **kwargs):
        user = super().authenticate(request, username=username, password=password, **kwargs)
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

    def _username(self, claims) -> str:
        value = claims.get(settings.OIDC_USERNAME_CLAIM)
        return value if isinstance(value, str) and 0 < len(value) <= USERNAME_MAX else ""

    def verify_claims(self, claims):
        return bool(self._username(claims))

    def describe_user_by_claims(self, claims):
        return f"{settings.OIDC_USERNAME_CLAIM} {self._username(claims)!r}"

    def filter_users_by_claims(self, claims):
        return self.UserModel.objects.filter(username=self._username(claims))

    def create_user(self, claims):
        user = self.UserModel.objects.create_user(
            self._username(claims), email=claims.get("email") or ""
        )
        user.set_unusable_password()
        user.save(update_fields=["password"])
        return self.update_user(user, claims)

    def update_user(self, user, claims):
        if user.is_superuser:
            # Break-glass accounts sign in with their password only: a name at the provider that
            # happens to match one must not become a superuser's session.
            raise SuspiciousOperation(
                f"{user} is a break-glass account, not signed in by the provider"
            )
        if user.is_active:
            memberships_sync_from_claims(user=user, claims=claims)
        return user
