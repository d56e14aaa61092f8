"""Observation mode that compares, in Chromium, on the demo's data (issue 24, item 9): dana, the owner of
workspace 7's observed offboarding, records what the current process did with a case, reads the agreement
with the product's plan, explains the disagreements and switches the workflow to live; olga, who does not
own it, is told why she may not. axe finds no serious or critical violation on these pages at 1280 and
390 px."""

import re
from io import StringIO

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command
from playwright.sync_api import expect

from approvals.models import Mode, WorkflowMode, WorkflowModeChange

pytestmark = [
    pytest.mark.browser,
    pytest.mark.django_db(databases=["default", "delivery"], transaction=True),
]

WIDTHS = (1280, 390)


def _demo():
    call_command("demo", password="a-demo-password-long", stdout=StringIO())
    for user in get_user_model().objects.all():
        user.set_password(f"pw-{user.username}")
        user.save()


def _axe_at_both_widths(page, axe_check, screen: str) -> None:
    for width in WIDTHS:
        page.set_viewport_size({"width": width, "height": 844})
        axe_check(f"{screen} at {width} px")
    page.set_viewport_size({"width": 1280, "height": 800})


def test_a_non_owner_sees_the_results_and_why_she_may_not_switch(page, live_server, sign_in):
    _demo()
    sign_in("olga")
    page.goto(f"{live_server.url}/observation/workflows/offboarding/go-live")
    expect(page.locator("#go-live-refusal")).to_contain_text(
        "only offboarding's owner, dana, confirms that it goes live"
    )
    expect(page.locator("#go-live-form")).to_have_count(0)
    expect(page.locator("#go-live-disagree")).to_have_text("1")


def _record_one_case(page, axe_check):
    page.locator('nav[aria-label="Main"]').get_by_role("link", name="Observation").click()
    _axe_at_both_widths(page, axe_check, "observation index")
    page.get_by_role("link", name="offboarding-v1").click()
    expect(page.locator("#count-observed")).to_have_text("5")
    expect(page.locator("#count-agree")).to_have_text("2")
    expect(page.locator("#pilot-brief")).to_contain_text("dana")
    _axe_at_both_widths(page, axe_check, "agreement page")
    page.locator("#unrecorded").get_by_role("link").first.click()
    expect(page.locator("#planned")).to_contain_text("close_account: a task at")
    _axe_at_both_widths(page, axe_check, "record form")
    page.get_by_label("No").check()
    page.get_by_label("What the current process did").fill("Client kept the account after a call.")
    page.get_by_label("Its reference (ticket, task id)").fill("OPS-1050")
    page.get_by_role("button", name="Record").click()
    expect(page.locator(".messages")).to_contain_text("disagrees with the plan")
    expect(page.locator("#count-disagree")).to_contain_text("2 (2 not explained by the owner)")
    expect(page.locator("table.disagreements")).to_contain_text(
        "Client kept the account after a call."
    )


def test_the_owner_records_an_outcome_explains_the_disagreements_and_switches_to_live(
    page, live_server, sign_in, axe_check
):
    _demo()
    sign_in("dana")
    _record_one_case(page, axe_check)
    for _ in range(2):
        page.locator("table.disagreements textarea").first.fill(
            "Closed by phone; the live flow asks first."
        )
        page.locator("table.disagreements").get_by_role(
            "button", name="Save explanation"
        ).first.click()
        expect(page.locator(".messages")).to_contain_text("Explained")
    expect(page.locator("#count-disagree")).to_contain_text("(0 not explained by the owner)")

    page.get_by_role("link", name="Switch offboarding to live…").click()
    expect(page.locator("#go-live-agree")).to_have_text("2")
    expect(page.locator("#go-live-unexplained")).to_have_text("0")
    _axe_at_both_widths(page, axe_check, "go-live page")
    page.get_by_label(re.compile("Type the workflow's name")).fill("offboarding")
    page.get_by_role("button", name="I own offboarding: switch it to live").click()
    expect(page.locator(".messages")).to_contain_text("offboarding is live")
    assert WorkflowMode.objects.get(workflow="offboarding").mode == Mode.LIVE
    change = WorkflowModeChange.objects.get(workflow="offboarding")
    assert (change.changed_by.username, change.from_mode, change.to_mode) == (
        "dana",
        "observe",
        "live",
    )
