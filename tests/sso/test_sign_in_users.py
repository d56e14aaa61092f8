"""Who the provider signs in: the console user its username claim names (created the first time, without a
usable password), never a break-glass superuser; and signing out ends the provider's session too."""

import pytest
from django.core.exceptions import SuspiciousOperation

from approvals.auth.backends import OIDCRoleBackend
from approvals.models import Membership
from tests.console.clients import client_for
from tests.factories import make_user, make_workspace

CLAIMS = {"preferred_username": "dana", "email": "dana@example.test", "groups": ["approvers-7"]}


@pytest.fixture
def backend(settings, db):
    settings.OIDC_ENABLED = True
    settings.OIDC_ROLE_MAPPING = {"approvers-7": [{"workspace": 7, "role": "approver"}]}
    make_workspace(7)
    return OIDCRoleBackend()


def test_a_first_sign_in_creates_the_user_without_a_password_and_with_their_roles(backend):
    assert backend.verify_claims(CLAIMS)
    user = backend.create_user(CLAIMS)
    assert (user.username, user.email, user.has_usable_password()) == (
        "dana",
        "dana@example.test",
        False,
    )
    assert list(Membership.objects.filter(user=user).values_list("role", flat=True)) == ["approver"]
    assert list(backend.filter_users_by_claims(CLAIMS)) == [user]


@pytest.mark.parametrize("name", [None, "", 7, "x" * 151])
def test_claims_without_a_usable_username_are_refused(backend, name):
    assert not backend.verify_claims({**CLAIMS, "preferred_username": name})


def test_the_provider_never_signs_anyone_into_a_break_glass_superuser(backend):
    root = make_user("dana", is_superuser=True)
    with pytest.raises(SuspiciousOperation, match="break-glass"):
        backend.update_user(root, CLAIMS)
    assert not Membership.objects.filter(user=root).exists()


def test_the_backend_does_nothing_while_single_sign_on_is_off(settings, rf, db):
    settings.OIDC_ENABLED = False
    assert OIDCRoleBackend().authenticate(rf.get("/accounts/oidc/callback/?code=c&state=s")) is None


def test_signing_out_of_a_provider_session_ends_it_at_the_provider(settings, db):
    settings.OIDC_ENABLED = True
    settings.OIDC_OP_END_SESSION_ENDPOINT = "https://idp.example.test/logout"
    settings.OIDC_RP_CLIENT_ID = "handoff-console"
    client = client_for(make_user("dana"))
    session = client.session
    session["oidc_id_token"] = "header.body.signature"
    session.save()
    answer = client.post("/accounts/logout/")
    assert answer.status_code == 200
    target = answer["Refresh"].removeprefix("0; url=")
    assert target.startswith("https://idp.example.test/logout?id_token_hint=header.body.signature")
    assert "post_logout_redirect_uri=http%3A%2F%2Ftestserver%2Faccounts%2Flogin%2F" in target
    assert "_auth_user_id" not in client.session


def test_signing_out_of_a_password_session_stays_here(settings, db):
    settings.OIDC_ENABLED = True
    settings.OIDC_OP_END_SESSION_ENDPOINT = "https://idp.example.test/logout"
    client = client_for(make_user("root", is_superuser=True))
    answer = client.post("/accounts/logout/")
    assert (answer.status_code, answer["Location"]) == (302, "/accounts/login/")
    assert client.get("/accounts/logout/").status_code == 405


def test_a_failed_provider_sign_in_comes_back_to_the_sign_in_page_saying_so(client, settings, db):
    settings.OIDC_ENABLED = True
    settings.OIDC_PROVIDER_NAME = "Example Corp"
    answer = client.get("/accounts/oidc/callback/?code=stolen-code&state=unknown-state")
    assert (answer.status_code, answer["Location"]) == (302, "/accounts/login/?sso=failed")
    page = client.get(answer["Location"]).content.decode()
    assert "Signing in through Example Corp did not succeed" in page
    assert "_auth_user_id" not in client.session
