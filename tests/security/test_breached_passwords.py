"""New passwords are checked against breached ones (ASVS 6.2.12) through Have I Been Pwned's range API, here a
server of the same contract in a process of its own (tests/security/breach_server.py): only the first five hex
digits of the password's SHA-1 leave the console, padding asked for; an unreachable service refuses."""

import hashlib
import socket
import subprocess
import sys

import httpx
import pytest
from django.contrib.auth.password_validation import validate_password
from django.core.exceptions import ValidationError
from django.test import Client

from tests.factories import make_user
from tests.processes import ROOT

pytestmark = pytest.mark.django_db

BREACHED = "kx7-plover-tangerine"
FRESH = "quiet-walrus-7-orbit"
START_DEADLINE_SECONDS = 60.0


@pytest.fixture(scope="module")
def breach_api(tmp_path_factory):
    passwords = tmp_path_factory.mktemp("breach") / "breached.txt"
    passwords.write_text(f"{BREACHED}:4321\n")
    process = subprocess.Popen(
        [sys.executable, str(ROOT / "tests" / "security" / "breach_server.py"), str(passwords)],
        stdout=subprocess.PIPE,
        text=True,
    )
    line = process.stdout.readline().strip()
    assert line.startswith("listening on "), line
    yield line.removeprefix("listening on ")
    process.kill()
    process.wait(timeout=START_DEADLINE_SECONDS)


@pytest.fixture(autouse=True)
def _answers_in_time(settings):
    """The service's answer is waited for as long as a process start: with the product's 3 s, a loaded machine
    that kept the server from answering that long had the password refused as unknown, not judged."""
    settings.PASSWORD_BREACH_TIMEOUT_SECONDS = START_DEADLINE_SECONDS


def asked(base_url: str) -> list[dict]:
    return httpx.get(f"{base_url}/stats", timeout=START_DEADLINE_SECONDS).json()["asked"]


def refusal_codes(password: str, user=None) -> list[str]:
    try:
        validate_password(password, user)
    except ValidationError as refused:
        return [error.code for error in refused.error_list]
    return []


def test_a_breached_password_is_refused_and_only_its_hash_prefix_leaves(settings, breach_api):
    settings.PASSWORD_BREACH_API_URL = breach_api
    before = len(asked(breach_api))
    assert refusal_codes(BREACHED) == ["password_breached"]
    [call] = asked(breach_api)[before:]
    digest = hashlib.sha1(BREACHED.encode(), usedforsecurity=False).hexdigest().upper()
    assert call == {"path": f"/range/{digest[:5]}", "padding": True}
    assert refusal_codes(FRESH) == [], "a password in no breach passes, whatever the padding"


def test_the_password_change_page_refuses_a_breached_password(settings, breach_api):
    settings.PASSWORD_BREACH_API_URL = breach_api
    make_user("alice")
    client = Client()
    assert (
        client.post("/accounts/login/", {"username": "alice", "password": "pw-alice"}).status_code
        == 302
    )
    form = {"old_password": "pw-alice", "new_password1": BREACHED, "new_password2": BREACHED}
    answer = client.post("/accounts/password/", form)
    assert answer.status_code == 200
    assert "appeared in a data breach" in answer.content.decode()
    assert (
        Client().post("/accounts/login/", {"username": "alice", "password": BREACHED}).status_code
        == 200
    )


def test_an_unreachable_service_refuses_the_password_saying_so(settings):
    # A port held by a socket that is bound but does not listen: connections to it are refused.
    with socket.socket() as nobody_listens:
        nobody_listens.bind(("127.0.0.1", 0))
        port = nobody_listens.getsockname()[1]
        settings.PASSWORD_BREACH_API_URL = f"http://127.0.0.1:{port}"
        with pytest.raises(ValidationError) as refused:
            validate_password(FRESH)
    assert [error.code for error in refused.value.error_list] == ["password_breach_unknown"]
    assert "could not be made just now" in refused.value.messages[0]
