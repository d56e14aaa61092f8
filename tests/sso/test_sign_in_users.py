"""Who the provider signs in: the console user bound to its (issuer, subject), never a break-glass
superuser (tests/sso/test_hostile_identities.py runs the whole flow); signing out ends the provider's
session too."""

import pytest

from approvals.auth.backends import OIDCRoleBackend
from approvals.errors import IdentityRefused
from approvals.models import Membership, SignOnIdentity
from approvals.services.identities import identity_sign_in
from tests.console.clients import client_for
from tests.factories import make_user, make_workspace


@pytest.fixture
def backend(settings, db):
    settings.OIDC_ENABLED = True
    settings.OIDC_ROLE_MAPPING = {"approvers-7": [{"workspace": 7, "role": "approver"}]}
    make_workspace(7)
    return OIDCRoleBackend()


def test_the_provider_never_signs_anyone_into_a_break_glass_superuser(backend):
    root = make_user("dana", is_superuser=True)
    SignOnIdentity.objects.create(issuer="https://idp.example.test", subject="s-dana", user=root)
    with pytest.raises(IdentityRefused, match="break-glass"):
        identity_sign_in(issuer="https://idp.example.test", subject="s-dana", username="dana")
    assert not Membership.objects.filter(user=root).exists()


@pytest.mark.parametrize("subject", [None, "", 7, "x" * 256])
def test_claims_without_a_usable_subject_are_refused(backend, subject):
    with pytest.raises(IdentityRefused, match="no usable subject"):
        identity_sign_in(issuer="https://idp.example.test", subject=subject, username="erin")
    assert not SignOnIdentity.objects.exists()


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
