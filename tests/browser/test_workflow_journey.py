"""A three-step workflow in a real Chromium: approved in the browser, its steps delivered and their work
reported done until the instance is complete; and a failed last step compensated from the console, the
plan shown before the operator confirms. Each new screen is checked with axe-core."""

import re

import pytest
from playwright.sync_api import expect

from approvals.management.commands.demo import ONBOARDING_STEPS
from approvals.services import request_approve
from delivery.models import ReceiverTask
from delivery.services import task_status_set
from outbox.dispatch.dispatcher import drain
from outbox.models import Handoff, HandoffKind, HandoffState
from outbox.selectors import instance_handoffs, instance_status
from reconciliation.services import reconciliation_run
from tests.factories import ONBOARDING_PAYLOAD, make_request, three_step_onboarding_world

pytestmark = [
    pytest.mark.browser,
    pytest.mark.django_db(databases=["default", "delivery"], transaction=True),
]
STEP_NAMES = [step["name"] for step in ONBOARDING_STEPS]


@pytest.fixture(autouse=True)
def no_csp_violations(page):
    refused = []
    page.on(
        "console", lambda m: refused.append(m.text) if "Content Security Policy" in m.text else None
    )
    yield
    assert not refused, refused


@pytest.fixture
def world():
    world = three_step_onboarding_world()
    return world


def step_rows(page):
    return page.locator("#workflow-instance table.steps tbody tr")


def expect_step(
    page, index: int, *, step: str, state: str, work: str = "", compensation: str = ""
) -> None:
    cells = step_rows(page).nth(index).locator("td")
    expect(cells.nth(0)).to_contain_text(step)
    expect(cells.nth(2)).to_have_text(state)
    if work:
        expect(cells.nth(5)).to_have_text(work)
    if compensation:
        expect(cells.nth(6)).to_have_text(compensation)


def sign_out(page):
    page.get_by_role("button", name="Sign out").click()
    expect(page.locator("header .who")).to_have_count(0)


def test_approved_in_the_browser_three_steps_delivered_then_work_done_makes_the_workflow_complete(
    page, live_server, sign_in, axe_check, world
):
    instance = "onboarding:7:43:1"
    request = make_request(world["w7"], 43, world["bob"], payload=dict(ONBOARDING_PAYLOAD))
    sign_in("alice")
    page.goto(f"{live_server.url}/approvals/7/43/1/")
    page.get_by_role("button", name="Approve exactly this payload").click()
    expect(page.locator("#request-state")).to_have_text("Approved")
    assert list(Handoff.objects.values_list("action_key", flat=True)) == [
        f"{instance}:create_client"
    ], "only the first step is recorded with the approval"
    first = Handoff.objects.get()
    assert first.source_id == request.pk

    # The dispatcher delivers step after step, as the django-q2 cluster would.
    assert drain().delivered == 3
    sign_out(page)
    sign_in("olga")
    page.goto(f"{live_server.url}/handoffs/{first.pk}/")
    heading = page.locator("#workflow-instance h2")
    expect(heading).to_have_text(f"Workflow {instance}: delivered, work not done yet")
    expect(step_rows(page)).to_have_count(3)
    for index, name in enumerate(STEP_NAMES):
        expect_step(page, index, step=name, state="Delivered", work="open")
        expect(step_rows(page).nth(index).locator("td").nth(1)).to_have_text(f"{instance}:{name}")
    axe_check("handoff detail with its workflow's steps")

    # The people doing the tasks finish the first two; a reconciliation run reads the statuses back.
    for name in STEP_NAMES[:2]:
        task_status_set(action_key=f"{instance}:{name}", status="done")
    assert reconciliation_run().work_statuses_recorded == 2
    page.reload()
    expect_step(page, 0, step="create_client", state="Delivered", work="done")
    expect_step(page, 1, step="provision_account", state="Delivered", work="done")
    expect_step(page, 2, step="send_welcome_pack", state="Delivered", work="open")
    expect(heading).to_have_text(f"Workflow {instance}: delivered, work not done yet")

    # The last one is reported done; "Reconcile now" on its page reads it back and the instance is complete.
    task_status_set(action_key=f"{instance}:send_welcome_pack", status="done")
    step_rows(page).nth(2).get_by_role("link").click()
    expect(page).to_have_url(re.compile(r"/handoffs/\d+/$"))
    expect(page.locator("h1 code")).to_have_text(f"{instance}:send_welcome_pack")
    page.locator("#handoff-actions").get_by_role("button", name="Reconcile now").click()
    expect(page.get_by_role("status")).to_contain_text("Reconciled now")
    expect(page.locator("#handoff-outcome")).to_contain_text("work done: yes")
    expect(heading).to_have_text(f"Workflow {instance}: complete")
    for index, name in enumerate(STEP_NAMES):
        expect_step(page, index, step=name, state="Delivered", work="done")
    axe_check("handoff detail of a complete workflow")
    assert instance_status(instance_handoffs(instance)) == "complete"


def test_failed_last_step_compensated_from_its_page_after_the_plan_is_shown(
    page, live_server, sign_in, axe_check, world
):
    instance = "onboarding:7:43:1"
    # No contact e-mail: the receiver refuses the welcome pack, so step 3 fails for good.
    payload = {key: value for key, value in ONBOARDING_PAYLOAD.items() if key != "contact_email"}
    request = make_request(world["w7"], 43, world["bob"], payload=payload)
    request_approve(
        workspace_id=7,
        number=43,
        revision=1,
        actor=world["alice"],
        payload_hash=request.payload_hash,
    )
    drain()
    failed = Handoff.objects.get(action_key=f"{instance}:send_welcome_pack")
    assert failed.state == HandoffState.NEEDS_ATTENTION

    sign_in("olga")
    page.goto(f"{live_server.url}/handoffs/?state=needs_attention")
    page.locator(f"#handoff-{failed.pk}").get_by_role("link", name=failed.action_key).click()
    expect(page.locator("#handoff-state")).to_have_text("Needs attention")
    heading = page.locator("#workflow-instance h2")
    expect(heading).to_have_text(f"Workflow {instance}: needs a person")
    expect_step(page, 0, step="create_client", state="Delivered")
    expect_step(page, 1, step="provision_account", state="Delivered")
    expect_step(page, 2, step="send_welcome_pack", state="Needs attention")
    axe_check("failed step with its workflow")

    # The plan is on screen before anything is recorded: latest delivered step first, the failed one cancelled.
    compensate = page.locator("#compensate")
    # A later step refused for good: compensating is the recommended action, so its section is open.
    expect(compensate).to_have_attribute("open", "")
    expect(page.locator("#correct")).to_have_count(0)
    expect(compensate).to_contain_text(
        "Reversed, in this order: provision_account, then create_client."
    )
    expect(compensate).to_contain_text("Not sent yet, so cancelled: send_welcome_pack.")
    axe_check("compensation plan")
    # A reason is required: without one the browser sends nothing.
    compensate.get_by_role("button", name="Compensate").click()
    expect(compensate.get_by_label("Why (required)")).to_have_js_property(
        "validity.valueMissing", True
    )
    assert not Handoff.objects.filter(kind=HandoffKind.COMPENSATION).exists()

    compensate.get_by_label("Why (required)").fill("client withdrew before the welcome pack")
    compensate.get_by_role("button", name="Compensate").click()
    expect(page.get_by_role("status")).to_contain_text(
        f"Compensating {instance}: reversing provision_account, create_client, latest first."
    )
    expect(heading).to_have_text(f"Workflow {instance}: compensating")
    expect(page.locator("#handoff-state")).to_have_text("Cancelled")
    expect(page.locator("#compensate")).to_have_count(0)
    axe_check("workflow being compensated")

    # The dispatcher delivers the compensations, one after the other.
    assert drain().delivered == 2
    page.reload()
    expect(heading).to_have_text(f"Workflow {instance}: compensated")
    expect(step_rows(page)).to_have_count(5)
    expect_step(page, 0, step="create_client", state="Delivered", compensation="Compensated")
    expect_step(page, 1, step="provision_account", state="Delivered", compensation="Compensated")
    expect_step(page, 2, step="send_welcome_pack", state="Cancelled")
    expect_step(page, 3, step="provision_account (compensation)", state="Delivered")
    expect_step(page, 4, step="create_client (compensation)", state="Delivered")
    expect(step_rows(page).nth(3).locator("td").nth(1)).to_have_text(
        f"{instance}:provision_account:compensate"
    )
    expect(step_rows(page).nth(4).locator("td").nth(1)).to_have_text(
        f"{instance}:create_client:compensate"
    )
    axe_check("compensated workflow")
    assert instance_status(instance_handoffs(instance)) == "compensated"
    assert sorted(ReceiverTask.objects.values_list("action_key", flat=True)) == sorted(
        [
            f"{instance}:create_client",
            f"{instance}:provision_account",
            f"{instance}:provision_account:compensate",
            f"{instance}:create_client:compensate",
        ]
    )
