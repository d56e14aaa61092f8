"""Alice's approval page in the demo as `make run` loads it (issue 35), in a real Chromium: "What each
destination will receive" shows each routed step's request, the accounts step's mapped envelope among them,
readable and without a horizontal scroll on a phone, checked with axe-core at both widths; approving from it
binds the decision to what was shown."""

from io import StringIO

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command
from playwright.sync_api import expect

from approvals.models import Approval
from tests.processes import ROOT

pytestmark = [
    pytest.mark.browser,
    pytest.mark.django_db(databases=["default", "delivery"], transaction=True),
]
WIDTHS = (1280, 390)


@pytest.fixture
def demo(monkeypatch, live_server):
    monkeypatch.setenv("PORT", live_server.url.rsplit(":", 1)[1])
    call_command(
        "demo",
        password="a-demo-password-long",
        destinations=str(ROOT / "demo" / "destinations.json"),
        stdout=StringIO(),
    )
    for user in get_user_model().objects.all():
        user.set_password(f"pw-{user.username}")
        user.save()


def test_alice_sees_what_each_destination_will_receive_and_approves_it(
    demo, page, live_server, sign_in, axe_check, no_horizontal_scroll, screenshot
):
    sign_in("alice")
    page.goto(f"{live_server.url}/approvals/7/42/1/")

    section = page.locator("#route-requests")
    expect(section.get_by_role("heading", level=2)).to_have_text(
        "What each destination will receive (redacted)"
    )
    accounts = section.locator('article[data-step="provision_account"]')
    expect(accounts.get_by_role("heading", level=3)).to_have_text(
        "Step provision_account → accounts · POST /v1/accounts"
    )
    expect(accounts.locator("pre.payload")).to_contain_text('"name": "Northwind Traders"')
    expect(accounts.locator("pre.payload")).to_contain_text('"plan": "standard"')
    receiver = section.locator('article[data-step="create_client"]')
    expect(receiver).to_contain_text("The proposed operation above, as it is.")

    for width in WIDTHS:
        page.set_viewport_size({"width": width, "height": 844})
        expect(accounts.locator("pre.payload")).to_be_visible()
        axe_check(f"the approval page at {width} px")
        no_horizontal_scroll(f"the approval page at {width} px")
    accounts.scroll_into_view_if_needed()
    screenshot("approval-what-each-destination-will-receive-phone")
    page.set_viewport_size({"width": 1280, "height": 800})

    page.get_by_role("button", name="Approve exactly this payload").click()
    expect(page.locator("#request-state")).to_have_text("Approved")
    approval = Approval.objects.get(request__workspace_id=7, request__number=42)
    assert approval.requests_hash
    stored = {entry["step"]: entry["request"] for entry in approval.requests}
    assert stored["provision_account"]["body"] == {
        "account": {
            "name": "Northwind Traders",
            "plan": "standard",
            "notes": "Kick-off call booked for Monday.",
        }
    }
    assert stored["create_client"] is None and stored["send_welcome_pack"] is None
