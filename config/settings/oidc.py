"""Single sign-on through the company's OpenID Connect provider (mozilla-django-oidc); off by default.

With `OIDC_ENABLED=1` people sign in at the provider and their workspace roles follow the provider's
group claim at every sign-in (approvals/auth/, docs/sso.md). Local passwords then serve break-glass
administrators only (`OIDC_LOCAL_PASSWORDS=break_glass`, superusers) or nobody (`off`). The client
secret comes from the environment only, like every other secret.
"""

import os

from django.core.exceptions import ImproperlyConfigured

from config.env import env_bool, env_float, env_int
from lib.json_config import JsonConfigRefused, load_json_config, parse_json_config

OIDC_ENABLED = env_bool("OIDC_ENABLED", False)

# Who may still sign in with a password kept here: "all" (no SSO), "break_glass" (superusers only,
# for when the provider is down), "off" (the password form is refused).
LOCAL_PASSWORD_MODES = ("all", "break_glass", "off")
OIDC_LOCAL_PASSWORDS = os.environ.get(
    "OIDC_LOCAL_PASSWORDS", "break_glass" if OIDC_ENABLED else "all"
)
if OIDC_LOCAL_PASSWORDS not in LOCAL_PASSWORD_MODES:
    raise ImproperlyConfigured(
        f"OIDC_LOCAL_PASSWORDS must be one of {', '.join(LOCAL_PASSWORD_MODES)}"
    )
if OIDC_LOCAL_PASSWORDS != "all" and not OIDC_ENABLED:
    raise ImproperlyConfigured("OIDC_LOCAL_PASSWORDS limits passwords only when OIDC_ENABLED=1")

# The provider's endpoints, as its discovery document (/.well-known/openid-configuration) names them.
OIDC_OP_ISSUER = os.environ.get("OIDC_OP_ISSUER", "")
OIDC_OP_AUTHORIZATION_ENDPOINT = os.environ.get("OIDC_OP_AUTHORIZATION_ENDPOINT", "")
OIDC_OP_TOKEN_ENDPOINT = os.environ.get("OIDC_OP_TOKEN_ENDPOINT", "")
OIDC_OP_USER_ENDPOINT = os.environ.get("OIDC_OP_USER_ENDPOINT", "")
OIDC_OP_JWKS_ENDPOINT = os.environ.get("OIDC_OP_JWKS_ENDPOINT", "")
# end_session_endpoint: signing out here also ends the provider's session (RP-initiated logout).
OIDC_OP_END_SESSION_ENDPOINT = os.environ.get("OIDC_OP_END_SESSION_ENDPOINT", "")
OIDC_PROVIDER_NAME = os.environ.get("OIDC_PROVIDER_NAME", "your company account")

OIDC_RP_CLIENT_ID = os.environ.get("OIDC_RP_CLIENT_ID", "")
OIDC_RP_CLIENT_SECRET = os.environ.get("OIDC_RP_CLIENT_SECRET", "")
OIDC_RP_SIGN_ALGO = os.environ.get("OIDC_RP_SIGN_ALGO", "RS256")
OIDC_RP_SCOPES = os.environ.get("OIDC_RP_SCOPES", "openid email profile groups")
OIDC_USE_PKCE = True
OIDC_USE_NONCE = True
OIDC_STORE_ID_TOKEN = True  # the id_token_hint of the provider's logout
OIDC_TIMEOUT = env_float("OIDC_TIMEOUT_SECONDS", 5.0)
# Which claim names the person (the console's user name) and which carries their groups.
OIDC_USERNAME_CLAIM = os.environ.get("OIDC_USERNAME_CLAIM", "preferred_username")
OIDC_GROUPS_CLAIM = os.environ.get("OIDC_GROUPS_CLAIM", "groups")
# The user that role changes made at sign-in are recorded under (an account nobody signs in with).
OIDC_ROLE_SYNC_ACTOR = os.environ.get("OIDC_ROLE_SYNC_ACTOR", "identity-provider")

LOGIN_REDIRECT_URL_FAILURE = "/accounts/login/?sso=failed"

# How strongly the provider must have authenticated the person (approvals/auth/sign_on_strength.py, docs/sso.md
# "Authentication strength"): `acr` one of these, `amr` naming at least one of these, `auth_time` this recent.
# Empty: the provider's own policy is taken as it is.
OIDC_REQUIRED_ACR_VALUES = os.environ.get("OIDC_REQUIRED_ACR_VALUES", "").split()
OIDC_REQUIRED_AMR = os.environ.get("OIDC_REQUIRED_AMR", "").split()
OIDC_MAX_AUTH_AGE_SECONDS = env_int("OIDC_MAX_AUTH_AGE_SECONDS", 0)


def _role_mapping() -> dict:
    """The group-to-role mapping: JSON in OIDC_ROLE_MAPPING, or a file named by OIDC_ROLE_MAPPING_FILE,
    read strictly (a group named twice is refused, not silently given the second list of roles)."""
    raw = os.environ.get("OIDC_ROLE_MAPPING", "")
    path = os.environ.get("OIDC_ROLE_MAPPING_FILE", "")
    try:
        if path:
            return load_json_config(path)
        return parse_json_config(raw, source="OIDC_ROLE_MAPPING") if raw else {}
    except JsonConfigRefused as exc:
        raise ImproperlyConfigured(f"the OIDC role mapping is refused: {exc}") from None


OIDC_ROLE_MAPPING = _role_mapping()

_REQUIRED = {
    "OIDC_OP_ISSUER": OIDC_OP_ISSUER,
    "OIDC_OP_AUTHORIZATION_ENDPOINT": OIDC_OP_AUTHORIZATION_ENDPOINT,
    "OIDC_OP_TOKEN_ENDPOINT": OIDC_OP_TOKEN_ENDPOINT,
    "OIDC_OP_USER_ENDPOINT": OIDC_OP_USER_ENDPOINT,
    "OIDC_OP_JWKS_ENDPOINT": OIDC_OP_JWKS_ENDPOINT,
    "OIDC_RP_CLIENT_ID": OIDC_RP_CLIENT_ID,
    "OIDC_RP_CLIENT_SECRET": OIDC_RP_CLIENT_SECRET,
}
if OIDC_ENABLED and (missing := [name for name, value in _REQUIRED.items() if not value]):
    raise ImproperlyConfigured(f"OIDC_ENABLED=1 needs {', '.join(missing)}")
