"""Passwords once single sign-on is on: break-glass superusers only, or nobody (the form is refused)."""

import pytest

from tests.factories import make_user


@pytest.fixture
def people(db):
    return make_user("dana"), make_user("root", is_superuser=True, is_staff=True)


def _post(client, username):
    return client.post("/accounts/login/", {"username": username, "password": f"pw-{username}"})


def test_without_single_sign_on_every_password_signs_in(client, people):
    assert _post(client, "dana").status_code == 302
    assert client.session["_auth_user_id"] == str(people[0].pk)


def test_break_glass_mode_lets_only_superusers_use_a_password(client, settings, people):
    settings.OIDC_ENABLED = True
    settings.OIDC_LOCAL_PASSWORDS = "break_glass"
    answer = _post(client, "dana")
    assert answer.status_code == 200
    assert "_auth_user_id" not in client.session
    assert _post(client, "root").status_code == 302
    assert client.session["_auth_user_id"] == str(people[1].pk)


def test_with_local_passwords_off_the_password_form_post_is_refused(client, settings, people):
    settings.OIDC_ENABLED = True
    settings.OIDC_LOCAL_PASSWORDS = "off"
    for username in ("dana", "root"):
        answer = _post(client, username)
        assert answer.status_code == 403
        assert b"Password sign-in is switched off" in answer.content
        assert "_auth_user_id" not in client.session
    page = client.get("/accounts/login/")
    assert b'name="password"' not in page.content
    assert b"sso-sign-in" in page.content


def test_with_local_passwords_off_the_admin_password_sign_in_fails_too(client, settings, people):
    settings.OIDC_ENABLED = True
    settings.OIDC_LOCAL_PASSWORDS = "off"
    client.post("/admin/login/", {"username": "root", "password": "pw-root"})
    assert "_auth_user_id" not in client.session


def test_single_sign_on_pages_are_not_found_while_it_is_off(client, db):
    assert client.get("/accounts/oidc/authenticate/").status_code == 404
    assert client.get("/accounts/oidc/callback/?code=x&state=y").status_code == 404
