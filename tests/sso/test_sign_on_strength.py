"""How strongly the provider authenticated the person (ASVS 6.8.4, 6.3.3 with single sign-on): the ID token's
`acr`, `amr` and `auth_time` checked against the settings, through the whole code flow with the scripted
provider in a process of its own. A token weaker than required is refused before any account is made or
opened, and the sign-in page says why; without requirements the provider's policy is taken as it is."""

import time
from urllib.parse import parse_qs, urlsplit

import pytest
from django.test import Client

from approvals.models import SignOnIdentity
from tests.factories import make_workspace
from tests.sso.scripted import sign_on

pytestmark = pytest.mark.django_db
HOME, REFUSED = "/", "/accounts/login/?sso=failed"


@pytest.fixture
def idp(scripted_provider, settings):
    scripted_provider.configure(settings)
    settings.LOGIN_REDIRECT_URL = HOME
    settings.OIDC_ROLE_MAPPING = {}
    make_workspace(7)
    return scripted_provider


def erin(**claims) -> dict:
    return {"sub": "s-erin", "preferred_username": "erin", "groups": [], **claims}


def refusal_shown(client: Client) -> str:
    page = client.get(REFUSED).content.decode()
    return page.split('id="sso-failed">')[1].split("</p>")[0]


def asked_of_provider(client: Client) -> dict:
    start = client.get("/accounts/oidc/authenticate/")
    return {k: v[0] for k, v in parse_qs(urlsplit(start["Location"]).query).items()}


def test_a_token_without_a_required_method_is_refused_with_a_page_saying_why(idp, settings):
    idp.will_answer(erin(sub="s-fay", preferred_username="fay"))
    assert sign_on(Client()) == HOME, "no requirement: the provider's own policy is taken"
    settings.OIDC_REQUIRED_AMR = ["mfa", "otp", "hwk"]
    for weak in (erin(amr=["pwd"]), erin(), erin(amr="otp pwd"), erin(amr=[7])):
        idp.will_answer(weak)
        client = Client()
        assert sign_on(client) == REFUSED
        assert "requires one of mfa, otp, hwk" in refusal_shown(client)
        assert "_auth_user_id" not in client.session
    assert not SignOnIdentity.objects.filter(subject="s-erin").exists(), "no account was made"
    idp.will_answer(erin(amr=["pwd", "otp"]))
    assert sign_on(Client()) == HOME


def test_an_acr_not_required_is_refused_and_the_request_asks_for_the_required_one(idp, settings):
    settings.OIDC_REQUIRED_ACR_VALUES = ["urn:example:loa:2", "urn:example:loa:3"]
    client = Client()
    assert asked_of_provider(client)["acr_values"] == "urn:example:loa:2 urn:example:loa:3"
    idp.will_answer(erin(acr="urn:example:loa:1"))
    assert sign_on(client) == REFUSED
    assert "urn:example:loa:1" in refusal_shown(client)
    idp.will_answer(erin(acr="urn:example:loa:3"))
    assert sign_on(Client()) == HOME


def test_an_old_or_missing_auth_time_is_refused_when_a_maximum_age_is_set(idp, settings):
    settings.OIDC_MAX_AUTH_AGE_SECONDS = 600
    assert asked_of_provider(Client())["max_age"] == "600"
    now = int(time.time())
    for stale in (
        erin(),
        erin(auth_time=now - 3600),
        erin(auth_time=now + 3600),
        erin(auth_time="x"),
    ):
        idp.will_answer(stale)
        client = Client()
        assert sign_on(client) == REFUSED
        assert "_auth_user_id" not in client.session
    idp.will_answer(erin(auth_time=now - 60))
    assert sign_on(Client()) == HOME
