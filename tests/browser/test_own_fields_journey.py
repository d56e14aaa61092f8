"""In Chromium: the requester reads back the e-mail they typed on their request's page, and the approver,
who sees it as [redacted], is told what the hidden field holds and why before approving "exactly this
payload"."""

import pytest
from playwright.sync_api import expect

from tests.factories import ONBOARDING_PAYLOAD, onboarding_world

pytestmark = [
    pytest.mark.browser,
    pytest.mark.django_db(databases=["default", "delivery"], transaction=True),
]

EMAIL = ONBOARDING_PAYLOAD["contact_email"]


def test_the_requester_sees_their_email_and_the_approver_is_told_what_is_hidden(
    page, live_server, sign_in
):
    onboarding_world()
    sign_in("bob")
    page.goto(f"{live_server.url}/approvals/7/42/1/")
    expect(page.locator("pre.payload")).to_contain_text(f'"contact_email": "{EMAIL}"')
    expect(page.locator("#payload-hidden")).to_have_count(0)

    page.context.clear_cookies()
    sign_in("alice")
    page.goto(f"{live_server.url}/approvals/7/42/1/")
    expect(page.locator("pre.payload")).to_contain_text('"contact_email": "[redacted]"')
    expect(page.locator("pre.payload")).not_to_contain_text(EMAIL)
    hidden = page.locator("#payload-hidden")
    expect(hidden).to_contain_text("Approving approves these fields too")
    expect(hidden).to_contain_text(
        "contact_email: an e-mail address, personal data: shown only to the requester who typed it"
    )
    expect(page.get_by_role("button", name="Approve exactly this payload")).to_be_visible()
