"""Incidents: failures grouped by cause page once, at a real HTTP receiver of alerts; a resend is the same
notification; what pages (corruption, security events, a high-impact step) and what queues (rejected
triggers, with an owner and an SLA); the workflow's last delivered step in every alert."""

import pytest
from django.test import Client
from standardwebhooks.webhooks import Webhook

from approvals.management.commands.demo import ONBOARDING_STEPS, ONBOARDING_THREE_STEPS_SCHEMA
from approvals.models import TriggerOutcome, TriggerRecord
from approvals.services import request_approve, rule_version_publish
from incidents.channels.delivery import notifications_deliver_now
from incidents.models import (
    AlertChannel,
    ChannelKind,
    Incident,
    IncidentKind,
    IncidentSeverity,
    IncidentState,
    Notification,
    NotificationState,
)
from incidents.services.incidents import incidents_sync
from incidents.services.operator import incident_resolve_by_person
from incidents.text import incident_summary
from outbox.destinations import InProcessDestination
from outbox.destinations.smtp.destination import message_id_for
from outbox.dispatch.dispatcher import handoff_deliver, sweep
from outbox.models import Handoff, HandoffState
from outbox.services import handoff_cancel
from reconciliation.models import Finding, FindingKind, ReconciliationRun, SecurityEvent
from tests.builders import record
from tests.factories import ONBOARDING_PAYLOAD, make_request, make_user
from tests.incidents.alert_receiver import AlertReceiver
from tests.incidents.engine import alerts_send_due
from tests.intake.triggers import TRIGGERS_URL, trigger_document

pytestmark = pytest.mark.django_db(databases=["default", "delivery"], transaction=True)
REJECTED = {"client_name": " ", "plan": "standard"}
SECRET = "whsec_aW5jaWRlbnQtd2ViaG9vay1zZWNyZXQtMzItYnl0ZXMh"


@pytest.fixture(autouse=True)
def _alert_settings(settings, monkeypatch):
    settings.ALERT_EMAILS = []
    settings.ALERT_WEBHOOK_URL = ""
    settings.ALERT_PAGE_WEBHOOK_URL = ""
    settings.CONSOLE_BASE_URL = "https://console.example"
    settings.ALERT_NOTIFICATION_RETRY_BASE_SECONDS = 0
    monkeypatch.setenv("INCIDENT_WEBHOOK_SECRET", SECRET)


def webhook_channel(receiver: AlertReceiver, **fields) -> AlertChannel:
    return AlertChannel.objects.create(
        name=fields.pop("name", "on-call webhook"),
        kind=ChannelKind.WEBHOOK,
        target=receiver.url,
        secret_env="INCIDENT_WEBHOOK_SECRET",
        **fields,
    )


def fail(number: int) -> Handoff:
    handoff = record(number, payload=REJECTED)
    assert handoff_deliver(handoff_id=handoff.pk, destination=InProcessDestination()) == (
        HandoffState.NEEDS_ATTENTION
    )
    return handoff


def triggers_of(receiver: AlertReceiver) -> list[dict]:
    return [d for d in receiver.documents() if d["type"] == "handoff.incident.trigger"]


def test_two_hundred_failures_of_one_cause_are_one_incident_one_page_and_resolve_when_settled(
    world,
):
    with AlertReceiver() as receiver:
        webhook_channel(receiver)
        handoffs = [fail(n) for n in range(1000, 1200)]
        alerts_send_due()
        alerts_send_due()
        [incident] = Incident.objects.all()
        assert incident.kind == IncidentKind.FAILURES
        assert incident.severity == IncidentSeverity.PAGE
        assert incident.member_count == 200
        assert (
            incident.cause
            == "failures:receiver:permanent:payload_invalid:onboarding-v1:onboarding:"
        )
        [page] = triggers_of(receiver)
        assert page["id"] == f"incident-{incident.pk}-1"
        assert page["incident"]["members"] == 200
        assert page["incident"]["link"] == f"https://console.example/incidents/{incident.pk}/"
        for handoff in handoffs:
            handoff_cancel(handoff_id=handoff.pk, actor=world["olga"], reason="duplicate request")
        alerts_send_due()
        incident.refresh_from_db()
        assert incident.state == IncidentState.RESOLVED and incident.resolved_by is None
        assert incident.settled_count == 200
        assert len(triggers_of(receiver)) == 1
        assert receiver.documents()[-1]["type"] == "handoff.incident.resolve"


def test_a_resend_after_a_lost_answer_is_the_same_notification(world):
    with AlertReceiver(lose_first=1) as receiver:
        webhook_channel(receiver)
        for n in range(1000, 1020):
            fail(n)
        alerts_send_due()
        assert len(receiver.received) == 2
        ids = {r.headers["webhook-id"] for r in receiver.received}
        assert len(ids) == 1 and {d["id"] for d in receiver.documents()} == ids
        for received in receiver.received:
            Webhook(SECRET).verify(received.body, received.headers)
    [notification] = Notification.objects.with_delivery()
    assert notification.delivery_state == NotificationState.SENT
    assert notification.delivery_attempts == 2
    # The outbox's engine: the lost answer was an unknown outcome, settled by sending it again.
    handoff = Handoff.objects.get(pk=notification.handoff_id)
    assert handoff.state == HandoffState.DELIVERED
    assert handoff.events.filter(to_state=HandoffState.UNCERTAIN).exists()


def test_a_notification_that_keeps_failing_is_visible_on_its_incident(world, settings):
    settings.ALERT_NOTIFICATION_MAX_ATTEMPTS = 2
    with AlertReceiver(status=422) as receiver:
        webhook_channel(receiver)
        for n in range(1000, 1020):
            fail(n)
        alerts_send_due()
        notifications_deliver_now()
        assert len(receiver.received) == 1, "a refusal is not retried"
    incident = Incident.objects.get(cause__startswith="failures:receiver:")
    [notification] = Notification.objects.with_delivery().filter(incident=incident)
    assert notification.delivery_state == NotificationState.FAILED
    assert notification.delivery_error.startswith("HTTP 422")
    alerts_send_due()
    [failed] = incident.events.filter(action="notification_failed")
    assert failed.note.startswith(f"incident-{incident.pk}-1 to on-call webhook: HTTP 422")


def test_a_failure_of_a_high_impact_step_pages_at_once_and_names_the_last_delivered_step(world):
    admin = make_user("rules-admin", is_superuser=True, is_staff=True)
    steps = [
        {**step, "high_impact": True} if step["name"] == "send_welcome_pack" else step
        for step in ONBOARDING_STEPS
    ]
    rule_version_publish(
        workflow="onboarding", schema=ONBOARDING_THREE_STEPS_SCHEMA, steps=steps, actor=admin
    )
    payload = {k: v for k, v in ONBOARDING_PAYLOAD.items() if k != "contact_email"}
    request = make_request(world["w7"], 43, world["bob"], payload=payload)
    request_approve(
        workspace_id=7,
        number=43,
        revision=1,
        actor=world["alice"],
        payload_hash=request.payload_hash,
    )
    sweep(destination=InProcessDestination())
    assert Handoff.objects.get(action_key="onboarding:7:43:1:send_welcome_pack").needs_attention
    with AlertReceiver() as receiver:
        webhook_channel(receiver)
        alerts_send_due()
        [incident] = Incident.objects.all()
        assert incident.high_impact and incident.severity == IncidentSeverity.PAGE
        assert incident.member_count == 1 and incident.step == "send_welcome_pack"
        [page] = triggers_of(receiver)
    facts = page["incident"]
    assert facts["last_delivered_step"].startswith("provision_account (delivered ")
    assert facts["workflow"] == "onboarding"
    assert facts["instance"] == "onboarding:7:43:1:send_welcome_pack"
    assert facts["failure_class"].startswith("permanent")
    assert facts["affected_record"] == "request 43 revision 1, workspace 7"
    assert facts["next_action"]


def test_corruption_findings_above_the_threshold_page(world, settings):
    settings.ALERT_CORRUPTION_THRESHOLD = 3
    run = ReconciliationRun.objects.create(trigger="test", batch_size=10)

    def finding(n: int) -> Finding:
        return Finding.objects.create(
            kind=FindingKind.PAYLOAD_MISMATCH,
            action_key=f"onboarding:7:{n}:1",
            workspace_id=7,
            workflow="onboarding",
            next_action="compare the payloads",
            first_run=run,
            last_run=run,
            last_seen_at=run.started_at,
        )

    with AlertReceiver() as receiver:
        webhook_channel(receiver)
        finding(1), finding(2)
        alerts_send_due()
        assert Incident.objects.get().severity == IncidentSeverity.QUEUE
        assert triggers_of(receiver) == []
        finding(3)
        alerts_send_due()
        [incident] = Incident.objects.all()
        assert incident.severity == IncidentSeverity.PAGE and incident.member_count == 3
        [page] = triggers_of(receiver)
        assert page["incident"]["failure_class"] == "reconciliation: payload_mismatch"


def test_forged_signatures_at_intake_and_sign_in_lockouts_page_above_a_rate(
    world, settings, client
):
    settings.ALERT_SECURITY_THRESHOLD = 3
    for n in range(3):
        response = client.generic(
            "POST",
            TRIGGERS_URL,
            data=b'{"workflow": "onboarding"}',
            content_type="application/json",
            headers={
                "webhook-id": f"msg_{n}",
                "webhook-timestamp": "1",
                "webhook-signature": "v1,x",
            },
        )
        assert response.status_code == 401
    assert SecurityEvent.objects.filter(kind="signature_rejected", source="intake").count() == 3
    make_user("victim")
    for _ in range(settings.AXES_FAILURE_LIMIT + 2):
        Client(REMOTE_ADDR="192.0.2.99").post(
            "/accounts/login/", {"username": "victim", "password": "guess"}
        )
    assert SecurityEvent.objects.filter(kind="lockout").count() >= 3
    with AlertReceiver() as receiver:
        webhook_channel(receiver)
        alerts_send_due()
        kinds = set(Incident.objects.values_list("cause", flat=True))
        assert kinds == {"security:signature_rejected", "security:lockout"}
        assert len(triggers_of(receiver)) == 2
        assert all(i.severity == IncidentSeverity.PAGE for i in Incident.objects.all())


def test_rejected_triggers_are_an_incident_with_an_owner_and_an_sla_on_health(
    world, client, mailbox
):
    TriggerRecord.objects.create(
        webhook_id="msg_rejected",
        signed_at=world["request"].created_at,
        workflow="onboarding",
        workspace_ref=7,
        reference="crm-77",
        document=trigger_document(reference="crm-77"),
        document_hash="x" * 64,
        outcome=TriggerOutcome.REJECTED_AT_INTAKE,
        reasons=["client_name: must be a non-empty string"],
        status_code=422,
        response={},
    )
    AlertChannel.objects.create(
        workspace_id=7,
        name="intake queue",
        kind=ChannelKind.EMAIL,
        target="intake-team@example.com",
        severity=IncidentSeverity.QUEUE,
    )
    incidents_sync()
    incidents_sync()
    notifications_deliver_now()
    [incident] = Incident.objects.all()
    [message] = mailbox.messages()
    [notification] = Notification.objects.all()
    handoff = Handoff.objects.get(pk=notification.handoff_id)
    assert message["To"] == "intake-team@example.com"
    assert message["Message-ID"] == message_id_for(handoff.action_key, "handoff-console")
    assert handoff.destination_id == message["Message-ID"]
    body = message.get_payload(decode=True).decode()
    assert "Safest next action:   Read the reasons on the trigger's page" in body
    assert f"Notification incident-{incident.pk}-1" in body
    assert incident.kind == IncidentKind.REJECTED_TRIGGERS
    assert incident.severity == IncidentSeverity.QUEUE
    assert incident.owner == world["olga"] and incident.sla_due_at is not None
    assert incident_summary(incident).affected_record.startswith("trigger ")
    client.force_login(world["olga"])
    page = client.get("/health/").content.decode()
    assert "1 trigger(s) of onboarding rejected at intake" in page and "olga" in page


def test_a_slack_channel_of_a_workspace_gets_a_slack_payload_about_its_own_members(world, settings):
    settings.ALERT_WIDESPREAD_THRESHOLD = (
        2  # workspace 8's two failures page (counted per workspace)
    )
    with AlertReceiver(status=200) as receiver:
        AlertChannel.objects.create(
            workspace_id=8, name="suppliers slack", kind=ChannelKind.SLACK, target=receiver.url
        )
        for n in range(1000, 1019):
            fail(n)
        for n in range(2000, 2002):
            record_ = record(n, payload=REJECTED, workspace_id=8)
            handoff_deliver(handoff_id=record_.pk, destination=InProcessDestination())
        alerts_send_due()
        [slack] = receiver.received
    incident = Incident.objects.get(workspace_id=8)
    assert incident.member_count == 2
    message = slack.document
    assert message["text"].endswith(f"(incident-{incident.pk}-1)")
    assert message["text"].startswith(f"PAGE: incident {incident.pk}:")
    details = message["blocks"][1]["text"]["text"]
    assert "onboarding:8:2000:1 and 1 more" in details and "onboarding:7:" not in details
    assert "Last delivered step:" in details and "Safest next action:" in details


def test_a_cause_in_two_workspaces_pages_each_workspace_about_its_own_incident_only(
    world, settings
):
    """Fails on the old code: one incident of both workspaces paged both channels with the same incident,
    and resolving it (by workspace 8's operator) stopped workspace 7's paging."""
    settings.ALERT_WIDESPREAD_THRESHOLD = 2
    otto = make_user("otto", workspace=world["w8"], roles=("operator",))
    with AlertReceiver() as sevens, AlertReceiver() as eights:
        webhook_channel(sevens, workspace_id=7, name="ws7 pager")
        webhook_channel(eights, workspace_id=8, name="ws8 pager")
        for n in (1000, 1001):
            fail(n)
        for n in (2000, 2001, 2002):
            handoff_deliver(
                handoff_id=record(n, payload=REJECTED, workspace_id=8).pk,
                destination=InProcessDestination(),
            )
        alerts_send_due()
        ours, theirs = Incident.objects.get(workspace_id=7), Incident.objects.get(workspace_id=8)
        [page7], [page8] = triggers_of(sevens), triggers_of(eights)
        assert (page7["incident"]["incident_id"], page7["incident"]["members"]) == (ours.pk, 2)
        assert (page8["incident"]["incident_id"], page8["incident"]["members"]) == (theirs.pk, 3)
        assert "onboarding:8:" not in sevens.received[0].body
        assert "onboarding:7:" not in eights.received[0].body
        assert ours.owner == world["olga"] and theirs.owner == otto
        incident_resolve_by_person(incident_id=theirs.pk, actor=otto, note="handled")
        alerts_send_due()
        assert [d["type"] for d in eights.documents()][-1] == "handoff.incident.resolve"
        assert [d["type"] for d in sevens.documents()] == ["handoff.incident.trigger"]
    ours.refresh_from_db()
    assert ours.state == IncidentState.OPEN and ours.next_escalation_at is not None
