"""The last stop's leftovers, in Chromium, each screen checked by axe at 1280 and 390 px:

- olga filters the handoff list, reads what "Preview a replay of these handoffs" will do (ask the receiver about
  each key first, nothing sent until the run is confirmed), clicks it and lands on the replay's page, whose
  preview holds exactly the filtered handoffs;
- bob follows the mode badge of his request's page to the workflow's observation, which says the mode and
  leads to the rule version's agreement page;
- olga reads on Health since when the receiver has been held by a Retry-After, how long ago, and until when."""

import re

import pytest
from django.db.models.functions import Now
from playwright.sync_api import expect

from incidents.models import Replay, ReplayItem
from outbox.clock import db_now_plus
from outbox.failures import DeliveryResult
from outbox.models import DestinationHealth, FailureClass, Handoff, HandoffState
from outbox.services.limits import destination_acquire, destination_release
from tests.approvals.observation_world import observed_world
from tests.builders import record
from tests.factories import onboarding_world, retry_after_rows

pytestmark = [
    pytest.mark.browser,
    pytest.mark.django_db(databases=["default", "delivery"], transaction=True),
]

WIDTHS = (1280, 390)


def _axe_at_both_widths(page, axe_check, no_horizontal_scroll, screen: str) -> None:
    for width in WIDTHS:
        page.set_viewport_size({"width": width, "height": 844})
        axe_check(f"{screen} at {width} px")
        no_horizontal_scroll(f"{screen} at {width} px")
    page.set_viewport_size({"width": 1280, "height": 800})


def test_olga_previews_a_replay_of_the_filtered_list(
    page, live_server, sign_in, axe_check, no_horizontal_scroll
):
    onboarding_world()
    handoffs = [record(n) for n in range(70, 75)]
    failed = handoffs[:3]
    Handoff.objects.filter(pk__in=[h.pk for h in failed]).update(
        state=HandoffState.NEEDS_ATTENTION,
        failure_class="transient",
        reason_code="retries_exhausted",
        attention_since=Now(),
    )
    sign_in("olga")

    page.goto(f"{live_server.url}/handoffs/?state=needs_attention")
    expect(page.locator("#handoff-results tbody tr")).to_have_count(3)
    explained = page.locator("#replay-from-filter-explained")
    expect(explained).to_contain_text("asks the receiver about each key first")
    expect(explained).to_contain_text("Nothing is sent until you confirm the run")
    _axe_at_both_widths(page, axe_check, no_horizontal_scroll, "handoff list with the replay form")

    page.get_by_role("button", name="Preview a replay of these handoffs").click()
    expect(page).to_have_url(re.compile(r"/incidents/replays/\d+/$"))
    replay = Replay.objects.get()
    assert page.url.endswith(f"/incidents/replays/{replay.pk}/")
    items = set(ReplayItem.objects.filter(replay=replay).values_list("handoff_id", flat=True))
    assert items == {h.pk for h in failed}, "exactly the filtered handoffs"
    assert Handoff.objects.filter(pk__in=items, state=HandoffState.NEEDS_ATTENTION).count() == 3, (
        "a preview sends nothing"
    )


def test_bob_follows_the_mode_badge_to_the_workflows_observation(
    page, live_server, sign_in, axe_check, no_horizontal_scroll
):
    observed_world()
    sign_in("bob")

    page.goto(f"{live_server.url}/approvals/7/42/1/")
    page.locator("h1").get_by_role("link", name="mode: observe").click()
    expect(page.locator("h1")).to_have_text("Observation of onboarding in workspace #7")
    expect(page.locator("#observation-workflow-mode")).to_contain_text(
        "Workflow onboarding is in mode observe: approved handoffs are recorded, not sent."
    )
    expect(page.locator("#observed-7-onboarding-v1")).to_contain_text("observe")
    expect(page.locator("[id^=observed-8-]")).to_have_count(0)
    _axe_at_both_widths(page, axe_check, no_horizontal_scroll, "a workflow's observation")

    page.get_by_role("link", name="onboarding-v1").click()
    expect(page).to_have_url(re.compile(r"/observation/7/versions/onboarding-v1/$"))


def _utc(at) -> str:
    return f"{at:%Y-%m-%d %H:%M:%S} UTC"


def test_health_says_since_when_the_receiver_is_held_and_until_when(
    page, live_server, sign_in, axe_check, no_horizontal_scroll
):
    onboarding_world()
    permit = destination_acquire(name="receiver", worker="test", requests=1, lease_seconds=30)
    too_many = DeliveryResult.failed(
        FailureClass.TRANSIENT, "http_429", "too many requests", status_code=429, retry_after=900
    )
    permit.made([too_many])
    destination_release(permit=permit)
    retry_after_rows("receiver").update(starts_at=db_now_plus(-600))
    health = DestinationHealth.objects.with_retry_after().get(name="receiver")
    sign_in("olga")

    page.goto(f"{live_server.url}/health/")
    since, until = (re.escape(_utc(at)) for at in (health.hold_since, health.hold_until))
    expect(page.locator("#destination-receiver-hold")).to_have_text(
        re.compile(rf"held since {since} \(10\s+minutes ago\), until {until} ")
    )
    _axe_at_both_widths(page, axe_check, no_horizontal_scroll, "Health with a Retry-After hold")
