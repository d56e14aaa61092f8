"""Sign-in throttling: django-axes with our handler (docs/security.md); imported by `config.settings`."""

import os
from datetime import timedelta

from django.core.exceptions import ImproperlyConfigured

from config.env import env_float, env_int

# Lockout: one user name at one address, for the cool-off time. Five wrong passwords for one user from an
# office's NAT address lock neither the others behind it nor that user elsewhere.
AXES_FAILURE_LIMIT = env_int("LOGIN_FAILURE_LIMIT", 5)
AXES_COOLOFF_TIME = timedelta(minutes=env_int("LOGIN_COOLOFF_MINUTES", 15))
AXES_LOCKOUT_PARAMETERS = [["username", "ip_address"]]
AXES_RESET_ON_SUCCESS = True
AXES_ENABLE_ACCESS_FAILURE_LOG = True
# Our handler: a failed provider callback (it names nobody) is logged but never locks an address, and many
# user names failing from one address pause password sign-in from it (approvals/auth/lockout.py).
AXES_HANDLER = "approvals.auth.lockout.SignInAttemptsHandler"
SIGN_IN_SPRAY_USER_NAMES = env_int("LOGIN_SPRAY_USER_NAMES", 10)
SIGN_IN_SPRAY_WINDOW = timedelta(minutes=env_int("LOGIN_SPRAY_WINDOW_MINUTES", 10))
# Every refusal is a 429 with Retry-After saying which pause it is.
AXES_LOCKOUT_CALLABLE = "console.views.sign_in_paused.sign_in_paused"
AXES_LOCKOUT_TEMPLATE = "registration/locked_out.html"
# The client address is REMOTE_ADDR only (django-axes' default): a header a client can set must not
# choose which address a failure is counted against.

# Passwords (approvals/auth/password_rules.py, docs/security.md "Passwords"). The words of this product's context
# that no new password may contain, besides every workspace's name, the role names and the person's own names;
# PASSWORD_CONTEXT_WORDS adds an install's own (comma-separated: its company's names, its products).
PASSWORD_CONTEXT_WORDS = [
    "handoff",
    "handoff console",
    "console",
    "approvals",
    "outbox",
    "receiver",
    "dispatcher",
    "support",
    "administrator",
    "superuser",
    "destination",
    *[
        word.strip()
        for word in os.environ.get("PASSWORD_CONTEXT_WORDS", "").split(",")
        if word.strip()
    ],
]
# Have I Been Pwned's range API (k-anonymity): GET {PASSWORD_BREACH_API_URL}/range/{5 hex}. "off" switches the
# check off (an install without the service and without a mirror of it); unreachable refuses the password.
PASSWORD_BREACH_API_URL = os.environ.get(
    "PASSWORD_BREACH_API_URL", "https://api.pwnedpasswords.com"
)
PASSWORD_BREACH_TIMEOUT_SECONDS = env_float("PASSWORD_BREACH_TIMEOUT_SECONDS", 3.0)

# The second factor after a password (approvals/auth/second_factor.py, docs/security.md "Second factor"): "staff"
# (staff and superusers, who reach admin; anyone who enrolled) or "all" (every password user).
SECOND_FACTOR_REQUIRED = os.environ.get("SECOND_FACTOR_REQUIRED", "staff")
if SECOND_FACTOR_REQUIRED not in ("staff", "all"):
    raise ImproperlyConfigured("SECOND_FACTOR_REQUIRED must be staff or all")
OTP_TOTP_ISSUER = "Handoff console"
# A password an administrator set must be changed at first sign-in and no longer signs in after this long.
INITIAL_PASSWORD_HOURS = env_int("INITIAL_PASSWORD_HOURS", 72)
