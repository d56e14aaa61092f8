"""Headers an intermediary sets cannot be set by the client (ASVS 5.0 4.1.3, docs/operations.md "Behind a
reverse proxy").

The address that lockouts count is `REMOTE_ADDR`: an `X-Forwarded-For` (or `X-Real-IP`) a client sends
neither spreads its failures over invented addresses nor moves a lock onto someone else's. The one
intermediary header the console trusts is `X-Forwarded-Proto`, and only where the settings say a proxy
overwrites it (`SECURE_PROXY_SSL_HEADER`, set with HTTPS enforced); elsewhere a client's claim of https
changes nothing."""

import os
import subprocess
import sys

import pytest
from axes.models import AccessAttempt
from django.conf import settings
from django.test import Client

from tests.factories import make_user
from tests.processes import ROOT

pytestmark = pytest.mark.django_db

LOGIN = "/accounts/login/"
ATTACKER = "198.51.100.7"
VICTIM = "203.0.113.99"


def sign_in(username: str, password: str, ip: str, **headers):
    client = Client(REMOTE_ADDR=ip, headers=headers)
    return client.post(LOGIN, {"username": username, "password": password})


def test_a_clients_x_forwarded_for_neither_spreads_its_failures_nor_locks_another_address():
    make_user("alice")
    for n in range(settings.AXES_FAILURE_LIMIT):
        # Each guess claims to come from a new address, and from the victim's.
        sign_in(
            "alice",
            "wrong-guess",
            ATTACKER,
            x_forwarded_for=f"10.0.0.{n}, {VICTIM}",
            x_real_ip=VICTIM,
        )

    assert set(AccessAttempt.objects.values_list("ip_address", flat=True)) == {ATTACKER}
    locked = sign_in("alice", "pw-alice", ATTACKER, x_forwarded_for="10.9.9.9")
    assert locked.status_code == 429
    # The victim's own address, even named by the attacker in every header, was never counted.
    answer = sign_in("alice", "pw-alice", VICTIM, x_forwarded_for=ATTACKER, x_real_ip=ATTACKER)
    assert (answer.status_code, answer["Location"]) == (302, "/")


def test_x_forwarded_proto_from_a_client_is_ignored_where_no_proxy_is_configured(settings):
    settings.SECURE_PROXY_SSL_HEADER = None
    settings.SECURE_SSL_REDIRECT = True
    answer = Client().get(LOGIN, headers={"x-forwarded-proto": "https"})
    assert answer.status_code == 301
    assert answer["Location"] == f"https://testserver{LOGIN}"


def test_x_forwarded_proto_is_trusted_exactly_as_the_settings_document(settings):
    settings.SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
    settings.SECURE_SSL_REDIRECT = True
    # The proxy overwrote the header: the request came over https and is served.
    assert Client().get(LOGIN, headers={"x-forwarded-proto": "https"}).status_code == 200
    for claimed in ("http", "HTTPS", "http, https"):
        answer = Client().get(LOGIN, headers={"x-forwarded-proto": claimed})
        assert answer.status_code == 301, claimed
    # Django reads the first value: a proxy that appended its `http` to a client's `https` would be fooled,
    # which is why docs/operations.md has the proxy overwrite the header, never append to it.
    assert Client().get(LOGIN, headers={"x-forwarded-proto": "https, http"}).status_code == 200


PRINT_PROXY_HEADER = (
    "import django; django.setup(); from django.conf import settings; "
    "print(repr(settings.SECURE_PROXY_SSL_HEADER))"
)


@pytest.mark.parametrize(
    ("secure", "expected"), [("1", "('HTTP_X_FORWARDED_PROTO', 'https')"), ("0", "None")]
)
def test_the_proxy_header_is_trusted_only_with_https_enforced(secure, expected):
    """As docs/operations.md says: with DJANGO_SECURE on, a proxy in front must overwrite the header."""
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("DJANGO_")},
        "DJANGO_SETTINGS_MODULE": "config.settings",
        "DJANGO_SECRET_KEY": "x" * 50,
        "DJANGO_SECURE": secure,
    }
    result = subprocess.run(
        [sys.executable, "-c", PRINT_PROXY_HEADER],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    assert result.stdout.strip().splitlines()[-1] == expected
