"""A second factor after the password (ASVS 6.3.3, 6.5.1, 6.5.3, 6.5.5): staff and superusers (who reach admin)
enrol a TOTP authenticator (RFC 6238, django-otp) at their first sign-in, its key shown once, and give its
code after every password; a code works once; wrong codes hold the authenticator back; an administrator with
the permission resets a lost one. `SECOND_FACTOR_REQUIRED=all` asks it of every password user."""

import re
import time
from datetime import timedelta

import pytest
from django.contrib.auth.models import Permission
from django.test import Client
from django.utils import timezone
from django_otp.oath import TOTP
from django_otp.plugins.otp_totp.models import TOTPDevice

from approvals.models import SignedInSession
from tests.factories import make_user

pytestmark = pytest.mark.django_db

STEP, ENROL = "/accounts/second-factor/", "/accounts/second-factor/enrol/"


def code(device: TOTPDevice, steps_ahead: int = 0) -> str:
    totp = TOTP(device.bin_key, device.step, device.t0, device.digits, device.drift)
    totp.time = time.time() + steps_ahead * device.step
    return f"{totp.token():0{device.digits}d}"


def password_only(username: str) -> Client:
    client = Client()
    answer = client.post("/accounts/login/", {"username": username, "password": f"pw-{username}"})
    assert answer.status_code == 302
    return client


def enrolled(username: str, **flags) -> TOTPDevice:
    user = make_user(username, **flags)
    return TOTPDevice.objects.create(user=user, name="authenticator", confirmed=True)


def test_staff_enrol_at_first_sign_in_and_the_password_alone_reaches_nothing():
    make_user("sam", is_staff=True)
    client = password_only("sam")
    for page in ("/admin/", "/approvals/", "/accounts/sessions/", "/accounts/password/"):
        assert client.get(page)["Location"] == STEP, page
    assert client.get(STEP)["Location"] == ENROL
    shown = client.post(ENROL, {"action": "start"}).content.decode()
    secret = re.search(r'id="totp-secret">([A-Z2-7]+)<', shown).group(1)
    uri = re.search(r'id="totp-uri">([^<]+)<', shown).group(1)
    assert uri.startswith("otpauth://totp/") and f"secret={secret}" in uri and "sam" in uri
    device = TOTPDevice.objects.get(user__username="sam", confirmed=False)
    assert len(device.bin_key) == 20, "a 160-bit key from the CSPRNG (django-otp's random_hex)"
    again = client.post(ENROL, {"action": "start"}).content.decode()
    assert secret not in again, "a new key each time: the first one is gone, never shown again"
    device = TOTPDevice.objects.get(user__username="sam", confirmed=False)
    assert client.post(ENROL, {"action": "confirm", "code": code(device)})["Location"] == "/"
    assert client.get("/admin/").status_code == 200


def test_each_password_sign_in_then_asks_the_code_which_works_once():
    device = enrolled("sam", is_staff=True)
    first = password_only("sam")
    assert first.get("/admin/")["Location"] == STEP
    password_key = first.session.session_key
    # One code, given twice: a code computed again could fall in the next 30-second step, a new code.
    used = code(device)
    assert first.post(STEP, {"code": used})["Location"] == "/"
    assert first.get("/admin/").status_code == 200
    assert first.session.session_key != password_key, "a new key once the second factor is given"
    [indexed] = SignedInSession.objects.filter(user=device.user).values_list(
        "session_key", flat=True
    )
    assert indexed == first.session.session_key, "its row in the list of sessions follows it"
    replay = password_only("sam")
    answer = replay.post(STEP, {"code": used})
    assert answer.status_code == 400 and "used already" in answer.content.decode()
    assert replay.get("/admin/")["Location"] == STEP
    assert password_only("sam").get(ENROL).status_code == 404, "no second authenticator by oneself"


def test_wrong_codes_hold_the_authenticator_back(settings):
    # django-otp holds for factor * 2^(failures - 1) seconds: its default factor, 1, is one second, which a
    # loaded machine spends between two requests. A minute's hold states the same rule without a race.
    settings.OTP_TOTP_THROTTLE_FACTOR = 60
    device = enrolled("sam", is_staff=True)
    client = password_only("sam")
    assert (
        client.post(STEP, {"code": "000000" if code(device) != "000000" else "111111"}).status_code
        == 400
    )
    held = client.post(STEP, {"code": code(device)})
    assert held.status_code == 400 and "try again in" in held.content.decode()
    TOTPDevice.objects.filter(pk=device.pk).update(
        throttling_failure_timestamp=timezone.now() - timedelta(minutes=5)
    )
    assert client.post(STEP, {"code": code(device)})["Location"] == "/"


def test_other_password_users_are_asked_when_required_or_enrolled_and_single_sign_on_never(
    settings,
):
    make_user("alice")
    assert password_only("alice").get("/approvals/").status_code == 200
    settings.SECOND_FACTOR_REQUIRED = "all"
    assert password_only("alice").get("/approvals/")["Location"] == STEP
    settings.SECOND_FACTOR_REQUIRED = "staff"
    enrolled("bob")
    assert password_only("bob").get("/approvals/")["Location"] == STEP
    erin = make_user("erin", is_staff=True)
    sso = Client()
    sso.force_login(erin, backend="approvals.auth.backends.OIDCRoleBackend")
    assert sso.get("/approvals/").status_code == 200, "the provider's factors count (docs/sso.md)"
    assert sso.get(ENROL).status_code == 404


def _admin(username: str, *perms: tuple[str, str]) -> Client:
    user = make_user(username, is_staff=True)
    user.user_permissions.set(
        Permission.objects.get(content_type__app_label=app, codename=codename)
        for app, codename in perms
    )
    client = Client()
    client.force_login(user)
    return client


def test_an_administrator_with_the_permission_resets_a_lost_authenticator():
    device = enrolled("sam", is_staff=True)
    form = {"action": "reset_second_factor", "_selected_action": [device.user_id]}
    viewer = _admin("vic", ("auth", "view_user"), ("auth", "change_user"))
    viewer.post("/admin/auth/user/", form)
    assert TOTPDevice.objects.filter(pk=device.pk).exists(), "no permission, no reset"
    admin = _admin(
        "ada", ("auth", "view_user"), ("auth", "change_user"), ("otp_totp", "delete_totpdevice")
    )
    admin.post("/admin/auth/user/", form)
    assert not TOTPDevice.objects.filter(user=device.user).exists()
    assert password_only("sam").get(STEP)["Location"] == ENROL, "enrols anew at the next sign-in"


def test_a_code_of_a_time_step_long_past_is_refused():
    device = enrolled("sam", is_staff=True)
    client = password_only("sam")
    assert client.post(STEP, {"code": code(device, steps_ahead=-3)}).status_code == 400
    assert client.get("/admin/")["Location"] == STEP


def test_admins_own_sign_in_form_owes_the_second_factor_too():
    device = enrolled("sam", is_staff=True)
    client = Client()
    answer = client.post(
        "/admin/login/", {"username": "sam", "password": "pw-sam", "next": "/admin/"}
    )
    assert answer.status_code == 302
    assert client.get("/admin/")["Location"] == STEP
    assert client.post(STEP, {"code": code(device)})["Location"] == "/"
    assert client.get("/admin/").status_code == 200
