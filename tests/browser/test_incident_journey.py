"""olga's incident, in Chromium: she opens the incident from the page's own link, reads what happened and
the safest next action, acknowledges it (the escalation stops: no further page), and, once the failed
handoffs are settled, sees the incident resolved by itself. And the replay: from the page's link she
previews a replay of the members (already there / missing), runs it, and sees the incident resolve."""

import pytest
from django.db.models.functions import Now
from playwright.sync_api import expect

from delivery.models import ReceiverTask
from incidents.channels.delivery import notifications_deliver_now
from incidents.models import AlertChannel, ChannelKind, EscalationPolicy, Incident, Replay
from incidents.services.incidents import incidents_sync
from incidents.services.notifications import incidents_escalate
from incidents.services.replay_preview import replay_preview_run
from incidents.services.replay_run import replay_run
from outbox.destinations import InProcessDestination
from outbox.dispatch.dispatcher import handoff_deliver
from outbox.models import Handoff, HandoffState
from outbox.services import handoff_cancel
from tests.builders import record
from tests.factories import onboarding_world
from tests.incidents.alert_receiver import AlertReceiver
from tests.incidents.engine import alerts_send_due
from tests.incidents.test_incidents import REJECTED, SECRET

pytestmark = [
    pytest.mark.browser,
    pytest.mark.django_db(databases=["default", "delivery"], transaction=True),
]


def test_olga_opens_the_incident_from_its_page_acknowledges_it_and_sees_it_resolve(
    page, live_server, sign_in, settings, monkeypatch, axe_check
):
    settings.CONSOLE_BASE_URL = live_server.url
    settings.ALERT_EMAILS = []
    monkeypatch.setenv("INCIDENT_WEBHOOK_SECRET", SECRET)
    world = onboarding_world()
    handoffs = []
    for n in range(500, 520):
        handoff = record(n, payload=REJECTED)
        handoff_deliver(handoff_id=handoff.pk, destination=InProcessDestination())
        handoffs.append(handoff)
    EscalationPolicy.objects.create(workspace_id=None, ack_timeout_seconds=0, max_pages=5)
    with AlertReceiver() as receiver:
        AlertChannel.objects.create(
            name="on-call",
            kind=ChannelKind.WEBHOOK,
            target=receiver.url,
            secret_env="INCIDENT_WEBHOOK_SECRET",
        )
        # The first page only (with no delay allowed, the sweep's escalation pass would page again at once).
        incidents_sync()
        notifications_deliver_now()
        [sent] = receiver.documents()
        sign_in("olga")
        page.goto(sent["incident"]["link"])
        incident = Incident.objects.get()
        expect(page.get_by_role("heading", level=1)).to_contain_text(f"Incident #{incident.pk}")
        expect(page.locator("#next-action")).to_contain_text("correct it")
        expect(page.get_by_role("heading", name="Members (0 of 20 settled)")).to_be_visible()
        axe_check("incident page")
        page.get_by_role("button", name="Acknowledge").click()
        expect(page.locator("#incident-state")).to_contain_text("Acknowledged by olga")
        incidents_escalate()
        alerts_send_due()
        assert [d["type"] for d in receiver.documents()] == [
            "handoff.incident.trigger",
            "handoff.incident.acknowledge",
        ]
        for handoff in handoffs:
            handoff_cancel(
                handoff_id=handoff.pk, actor=world["olga"], reason="sent twice by the CRM"
            )
        alerts_send_due()
        page.reload()
        expect(page.locator("#incident-state")).to_contain_text("Resolved by itself")
        expect(page.get_by_role("heading", name="Members (20 of 20 settled)")).to_be_visible()


def test_olga_opens_the_incident_from_its_page_previews_and_runs_the_replay_and_sees_it_resolve(
    page, live_server, sign_in, settings, monkeypatch, axe_check
):
    settings.CONSOLE_BASE_URL = live_server.url
    settings.ALERT_EMAILS = []
    settings.ALERT_WIDESPREAD_THRESHOLD = 10  # twelve failing at once page
    monkeypatch.setenv("INCIDENT_WEBHOOK_SECRET", SECRET)
    onboarding_world()
    handoffs = [record(n) for n in range(600, 612)]
    Handoff.objects.filter(pk__in=[h.pk for h in handoffs]).update(
        state=HandoffState.NEEDS_ATTENTION,
        failure_class="transient",
        reason_code="retries_exhausted",
        attention_since=Now(),
    )
    # The receiver's gateway timed out on all twelve; four of them had landed.
    for h in handoffs[:4]:
        ReceiverTask.objects.using("delivery").create(
            action_key=h.action_key, payload=h.payload, payload_hash=h.payload_hash
        )
    with AlertReceiver() as receiver:
        AlertChannel.objects.create(
            name="on-call",
            kind=ChannelKind.WEBHOOK,
            target=receiver.url,
            secret_env="INCIDENT_WEBHOOK_SECRET",
        )
        incidents_sync()
        notifications_deliver_now()
        [sent] = receiver.documents()
    sign_in("olga")
    page.goto(sent["incident"]["link"])
    expect(page.get_by_role("heading", name="What happened")).to_be_visible()
    expect(page.locator("#incident-summary")).to_contain_text("transient (retries_exhausted)")
    page.get_by_role("button", name="Preview a replay").click()
    expect(page.locator("#replay-state")).to_contain_text("Asking the destinations")
    replay_preview_run(replay_id=Replay.objects.get().pk)  # the worker's job; the page polls
    preview = page.locator("#replay-preview")
    expect(preview.locator('[data-verdict="present"] .count')).to_have_text("4")
    expect(preview.locator('[data-verdict="missing"] .count')).to_have_text("8")
    axe_check("replay preview")
    page.get_by_role("button", name="Run the replay as previewed").click()
    replay_run(replay_id=Replay.objects.get().pk)
    expect(page.locator("#replay-done")).to_be_visible()
    expect(page.locator('[data-outcome="settled"] .count')).to_have_text("4")
    expect(page.locator('[data-outcome="sent"] .count')).to_have_text("8")
    for handoff in Handoff.objects.filter(state=HandoffState.PENDING):
        handoff_deliver(handoff_id=handoff.pk, destination=InProcessDestination())
    alerts_send_due()
    page.get_by_role("link", name=f"Incident #{Incident.objects.get().pk}").click()
    expect(page.locator("#incident-state")).to_contain_text("Resolved by itself")
    expect(page.get_by_role("heading", name="Members (12 of 12 settled)")).to_be_visible()
