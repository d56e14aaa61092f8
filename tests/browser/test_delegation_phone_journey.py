"""The approver on a 390 px phone, in a real Chromium, names a delegate for their holiday, sees it, and
ends it early (issue 39); the page never scrolls sideways."""

from datetime import timedelta

import pytest
from playwright.sync_api import expect

from approvals.models import ApprovalDelegation
from outbox.clock import db_time
from tests.factories import onboarding_world

pytestmark = [
    pytest.mark.browser,
    pytest.mark.django_db(databases=["default", "delivery"], transaction=True),
]


def test_an_approver_on_a_phone_names_a_delegate_and_ends_it(
    page, live_server, sign_in, no_horizontal_scroll
):
    world = onboarding_world()
    page.set_viewport_size({"width": 390, "height": 844})
    sign_in("alice")
    page.goto(f"{live_server.url}/approvals/delegations/")
    expect(page.get_by_role("heading", level=1)).to_have_text("Your delegates")
    no_horizontal_scroll("the delegation screen")

    page.get_by_label("Delegate (user name)").fill("olga")
    page.get_by_label("Until").fill((db_time().date() + timedelta(days=14)).isoformat())
    page.get_by_label("Why").fill("holiday")
    page.get_by_role("button", name="Name this delegate").click()
    expect(page.locator("#my-delegations")).to_contain_text("olga decides for you")
    no_horizontal_scroll("the delegation screen with a delegation")
    (d,) = ApprovalDelegation.objects.all()
    assert (d.approver, d.delegate) == (world["alice"], world["olga"])

    page.get_by_role("button", name="End this delegation now").click()
    expect(page.locator("#my-delegations")).to_contain_text("Ended")
    d.refresh_from_db()
    assert d.revoked_by == world["alice"]
