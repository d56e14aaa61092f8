"""What a process that signs nobody in imports at start: a dispatcher (`manage.py dispatch`) pays for every
module django.setup() reaches, and `make test` starts hundreds of them (docs/testing.md). And how it starts: with
the cyclic garbage collector off until its command is loaded, then on, with what start-up made frozen out of its
reach (docs/testing.md, "Starting a process")."""

import os
import subprocess
import sys

from tests.processes import ROOT

# The sign-in backends' libraries: a web process imports them with its URLs, a dispatcher never needs them.
SIGN_IN_ONLY = ("approvals.auth.backends", "mozilla_django_oidc.auth", "jwt", "requests")
# Libraries imported where they are called, not with the modules every process loads: jsonschema where a schema
# is checked (approvals/rules.py), httpx where a status event is sent (delivery/status_events.py); 0.05 s of
# a dispatcher's start (docs/testing.md, "Imports at the call").
AT_THE_CALL = ("jsonschema", "httpx")

STARTED = """
import sys
import django
django.setup()
from django.core.management import load_command_class
load_command_class("outbox", "dispatch")
print(" ".join(sorted(sys.modules)))
"""


def _run(tmp_path, *args: str) -> str:
    """The standard output of a child Python started from the repository with the test settings."""
    return subprocess.run(
        [sys.executable, *args],
        cwd=ROOT,
        env=os.environ
        | {
            "DJANGO_SETTINGS_MODULE": "config.test_settings",
            "HANDOFF_VAR_DIR": str(tmp_path / "var"),
            "PYTHONPATH": str(ROOT),
        },
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    ).stdout


def test_a_dispatcher_starts_without_the_sign_in_backends(tmp_path):
    imported = set(_run(tmp_path, "-c", STARTED).split())
    assert "outbox.management.commands.dispatch" in imported
    assert [name for name in SIGN_IN_ONLY if name in imported] == []


def test_a_dispatcher_starts_without_the_libraries_imported_at_their_call(tmp_path):
    imported = set(_run(tmp_path, "-c", STARTED).split())
    assert "approvals.rules" in imported
    assert "delivery.status_events" in imported
    assert [name for name in AT_THE_CALL if name in imported] == []


# What a web process (a gunicorn worker, the receiver of the fault tests) imports before its first answer.
WEB_STARTED = """
import sys
import config.wsgi, config.urls
print(" ".join(sorted(sys.modules)))
"""
# And what it does not: the demo's SMTP server (delivery/mailbox_server.py: only the mailbox page's reads are
# a view's) and the confusable-name check of a first sign-on (approvals/auth/usernames.py).
WEB_AT_THE_CALL = (*AT_THE_CALL, "aiosmtpd", "confusable_homoglyphs")


def test_a_web_process_starts_without_the_libraries_imported_at_their_call(tmp_path):
    imported = set(_run(tmp_path, "-c", WEB_STARTED).split())
    assert "delivery.mailbox_views" in imported
    assert "approvals.auth.usernames" in imported
    assert [name for name in WEB_AT_THE_CALL if name in imported] == []


COLLECTOR = "import gc; print(gc.isenabled(), gc.get_freeze_count())"


def test_a_command_runs_with_the_collector_on_and_its_start_up_frozen(tmp_path):
    enabled, frozen = _run(tmp_path, "manage.py", "shell", "--no-imports", "-c", COLLECTOR).split()
    assert enabled == "True"
    # Django's models, the product's modules, settings and URL patterns: far more than a bare interpreter's.
    assert int(frozen) > 50_000
