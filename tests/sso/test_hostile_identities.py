"""Single sign-on bound to the provider's (issuer, subject), tried with hostile identities from a provider
in a process of its own (tests/oidc_provider/scripted_provider.py): an existing user name under a new
subject, a staff user name, look-alike names, a userinfo answer naming another subject.

A first sign-on makes a user of its own and never takes an existing account by name; an existing account
is bound by its holder's password or an administrator's command, audited."""

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.test import Client

from approvals.models import Membership, RoleChange, SignOnIdentity, SignOnIdentityEvent
from tests.factories import make_user, make_workspace
from tests.sso.scripted import sign_on

pytestmark = pytest.mark.django_db
HOME, REFUSED = "/", "/accounts/login/?sso=failed"
OPERATORS = "handoff-ws7-operators"


@pytest.fixture
def idp(scripted_provider, settings):
    provider = scripted_provider
    provider.configure(settings)
    settings.LOGIN_REDIRECT_URL = HOME
    settings.OIDC_ROLE_MAPPING = {OPERATORS: [{"workspace": 7, "role": "operator"}]}
    make_workspace(7)
    return provider


def _signed_in_as(client: Client) -> str | None:
    from django.contrib.auth import get_user_model

    pk = client.session.get("_auth_user_id")
    return get_user_model().objects.get(pk=pk).get_username() if pk else None


def test_a_first_sign_on_makes_its_own_user_bound_to_issuer_and_subject(idp):
    idp.will_answer({"sub": "s-erin", "preferred_username": "erin", "groups": [OPERATORS]})
    client = Client()
    assert sign_on(client) == HOME
    assert _signed_in_as(client) == "erin"
    identity = SignOnIdentity.objects.select_related("user").get()
    assert (identity.issuer, identity.subject, identity.user.username) == (
        idp.issuer,
        "s-erin",
        "erin",
    )
    assert not identity.user.has_usable_password()
    assert Membership.objects.filter(user=identity.user, role="operator").count() == 1
    event = SignOnIdentityEvent.objects.get()
    assert (event.action, event.subject) == ("created", "s-erin")


def test_an_existing_user_name_under_a_new_subject_is_refused_and_her_roles_stay(idp):
    dana = make_user("dana", workspace=make_workspace(8), roles=("approver",), password="dana-pass")
    idp.will_answer({"sub": "attacker-sub-1", "preferred_username": "dana", "groups": []})
    client = Client()
    assert sign_on(client) == REFUSED
    assert _signed_in_as(client) is None
    assert Membership.objects.filter(user=dana, role="approver").exists()
    assert not RoleChange.objects.exists()
    assert not SignOnIdentity.objects.exists()
    page = client.get(REFUSED).content.decode()
    assert "an account named &#x27;dana&#x27; already exists here" in page
    assert 'href="/accounts/link/"' in page


def test_a_staff_user_name_under_a_new_subject_never_reaches_admin(idp):
    make_user("support", is_staff=True)
    idp.will_answer({"sub": "attacker-sub-2", "preferred_username": "support", "groups": []})
    client = Client()
    assert sign_on(client) == REFUSED
    assert _signed_in_as(client) is None
    assert client.get("/admin/").status_code == 302


@pytest.mark.parametrize(
    "claimed",
    ["dana ", "DANA", "\u043elga", "d\x00a", "da\u200bna", "dana\r\nBcc: x@evil.example", ""],
    ids=["trailing-space", "other-case", "cyrillic-o", "nul", "zero-width", "crlf", "empty"],
)
def test_a_look_alike_or_malformed_user_name_makes_no_account(idp, claimed):
    make_user("dana")
    make_user("olga")
    idp.will_answer({"sub": f"s-{claimed!r}", "preferred_username": claimed, "groups": []})
    client = Client()
    assert sign_on(client) == REFUSED
    assert _signed_in_as(client) is None
    from django.contrib.auth import get_user_model

    assert sorted(get_user_model().objects.values_list("username", flat=True)) == ["dana", "olga"]


def test_a_userinfo_answer_naming_another_subject_is_refused(idp):
    idp.will_answer(
        {"sub": "s-victim", "preferred_username": "sso-victim", "groups": []},
        userinfo={"sub": "someone-else", "preferred_username": "sso-victim", "groups": [OPERATORS]},
    )
    client = Client()
    assert sign_on(client) == REFUSED
    assert _signed_in_as(client) is None
    assert not Membership.objects.exists()
    assert not SignOnIdentity.objects.exists()


def test_the_id_tokens_claims_win_over_the_userinfo_answers(idp):
    idp.will_answer(
        {"sub": "s-erin", "preferred_username": "erin", "groups": []},
        userinfo={"sub": "s-erin", "preferred_username": "root", "groups": [OPERATORS]},
    )
    client = Client()
    assert sign_on(client) == HOME
    assert _signed_in_as(client) == "erin"
    assert not Membership.objects.exists()


def test_a_bound_subject_keeps_its_account_when_its_name_changes_at_the_provider(idp):
    idp.will_answer({"sub": "s-erin", "preferred_username": "erin", "groups": []})
    assert sign_on(Client()) == HOME
    idp.will_answer({"sub": "s-erin", "preferred_username": "erin.renamed", "groups": []})
    client = Client()
    assert sign_on(client) == HOME
    assert _signed_in_as(client) == "erin"


def test_staff_and_superuser_flags_never_come_from_the_provider(idp):
    idp.will_answer(
        {"sub": "s-eve", "preferred_username": "eve", "is_staff": True, "is_superuser": True}
    )
    client = Client()
    assert sign_on(client) == HOME
    user = SignOnIdentity.objects.get().user
    assert (user.is_staff, user.is_superuser) == (False, False)
    assert client.get("/admin/").status_code == 302


def test_the_account_holder_links_it_with_its_password_then_signs_on_into_it(idp):
    dana = make_user("dana", password="dana-pass")
    idp.will_answer({"sub": "s-dana", "preferred_username": "dana", "groups": [OPERATORS]})
    client = Client()
    assert sign_on(client) == REFUSED
    wrong = client.post("/accounts/link/", {"password": "guess"})
    assert wrong.status_code == 400
    assert not SignOnIdentity.objects.exists()
    linked = client.post("/accounts/link/", {"password": "dana-pass"})
    assert (linked.status_code, linked["Location"]) == (302, "/accounts/login/?sso=linked")
    assert client.get("/accounts/link/").status_code == 404  # used once
    again = Client()
    assert sign_on(again) == HOME
    assert _signed_in_as(again) == "dana"
    assert Membership.objects.filter(user=dana, role="operator").exists()
    event = SignOnIdentityEvent.objects.get()
    assert (event.action, event.user, event.subject) == ("linked_by_password", dana, "s-dana")


def test_the_link_page_is_nothing_without_a_refused_sign_on_in_this_browser(idp):
    make_user("dana", password="dana-pass")
    assert Client().get("/accounts/link/").status_code == 404
    assert Client().post("/accounts/link/", {"password": "dana-pass"}).status_code == 404


def test_an_administrator_links_an_account_by_command_with_a_reason(idp, settings):
    root = make_user("root", is_superuser=True, is_staff=True)
    olga = make_user("olga")
    with pytest.raises(CommandError, match="may not link"):
        call_command(
            "sign_on_identities", "link", "olga", "s-olga", "--as", "olga", "--reason", "x"
        )
    call_command(
        "sign_on_identities",
        "link",
        "olga",
        "s-olga",
        "--as",
        "root",
        "--reason",
        "checked by phone",
    )
    event = SignOnIdentityEvent.objects.get()
    assert (event.action, event.actor, event.reason) == (
        "linked_by_admin",
        root,
        "checked by phone",
    )
    idp.will_answer({"sub": "s-olga", "preferred_username": "someone-else", "groups": []})
    client = Client()
    assert sign_on(client) == HOME
    assert _signed_in_as(client) == olga.username
    call_command("sign_on_identities", "unlink", "s-olga", "--as", "root", "--reason", "left")
    assert not SignOnIdentity.objects.exists()
    assert SignOnIdentityEvent.objects.filter(action="unlinked").count() == 1


def test_no_link_ever_makes_a_break_glass_superuser_a_provider_session(idp):
    make_user("root", is_superuser=True, is_staff=True)
    with pytest.raises(CommandError, match="break-glass"):
        call_command(
            "sign_on_identities", "link", "root", "s-root", "--as", "root", "--reason", "x"
        )
    assert not SignOnIdentity.objects.exists()
