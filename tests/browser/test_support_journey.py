"""Support staff in a real Chromium: signed in to the admin with the least-privilege group, they find a
handoff by "request 42" and only that one, read it (payload redacted) and cannot change it."""

import pytest
from playwright.sync_api import expect

from approvals.services import support_staff_enroll
from outbox.models import HandoffState
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
    page.locator("#searchbar").fill("request 42")
    page.locator("#searchbar").press("Enter")
    results = page.locator("#result_list tbody tr")
    expect(results).to_have_count(1)
    expect(results.first).to_contain_text("onboarding:7:42:1")
    results.first.locator("a").first.click()
    expect(page.locator("body")).to_contain_text("onboarding:7:42:1")
    expect(page.locator('input[name="_save"]')).to_have_count(0)
