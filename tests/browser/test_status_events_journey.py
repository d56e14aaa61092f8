"""The receiver tells the source when a task's work changes: in a real Chromium, the requester sees the
work done after the receiver's change, with no reconciliation run in between, and the operator's handoff
page says who confirmed it and when; a task deleted at the receiver stops being shown as existing. How soon
is measured by bench/status_events_bench.py; here the deadlines are a loaded machine's (the suite passes at
a load of 10, where a reload of the page alone can take seconds)."""

import time

import pytest
from playwright.sync_api import expect

from delivery.services import task_delete, task_status_set
from delivery.status_events import sender_idle
from outbox.dispatch.dispatcher import drain
from outbox.models import Handoff
from reconciliation.models import Finding, ReconciliationRun
from tests.builders import approve
from tests.factories import onboarding_world

pytestmark = [
    pytest.mark.browser,
    pytest.mark.django_db(databases=["default", "delivery"], transaction=True),
]
EVENTS_PATH = "/reconciliation/api/destinations/receiver/status-events"
SECONDS = 120


def poll_until_shown(page, locator, text: str, *, since: float) -> None:
    """Reload until `locator` contains `text`, at most SECONDS from `since`. No sleep: the condition is read
    on each fresh page until the deadline."""
    while True:
        page.reload()
        if text in locator.inner_text():
            return
        assert time.monotonic() - since < SECONDS, f"not shown within {SECONDS} s: {text!r}"


@pytest.fixture
def delivered(live_server, settings):
    settings.RECEIVER_STATUS_EVENTS_URL = f"{live_server.url}{EVENTS_PATH}"
    world = onboarding_world()
    approve(world)
    assert drain().delivered == 1
    yield Handoff.objects.get(action_key="onboarding:7:42:1")
    # The sender's thread ends (and closes its connections) before the databases are torn down.
    assert sender_idle(timeout=SECONDS)


def test_the_receivers_work_done_reaches_the_requester_without_a_reconciliation_run(
    page, live_server, sign_in, delivered
):
    sign_in("bob")
    page.goto(f"{live_server.url}/approvals/mine/")
    row = page.locator("#my-request-7-42")
    expect(row.locator('[data-line="step"]')).to_contain_text("the receiver reports it open")
    runs = ReconciliationRun.objects.count()

    changed = time.monotonic()
    task_status_set(action_key=delivered.action_key, status="done")
    poll_until_shown(
        page,
        row.locator('[data-line="request"]'),
        "done: the work of every step is done",
        since=changed,
    )
    expect(row.locator('[data-line="step"]')).to_contain_text("the receiver reports the work done")
    assert ReconciliationRun.objects.count() == runs  # told by the receiver, not found by a run


def test_the_handoff_page_says_who_confirmed_the_work_and_stops_saying_a_deleted_task_exists(
    page, live_server, sign_in, delivered
):
    sign_in("olga")
    page.goto(f"{live_server.url}/handoffs/{delivered.pk}/")
    expect(page.locator("#next-step")).to_contain_text("Delivered. Nothing to do here.")
    expect(page.locator("#evidence-task")).to_contain_text("yes: task")

    # The page polls its evidence by itself: no reload.
    task_status_set(action_key=delivered.action_key, status="done")
    expect(page.locator("#evidence-work")).to_contain_text("done, at", timeout=SECONDS * 1000)
    expect(page.locator("#evidence-task")).to_contain_text("status event from receiver")

    task_delete(action_key=delivered.action_key)
    expect(page.locator("#evidence-task")).to_contain_text(
        "no: the receiver has no task", timeout=SECONDS * 1000
    )
    # The finding is opened by the same call, just after the event is recorded.
    changed = time.monotonic()
    poll_until_shown(page, page.locator("main"), "Missing at the receiver", since=changed)
    expect(page.locator("#next-step")).not_to_contain_text("Nothing to do here")
    expect(page.locator("#handoff-findings")).to_contain_text("Missing at the receiver")
    assert Finding.objects.live().filter(action_key=delivered.action_key).count() == 1
