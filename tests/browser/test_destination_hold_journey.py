"""An outage or a hold is visible where the operator looks first: the handoff list and the handoff's page
say that the destination takes no call, since when and until when (the times the database's clock wrote),
and neither offers "Run now" nor promises "sends it within seconds" while it could not."""

import pytest
from django.conf import settings
from playwright.sync_api import expect

from outbox.clock import db_now
from outbox.failures import DeliveryResult
from outbox.hold_lines import destination_holds_now
from outbox.models import DestinationHealth, FailureClass, HandoffState
from outbox.services.breaker import destination_record_results
from outbox.services.destination_windows import destination_pause_by_operator
from outbox.services.limits import destination_acquire, destination_release
from tests.factories import HandoffFactory, onboarding_world

pytestmark = [
    pytest.mark.browser,
    pytest.mark.django_db(databases=["default", "delivery"], transaction=True),
]


def _utc(at) -> str:
    return f"{at:%Y-%m-%d %H:%M:%S} UTC"


@pytest.fixture(autouse=True)
def probes_a_minute_apart(settings):
    """A paused destination's next probe a minute ahead: the page, rendered seconds later on a loaded
    machine, still shows it as a time to come (the default 2 s would read "probing now")."""
    settings.HANDOFF_BREAKER_PROBE_BASE = 60.0
    settings.HANDOFF_BREAKER_QUICK_PROBE_CAP = 60.0


def _waiting_after_a_failed_attempt():
    """Pending after a connection failure, its next attempt due now: the list said "retry 0 minutes" and
    offered "Run now"."""
    return HandoffFactory(
        number=60,
        attempts=1,
        failure_class=FailureClass.TRANSIENT,
        reason_code="connect_failed",
        next_attempt_at=db_now(),
    )


def _receiver_goes_down() -> DestinationHealth:
    failures = [
        DeliveryResult.failed(FailureClass.TRANSIENT, "connect_failed", "connection refused")
    ] * settings.HANDOFF_BREAKER_THRESHOLD
    destination_record_results(name="receiver", results=failures)
    return DestinationHealth.objects.get(name="receiver")


def _retry_after(seconds: float) -> DeliveryResult:
    return DeliveryResult.failed(
        FailureClass.TRANSIENT,
        "http_429",
        "too many requests",
        status_code=429,
        retry_after=seconds,
    )


def _receiver_answers_retry_after(*seconds: float) -> list[DestinationHealth]:
    """Calls in flight at once (their permits taken before any hold), each answered with a Retry-After in
    turn: the destination's row after each answer."""
    permits = [
        destination_acquire(name="receiver", worker=f"test-{n}", requests=1, lease_seconds=30)
        for n in range(len(seconds))
    ]
    seen = []
    for permit, wait in zip(permits, seconds, strict=True):
        permit.made([_retry_after(wait)])
        destination_release(permit=permit)
        seen.append(DestinationHealth.objects.with_retry_after().get(name="receiver"))
    return seen


def _words() -> str:
    """The receiver's one live hold in the destination page's words (`outbox/hold_lines.py`)."""
    [line] = destination_holds_now("receiver").live
    return line.words


def test_an_outage_shows_on_the_list_and_the_page_without_run_now(page, live_server, sign_in):
    onboarding_world()
    handoff = _waiting_after_a_failed_attempt()
    health = _receiver_goes_down()
    assert health.paused_at is not None and health.next_probe_at is not None
    words = _words()
    assert words.startswith("Breaker pause: ")
    assert f"until a probe succeeds (next probe {_utc(health.next_probe_at)})" in words
    sign_in("olga")

    page.goto(f"{live_server.url}/handoffs/?state=pending")
    row = page.locator(f"#handoff-{handoff.pk}")
    expect(row.locator(".hold")).to_have_text(words)
    expect(row).not_to_contain_text("retry 0 minutes")
    expect(row.get_by_role("button", name="Run now")).to_have_count(0)

    page.goto(f"{live_server.url}/handoffs/{handoff.pk}/")
    expect(page.locator("#destination-holds .hold")).to_have_text(words)
    expect(page.locator("#next-step")).to_contain_text("Waiting: destination receiver is held.")
    expect(page.locator("#next-step")).to_contain_text(words)
    expect(page.get_by_role("button", name="Run now")).to_have_count(0)


def test_a_retry_after_hold_says_since_and_until_when_and_promises_no_seconds(
    page, live_server, sign_in
):
    onboarding_world()
    queued = HandoffFactory(number=61)
    # A second call's answer extends the hold: the page says since when the destination has been held.
    first, health = _receiver_answers_retry_after(30, 54)
    assert health.hold_since == first.hold_since is not None
    assert health.hold_until > first.hold_until
    words = _words()
    assert words.startswith("Retry-After hold: HTTP 429 with Retry-After 54 s · ")
    assert f"since {_utc(health.hold_since)} · until {_utc(health.hold_until)}" in words
    sign_in("olga")

    page.goto(f"{live_server.url}/handoffs/{queued.pk}/")
    expect(page.locator("#destination-holds .hold")).to_have_text(words)
    expect(page.locator("#next-step")).to_contain_text(words)
    expect(page.locator("#next-step")).not_to_contain_text("within seconds")

    page.goto(f"{live_server.url}/handoffs/?state=pending")
    expect(page.locator(f"#handoff-{queued.pk} .hold")).to_have_text(words)


def test_an_operators_pause_shows_who_since_when_and_until_resumed(page, live_server, sign_in):
    world = onboarding_world()
    handoff = _waiting_after_a_failed_attempt()
    pause = destination_pause_by_operator(
        name="receiver", actor=world["olga"], reason="receiver upgrade"
    )
    words = _words()
    assert words == (
        f"Paused by an operator: receiver upgrade · since {_utc(pause.starts_at)} "
        "· until an operator resumes it · set by olga"
    )
    sign_in("olga")

    page.goto(f"{live_server.url}/handoffs/")
    row = page.locator(f"#handoff-{handoff.pk}")
    expect(row.locator(".hold")).to_have_text(words)
    expect(row.get_by_role("button", name="Run now")).to_have_count(0)
    page.goto(f"{live_server.url}/handoffs/{handoff.pk}/")
    expect(page.locator("#destination-holds .hold")).to_have_text(words)
    expect(page.locator("#next-step")).to_contain_text(words)
    expect(page.get_by_role("button", name="Run now")).to_have_count(0)
    assert handoff.state == HandoffState.PENDING
