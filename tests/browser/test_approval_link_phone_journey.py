"""The approver on a 390 px phone, in a real Chromium: the reminder e-mail's link → sign-in → the approval
page (opening decided nothing) → the decision; and the same kind of link refused, with the reason, once the
request changed before it was opened."""

import re
from datetime import timedelta

import pytest
from django.contrib.auth.models import Group
from playwright.sync_api import expect

from approvals.models import Approval, Request
from approvals.rules import rules_for
from approvals.services import request_revise
from approvals.services.approval_deadlines import approval_deadlines_sweep
from approvals.services.workflow_files import workflows_apply
from outbox.clock import db_time
from tests.approvals.notices import recorded_mail
from tests.browser.conftest import give_second_factor
from tests.factories import onboarding_world

pytestmark = [
    pytest.mark.browser,
    pytest.mark.django_db(databases=["default", "delivery"], transaction=True),
]


def _reminded_world():
    """Workspace 7's request 42 is 17 hours old under a 24 h deadline reminding 8 h before: alice's reminder."""
    world = onboarding_world()
    world["alice"].email = "alice@example.test"
    world["alice"].save()
    Group.objects.create(name="onboarding-leads")
    rules = rules_for("onboarding")
    entry = {
        "name": "onboarding",
        "schema": rules.schema,
        "steps": list(rules.steps),
        "approval": {
            "due_after_hours": 24,
            "remind_before_hours": 8,
            "expire_after_hours": 72,
            "escalate_to": "onboarding-leads",
        },
    }
    workflows_apply(document={"workflows": [entry]}, actor=None)
    Request.objects.filter(pk=world["request"].pk).update(
        created_at=db_time() - timedelta(hours=17)
    )
    approval_deadlines_sweep()
    (reminder,) = [m for m in recorded_mail() if m.to == ["alice@example.test"]]
    world["link"] = re.search(r"http://[^/]+(/approvals/link/[^/\s]+/)", reminder.body).group(1)
    return world


def _open_signed_in(page, url: str, username: str) -> None:
    """Open the link: the sign-in page comes first, then (and after any second factor) the link itself."""
    page.goto(url)
    expect(page).to_have_url(re.compile(r"/accounts/login/"))
    page.get_by_label("User name").fill(username)
    page.get_by_label("Password").fill(f"pw-{username}")
    page.get_by_role("button", name="Sign in").click()
    give_second_factor(page)
    if "/approvals/link/" not in page.url and "/approvals/7/" not in page.url:
        page.goto(url)


def test_the_reminders_link_leads_the_approver_on_a_phone_to_the_page_and_the_decision(
    page, live_server, no_horizontal_scroll
):
    world = _reminded_world()
    page.set_viewport_size({"width": 390, "height": 844})
    _open_signed_in(page, f"{live_server.url}{world['link']}", "alice")
    expect(page).to_have_url(re.compile(r"/approvals/7/42/1/$"))
    expect(page.get_by_role("heading", level=1)).to_contain_text("request 42, revision 1")
    no_horizontal_scroll("the approval page from the link")
    assert not Approval.objects.exists(), "opening the link decided nothing"
    page.get_by_role("button", name="Approve exactly this payload").click()
    expect(page.get_by_role("status")).to_contain_text("Approved.")
    assert Approval.objects.get(request=world["request"]).decided_by == world["alice"]
    page.goto(f"{live_server.url}{world['link']}")
    expect(page.get_by_role("status")).to_contain_text("already approved")


def test_the_same_link_is_refused_on_a_phone_once_the_request_changed(
    page, live_server, no_horizontal_scroll
):
    world = _reminded_world()
    request_revise(
        workspace_id=7,
        number=42,
        payload=dict(world["request"].payload, plan="enterprise"),
        actor=world["bob"],
        reason="bigger plan",
    )
    page.set_viewport_size({"width": 390, "height": 844})
    _open_signed_in(page, f"{live_server.url}{world['link']}", "alice")
    expect(page.get_by_role("status")).to_contain_text(
        "changed since this link was sent: revision 2"
    )
    expect(page.get_by_text("Nothing was decided.")).to_be_visible()
    no_horizontal_scroll("the refused link")
    assert not Approval.objects.exists()
