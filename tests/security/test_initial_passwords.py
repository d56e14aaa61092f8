"""Initial passwords (ASVS 6.4.1): a password an administrator sets in admin (a new user, or "set password")
must be changed at its holder's first sign-in before any page opens, and no longer signs in once
INITIAL_PASSWORD_HOURS have passed unused."""

from datetime import timedelta

import pytest
from django.contrib.auth import get_user_model
from django.test import Client

from approvals.models import InitialPassword
from tests.factories import make_user

pytestmark = pytest.mark.django_db

INITIAL, OWN = "Tulip-quartz-9147", "quiet-walrus-7-orbit"


def admin_client() -> Client:
    client = Client()
    client.force_login(make_user("root", is_staff=True, is_superuser=True))
    return client


def sign_in(username: str, password: str) -> Client | None:
    client = Client()
    answer = client.post("/accounts/login/", {"username": username, "password": password})
    return client if answer.status_code == 302 else None


def test_a_new_users_password_from_admin_must_be_changed_before_anything_opens():
    form = {
        "username": "nina",
        "usable_password": "true",
        "password1": INITIAL,
        "password2": INITIAL,
    }
    assert admin_client().post("/admin/auth/user/add/", form).status_code == 302
    assert InitialPassword.objects.filter(user__username="nina", set_by__username="root").exists()
    nina = sign_in("nina", INITIAL)
    for page in ("/", "/approvals/", "/handoffs/", "/accounts/sessions/"):
        assert nina.get(page)["Location"] == "/accounts/password/", page
    asked = nina.get("/accounts/password/").content.decode()
    assert 'id="initial-password"' in asked
    form = {"old_password": INITIAL, "new_password1": OWN, "new_password2": OWN}
    assert nina.post("/accounts/password/", form)["Location"] == "/"
    assert nina.get("/approvals/").status_code == 200
    assert not InitialPassword.objects.exists()
    assert sign_in("nina", OWN).get("/approvals/").status_code == 200


def test_a_password_an_administrator_sets_again_is_initial_too():
    nina = make_user("nina")
    form = {"password1": INITIAL, "password2": INITIAL, "usable_password": "true"}
    answer = admin_client().post(f"/admin/auth/user/{nina.pk}/password/", form)
    assert answer.status_code == 302
    assert sign_in("nina", INITIAL).get("/approvals/")["Location"] == "/accounts/password/"


def test_an_initial_password_unused_past_its_hours_no_longer_signs_in(settings):
    settings.INITIAL_PASSWORD_HOURS = 72
    nina = make_user("nina")
    nina.set_password(INITIAL)
    nina.save()
    InitialPassword.objects.create(user=nina)
    assert sign_in("nina", INITIAL) is not None, "within its hours it signs in (to be changed)"
    set_at = InitialPassword.objects.get().set_at
    InitialPassword.objects.update(set_at=set_at - timedelta(hours=73))
    assert sign_in("nina", INITIAL) is None
    assert get_user_model().objects.get(username="nina").check_password(INITIAL)
