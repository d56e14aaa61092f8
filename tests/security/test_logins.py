"""Sign-in throttling (django-axes), logged failures, password validators and the idle session timeout."""

import logging
import time

import pytest
from axes.models import AccessAttempt, AccessFailureLog
from django.conf import settings
from django.contrib.auth.password_validation import validate_password
from django.core.exceptions import ValidationError
from django.test import Client

from approvals.idle_sessions import LAST_ACTIVITY
from tests.factories import make_user

pytestmark = pytest.mark.django_db

LOGIN = "/accounts/login/"


def sign_in(username: str, password: str, ip: str = "192.0.2.10"):
    return Client(REMOTE_ADDR=ip).post(LOGIN, {"username": username, "password": password})


def test_right_password_signs_in_before_any_failure():
    make_user("alice")
    response = sign_in("alice", "pw-alice")
    assert response.status_code == 302 and response["Location"] == "/"


def test_after_the_failure_limit_the_right_password_is_refused_with_retry_after():
    make_user("alice")
    for _ in range(settings.AXES_FAILURE_LIMIT):
        sign_in("alice", "wrong-guess")
    response = sign_in("alice", "pw-alice")
    assert response.status_code == 429
    assert response["Retry-After"] == str(int(settings.AXES_COOLOFF_TIME.total_seconds()))
    page = response.content.decode()
    assert "Signing in is paused" in page
    assert "Too many failed sign-ins for this account from your network address" in page
    assert "_auth_user_id" not in response.client.session


def test_a_lockout_holds_that_user_at_that_address_only():
    make_user("alice")
    make_user("bob")
    office = "198.51.100.7"  # one NAT address for everyone in the office
    for _ in range(settings.AXES_FAILURE_LIMIT):
        sign_in("alice", "wrong-guess", ip=office)
    assert sign_in("alice", "pw-alice", ip=office).status_code == 429
    assert sign_in("bob", "pw-bob", ip=office).status_code == 302, "others behind it sign in"
    assert sign_in("alice", "pw-alice", ip="203.0.113.99").status_code == 302, "alice elsewhere"


def test_failures_spread_over_users_or_addresses_lock_nobody_out():
    make_user("alice")
    for n in range(settings.AXES_FAILURE_LIMIT):
        sign_in("alice", "wrong-guess", ip=f"198.51.100.{n + 1}")
        sign_in(f"nobody-{n}", "wrong-guess", ip="198.51.100.200")
    assert sign_in("alice", "pw-alice", ip="203.0.113.99").status_code == 302
    assert sign_in("alice", "pw-alice", ip="198.51.100.200").status_code == 302


def test_a_failed_sign_in_is_logged_and_recorded_without_the_password(caplog):
    make_user("alice")
    with caplog.at_level(logging.WARNING, logger="axes"):
        response = sign_in("alice", "wrong-guess-123")
    assert response.status_code == 200
    assert any(
        "login failure" in r.getMessage() for r in caplog.records if r.name.startswith("axes")
    )
    attempt = AccessAttempt.objects.get(username="alice")
    assert attempt.failures_since_start == 1 and attempt.ip_address == "192.0.2.10"
    assert AccessFailureLog.objects.filter(username="alice").exists()
    assert "wrong-guess-123" not in attempt.post_data


@pytest.mark.parametrize("password", ["password", "12345678", "1234567890", "qwerty123"])
def test_common_and_numeric_passwords_are_refused(password):
    with pytest.raises(ValidationError):
        validate_password(password)


def test_a_long_uncommon_password_is_accepted():
    validate_password("tangerine-orbit-lantern-42")


def test_an_idle_session_ends_and_asks_to_sign_in_again():
    user = make_user("alice")
    client = Client()
    client.force_login(user)
    assert client.get("/approvals/").status_code == 200
    session = client.session
    session[LAST_ACTIVITY] = int(time.time()) - settings.SESSION_IDLE_SECONDS - 1
    session.save()
    response = client.get("/approvals/")
    assert response.status_code == 302 and response["Location"].startswith("/accounts/login/")
    assert client.get("/approvals/").status_code == 302


def test_a_session_in_use_stays_signed_in():
    user = make_user("alice")
    client = Client()
    client.force_login(user)
    session = client.session
    session[LAST_ACTIVITY] = int(time.time()) - settings.SESSION_IDLE_SECONDS + 60
    session.save()
    assert client.get("/approvals/").status_code == 200


def test_a_successful_sign_in_is_logged_with_who_how_when_and_from_where(caplog):
    make_user("alice")
    before = time.time()
    with caplog.at_level(logging.INFO, logger="approvals.auth.lockout"):
        assert sign_in("alice", "pw-alice", ip="198.51.100.23").status_code == 302
    lines = [r for r in caplog.records if r.name == "approvals.auth.lockout"]
    assert [r.getMessage() for r in lines] == ["sign-in of alice by password from 198.51.100.23"]
    assert before <= lines[0].created <= time.time()
