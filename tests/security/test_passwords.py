"""Passwords as the console takes them (ASVS 6.2, 6.3): Django's validators as configured, the sign-in form's
password field, the password checked exactly as typed, and no account that a fresh database lets in."""

import re

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.password_validation import validate_password
from django.core.exceptions import ValidationError
from django.test import Client

from tests.factories import make_user

pytestmark = pytest.mark.django_db

LOGIN = "/accounts/login/"


def signs_in(username: str, password: str) -> bool:
    answer = Client().post(LOGIN, {"username": username, "password": password})
    return answer.status_code == 302 and "_auth_user_id" in answer.client.session


def test_a_password_shorter_than_the_minimum_is_refused_whatever_it_is_made_of():
    with pytest.raises(ValidationError) as refused:
        validate_password("kx7-plov")  # 8 characters, neither common nor numeric
    assert [e.code for e in refused.value.error_list] == ["password_too_short"]
    validate_password("kx7-plover")  # 10: the minimum


@pytest.mark.parametrize("length", [64, 128, 512])
def test_long_passwords_are_accepted_and_sign_in(length):
    password = ("correct horse battery staple " * 20)[:length]
    validate_password(password)
    user = make_user("alice")
    user.set_password(password)
    user.save()
    assert signs_in("alice", password)


def test_the_password_is_checked_exactly_as_typed():
    typed = " Tangerine Orbit " + "x" * 70 + " Lantern! "  # spaces, case, past bcrypt's 72 bytes
    user = make_user("alice")
    user.set_password(typed)
    user.save()
    assert signs_in("alice", typed)
    for altered in (
        typed.lower(),
        typed.upper(),
        typed.strip(),
        typed[:72],
        typed + " ",
        typed[:-1],
    ):
        assert not signs_in("alice", altered), altered


def _inputs(page: str) -> dict[str, str]:
    return {
        re.search(r'name="([^"]+)"', tag).group(1): tag
        for tag in re.findall(r"<input[^>]*>", page)
        if 'name="' in tag
    }


def test_the_sign_in_forms_password_is_masked_and_open_to_password_managers():
    page = Client().get(LOGIN).content.decode()
    fields = _inputs(page)
    assert 'type="password"' in fields["password"]
    assert 'autocomplete="current-password"' in fields["password"]
    assert 'autocomplete="username"' in fields["username"]
    # Nothing stops pasting or a password manager filling the form.
    assert 'autocomplete="off"' not in page
    assert not re.search(r"\bon(paste|copy|drop|keydown|input)\s*=", page, flags=re.IGNORECASE)
    assert "<script" not in page.split('<form method="post"')[1].split("</form>")[0]


def test_a_migrated_database_has_no_account_that_signs_in():
    assert not get_user_model().objects.exists(), "migrations create no user"
    for name in ("admin", "root", "sa", "administrator", "demo"):
        for password in (name, "admin", "password", "changeme"):  # under the lockout's limit
            assert not signs_in(name, password), (name, password)
