"""What a process that signs nobody in imports at start: a dispatcher (`manage.py dispatch`) pays for every
module django.setup() reaches, and `make test` starts hundreds of them (docs/testing.md)."""

import os
import subprocess
import sys

from tests.processes import ROOT

# The sign-in backends' libraries: a web process imports them with its URLs, a dispatcher never needs them.
SIGN_IN_ONLY = ("approvals.auth.backends", "mozilla_django_oidc.auth", "jwt", "requests")

STARTED = """
import sys
import django
django.setup()
from django.core.management import load_command_class
load_command_class("outbox", "dispatch")
print(" ".join(sorted(sys.modules)))
"""


def test_a_dispatcher_starts_without_the_sign_in_backends(tmp_path):
    env = os.environ | {
        "DJANGO_SETTINGS_MODULE": "config.test_settings",
        "HANDOFF_VAR_DIR": str(tmp_path / "var"),
        "PYTHONPATH": str(ROOT),
    }
    done = subprocess.run(
        [sys.executable, "-c", STARTED],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    )
    imported = set(done.stdout.split())
    assert "outbox.management.commands.dispatch" in imported
    assert [name for name in SIGN_IN_ONLY if name in imported] == []
