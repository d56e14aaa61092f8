"""No secret is in the source (ASVS 5.0 13.3.1; docs/operations.md "Secrets"): with an empty environment every
setting named like a secret is empty, except the session-signing key of a DEBUG process, which is random and
differs from one process to the next; a production process without DJANGO_SECRET_KEY does not start."""

import json
import subprocess
import sys

from tests.processes import ROOT

SECRET_NAME = ("SECRET", "TOKEN", "PASSWORD", "PRIVATE", "API_KEY", "CREDENTIAL")
# Named like a secret, but settings about one: a form field's name, a sign-in mode, a service's address.
NOT_SECRETS = {"AXES_PASSWORD_FORM_FIELD", "OIDC_LOCAL_PASSWORDS", "PASSWORD_BREACH_API_URL"}
PRINT = (
    "import django, json; django.setup(); from django.conf import settings; "
    f"names = [n for n in dir(settings) if n.isupper() and any(w in n for w in {SECRET_NAME!r})]; "
    "print(json.dumps({n: getattr(settings, n) for n in names "
    "if isinstance(getattr(settings, n), str)}))"
)


def settings_with(**env) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", PRINT],
        cwd=ROOT,
        env={"PATH": "/usr/bin:/bin", "DJANGO_SETTINGS_MODULE": "config.settings", **env},
        capture_output=True,
        text=True,
        timeout=120,
    )


def secrets_of(**env) -> dict[str, str]:
    done = settings_with(**env)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_every_secret_setting_is_empty_without_the_environment(tmp_path):
    first = secrets_of(DJANGO_DEBUG="1", HANDOFF_VAR_DIR=str(tmp_path))
    assert {
        "SECRET_KEY",
        "RECEIVER_SIGNING_SECRET",
        "INTAKE_SIGNING_SECRET",
        "METRICS_TOKEN",
    } <= set(first)
    given = {
        name
        for name, value in first.items()
        if value and name != "SECRET_KEY" and name not in NOT_SECRETS
    }
    assert not given, f"secrets with a value in the source: {sorted(given)}"
    second = secrets_of(DJANGO_DEBUG="1", HANDOFF_VAR_DIR=str(tmp_path))
    assert first["SECRET_KEY"] != second["SECRET_KEY"], (
        "a per-process random key, not one in source"
    )


def test_a_production_process_without_its_secret_key_does_not_start(tmp_path):
    done = settings_with(HANDOFF_VAR_DIR=str(tmp_path))
    assert done.returncode != 0
    assert "DJANGO_SECRET_KEY must be set" in done.stderr
