"""Settings for the test suite: the real settings, with test-only secrets and the fast destination.

Environment variables set by a test run still win (for example DATABASE_URL for PostgreSQL).
"""

import base64
import os
import sys

# httpx imports its command line (click, rich, pygments: 65 ms of CPU a process) whenever those are installed,
# and only import-linter puts them in the test virtualenv; no process of the suite runs httpx's command line.
# Every process the suite starts reads these settings (docs/testing.md, "Starting a process").
sys.modules.setdefault("httpx._main", None)

os.environ.setdefault("DJANGO_SECRET_KEY", "test-only-" + "x" * 40)
os.environ.setdefault("DJANGO_SECURE", "0")
for _name, _raw in (
    ("RECEIVER_SIGNING_SECRET", b"receiver-test-secret-32-bytes!!!"),
    ("INTAKE_SIGNING_SECRET", b"intake-test-secret-32-bytes!!!!!"),
):
    os.environ.setdefault(_name, "whsec_" + base64.b64encode(_raw).decode())
os.environ.setdefault("METRICS_TOKEN", "metrics-test-token")
os.environ.setdefault("ACCOUNTS_API_TOKEN", "accounts-test-token")
# What the demo's accounts destination sends (a destination reads HANDOFF_DEST_* variables only).
os.environ.setdefault("HANDOFF_DEST_ACCOUNTS_TOKEN", os.environ["ACCOUNTS_API_TOKEN"])
os.environ.setdefault("HANDOFF_DESTINATION", "in_process")
os.environ.setdefault("HANDOFF_WAKE_ON_COMMIT", "0")
# The suite's workflows send without an observation first; observe mode and going live have tests of their
# own, which store the mode they test (a deployment starts new workflows in observe).
os.environ.setdefault("WORKFLOW_DEFAULT_MODE", "live")
os.environ.setdefault(
    "WORKFLOW_DEFAULT_MODE_REASON", "the test suite: its workflows send unless a test observes them"
)
os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
# No call to Have I Been Pwned from the suite: the breached-password check has tests of its own, against a
# server of the range API's contract in a process of its own (tests/security/breach_server.py).
os.environ.setdefault("PASSWORD_BREACH_API_URL", "off")
# Retention runs flat out in tests (and in the processes they start), so that the suite stays in its time; its
# pacing has tests of its own (tests/outbox/services/test_retention.py), which name their duty cycle, and so
# has its wait while the dispatchers are behind (off here: a fault test records handoffs beside it as fast as
# it can, and each batch would wait its longest).
os.environ.setdefault("HANDOFF_RETENTION_DUTY_CYCLE", "1")
os.environ.setdefault("HANDOFF_RETENTION_YIELD_BACKLOG", "0")
# Health's figures are computed on every request in tests, which change the data between two looks; their
# sharing has tests of its own (tests/console/test_health_shared_figures.py), which turn it on.
os.environ.setdefault("HEALTH_FIGURES_SECONDS", "0")
# Incidents tell people at once in tests; the delay before paging has tests of its own
# (tests/incidents/test_page_delay.py), which set it in seconds.
os.environ.setdefault("ALERT_PAGE_DELAY_SECONDS", "0")
os.environ.setdefault("ALERT_QUEUE_DELAY_SECONDS", "0")
# One refused credential pauses a destination in tests, whose credential cases refuse once; the threshold of
# refusals that persist has tests of its own (tests/faults/test_credential_holds.py), which set the default.
os.environ.setdefault("HANDOFF_BREAKER_CREDENTIAL_THRESHOLD", "1")
os.environ.setdefault(
    "HANDOFF_VAR_DIR", os.path.join(os.path.dirname(os.path.dirname(__file__)), "var", "test")
)

from config.settings import *  # noqa: E402,F403

PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
STORAGES["staticfiles"]["BACKEND"] = "django.contrib.staticfiles.storage.StaticFilesStorage"  # noqa: F405
WHITENOISE_USE_FINDERS = True
# Each test's client builds the middleware anew; WhiteNoise's scan of the static files then cost 25-35 ms of CPU
# a client. The same middleware with the scan done once a process (tests/static_files.py; docs/testing.md).
MIDDLEWARE = [  # noqa: F405
    "tests.static_files.WhiteNoiseScannedOnce"
    if name == "whitenoise.middleware.WhiteNoiseMiddleware"
    else name
    for name in MIDDLEWARE  # noqa: F405
]

# django-q2 calls its scheduler from the guard loop once its cycles add up to 30 s; a cycle of 30 s
# runs the scheduler as the cluster starts, so a test of the scheduled sweep does not wait half a minute.
if os.environ.get("Q_GUARD_CYCLE"):
    Q_CLUSTER["guard_cycle"] = float(os.environ["Q_GUARD_CYCLE"])  # noqa: F405

# The PostgreSQL streams of `make test` copy their test databases from templates migrated once before them
# (`make test-template`) instead of each migrating its own: a whole migrate of both databases costs about
# 20 s of CPU (Django renders the migration states) and took 65-120 s while the suites started side by side.
# pytest-django still runs `migrate` on the copy, which then finds nothing to apply.
if os.environ.get("HANDOFF_TEST_TEMPLATE"):
    for _alias, _suffix in (("default", ""), ("delivery", "_delivery")):
        if DATABASES[_alias]["ENGINE"] == "django.db.backends.postgresql":  # noqa: F405
            DATABASES[_alias].setdefault("TEST", {})["TEMPLATE"] = (  # noqa: F405
                os.environ["HANDOFF_TEST_TEMPLATE"] + _suffix
            )
