"""Operators set a destination's limits on the health page: an htmx form, operators only, bad input a 422 with
the reason and nothing written, every change a destination event with its actor."""

import pytest
from django.test import Client

from outbox.clock import db_now_plus
from outbox.limits import destination_acquire
from outbox.models import DestinationEvent, DestinationHealth
from tests.console.clients import HTMX, client_for
from tests.factories import make_user

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
    data = {"max_concurrency": "2", "max_requests_per_second": "20", "reason": "receiver team asked", **fields}
    return client.post(URL, data, **HTMX)


def test_an_operator_sets_the_limits_and_the_change_is_recorded_with_the_actor(world):
    response = post(client_for(world["olga"]))
    assert response.status_code == 200
    html = response.content.decode()
    assert 'id="destination-receiver"' in html and "Limits of receiver saved." in html
    assert "0 of 2" in html and "0 of 20" in html
    assert limits() == (2, 20)
    event = DestinationEvent.objects.get(action="set_limits")
    assert (event.actor, event.actor_label) == (world["olga"], "olga")
    assert "concurrency unlimited -> 2" in event.reason and "second unlimited -> 20" in event.reason
    assert "receiver team asked" in event.reason


def test_blank_limits_mean_unlimited(world):
    client = client_for(world["olga"])
    post(client)
    assert post(client, max_concurrency="", max_requests_per_second=" ").status_code == 200
    assert limits() == (None, None)
    last = DestinationEvent.objects.filter(action="set_limits").latest("id")
    assert "2 -> unlimited" in last.reason and "20 -> unlimited" in last.reason


def test_the_same_limits_again_record_nothing(world):
    client = client_for(world["olga"])
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
def test_bad_input_is_a_422_with_its_reason_and_writes_nothing(world, fields, reason):
    response = post(client_for(world["olga"]), **fields)
    assert response.status_code == 422
    assert reason in response.content.decode()
    assert limits() == (None, None)
    assert not DestinationEvent.objects.exists()


def test_bad_input_without_htmx_is_a_422_page_that_says_why(world):
    response = client_for(world["olga"]).post(URL, {"max_concurrency": "0", "reason": "x"})
    assert response.status_code == 422
    assert "Limits of destination receiver not changed" in response.content.decode()
    assert limits() == (None, None)


def test_without_htmx_a_change_goes_back_to_the_health_page(world):
    response = client_for(world["olga"]).post(URL, {"max_concurrency": "3", "reason": "x"})
    assert response.status_code == 302 and response["Location"] == "/health/"
    assert limits() == (3, None)


@pytest.mark.parametrize("who", ["alice", "bob", "mallory", "support", "anonymous"])
def test_only_operators_may_set_limits(world, who):
    if who == "anonymous":
        client = Client()
    elif who == "support":
        client = client_for(make_user("sam", is_staff=True))
    else:
        client = client_for(world[who])
    response = post(client)
    assert response.status_code == (302 if who == "anonymous" else 403)
    if who == "anonymous":
        assert response["Location"].startswith("/accounts/login/")
    assert limits() == (None, None)
    assert not DestinationEvent.objects.exists()


def test_an_operator_of_another_workspace_only_is_still_an_operator(world):
    # A destination serves every workspace: any operator may set its limits, and the event names who did.
    assert post(client_for(world["otto"])).status_code == 200
    assert DestinationEvent.objects.get().actor == world["otto"]


def test_an_unknown_destination_is_a_404_and_a_get_a_405(world):
    client = client_for(world["olga"])
    assert client.post("/health/destinations/elsewhere/limits", {"reason": "x"}, **HTMX).status_code == 404
    assert client.get(URL).status_code == 405
    assert not DestinationHealth.objects.exists()


def test_setting_limits_needs_a_csrf_token(world):
    client = Client(enforce_csrf_checks=True)
    client.force_login(world["olga"])
    response = client.post(URL, {"max_concurrency": "2", "reason": "x"}, **HTMX)
    assert response.status_code == 403
    assert limits() == (None, None)


def test_the_health_page_shows_the_limits_the_hold_and_the_slots_in_use(world):
    client = client_for(world["olga"])
    page = client.get("/health/").content.decode()
    assert 'id="destination-receiver"' in page and "0 of unlimited" in page
    assert 'hx-post="/health/destinations/receiver/limits"' in page
    post(client)
    destination_acquire(name="receiver", worker="w1", requests=1, lease_seconds=30)
    DestinationHealth.objects.filter(name="receiver").update(
        hold_until=db_now_plus(30), hold_reason="HTTP 429 with Retry-After 30 s"
    )
    page = client.get("/health/").content.decode()
    assert "1 of 2" in page and "1 of 20" in page.split('id="destination-receiver-rate"')[1]
    assert "held until" in page and "HTTP 429 with Retry-After 30 s" in page
    DestinationHealth.objects.filter(name="receiver").update(hold_until=db_now_plus(-1))
    assert "held until" not in client.get("/health/").content.decode()
