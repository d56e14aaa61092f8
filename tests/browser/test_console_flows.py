"""The three console scenarios in a real Chromium: approve and watch delivery, reconcile an uncertain
handoff, correct a rejected one into a new revision awaiting approval."""

import pytest
from playwright.sync_api import expect

from approvals.services import request_approve
from delivery.models import ReceiverTask
from outbox.destinations import InProcessDestination
from outbox.dispatch.dispatcher import drain, handoff_deliver
from outbox.models import FailureClass, Handoff, HandoffState
from tests.factories import ONBOARDING_PAYLOAD, make_request, onboarding_world

pytestmark = [
    pytest.mark.browser,
    pytest.mark.django_db(databases=["default", "delivery"], transaction=True),
]


def test_approver_approves_request_42_and_sees_it_delivered_with_its_destination_id(
    page, live_server, sign_in, screenshot
):
    world = onboarding_world()
    sign_in("alice")
    page.get_by_role("link", name="Approvals").click()
    page.get_by_role("link", name="onboarding request 42").click()
    expect(page.locator("#payload-hash")).to_have_text(world["request"].payload_hash)

    page.get_by_role("button", name="Approve exactly this payload").click()
    expect(page.get_by_role("status")).to_contain_text(
        "Approved. Handoff onboarding:7:42:1 is recorded"
    )
    expect(page.locator("#request-state")).to_have_text("Approved")

    # The dispatcher's work, done here while the browser waits on a page that does not poll: one
    # drain of the outbox, exactly as a worker of the django-q2 cluster runs it.
    stats = drain()
    assert stats.delivered == 1
    handoff = Handoff.objects.get(action_key="onboarding:7:42:1")

    page.get_by_role("link", name="Open the handoff").click()
    expect(page.locator("#handoff-state")).to_have_text("Delivered")
    expect(page.locator("#destination-id")).to_have_text(handoff.destination_id)
    assert handoff.destination_id == str(
        ReceiverTask.objects.get(action_key=handoff.action_key).task_id
    )
    screenshot("approver-sees-request-42-delivered")


def test_operator_reconciles_an_uncertain_handoff_and_sees_it_delivered(
    page, live_server, sign_in, screenshot
):
    world = onboarding_world()
    handoff = request_approve(
        workspace_id=7,
        number=42,
        revision=1,
        actor=world["alice"],
        payload_hash=world["request"].payload_hash,
    )
    handoff_deliver(
        handoff_id=handoff.pk, destination=InProcessDestination(lose_ack_for={handoff.action_key})
    )
    assert Handoff.objects.get(pk=handoff.pk).state == HandoffState.UNCERTAIN

    sign_in("olga")
    page.get_by_role("link", name="Handoffs", exact=True).click()
    page.get_by_label("State").select_option("uncertain")
    row = page.locator(f"#handoff-{handoff.pk}")
    expect(row).to_contain_text("Uncertain")
    row.get_by_role("link", name="onboarding:7:42:1").click()
    expect(page.locator("#next-step")).to_contain_text("Outcome unknown: reconcile first.")

    page.locator("#handoff-actions").get_by_role("button", name="Reconcile").click()
    expect(page.locator("#handoff-state")).to_have_text("Delivered")
    task = ReceiverTask.objects.get(action_key=handoff.action_key)
    expect(page.locator("#destination-id")).to_have_text(str(task.task_id))
    expect(page.get_by_role("status")).to_contain_text(f"receiver has task {task.task_id}")
    assert ReceiverTask.objects.count() == 1
    screenshot("operator-reconciled-uncertain-handoff")


def test_operator_corrects_a_rejected_handoff_and_the_new_revision_awaits_approval(
    page, live_server, sign_in, screenshot
):
    world = onboarding_world()
    # The source rules accept a blank-looking client name; the receiver rejects it: permanent failure.
    request = make_request(
        world["w7"], 50, world["bob"], payload={**ONBOARDING_PAYLOAD, "client_name": "   "}
    )
    handoff = request_approve(
        workspace_id=7,
        number=50,
        revision=1,
        actor=world["alice"],
        payload_hash=request.payload_hash,
    )
    handoff_deliver(handoff_id=handoff.pk)
    handoff.refresh_from_db()
    assert (handoff.state, handoff.failure_class) == (
        HandoffState.NEEDS_ATTENTION,
        FailureClass.PERMANENT,
    )

    sign_in("olga")
    page.goto(f"{live_server.url}/handoffs/{handoff.pk}/")
    expect(page.locator("#next-step")).to_contain_text(
        "The receiver rejected the content: correct it."
    )
    correct = page.locator("#correct")
    correct.get_by_label("Client name").fill("Fabrikam Ltd")
    correct.get_by_label("Why (required)").fill("client name was blank")
    correct.get_by_role("button", name="Create corrected revision").click()
    expect(page.get_by_role("status")).to_contain_text(
        "request 50 revision 2 awaits a new approval"
    )
    expect(page.locator("#handoff-state")).to_have_text("Superseded")

    page.get_by_role("button", name="Sign out").click()
    sign_in("alice")
    page.get_by_role("link", name="Approvals").click()
    row = page.locator("#request-7-50-2")
    expect(row).to_contain_text("revision 2")
    row.get_by_role("link").click()
    expect(page.locator("#request-detail")).to_contain_text("Fabrikam Ltd")
    page.get_by_role("link", name="← Approvals queue").click()
    expect(page.locator("#request-7-50-2")).to_be_visible()
    screenshot("corrected-revision-in-approvals-queue")
