"""Operators set a destination's limits on the health page: an htmx form for operators who also hold the
`outbox.set_destination_limits` permission (a destination serves every workspace), bad input a 422 with the
reason and nothing written, every change a destination event with its actor. Operators without the permission
see the limits read-only and get 403 if they post."""

from io import StringIO

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.core.management import call_command
from django.test import Client

from approvals.models import Role
from approvals.services import DESTINATION_ADMINS_GROUP
from outbox.clock import db_now_plus
from outbox.models import DestinationEvent, DestinationHealth
from outbox.services.limits import destination_acquire
from tests.console.clients import HTMX, client_for
from tests.factories import grant_destination_admin, make_user, retry_after_hold, retry_after_rows

pytestmark = pytest.mark.django_db(databases=["default", "delivery"])
URL = "/health/destinations/receiver/limits"


def limits() -> tuple:
    return tuple(
        DestinationHealth.objects.filter(name="receiver")
        .values_list("max_concurrency", "max_requests_per_second")
        .first()
        or (None, None)
    )


def post(client, **fields):
    data = {
        "max_concurrency": "2",
        "max_requests_per_second": "20",
        "reason": "receiver team asked",
        **fields,
    }
    return client.post(URL, data, **HTMX)


@pytest.fixture
def olga(world):
    """olga, operator of workspace 7, in the destination admins group (as in the demo)."""
    return grant_destination_admin(world["olga"])


def test_an_operator_sets_the_limits_and_the_change_is_recorded_with_the_actor(olga):
    response = post(client_for(olga))
    assert response.status_code == 200
    html = response.content.decode()
    assert 'id="destination-receiver"' in html and "Limits of receiver saved." in html
    assert 'hx-post="/health/destinations/receiver/limits"' in html, (
        "the swapped-in block keeps its form"
    )
    assert "0 of 2" in html and "0 of 20" in html
    assert limits() == (2, 20)
    event = DestinationEvent.objects.get(action="set_limits")
    assert (event.actor, event.actor_label) == (olga, "olga")
    assert "concurrency unlimited -> 2" in event.reason and "second unlimited -> 20" in event.reason
    assert "receiver team asked" in event.reason


def test_blank_limits_mean_unlimited(olga):
    client = client_for(olga)
    post(client)
    assert post(client, max_concurrency="", max_requests_per_second=" ").status_code == 200
    assert limits() == (None, None)
    last = DestinationEvent.objects.filter(action="set_limits").latest("id")
    assert "2 -> unlimited" in last.reason and "20 -> unlimited" in last.reason


def test_the_same_limits_again_record_nothing(olga):
    client = client_for(olga)
    post(client), post(client)
    assert DestinationEvent.objects.filter(action="set_limits").count() == 1


@pytest.mark.parametrize(
    ("fields", "reason"),
    [
        ({"max_concurrency": "0"}, "Maximum concurrency must be a whole number from 1 to 10,000"),
        ({"max_concurrency": "-1"}, "Maximum concurrency must be a whole number"),
        ({"max_requests_per_second": "2.5"}, "Maximum requests per second must be a whole number"),
        ({"max_requests_per_second": "many"}, "Maximum requests per second must be a whole number"),
        ({"max_requests_per_second": "10001"}, "from 1 to 10,000"),
        ({"max_concurrency": "\uff12"}, "Maximum concurrency must be a whole number"),
        ({"reason": "  "}, "a reason is required"),
    ],
    ids=["zero", "negative", "fraction", "text", "too-many", "full-width-digit", "no-reason"],
)
def test_bad_input_is_a_422_with_its_reason_and_writes_nothing(olga, fields, reason):
    response = post(client_for(olga), **fields)
    assert response.status_code == 422
    assert reason in response.content.decode()
    assert limits() == (None, None)
    assert not DestinationEvent.objects.exists()


def test_bad_input_without_htmx_is_a_422_page_that_says_why(olga):
    response = client_for(olga).post(URL, {"max_concurrency": "0", "reason": "x"})
    assert response.status_code == 422
    assert "Limits of destination receiver not changed" in response.content.decode()
    assert limits() == (None, None)


def test_without_htmx_a_change_goes_back_to_the_health_page(olga):
    response = client_for(olga).post(URL, {"max_concurrency": "3", "reason": "x"})
    assert response.status_code == 302 and response["Location"] == "/health/"
    assert limits() == (3, None)


@pytest.mark.parametrize("who", ["alice", "bob", "mallory", "support", "anonymous"])
def test_only_operators_may_set_limits_even_with_the_permission(world, who):
    if who == "anonymous":
        client = Client()
    else:
        user = make_user("sam", is_staff=True) if who == "support" else world[who]
        client = client_for(grant_destination_admin(user))
    response = post(client)
    assert response.status_code == (302 if who == "anonymous" else 403)
    if who == "anonymous":
        assert response["Location"].startswith("/accounts/login/")
    assert limits() == (None, None)
    assert not DestinationEvent.objects.exists()


@pytest.mark.parametrize("htmx", [True, False], ids=["htmx", "plain"])
def test_an_operator_without_the_permission_gets_a_403_with_the_reason_and_nothing_changes(
    world, olga, htmx
):
    post(client_for(olga))
    # oscar is an operator of workspace 7, as olga is, without the permission.
    client = client_for(world["oscar"])
    data = {"max_concurrency": "5", "max_requests_per_second": "50", "reason": "mine is slow"}
    response = client.post(URL, data, **(HTMX if htmx else {}))
    assert response.status_code == 403
    assert "apply to every workspace" in response.content.decode()
    assert "set destination limits" in response.content.decode()
    assert limits() == (2, 20)
    assert DestinationEvent.objects.filter(action="set_limits").count() == 1
    assert not DestinationEvent.objects.filter(actor=world["oscar"]).exists()


def test_an_operator_without_the_permission_sees_the_limits_read_only_and_who_changes_them(
    world, olga
):
    post(client_for(olga))
    page = client_for(world["oscar"]).get("/health/").content.decode()
    block = page.split('id="destination-receiver"')[1].split("</section>")[0]
    assert "0 of 2" in block and "0 of 20" in block and "none" in block.split('-hold"')[1]
    assert (
        "Limits apply to every workspace; people with the" in block
        and "permission change them." in block
    )
    assert (
        "<form" not in block and "Set limits" not in block and 'name="max_concurrency"' not in block
    )
    assert "/health/destinations/receiver/limits" not in page


def test_an_operator_of_another_workspace_with_the_permission_of_their_own_may_set_them(world):
    # A destination serves every workspace: the permission, given to the user or through the group, with an
    # operator role in any workspace; the event names who did it.
    petra = make_user(
        "petra",
        workspace=world["w8"],
        roles=(Role.OPERATOR,),
        permissions=["outbox.set_destination_limits"],
    )
    response = post(client_for(petra))
    assert (
        response.status_code == 200
        and 'hx-post="/health/destinations/receiver/limits"' in response.content.decode()
    )
    assert limits() == (2, 20)
    assert DestinationEvent.objects.get().actor == petra


def test_an_unknown_destination_is_a_404_and_a_get_a_405(olga):
    client = client_for(olga)
    assert (
        client.post("/health/destinations/elsewhere/limits", {"reason": "x"}, **HTMX).status_code
        == 404
    )
    assert client.get(URL).status_code == 405
    assert not DestinationHealth.objects.exists()


def test_setting_limits_needs_a_csrf_token(olga):
    client = Client(enforce_csrf_checks=True)
    client.force_login(olga)
    response = client.post(URL, {"max_concurrency": "2", "reason": "x"}, **HTMX)
    assert response.status_code == 403
    assert limits() == (None, None)


def test_the_health_page_shows_the_limits_the_hold_and_the_slots_in_use(olga):
    client = client_for(olga)
    page = client.get("/health/").content.decode()
    assert 'id="destination-receiver"' in page and "0 of unlimited" in page
    assert 'hx-post="/health/destinations/receiver/limits"' in page
    assert "permission change them" not in page
    post(client)
    destination_acquire(name="receiver", worker="w1", requests=1, lease_seconds=30)
    retry_after_hold("receiver", 30, "HTTP 429 with Retry-After 30 s")
    page = client.get("/health/").content.decode()
    assert "1 of 2" in page and "1 of 20" in page.split('id="destination-receiver-rate"')[1]
    assert "held since" in page and ", until " in page and "HTTP 429 with Retry-After 30 s" in page
    retry_after_rows("receiver").update(ends_at=db_now_plus(-1))
    assert "held since" not in client.get("/health/").content.decode()


def test_the_demo_puts_olga_in_the_destination_admins_group_and_a_second_run_keeps_her_there():
    out = StringIO()
    call_command("demo", password="demo-password-long", stdout=out)
    assert f"in the {DESTINATION_ADMINS_GROUP} group: sets destinations' limits" in out.getvalue()
    olga = get_user_model().objects.get(username="olga")
    group = Group.objects.get(name=DESTINATION_ADMINS_GROUP)
    assert list(group.permissions.values_list("content_type__app_label", "codename")) == [
        ("outbox", "set_destination_limits")
    ]
    assert list(group.user_set.all()) == [olga]
    assert not olga.is_superuser and not olga.is_staff
    # Demo data loaded before the permission existed: the second run puts olga in the group, once.
    olga.groups.clear()
    out = StringIO()
    call_command("demo", stdout=out)
    call_command("demo", stdout=StringIO())
    assert "demo data already loaded" in out.getvalue() and "passwords unchanged" in out.getvalue()
    assert list(Group.objects.get(name=DESTINATION_ADMINS_GROUP).user_set.all()) == [olga]
    assert post(client_for(olga)).status_code == 200
    for username in ("alice", "bob", "mallory", "support"):
        user = get_user_model().objects.get(username=username)
        assert not user.has_perm("outbox.set_destination_limits"), username
