"""The provider's tokens after a sign-on through the scripted provider (a process of its own): the access
token is not kept, the ID token stays in the server-side session for the provider's logout hint, and
neither reaches the browser (ASVS 10.1.1). The sign-on is logged with who, how and from where (16.3.1)."""

import logging

import pytest
from django.conf import settings as django_settings
from django.test import Client

from tests.sso.scripted import sign_on

pytestmark = pytest.mark.django_db


@pytest.fixture
def idp(scripted_provider, settings):
    scripted_provider.configure(settings)
    settings.LOGIN_REDIRECT_URL = "/"
    scripted_provider.will_answer({"sub": "s-erin", "preferred_username": "erin"})
    return scripted_provider


def test_the_providers_tokens_never_reach_the_browser(idp):
    client = Client()
    assert sign_on(client) == "/"
    session = client.session
    assert not {"oidc_access_token", "oidc_refresh_token"} & set(session.keys())
    id_token = session["oidc_id_token"]
    header, body, signature = id_token.split(".")
    cookie_names = {django_settings.SESSION_COOKIE_NAME, django_settings.CSRF_COOKIE_NAME}
    assert set(client.cookies) <= cookie_names
    cookies = " ".join(morsel.value for morsel in client.cookies.values())
    for page in ("/", "/approvals/", "/handoffs/", "/accounts/login/"):
        answer = client.get(page, follow=True)
        text = answer.content.decode() + str(answer.headers) + cookies
        assert body not in text and signature not in text, page


def test_a_sign_on_is_logged_with_who_how_and_from_where(idp, caplog):
    with caplog.at_level(logging.INFO, logger="approvals.auth.lockout"):
        assert sign_on(Client(REMOTE_ADDR="198.51.100.24")) == "/"
    lines = [r.getMessage() for r in caplog.records if r.name == "approvals.auth.lockout"]
    assert lines == ["sign-in of erin by single sign-on from 198.51.100.24"]
