"""The sessions of an account (ASVS 7.1.2, 7.4.5, 7.5.2): its holder sees every one (when, how, from which
address and browser, this one marked) and ends any or all of the others; an administrator holding
`approvals.end_sessions` ends a user's or every session in admin. Ended means the cookie signs nobody in."""

import pytest
from django.contrib.auth.models import Permission
from django.test import Client

from approvals.models import SignedInSession
from tests.factories import make_user

pytestmark = pytest.mark.django_db

PAGE = "/accounts/sessions/"
ADMIN_LIST = "/admin/approvals/signedinsession/"


def signed_in(username: str, address: str = "127.0.0.1", agent: str = "TestBrowser/1") -> Client:
    client = Client(REMOTE_ADDR=address, HTTP_USER_AGENT=agent)
    answer = client.post("/accounts/login/", {"username": username, "password": f"pw-{username}"})
    assert answer.status_code == 302
    return client


def is_signed_in(client: Client) -> bool:
    return client.get("/approvals/").status_code == 200


def session_ids(username: str) -> list[int]:
    return list(
        SignedInSession.objects.filter(user__username=username)
        .order_by("signed_in_at", "id")
        .values_list("id", flat=True)
    )


def test_a_person_sees_their_own_sessions_with_when_how_where_and_this_one_marked():
    make_user("alice")
    make_user("bob")
    laptop = signed_in("alice", "10.0.0.7", "Firefox/140 on the laptop")
    signed_in("alice", "10.9.9.9", "Safari/18 on the phone")
    signed_in("bob", "10.6.6.6", "Bob's browser")
    page = laptop.get(PAGE).content.decode()
    assert page.count("End this session") == 1 and page.count("This session") == 1
    assert "10.9.9.9" in page and "Safari/18 on the phone" in page and "Password" in page
    current = page.split('id="current-session"')[1].split("</tr>")[0]
    assert "10.0.0.7" in current and "Firefox/140 on the laptop" in current
    assert "10.6.6.6" not in page, "another account's session is not listed"
    assert 'id="my-sessions-link"' in laptop.get("/").content.decode()


def test_ending_one_other_session_signs_that_browser_out_and_keeps_this_one():
    make_user("alice")
    make_user("bob")
    here, phone, tablet = signed_in("alice"), signed_in("alice"), signed_in("alice")
    bob = signed_in("bob")
    phone_id = session_ids("alice")[1]
    bobs_id = session_ids("bob")[0]
    assert here.post("/accounts/sessions/end", {"session": bobs_id}).status_code == 302
    assert is_signed_in(bob), "another account's session cannot be ended from here"
    here.post("/accounts/sessions/end", {"session": phone_id})
    assert not is_signed_in(phone) and is_signed_in(here) and is_signed_in(tablet)
    assert here.post("/accounts/sessions/end-others").status_code == 302
    assert not is_signed_in(tablet) and is_signed_in(here) and is_signed_in(bob)
    assert len(session_ids("alice")) == 1


def test_signing_out_or_a_password_change_keeps_the_list_true():
    make_user("alice")
    here, other = signed_in("alice"), signed_in("alice")
    other.post("/accounts/logout/")
    assert len(session_ids("alice")) == 1
    new = "quiet-walrus-7-orbit"
    form = {"old_password": "pw-alice", "new_password1": new, "new_password2": new}
    assert here.post("/accounts/password/", form).status_code == 302
    page = here.get(PAGE).content.decode()
    assert page.count("This session") == 1 and "End this session" not in page
    assert SignedInSession.objects.get().session_key == here.session.session_key


def _staff(username: str, *codenames: str) -> Client:
    user = make_user(username, is_staff=True)
    user.user_permissions.set(
        Permission.objects.filter(content_type__app_label="approvals", codename__in=codenames)
    )
    client = Client()
    client.force_login(user)
    return client


def _action(client: Client, action: str, ids: list[int]):
    return client.post(ADMIN_LIST, {"action": action, "_selected_action": ids})


def test_an_administrator_with_the_permission_ends_a_users_sessions_and_all_sessions():
    make_user("alice")
    make_user("bob")
    alices = [signed_in("alice"), signed_in("alice")]
    bob = signed_in("bob")
    admin = _staff("sam", "view_signedinsession", "end_sessions")
    listed = admin.get(ADMIN_LIST).content.decode()
    assert "End every session of the selected sessions&#x27; users" in listed
    assert alices[0].session.session_key not in listed, "the key, a credential, is never shown"
    _action(admin, "end_all_of_their_users", session_ids("alice")[:1])
    assert not any(is_signed_in(c) for c in alices) and is_signed_in(bob)
    everyone = list(SignedInSession.objects.values_list("id", flat=True))
    _action(admin, "end_selected", everyone)
    assert not is_signed_in(bob) and not SignedInSession.objects.filter(user__username="bob")


def test_without_the_permission_an_administrator_can_end_nothing():
    make_user("alice")
    alice = signed_in("alice")
    viewer = _staff("vic", "view_signedinsession")
    assert viewer.get(ADMIN_LIST).status_code == 200
    _action(viewer, "end_all_of_their_users", session_ids("alice"))
    _action(viewer, "end_selected", session_ids("alice"))
    assert is_signed_in(alice)
    assert viewer.get(ADMIN_LIST + "add/").status_code == 403
