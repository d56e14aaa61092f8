"""olga's incident, in Chromium: she opens the incident from the page's own link, reads what happened and
the safest next action, acknowledges it (the escalation stops: no further page), and, once the failed
handoffs are settled, sees the incident resolved by itself."""

import pytest
from playwright.sync_api import expect

from outbox.destinations import InProcessDestination
from outbox.dispatcher import handoff_deliver
from outbox.services import handoff_cancel
from reconciliation.alerts import alerts_send_due
from reconciliation.alerts.delivering import notifications_send_due
from reconciliation.alerts.incidents import incidents_sync
from reconciliation.alerts.notifications import incidents_escalate
from reconciliation.models import AlertChannel, ChannelKind, EscalationPolicy, Incident
from tests.builders import record
from tests.factories import onboarding_world
from tests.reconciliation.alerts.alert_receiver import AlertReceiver
from tests.reconciliation.alerts.test_incidents import REJECTED, SECRET

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
        notifications_send_due()
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
