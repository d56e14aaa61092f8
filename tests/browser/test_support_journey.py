"""Support staff in a real Chromium: signed in to the admin with the least-privilege group (password, then
the second factor staff owe), they find a handoff by "request 42" and only that one, read it (payload
redacted) and cannot change it."""

import pytest
from playwright.sync_api import expect

from approvals.services import support_staff_enroll
from outbox.models import HandoffState
from tests.browser.conftest import give_second_factor
from tests.browser.test_journeys import sweep_world
from tests.factories import HandoffFactory, make_user

pytestmark = [
    pytest.mark.browser,
    pytest.mark.django_db(databases=["default", "delivery"], transaction=True),
]


def test_support_finds_request_42_in_the_admin_and_only_it(page, live_server):
    support = make_user("support", is_staff=True)
    support_staff_enroll(user=support)
    HandoffFactory(number=42, state=HandoffState.DELIVERED, destination_id="f00d-4200-beef")
    HandoffFactory(number=420, state=HandoffState.DELIVERED, destination_id="aa42aa-0000")
    HandoffFactory(number=7, state=HandoffState.NEEDS_ATTENTION, destination_id="")

    page.goto(f"{live_server.url}/admin/login/?next=/admin/outbox/handoff/")
    page.get_by_label("Username").fill("support")
    page.get_by_label("Password").fill("pw-support")
    page.get_by_role("button", name="Log in").click()
    give_second_factor(page)
    page.goto(f"{live_server.url}/admin/outbox/handoff/")
    page.locator("#searchbar").fill("request 42")
    page.locator("#searchbar").press("Enter")
    results = page.locator("#result_list tbody tr")
    expect(results).to_have_count(1)
    expect(results.first).to_contain_text("onboarding:7:42:1")
    results.first.locator("a").first.click()
    expect(page.locator("body")).to_contain_text("onboarding:7:42:1")
    expect(page.locator('input[name="_save"]')).to_have_count(0)


@pytest.mark.parametrize("width", [1280, 390])
def test_admin_pages_support_uses_pass_axe(page, live_server, sign_in, axe_check, width):
    """The admin pages support staff use pass axe (no serious or critical violation) on a desktop and a
    phone: the outbox list, one handoff, its attempts and events, and the assign action's page."""
    _world, handoffs = sweep_world()
    support_staff_enroll(user=make_user("support", is_staff=True))
    page.set_viewport_size({"width": width, "height": 900})
    sign_in("support")
    base = f"{live_server.url}/admin/outbox"
    for name, url in (
        ("admin handoff list", f"{base}/handoff/"),
        ("admin handoff list, searched", f"{base}/handoff/?q=request+42"),
        ("admin handoff", f"{base}/handoff/{handoffs[2].pk}/change/"),
        ("admin attempts", f"{base}/attempt/"),
        ("admin events", f"{base}/handoffevent/"),
    ):
        page.goto(url)
        expect(page.locator("#content")).to_be_visible()
        axe_check(f"{name} at {width} px")
    page.goto(f"{base}/handoff/")
    page.locator(f'input[name="_selected_action"][value="{handoffs[2].pk}"]').check()
    page.locator('select[name="action"]').select_option("assign")
    page.get_by_role("button", name="Go").click()
    expect(page.get_by_role("button", name="Assign")).to_be_visible()
    axe_check(f"admin assign at {width} px")
