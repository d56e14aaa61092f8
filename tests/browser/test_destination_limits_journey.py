"""An on-call operator who is a destination admin (as olga is in the demo) in a real Chromium sets a
destination's limits on the health page: the htmx form (with its CSRF token) saves them and the block shows
them; a bad value is refused with its reason in place, and nothing changes."""

import pytest
from playwright.sync_api import expect

from outbox.models import DestinationEvent, DestinationHealth
from tests.factories import grant_destination_admin, onboarding_world

pytestmark = [
    pytest.mark.browser,
    pytest.mark.django_db(databases=["default", "delivery"], transaction=True),
]


def set_limits(page, reason: str, **values: str):
    """Fill the receiver's limits form (by label) and send it; the block as it was swapped in."""
    block = page.locator("#destination-receiver")
    for label, value in values.items():
        block.get_by_label(label).fill(value)
    block.get_by_label("Reason").fill(reason)
    block.get_by_role("button", name="Set limits").click()
    return page.locator("#destination-receiver")


def test_operator_sets_the_destinations_limits_and_a_bad_value_is_refused_in_place(
    page, live_server, sign_in, axe_check
):
    grant_destination_admin(onboarding_world()["olga"])
    sign_in("olga")
    page.goto(f"{live_server.url}/health/")
    block = page.locator("#destination-receiver")
    expect(block.locator("#destination-receiver-in-flight")).to_contain_text("of unlimited")

    block = set_limits(
        page,
        "the receiver's team asked for 2 and 20/s",
        **{"Maximum concurrency": "2", "Maximum requests per second": "20"},
    )
    expect(block.get_by_role("status")).to_have_text("Limits of receiver saved.")
    expect(block.locator("#destination-receiver-in-flight")).to_contain_text("of 2")
    expect(block.locator("#destination-receiver-rate")).to_contain_text("of 20")
    axe_check("health, destination limits saved")
    health = DestinationHealth.objects.get(name="receiver")
    assert (health.max_concurrency, health.max_requests_per_second) == (2, 20)
    assert (
        DestinationEvent.objects.filter(
            destination="receiver", action="set_limits", actor_label="olga"
        ).count()
        == 1
    )

    block = set_limits(page, "typo", **{"Maximum concurrency": "two"})
    expect(block.get_by_role("alert")).to_contain_text("Maximum concurrency must be a whole number")
    # What was typed stays in the form to be corrected; the saved limits are unchanged.
    expect(block.get_by_label("Maximum concurrency")).to_have_value("two")
    expect(block.locator("#destination-receiver-in-flight")).to_contain_text("of 2")
    axe_check("health, destination limits refused")
    health.refresh_from_db()
    assert (health.max_concurrency, health.max_requests_per_second) == (2, 20)
    assert DestinationEvent.objects.filter(destination="receiver", action="set_limits").count() == 1
