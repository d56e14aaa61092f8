"""The suite's test clients share one middleware chain (tests/conftest.py) until a setting changes: a client made
after a change answers with the middleware built from the settings then in force, and one made after it is set back
answers as before it."""

import pytest
from django.test import Client

pytestmark = pytest.mark.django_db


def chain_of(client: Client):
    client.get("/accounts/login/")
    return client.handler._middleware_chain


def test_two_clients_take_the_chain_the_first_one_built():
    assert chain_of(Client()) is chain_of(Client())


def test_a_changed_setting_that_a_middleware_reads_once_is_in_force_for_the_next_client(settings):
    # SecurityMiddleware reads SECURE_CONTENT_TYPE_NOSNIFF in its __init__, not at each request.
    before = Client()
    assert before.get("/accounts/login/")["X-Content-Type-Options"] == "nosniff"
    settings.SECURE_CONTENT_TYPE_NOSNIFF = False
    after = Client()
    assert "X-Content-Type-Options" not in after.get("/accounts/login/")
    assert chain_of(after) is not chain_of(before)
    settings.SECURE_CONTENT_TYPE_NOSNIFF = True
    assert Client().get("/accounts/login/")["X-Content-Type-Options"] == "nosniff"
