"""Settings for every environment; everything comes from the environment with safe local defaults.

Secrets (SECRET_KEY, signing secrets, metrics token) are read from the environment only.
`make run` writes random ones to var/run.env for the local demo; nothing here holds a secret.
"""

import json
import os
from pathlib import Path

import dj_database_url
from django.core.exceptions import ImproperlyConfigured

BASE_DIR = Path(__file__).resolve().parent.parent.parent
VAR_DIR = Path(os.environ.get("HANDOFF_VAR_DIR", BASE_DIR / "var"))


from config.env import env_bool, env_float, env_int  # noqa: E402

DEBUG = env_bool("DJANGO_DEBUG", False)
SECRET_KEY = os.environ.get("DJANGO_SECRET_KEY", "")
if not SECRET_KEY:
    if not DEBUG and not env_bool("HANDOFF_ALLOW_EPHEMERAL_SECRETS", False):
        raise ImproperlyConfigured(
            "DJANGO_SECRET_KEY must be set (or DJANGO_DEBUG=1 for local work)."
        )
    # A per-process random key: sessions do not survive a restart, which is fine locally.
    SECRET_KEY = os.urandom(32).hex()

ALLOWED_HOSTS = [
    h for h in os.environ.get("DJANGO_ALLOWED_HOSTS", "127.0.0.1,localhost").split(",") if h
]
CSRF_TRUSTED_ORIGINS = [
    o for o in os.environ.get("DJANGO_CSRF_TRUSTED_ORIGINS", "").split(",") if o
]

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "axes",
    "csp",
    "django.contrib.sessions",
    "django.contrib.messages",
    "whitenoise.runserver_nostatic",
    "django.contrib.staticfiles",
    "django_htmx",
    "django_filters",
    "template_partials",
    "django_q",
    # The second factor of password users: TOTP devices (approvals/auth/second_factor.py).
    "django_otp",
    "django_otp.plugins.otp_totp",
    "approvals",
    "outbox",
    "delivery",
    "reconciliation",
    "incidents",
    "console",
]

MIDDLEWARE = [
    # First: every log line of a request carries the workspace, handoff or action key its URL names.
    "config.log_middleware.RequestLogContext",
    "config.http_methods.RefuseTraceMiddleware",
    # Before anything reads a body: an upload over its limit is refused unread (config/upload_limits.py).
    "config.upload_limits.LimitUploads",
    "django.middleware.security.SecurityMiddleware",
    "config.https_only.RefusePlainHttpApis",
    "csp.middleware.CSPMiddleware",
    "django_permissions_policy.PermissionsPolicyMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "approvals.idle_sessions.IdleSessionTimeoutMiddleware",
    # Each account's index of sessions follows a session whose key changed (approvals/signed_in_sessions.py).
    "approvals.signed_in_sessions.FollowSessionKeys",
    # A password sign-in's owed steps first: the second factor, a password of one's own (approvals/auth/).
    "approvals.auth.sign_in_steps.SignInStepsMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
    "config.nul_guard.RefuseNulMiddleware",
    # A page reads each destination's contract once, however many of its handoffs it advises on.
    "outbox.guidance.contracts_read_once_per_request",
    # ... and the configured secrets once, however many strings it masks (outbox/redaction.py).
    "outbox.redaction.secrets_read_once_per_request",
    # ... and its user's memberships once, however many of its parts ask (approvals/selectors.py).
    "approvals.selectors.memberships_read_once_per_request",
    # A refused signature at intake or the receiver is a security event (paged above a rate).
    "reconciliation.security_events.SecurityEventMiddleware",
    # Last, as django-axes asks: it turns a lockout raised during authentication into the lockout answer.
    "axes.middleware.AxesMiddleware",
]

ROOT_URLCONF = "config.urls"
WSGI_APPLICATION = "config.wsgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
                "console.context_processors.nav",
            ],
        },
    }
]


# The web app, the receiver API and the workers share an SQLite file: wait for the lock instead of failing,
# and take the write lock when a transaction starts. The same whether the file is the default one or named
# by a sqlite:// DATABASE_URL.
SQLITE_OPTIONS = {
    "timeout": 30,
    "transaction_mode": "IMMEDIATE",
    "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
}


def _from_url(url: str) -> dict:
    # Health checks: a persistent connection that the server closed (restart, failover) is replaced
    # before a request uses it, instead of failing that request.
    config = dj_database_url.parse(
        url, conn_max_age=env_int("DATABASE_CONN_MAX_AGE", 60), conn_health_checks=True
    )
    options = config.setdefault("OPTIONS", {})
    if config["ENGINE"] == "django.db.backends.sqlite3":
        for key, value in SQLITE_OPTIONS.items():
            options.setdefault(key, value)
    elif env_bool("DATABASE_TRANSACTION_POOLER", False):
        # Behind a pooler in transaction mode (PgBouncer): a server session is not ours between
        # transactions, so no server-side cursor and no prepared statement may outlive one.
        config["DISABLE_SERVER_SIDE_CURSORS"] = True
        options["prepare_threshold"] = None
    elif not env_bool("DATABASE_JIT", False):
        # PostgreSQL's JIT compiles any query its planner costs high, such as the health page's counts over
        # a large outbox: on a 100,000-handoff outbox it spent 2.3 s compiling a 0.6 s count (EXPLAIN
        # ANALYZE, bench/console_operators_bench.py). Off for our sessions (a pooler refuses this startup
        # option: there, ALTER DATABASE ... SET jit = off, docs/operations.md).
        options.setdefault("options", "-c jit=off")
    return config


def _database(url_env: str, sqlite_name: str) -> dict:
    url = os.environ.get(url_env)
    if url:
        return _from_url(url)
    VAR_DIR.mkdir(parents=True, exist_ok=True)
    return {
        "ENGINE": "django.db.backends.sqlite3",
        "NAME": VAR_DIR / sqlite_name,
        "OPTIONS": dict(SQLITE_OPTIONS),
        "TEST": {"NAME": None},
    }


DATABASES = {
    "default": _database("DATABASE_URL", "source.sqlite3"),
    "delivery": _database("DELIVERY_DATABASE_URL", "delivery.sqlite3"),
}
DATABASE_ROUTERS = ["config.routers.DeliveryRouter"]
# Behind a pooler a process's connection outlives a failover (the pooler changes the server behind it), so the
# timeline check on connect (outbox/failover.py) is not enough: each claim reads the timeline first.
HANDOFF_TIMELINE_CHECK_EACH_CLAIM = env_bool(
    "HANDOFF_TIMELINE_CHECK_EACH_CLAIM", env_bool("DATABASE_TRANSACTION_POOLER", False)
)
# The dispatcher's reads before a claim, the claim and its outcomes are prepared on its connection
# (`lib.databases.prepared_cursor`): PostgreSQL planned them at every batch, most of an empty claim's time.
# Not behind a pooler: a prepared statement lives in one server session (docs/operations.md, "Behind a pooler").
DATABASE_PREPARED_STATEMENTS = env_bool(
    "DATABASE_PREPARED_STATEMENTS", not env_bool("DATABASE_TRANSACTION_POOLER", False)
)
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {
        "NAME": "django.contrib.auth.password_validation.MinimumLengthValidator",
        "OPTIONS": {"min_length": 10},
    },
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
    # Words of this product's context, and breached passwords (approvals/auth/password_rules.py; the words
    # and the service in config/settings/sign_in.py).
    {"NAME": "approvals.auth.password_rules.ContextWordsValidator"},
    {"NAME": "approvals.auth.password_rules.BreachedPasswordValidator"},
]
# django-axes counts failed logins before the model backend checks the password, so it comes first.
AUTHENTICATION_BACKENDS = [
    "axes.backends.AxesStandaloneBackend",
    # Passwords (break-glass only once single sign-on is on) and the identity provider: config/settings/oidc.py.
    "approvals.auth.backends.LocalPasswordBackend",
    "approvals.auth.backends.OIDCRoleBackend",
]
LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "home"
LOGOUT_REDIRECT_URL = "login"

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATIC_ROOT = BASE_DIR / "staticfiles"
STATICFILES_DIRS = [BASE_DIR / "static"]
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {
        "BACKEND": "whitenoise.storage.CompressedManifestStaticFilesStorage"
        if not DEBUG
        else "django.contrib.staticfiles.storage.StaticFilesStorage"
    },
}

# Uploads (the observation CSV import): the body of one is at most this, refused unread above it
# (config/upload_limits.py); it is small enough to stay in memory, never spilled to a temporary file.
UPLOAD_MAX_BODY_BYTES = env_int("UPLOAD_MAX_BODY_BYTES", 320 * 1024)
FILE_UPLOAD_MAX_MEMORY_SIZE = UPLOAD_MAX_BODY_BYTES

SESSION_COOKIE_HTTPONLY = True
# approvals.idle_sessions: a session ends unused for the first, and the cookie age after its sign-in.
SESSION_IDLE_SECONDS = env_int("SESSION_IDLE_MINUTES", 30) * 60
SESSION_ACTIVITY_RESOLUTION_SECONDS = 60
SESSION_COOKIE_AGE = env_int("SESSION_MAX_HOURS", 12) * 3600
SESSION_COOKIE_SAMESITE = "Lax"
SECURE_CONTENT_TYPE_NOSNIFF = True
SECURE_REFERRER_POLICY = "same-origin"
SECURE_CROSS_ORIGIN_OPENER_POLICY = "same-origin"
X_FRAME_OPTIONS = "DENY"

# The console loads one script (htmx) and one stylesheet, both from our own static files; nothing inline.
CONTENT_SECURITY_POLICY = {
    "DIRECTIVES": {
        "default-src": ["'none'"],
        "script-src": ["'self'"],
        "style-src": ["'self'"],
        "img-src": ["'self'", "data:"],
        "connect-src": ["'self'"],
        "font-src": ["'self'"],
        "form-action": ["'self'"],
        "frame-ancestors": ["'none'"],
        "base-uri": ["'none'"],
        "object-src": ["'none'"],
    },
}
# Browser features the console never uses are switched off for it and anything it might embed.
PERMISSIONS_POLICY = {
    feature: []
    for feature in (
        "accelerometer",
        "autoplay",
        "camera",
        "display-capture",
        "encrypted-media",
        "fullscreen",
        "geolocation",
        "gyroscope",
        "magnetometer",
        "microphone",
        "midi",
        "payment",
        "picture-in-picture",
        "publickey-credentials-get",
        "screen-wake-lock",
        "usb",
        "xr-spatial-tracking",
    )
}

# Secure transport is on whenever DEBUG is off. HANDOFF_ALLOW_EPHEMERAL_SECRETS only lets a process start
# without DJANGO_SECRET_KEY; it never turns these off. DJANGO_SECURE=0 is the one explicit way to do that
# (the test suite and benchmarks serve plain HTTP on 127.0.0.1).
if env_bool("DJANGO_SECURE", not DEBUG):
    SECURE_SSL_REDIRECT = env_bool("DJANGO_SECURE_SSL_REDIRECT", True)
    SESSION_COOKIE_SECURE = True
    CSRF_COOKIE_SECURE = True
    SECURE_HSTS_SECONDS = env_int("DJANGO_HSTS_SECONDS", 31536000)
    SECURE_HSTS_INCLUDE_SUBDOMAINS = True
    SECURE_HSTS_PRELOAD = True
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")

# --- The receiver (delivery app) -------------------------------------------------------
RECEIVER_SIGNING_SECRET = os.environ.get("RECEIVER_SIGNING_SECRET", "")
# Accepted besides RECEIVER_SIGNING_SECRET during a rotation (docs/security.md); senders sign with the newest.
RECEIVER_SIGNING_SECRET_PREVIOUS = os.environ.get("RECEIVER_SIGNING_SECRET_PREVIOUS", "")
from config.settings.accounts_service import *  # noqa: E402,F403

# The demo's SMTP server and its mailbox page (`manage.py demo_mailbox`, /delivery/mailbox/): off unless set.
DEMO_MAILBOX_DIR = os.environ.get("DEMO_MAILBOX_DIR", "")
DEMO_SMTP_PORT = env_int("DEMO_SMTP_PORT", 8025)
RECEIVER_MAX_BODY_BYTES = env_int("RECEIVER_MAX_BODY_BYTES", 256 * 1024)
RECEIVER_MAX_JSON_DEPTH = env_int("RECEIVER_MAX_JSON_DEPTH", 32)
RECEIVER_SIGNATURE_TOLERANCE_SECONDS = 300
RECEIVER_BATCH_LIMIT = env_int("RECEIVER_BATCH_LIMIT", 100)
# Fault injection for tests and demos; off unless set. JSON, see delivery/faults.py.
RECEIVER_FAULTS = json.loads(os.environ.get("RECEIVER_FAULTS", "null") or "null")

# --- The dispatcher (outbox app) -------------------------------------------------------
# Which destination handoffs go to. "http" reaches a receiver over its signed API;
# "in_process" calls the receiver's services directly (fast tests only). Its capabilities are
# declared here, not assumed: a receiver that does not honour the idempotency key, or cannot be asked
# about a key, sends uncertain outcomes to a person instead of sending again.
HANDOFF_DESTINATION = {
    "kind": os.environ.get("HANDOFF_DESTINATION", "http"),
    "name": os.environ.get("HANDOFF_DESTINATION_NAME", "receiver"),
    "url": os.environ.get("RECEIVER_URL", "http://127.0.0.1:8000/delivery/api"),
    "connect_timeout": env_float("RECEIVER_CONNECT_TIMEOUT", 2.0),
    "read_timeout": env_float("RECEIVER_READ_TIMEOUT", 5.0),
    "supports_idempotency": env_bool("RECEIVER_SUPPORTS_IDEMPOTENCY", True),
    "supports_lookup": env_bool("RECEIVER_SUPPORTS_LOOKUP", True),
    "supports_batch": env_bool("RECEIVER_SUPPORTS_BATCH", False),
    "retry": {
        "window_seconds": env_float("HANDOFF_RETRY_WINDOW_HOURS", 24.0) * 3600,
        "max_attempts": env_int("HANDOFF_MAX_ATTEMPTS", 0) or None,
        "base_delay": env_float("HANDOFF_BACKOFF_BASE", 2.0),
        "max_delay": env_float("HANDOFF_BACKOFF_CAP", 300.0),
        "max_retry_after": env_float("HANDOFF_MAX_RETRY_AFTER", 3600.0),
    },
}
# The variables above that seed the default destination, by its key, as far as they are set. They apply only
# while no row of its name exists; once one does, one that disagrees with the row is refused at the start
# of the dispatcher and by `manage.py check` (outbox/destinations/seed_variables.py).
HANDOFF_DESTINATION_SEED_VARIABLES = {
    variable: key
    for variable, key in (
        ("RECEIVER_URL", "url"),
        ("RECEIVER_CONNECT_TIMEOUT", "connect_timeout"),
        ("RECEIVER_READ_TIMEOUT", "read_timeout"),
        ("RECEIVER_SUPPORTS_IDEMPOTENCY", "supports_idempotency"),
        ("RECEIVER_SUPPORTS_LOOKUP", "supports_lookup"),
        ("RECEIVER_SUPPORTS_BATCH", "supports_batch"),
    )
    if os.environ.get(variable)
}
# Destinations read their secrets from HANDOFF_DEST_* variables or from files in this directory only
# (outbox/destinations/credentials/secret_places.py): a file named outside it, links followed, is refused.
HANDOFF_SECRETS_DIR = Path(os.environ.get("HANDOFF_SECRETS_DIR", VAR_DIR / "secrets"))
# The circuit breaker: this many consecutive connection/5xx failures across handoffs pause the
# destination; a single probe call is then made after PROBE_BASE seconds, doubling up to PROBE_CAP,
# until one succeeds.
HANDOFF_BREAKER_THRESHOLD = env_int("HANDOFF_BREAKER_THRESHOLD", 5)
# ... and this many consecutive refused credentials (401/403) start a credential hold: refusals that
# persist, not a stray one from one node of a receiver behind a load balancer (issue 36, item 7).
HANDOFF_BREAKER_CREDENTIAL_THRESHOLD = env_int("HANDOFF_BREAKER_CREDENTIAL_THRESHOLD", 3)
# ... or when at least CREDENTIAL_SHARE of the destination's calls in the last CREDENTIAL_WINDOW_SECONDS (at
# least CREDENTIAL_MIN_CALLS of them) were refused: a share that persists without three in a row
# (outbox/services/credential_share.py; docs/destinations.md "Holds").
HANDOFF_BREAKER_CREDENTIAL_SHARE = env_float("HANDOFF_BREAKER_CREDENTIAL_SHARE", 0.2)
HANDOFF_BREAKER_CREDENTIAL_WINDOW_SECONDS = env_float(
    "HANDOFF_BREAKER_CREDENTIAL_WINDOW_SECONDS", 60.0
)
HANDOFF_BREAKER_CREDENTIAL_MIN_CALLS = env_int("HANDOFF_BREAKER_CREDENTIAL_MIN_CALLS", 20)
HANDOFF_BREAKER_PROBE_BASE = env_float("HANDOFF_BREAKER_PROBE_BASE", 2.0)
HANDOFF_BREAKER_PROBE_CAP = env_float("HANDOFF_BREAKER_PROBE_CAP", 60.0)
# ... at most QUICK_PROBE_CAP apart when the receiver refused the connection or answered 500/502/503 (it is
# restarting, or waits for its database): outbox/breaker_rules.py QUICK_RECOVERY_REASONS.
HANDOFF_BREAKER_QUICK_PROBE_CAP = env_float("HANDOFF_BREAKER_QUICK_PROBE_CAP", 5.0)
# Per-destination limits (docs/console.md "Destination limits"): what a destination gets when it is first seen;
# operators change them on the health page. 0 or empty = unlimited. A 429 or 503 answer with Retry-After holds
# the whole destination (no claims) for at most MAX_HOLD_SECONDS.
HANDOFF_DESTINATION_MAX_CONCURRENCY = env_int("HANDOFF_DESTINATION_MAX_CONCURRENCY", 0) or None
HANDOFF_DESTINATION_MAX_REQUESTS_PER_SECOND = (
    env_int("HANDOFF_DESTINATION_MAX_REQUESTS_PER_SECOND", 0) or None
)
HANDOFF_DESTINATION_MAX_HOLD_SECONDS = env_float("HANDOFF_DESTINATION_MAX_HOLD_SECONDS", 600.0)
# The lease of a claimed handoff, on the database clock. The one rule that ties lease, timeouts and
# batch size together: one call must end within a lease. The dispatcher renews the leases of the
# claims it still holds before any call that could outlive them, so the claim batch size does not
# enter the rule; a lease shorter than one call could pass to another worker while the call is out.
# Each destination's own timeouts are checked against it (outbox/destinations/lease_rule.py): by
# `manage.py destinations apply` and `check` and at the dispatcher's start, the seed's too.
HANDOFF_LEASE_SECONDS = env_int("HANDOFF_LEASE_SECONDS", 30)
HANDOFF_CLAIM_BATCH = env_int("HANDOFF_CLAIM_BATCH", 20)
# Worker threads of a `manage.py dispatch` process (HANDOFF_DISPATCH_LANES per destination, at most this many; one
# database connection each): a slow or dead destination holds up its lanes, never the others.
HANDOFF_DISPATCH_WORKERS = env_int("HANDOFF_DISPATCH_WORKERS", 8)
# Workers that may serve one destination at once: the second only for a handoff committed while a turn's call
# is under way, claimed at once instead of after that call and its outcome (outbox/dispatch/serving.py).
HANDOFF_DISPATCH_LANES = env_int("HANDOFF_DISPATCH_LANES", 2)
# Who may own a handoff: the source application's rule, named here so that the outbox imports nothing from it.
HANDOFF_ASSIGNEE_CHECK = "approvals.selectors.may_own_failures_of"
# Which destinations the workflows in force route steps to (one may not be disabled while routed): the
# source application's rule, named here for the same reason.
HANDOFF_ROUTES_CHECK = "approvals.selectors.routed_destination_names"
HANDOFF_SLA_MINUTES = env_int("HANDOFF_SLA_MINUTES", 60)
HANDOFF_STUCK_MINUTES = env_int("HANDOFF_STUCK_MINUTES", 15)
HANDOFF_WAKE_ON_COMMIT = env_bool("HANDOFF_WAKE_ON_COMMIT", True)
# Where the dispatcher LISTENs for wake-ups, when not through DATABASE_URL: a direct route to PostgreSQL past
# a pooler in transaction mode (LISTEN belongs to a server session, which such a pooler does not keep).
HANDOFF_LISTEN_DATABASE_URL = os.environ.get("HANDOFF_LISTEN_DATABASE_URL", "")

METRICS_TOKEN = os.environ.get("METRICS_TOKEN", "")
INTAKE_SIGNING_SECRET = os.environ.get("INTAKE_SIGNING_SECRET", "")

# --- django-q2 -------------------------------------------------------------------------
Q_CLUSTER = {
    "name": "handoff",
    "orm": "default",
    "workers": env_int("Q_WORKERS", 2),
    # A task is re-run after `retry` seconds if no worker acknowledged it; every task here is
    # safe to run twice (the outbox row is the truth, not the message).
    "timeout": 60,
    "retry": 120,
    "max_attempts": 1,
    "poll": 0.2,
    "catch_up": False,
    "ack_failures": True,
    "save_limit": 200,
    "label": "Task queue",
}

# Plain text lines, or JSON lines with LOG_FORMAT=json; both redacted, with the handoff's fields.
from config.settings.logging import LOG_FORMAT, LOGGING  # noqa: E402,F401

EMAIL_BACKEND = os.environ.get(
    "EMAIL_BACKEND",
    "django.core.mail.backends.console.EmailBackend"
    if DEBUG
    else "django.core.mail.backends.smtp.EmailBackend",
)

# Intake, reconciliation and alerts: the settings of the product's later stages.
# Incidents, their channels, escalation and notifications (docs/incidents.md).
from config.settings.incidents import *  # noqa: E402,F403
from config.settings.intake_and_alerts import *  # noqa: E402,F403

# Single sign-on through OpenID Connect (off by default).
from config.settings.oidc import *  # noqa: E402,F403

# Probes under an orchestrator (docs/operations.md).
from config.settings.operations import *  # noqa: E402,F403

# Retention: settled handoffs leave the hot tables for the archive (docs/operations.md).
from config.settings.retention import *  # noqa: E402,F403

# Sign-in throttling: django-axes' lockout and our spraying pause (docs/security.md).
from config.settings.sign_in import *  # noqa: E402,F403

# Tracing: off unless an OTLP endpoint is named (docs/observability.md).
from config.settings.telemetry import *  # noqa: E402,F403
