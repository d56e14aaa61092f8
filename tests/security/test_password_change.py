"""A person changes their own password (ASVS 6.2.2, 6.2.3, 7.4.3): the current one is required, a wrong one
counts towards the sign-in lockout, the new one meets the validators, and the person's other sessions end."""

import pytest
from django.conf import settings
from django.test import Client

from tests.factories import make_user

pytestmark = pytest.mark.django_db

PAGE, NEW = "/accounts/password/", "kx7-plover-tangerine"


def signed_in(username: str) -> Client:
    client = Client()
    answer = client.post("/accounts/login/", {"username": username, "password": f"pw-{username}"})
    assert answer.status_code == 302
    return client


def change(client: Client, old: str, new: str = NEW):
    return client.post(PAGE, {"old_password": old, "new_password1": new, "new_password2": new})


def signs_in(username: str, password: str) -> bool:
    answer = Client().post("/accounts/login/", {"username": username, "password": password})
    return answer.status_code == 302


def test_a_password_user_changes_their_password_giving_the_current_one():
    make_user("alice")
    client = signed_in("alice")
    home = client.get("/").content.decode()
    assert 'id="password-change-link"' in home
    page = client.get(PAGE).content.decode()
    assert page.count('type="password"') == 3 and 'autocomplete="current-password"' in page
    refused = change(client, "not-the-current-one")
    assert refused.status_code == 200 and "Your old password was entered incorrectly" in (
        refused.content.decode()
    )
    assert change(client, "pw-alice", new="12345678").status_code == 200, "validators apply"
    assert signs_in("alice", "pw-alice") and not signs_in("alice", NEW)
    done = change(client, "pw-alice")
    assert (done.status_code, done["Location"]) == (302, "/")
    assert signs_in("alice", NEW) and not signs_in("alice", "pw-alice")


def test_changing_the_password_ends_the_other_sessions_and_keeps_this_one():
    make_user("alice")
    make_user("bob")
    here, laptop, colleague = signed_in("alice"), signed_in("alice"), signed_in("bob")
    assert change(here, "pw-alice").status_code == 302
    assert here.get("/approvals/").status_code == 200
    assert laptop.get("/approvals/").status_code == 302, "the other session ended"
    assert colleague.get("/approvals/").status_code == 200


def test_wrong_current_passwords_count_towards_the_lockout():
    make_user("alice")
    client = signed_in("alice")
    for _ in range(settings.AXES_FAILURE_LIMIT):
        change(client, "a-wrong-guess")
    answer = change(client, "pw-alice")
    assert answer.status_code == 429
    assert signs_in("alice", "pw-alice") is False, "locked at this address, as sign-in is"
    assert not signs_in("alice", NEW)


@pytest.mark.parametrize(
    ("mode", "superuser", "allowed"),
    [("break_glass", True, True), ("break_glass", False, False), ("off", True, False)],
)
def test_only_accounts_that_passwords_sign_in_may_change_one(settings, mode, superuser, allowed):
    user = make_user("dana", is_superuser=superuser)
    client = Client()
    client.force_login(user)
    settings.OIDC_ENABLED, settings.OIDC_LOCAL_PASSWORDS = True, mode
    assert client.get(PAGE).status_code == (200 if allowed else 404)
    assert ('id="password-change-link"' in client.get("/").content.decode()) is allowed
    assert change(client, "pw-dana").status_code == (302 if allowed else 404)


def test_an_account_without_a_password_has_no_password_to_change():
    user = make_user("erin")
    user.set_unusable_password()
    user.save()
    client = Client()
    client.force_login(user)
    assert client.get(PAGE).status_code == 404
    assert Client().get(PAGE)["Location"].startswith("/accounts/login/")
