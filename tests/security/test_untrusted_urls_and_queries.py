"""Untrusted text in URLs and queries (ASVS 1.2.2, 1.2.4): the sign-in's `next` leads only to this site, and
SQL's metacharacters typed into the handoff list's search are data, matched as typed."""

import pytest
from django.test import Client

from tests.builders import record
from tests.console.clients import client_for
from tests.factories import ONBOARDING_PAYLOAD, make_user, onboarding_world

pytestmark = pytest.mark.django_db(databases=["default", "delivery"])

LOGIN = "/accounts/login/"


@pytest.mark.parametrize(
    "elsewhere",
    [
        "https://evil.example/",
        "//evil.example/handoffs/",
        "/\\evil.example/",
        "javascript:alert(1)",
        "JavaScript:alert(document.cookie)",
        "data:text/html,<script>alert(1)</script>",
        "http://testserver.evil.example/",
    ],
)
def test_a_sign_in_next_of_another_site_or_scheme_lands_on_the_home_page(elsewhere):
    make_user("alice")
    client = Client()
    page = client.get(LOGIN, {"next": elsewhere}).content.decode()
    assert "evil.example" not in page and "alert(" not in page
    answer = client.post(LOGIN, {"username": "alice", "password": "pw-alice", "next": elsewhere})
    assert (answer.status_code, answer["Location"]) == (302, "/")


def test_a_sign_in_next_on_this_site_is_followed():
    make_user("alice")
    answer = Client().post(
        LOGIN, {"username": "alice", "password": "pw-alice", "next": "/handoffs/?q=a%26b"}
    )
    assert (answer.status_code, answer["Location"]) == (302, "/handoffs/?q=a%26b")


@pytest.fixture
def olga_and_handoffs():
    world = onboarding_world()
    plain = record(42)
    odd = record(43, payload={**ONBOARDING_PAYLOAD, "client_name": "Percent %_ Traders"})
    return client_for(world["olga"]), plain, odd


@pytest.mark.parametrize(
    ("typed", "finds"),
    [
        ("' OR 1=1 --", ()),
        ('" OR ""="', ()),
        ("'; DELETE FROM outbox_handoff; --", ()),
        ("%", ("odd",)),
        ("%_", ("odd",)),
        ("%_ t", ("odd",)),
        ("Northwind Traders", ("plain",)),
    ],
)
def test_sql_metacharacters_in_the_search_are_matched_as_typed(olga_and_handoffs, typed, finds):
    client, plain, odd = olga_and_handoffs
    answer = client.get("/handoffs/", {"q": typed})
    assert answer.status_code == 200
    page = answer.content.decode()
    shown = {name for name, h in (("plain", plain), ("odd", odd)) if f"/handoffs/{h.pk}/" in page}
    assert shown == set(finds)
    assert client.get("/handoffs/").content.decode().count("/handoffs/") >= 2, "nothing deleted"
