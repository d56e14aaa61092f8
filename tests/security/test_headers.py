"""Response headers of console pages, and the production settings: `check --deploy` is clean."""

import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.test import Client

from tests.factories import onboarding_world
from tests.processes import manage_argv

pytestmark = pytest.mark.django_db

ROOT = Path(__file__).resolve().parents[2]
CONSOLE_PAGES = [
    "/",
    "/approvals/",
    "/approvals/7/42/1/",
    "/handoffs/",
    "/approvals/api/triggers/",
    "/health/",
    "/reconciliation/findings/",
    "/reconciliation/runs/",
    "/approvals/roles/",
]


@pytest.fixture
def alice_client():
    """An approver who is also an operator of workspace 7: every console page is open to her."""
    from approvals.models import Membership, Role

    world = onboarding_world()
    Membership.objects.create(user=world["alice"], workspace=world["w7"], role=Role.OPERATOR)
    client = Client()
    client.force_login(world["alice"])
    return client


def directives(header: str) -> dict[str, list[str]]:
    parsed = {}
    for part in header.split(";"):
        name, *values = part.split()
        parsed[name] = values
    return parsed


@pytest.mark.parametrize("url", CONSOLE_PAGES)
def test_console_pages_carry_a_strict_csp_and_a_permissions_policy(alice_client, url):
    response = alice_client.get(url)
    assert response.status_code == 200, url
    csp = directives(response["Content-Security-Policy"])
    assert csp["default-src"] == ["'none'"]
    assert csp["script-src"] == ["'self'"] and csp["style-src"] == ["'self'"]
    assert csp["frame-ancestors"] == ["'none'"] and csp["object-src"] == ["'none'"]
    assert not any("unsafe" in v for values in csp.values() for v in values)
    policy = response["Permissions-Policy"]
    for feature in ("camera=()", "microphone=()", "geolocation=()", "payment=()", "usb=()"):
        assert feature in policy
    assert response["X-Frame-Options"] == "DENY"
    assert response["Referrer-Policy"] == "same-origin"


def test_the_login_page_carries_the_same_headers():
    response = Client().get("/accounts/login/")
    assert directives(response["Content-Security-Policy"])["script-src"] == ["'self'"]
    assert "camera=()" in response["Permissions-Policy"]


@pytest.mark.parametrize("url", CONSOLE_PAGES)
def test_console_pages_have_no_inline_script_or_style(alice_client, url):
    """The policy forbids inline code; a page that had some would silently lose it in the browser."""
    body = alice_client.get(url).content.decode()
    assert "<style" not in body
    assert body.count("<script") == body.count("<script src=")
    assert " style=" not in body and " onclick=" not in body


def production_env(**extra: str) -> dict[str, str]:
    env = {
        k: v for k, v in os.environ.items() if not k.startswith(("DJANGO_", "HANDOFF_", "PYTEST"))
    }
    env.update(
        {
            "DJANGO_SETTINGS_MODULE": "config.settings",
            "DJANGO_DEBUG": "0",
            "DJANGO_ALLOWED_HOSTS": "console.example.com",
            "HANDOFF_VAR_DIR": str(ROOT / "var" / "test"),
        }
    )
    env.update(extra)
    return env


def run_manage(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run(
        manage_argv(*args),
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_check_deploy_is_clean_with_production_settings():
    secret = "prod-" + "k3y-" * 15
    result = run_manage(
        "check", "--deploy", "--fail-level", "WARNING", env=production_env(DJANGO_SECRET_KEY=secret)
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "System check identified no issues" in result.stdout


PRINT_SECURE = (
    "import django; django.setup(); from django.conf import settings as s; "
    "print(s.SESSION_COOKIE_SECURE, s.CSRF_COOKIE_SECURE, s.SECURE_SSL_REDIRECT, "
    "s.SECURE_HSTS_SECONDS > 0)"
)


def test_ephemeral_secrets_do_not_switch_off_secure_settings():
    env = production_env(HANDOFF_ALLOW_EPHEMERAL_SECRETS="1")
    result = subprocess.run(
        [sys.executable, "-c", PRINT_SECURE],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.split()[-4:] == ["True", "True", "True", "True"]


def test_without_a_secret_key_production_settings_refuse_to_start():
    result = run_manage("check", env=production_env())
    assert result.returncode != 0 and "DJANGO_SECRET_KEY must be set" in result.stderr
