"""Console sessions (ASVS V7): a new random key at each sign-in, unusable once signed out or once the account
is disabled, and an end `SESSION_MAX_HOURS` after sign-in however busy the session is."""

import datetime
import re

import pytest
from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.sessions.backends.db import SessionStore
from django.contrib.sessions.models import Session
from django.test import Client

from approvals.idle_sessions import LAST_ACTIVITY, SIGNED_IN_AT
from tests.factories import make_user

pytestmark = pytest.mark.django_db

LOGIN, PAGE = "/accounts/login/", "/approvals/"


def signed_in(username: str, client: Client | None = None) -> Client:
    client = client or Client()
    answer = client.post(LOGIN, {"username": username, "password": f"pw-{username}"})
    assert answer.status_code == 302, answer
    return client


def session_key(client: Client) -> str:
    return client.cookies[settings.SESSION_COOKIE_NAME].value


def is_signed_out(answer) -> bool:
    return answer.status_code == 302 and answer["Location"].startswith(LOGIN)


def test_each_sign_in_gets_its_own_random_key_of_at_least_128_bits():
    make_user("alice")
    keys = [session_key(signed_in("alice")) for _ in range(20)]
    assert len(set(keys)) == len(keys), "no key is static or reused"
    # Django's keys: 32 characters of [a-z0-9] from `secrets`, log2(36) * 32 = 165 bits.
    assert all(re.fullmatch(r"[a-z0-9]{32}", key) for key in keys), keys
    assert not any(key in settings.SECRET_KEY for key in keys)


def test_signing_in_replaces_the_key_the_browser_had_and_ends_it():
    make_user("alice")
    make_user("bob")
    client = Client()
    before = client.session  # an anonymous session, as a planted cookie would be
    before["planted"] = True
    before.save()
    planted = before.session_key
    signed_in("alice", client)
    as_alice = session_key(client)
    assert as_alice != planted and not SessionStore().exists(planted)
    signed_in("bob", client)  # signing in again, as someone else, in the same browser
    assert session_key(client) not in (planted, as_alice)
    assert not SessionStore().exists(as_alice)


def test_a_copied_cookie_is_refused_once_its_session_signed_out():
    make_user("alice")
    client = signed_in("alice")
    copied = session_key(client)
    assert client.get(PAGE).status_code == 200
    assert client.post("/accounts/logout/").status_code == 302
    replay = Client()
    replay.cookies[settings.SESSION_COOKIE_NAME] = copied
    assert is_signed_out(replay.get(PAGE))
    assert not Session.objects.filter(session_key=copied).exists()


@pytest.mark.parametrize("ending", ["disabled", "deleted"])
def test_every_session_of_a_disabled_or_deleted_account_ends(ending):
    alice = make_user("alice")
    make_user("bob")
    laptop, phone, colleague = signed_in("alice"), signed_in("alice"), signed_in("bob")
    assert laptop.get(PAGE).status_code == phone.get(PAGE).status_code == 200
    if ending == "disabled":
        get_user_model().objects.filter(pk=alice.pk).update(is_active=False)
    else:
        alice.delete()
    assert is_signed_out(laptop.get(PAGE)) and is_signed_out(phone.get(PAGE))
    assert colleague.get(PAGE).status_code == 200


def clock_moves_on(client: Client, seconds: int) -> None:
    """The session's clock moves `seconds` on: every time stored with the session moves that far back."""
    row = Session.objects.get(session_key=session_key(client))
    data = row.get_decoded()
    for name in (LAST_ACTIVITY, SIGNED_IN_AT):
        if name in data:
            data[name] -= seconds
    if isinstance(data.get("_session_expiry"), str):
        expiry = datetime.datetime.fromisoformat(data["_session_expiry"])
        data["_session_expiry"] = (expiry - datetime.timedelta(seconds=seconds)).isoformat()
    Session.objects.filter(pk=row.pk).update(
        session_data=SessionStore().encode(data),
        expire_date=row.expire_date - datetime.timedelta(seconds=seconds),
    )


def test_a_session_used_every_29_minutes_still_ends_after_its_maximum_hours():
    make_user("alice")
    client = signed_in("alice")
    step = 29 * 60  # within the idle timeout, and each use writes the activity time
    assert step < settings.SESSION_IDLE_SECONDS
    steps_within = settings.SESSION_COOKIE_AGE // step
    for _ in range(steps_within):
        clock_moves_on(client, step)
        assert client.get(PAGE).status_code == 200
    clock_moves_on(client, step)  # past SESSION_MAX_HOURS since the sign-in
    assert is_signed_out(client.get(PAGE))
    assert is_signed_out(client.get(PAGE))


def test_the_session_and_its_cookie_expire_at_the_sign_in_plus_the_maximum_hours():
    make_user("alice")
    client = signed_in("alice")
    row = Session.objects.get(session_key=session_key(client))
    signed_at = row.get_decoded()[SIGNED_IN_AT]
    ends = datetime.datetime.fromtimestamp(signed_at + settings.SESSION_COOKIE_AGE, tz=datetime.UTC)
    assert row.expire_date == ends
    clock_moves_on(client, 20 * 60)
    assert client.get(PAGE).status_code == 200  # writes the activity time, saving the session
    assert Session.objects.get(pk=row.pk).expire_date == ends - datetime.timedelta(minutes=20)
    cookie_age = int(client.cookies[settings.SESSION_COOKIE_NAME]["max-age"])
    assert cookie_age <= settings.SESSION_COOKIE_AGE - 20 * 60
