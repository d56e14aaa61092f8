"""The requester is told only what is known, in a real Chromium: one line per request and per step, with who
confirmed what and when, what happens next and who owns it (issue 24, item 1); and a correction in the demo
finishes: the approver who corrected a request is told why she cannot approve it, and the demo's second
approver approves it (item 5). Each screen is checked with axe-core."""

import re

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command
from playwright.sync_api import expect

from approvals.models import Request, RequestState
from approvals.services import request_approve
from delivery.models import ReceiverTask
from delivery.services import task_status_set
from outbox.dispatch.dispatcher import drain
from outbox.models import Handoff
from outbox.services import instance_compensate
from reconciliation.services import reconciliation_run
from tests.factories import ONBOARDING_PAYLOAD, make_request, three_step_onboarding_world

pytestmark = [
    pytest.mark.browser,
    pytest.mark.django_db(databases=["default", "delivery"], transaction=True),
]
WITHOUT_EMAIL = {k: v for k, v in ONBOARDING_PAYLOAD.items() if k != "contact_email"}


@pytest.fixture(autouse=True)
def no_csp_violations(page):
    refused = []
    page.on(
        "console", lambda m: refused.append(m.text) if "Content Security Policy" in m.text else None
    )
    yield
    assert not refused, refused


def sign_out(page):
    page.get_by_role("button", name="Sign out").click()
    expect(page.locator("header .who")).to_have_count(0)


def approve(world, number: int, payload: dict) -> Request:
    request = make_request(world["w7"], number, world["bob"], payload=payload)
    request_approve(
        workspace_id=7,
        number=number,
        revision=1,
        actor=world["alice"],
        payload_hash=request.payload_hash,
    )
    return request


def three_outcomes(world) -> None:
    """Request 43: its last step refused, the workflow compensated. 44: the work of step 1 failed at the
    receiver. 45: step 2's task deleted at the receiver. Each found out as the product finds out."""
    approve(world, 43, WITHOUT_EMAIL)
    approve(world, 44, ONBOARDING_PAYLOAD)
    approve(world, 45, ONBOARDING_PAYLOAD)
    drain()
    instance_compensate(instance_key="onboarding:7:43:1", actor=world["olga"], reason="withdrawn")
    assert drain().delivered == 2
    task_status_set(action_key="onboarding:7:44:1:create_client", status="failed")
    ReceiverTask.objects.filter(action_key="onboarding:7:45:1:provision_account").delete()
    reconciliation_run()


def test_my_requests_tells_a_compensated_a_failed_and_a_deleted_request_as_they_are(
    page, live_server, sign_in, axe_check, screenshot, no_horizontal_scroll
):
    world = three_step_onboarding_world()
    three_outcomes(world)
    undo = Handoff.objects.get(action_key="onboarding:7:43:1:create_client:compensate")
    sign_in("bob")
    page.locator('nav[aria-label="Main"]').get_by_role("link", name="My requests").click()

    compensated = page.locator("#my-request-7-43")
    # The compensation's task is never the step's "yes", and nothing of a reversed workflow is "task open"
    # (what the screen said while it read the request's newest handoff: the compensation).
    expect(compensated).not_to_contain_text(undo.destination_id)
    expect(compensated).not_to_contain_text("task open")
    headline = compensated.locator('[data-line="request"]')
    expect(headline).to_contain_text("undone: its delivered steps were reversed (compensated)")
    steps = compensated.locator('[data-line="step"]')
    expect(steps).to_have_count(3)
    expect(steps.nth(0)).to_contain_text("Step 1 of 3: create_client: reversed: task")
    expect(steps.nth(0)).to_contain_text(f"its compensation, task {undo.destination_id[:8]}…")
    expect(steps.nth(2)).to_contain_text("cancelled before it was sent, by olga")
    expect(compensated.locator(".status-line.yes")).to_have_count(0)

    failed = page.locator("#my-request-7-44")
    expect(failed).to_contain_text("failed at the receiver")
    expect(failed.locator('[data-line="request"]')).to_contain_text(
        "stuck with an operator at step 1 of 3: create_client"
    )
    expect(failed.locator('[data-line="request"]')).to_contain_text("owner: olga (operator)")
    expect(failed.locator('[data-line="step"]').nth(0)).to_contain_text(
        "failed at the receiver: task"
    )
    expect(failed.locator(".status-line.yes")).to_have_count(0)

    deleted = page.locator("#my-request-7-45")
    expect(deleted.locator('[data-line="step"]').nth(1)).to_contain_text(
        "unknown: the receiver had a task"
    )
    expect(deleted.locator('[data-line="step"]').nth(1)).to_contain_text(
        "but has none for this key now (reconciliation run"
    )
    expect(deleted.locator(".status-line.yes")).to_have_count(0)
    axe_check("my requests with a compensated, a failed and a deleted request")
    screenshot("requester-status-lines")
    page.set_viewport_size({"width": 390, "height": 844})
    page.reload()
    expect(page.locator("#my-request-7-43 [data-line='request']")).to_contain_text("undone")
    axe_check("my requests at 390 px")
    no_horizontal_scroll("my requests at 390 px")
    page.set_viewport_size({"width": 1280, "height": 800})

    # The request's page says the same, line for line.
    compensated.get_by_role("link", name="onboarding request 43").click()
    expect(page).to_have_url(re.compile("/approvals/7/43/1/$"))
    where = page.locator("#request-status")
    expect(where.locator('[data-line="request"]')).to_contain_text("undone")
    expect(where.locator('[data-line="step"]')).to_have_count(3)
    expect(where.locator(".status-line.yes")).to_have_count(0)
    axe_check("request page of a compensated request")


def test_a_request_corrected_in_the_demo_is_approved_by_the_second_approver(
    page, live_server, sign_in, axe_check, screenshot
):
    from io import StringIO

    call_command("demo", password="a-demo-password-long", stdout=StringIO())
    for user in get_user_model().objects.all():
        user.set_password(f"pw-{user.username}")
        user.save()
    sign_in("alice")
    page.locator('nav[aria-label="Main"]').get_by_role("link", name="Approvals").click()
    page.get_by_role("link", name="onboarding request 42").click()

    # The correction's fields are labelled and typed as on the request form: the plan is a choice.
    page.locator("#approver-correct summary").click()
    correct = page.locator("#approver-correct")
    expect(correct.get_by_label("Client name")).to_have_value("Northwind Traders")
    correct.get_by_label("Plan").select_option("enterprise")
    correct.get_by_label("Why (required)").fill("the contract says enterprise")
    axe_check("correction form")
    correct.get_by_role("button", name="Send back corrected").click()
    expect(page).to_have_url(re.compile("/approvals/7/42/2/$"))

    # No Approve button that would refuse: the page says why, and who decides instead.
    expect(page.get_by_role("button", name="Approve exactly this payload")).to_have_count(0)
    expect(page.locator("#decide-refused")).to_contain_text(
        "You corrected it; another approver must approve it."
    )
    expect(page.locator("#decide-refused")).to_contain_text("dana")
    axe_check("corrected request, as its corrector")
    screenshot("corrected-request-as-its-corrector")
    page.locator('nav[aria-label="Main"]').get_by_role("link", name="Approvals").click()
    expect(page.locator("#request-7-42-2")).to_contain_text(
        "You corrected it; another approver must approve it."
    )
    sign_out(page)

    sign_in("bob")
    page.locator('nav[aria-label="Main"]').get_by_role("link", name="My requests").click()
    line = page.locator("#my-request-7-42 [data-line='request']")
    expect(line).to_contain_text("Corrected by alice (an approver) at")
    expect(line).to_contain_text("owner: the approvers who may decide it: dana")
    sign_out(page)

    sign_in("dana")
    page.goto(f"{live_server.url}/approvals/7/42/2/")
    page.get_by_role("button", name="Approve exactly this payload").click()
    expect(page.locator("#request-state")).to_have_text("Approved")
    assert Request.objects.get(workspace_id=7, number=42, revision=2).state == (
        RequestState.APPROVED
    )
    sign_out(page)
    sign_in("bob")
    page.locator('nav[aria-label="Main"]').get_by_role("link", name="My requests").click()
    expect(page.locator("#my-request-7-42 [data-line='request']")).to_contain_text(
        "Approved by dana at"
    )
    axe_check("my requests after the second approver approved")
