"""Alerts: what they say, that they are redacted, and that repeats are grouped instead of re-sent."""

import json
from datetime import timedelta

import httpx
import pytest
from django.core import mail
from django.utils import timezone
from standardwebhooks.webhooks import Webhook

from delivery.models import ReceiverTask
from outbox.destinations import InProcessDestination
from outbox.dispatcher import handoff_deliver
from outbox.models import Handoff
from outbox.services import handoff_retry
from reconciliation.alerts.sending import alerts_send_due
from reconciliation.models import AlertRecord
from reconciliation.services.runs import reconciliation_run
from tests.builders import deliver, record
from tests.reconciliation.alerts.alert_receiver import AlertReceiver

pytestmark = pytest.mark.django_db(databases=["default", "delivery"])
REJECTED = {"client_name": " ", "plan": "standard"}
WEBHOOK_SECRET = "whsec_YWxlcnQtd2ViaG9vay1zZWNyZXQtMzItYnl0ZXMhIQ=="


@pytest.fixture(autouse=True)
def _recipients(settings):
    settings.ALERT_EMAILS = ["oncall@example.com"]
    settings.CONSOLE_BASE_URL = "https://console.example"
    settings.ALERT_WEBHOOK_URL = ""


def rejected(number: int, **kw) -> Handoff:
    handoff = record(number, payload=REJECTED, **kw)
    assert (
        handoff_deliver(handoff_id=handoff.pk, destination=InProcessDestination())
        == "needs_attention"
    )
    return Handoff.objects.get(pk=handoff.pk)


def test_needs_attention_alert_names_what_on_call_needs(world):
    handoff = rejected(42, owner=world["olga"])
    world["olga"].email = "olga@example.com"
    world["olga"].save()
    result = alerts_send_due()
    assert result.recorded["needs_attention"] == 1 and result.messages_sent == 1
    [message] = mail.outbox
    assert message.subject == "[handoff] 1 handoff(s) need attention: onboarding, permanent"
    assert sorted(message.to) == ["olga@example.com", "oncall@example.com"]
    body = message.body
    assert "Instance:              onboarding:7:42:1" in body
    assert "Workflow:              onboarding" in body
    assert "Failure class:         permanent (payload_invalid)" in body
    assert "Affected record:       request 42 revision 1, workspace 7" in body
    # The workflow's last delivered step (none: its only step failed), not the handoff's own progress.
    assert "Last delivered step:   none yet: no step of this instance has been delivered" in body
    assert (
        "Safest next action:    The receiver rejected the content: correct it. Sending the same payload"
        in body
    )
    assert f"Open:                  https://console.example/handoffs/{handoff.pk}/" in body


def test_alert_text_is_redacted(world):
    handoff = rejected(42)
    Handoff.objects.filter(pk=handoff.pk).update(
        last_error="receiver said: contact jane.doe@client.example, Authorization: Bearer abc.def.ghi"
    )
    alerts_send_due()
    body = mail.outbox[0].body
    assert "jane.doe@client.example" not in body and "abc.def.ghi" not in body
    assert "[redacted]" in body


def test_a_handoff_that_stays_broken_is_alerted_once(world):
    rejected(42)
    alerts_send_due()
    again = alerts_send_due()
    assert sum(again.recorded.values()) == 0 and again.messages_sent == 0
    assert len(mail.outbox) == 1
    assert AlertRecord.objects.filter(kind="needs_attention").count() == 1


def test_handoffs_failing_together_are_grouped_in_one_message(world):
    for number in (42, 43, 44):
        rejected(number)
    alerts_send_due()
    [message] = mail.outbox
    assert message.subject.startswith("[handoff] 3 handoff(s) need attention")
    assert all(f"onboarding:7:{n}:1" in message.body for n in (42, 43, 44))
    assert len(set(AlertRecord.objects.values_list("message_id", flat=True))) == 1


def test_more_handoffs_than_a_message_holds_are_summarised_with_a_link(world, settings):
    settings.ALERT_MAX_ITEMS_PER_MESSAGE = 2
    for number in (42, 43, 44):
        rejected(number)
    alerts_send_due()
    body = mail.outbox[0].body
    assert body.count("Instance:") == 2
    assert (
        "... and 1 more: https://console.example/handoffs/?state=needs_attention&failure_class=permanent"
        in body
    )


def test_failing_again_after_a_retry_is_a_new_episode(world):
    handoff = rejected(42)
    alerts_send_due()
    handoff_retry(handoff_id=handoff.pk, actor=world["olga"])
    assert (
        handoff_deliver(handoff_id=handoff.pk, destination=InProcessDestination())
        == "needs_attention"
    )
    result = alerts_send_due()
    assert result.recorded["needs_attention"] == 1
    assert len(mail.outbox) == 2


def test_sla_breach_is_alerted_once(world):
    handoff = rejected(42)
    alerts_send_due()
    Handoff.objects.filter(pk=handoff.pk).update(sla_due_at=timezone.now() - timedelta(minutes=1))
    result = alerts_send_due()
    assert result.recorded["sla_breach"] == 1
    assert (
        mail.outbox[-1].subject == "[handoff] SLA breached for 1 handoff(s): onboarding, permanent"
    )
    alerts_send_due()
    assert len(mail.outbox) == 2


def test_reconciliation_problems_are_alerted_once_per_finding(world):
    handoff = deliver(record(42))
    ReceiverTask.objects.using("delivery").filter(action_key=handoff.action_key).delete()
    reconciliation_run()
    alerts_send_due()
    [message] = mail.outbox
    assert message.subject == "[handoff] Reconciliation found 1 new problem(s)"
    assert "Instance:              onboarding:7:42:1" in message.body
    assert "Failure class:         reconciliation: missing_at_receiver" in message.body
    assert "Do not resend" in message.body
    assert f"https://console.example/handoffs/{handoff.pk}/" in message.body
    reconciliation_run()  # still missing: the same finding, not a new alert
    alerts_send_due()
    assert len(mail.outbox) == 1


def test_alert_without_any_recipient_is_kept_and_sent_once_configured(world, settings):
    settings.ALERT_EMAILS = []
    rejected(42)
    result = alerts_send_due()
    assert result.failed == 1 and not mail.outbox
    record_ = AlertRecord.objects.get()
    assert record_.sent_at is None and "no alert recipient" in record_.last_error
    settings.ALERT_EMAILS = ["oncall@example.com"]
    alerts_send_due()
    assert len(mail.outbox) == 1
    assert AlertRecord.objects.get().sent_at is not None


def test_webhook_is_signed_in_the_standard_webhooks_format(world, settings):
    settings.ALERT_WEBHOOK_URL = "https://hooks.example/alerts"
    settings.ALERT_WEBHOOK_SECRET = WEBHOOK_SECRET
    received = []

    def handler(request: httpx.Request) -> httpx.Response:
        received.append(request)
        return httpx.Response(204)

    rejected(42)
    with httpx.Client(transport=httpx.MockTransport(handler)) as client:
        result = alerts_send_due(http_client=client)
    assert result.webhooks_sent == 1
    [request] = received
    body = request.content.decode()
    Webhook(WEBHOOK_SECRET).verify(
        body, {k: v for k, v in request.headers.items() if k.startswith("webhook-")}
    )
    document = json.loads(body)
    assert document["type"] == "handoff.alert.needs_attention"
    assert document["items"][0]["instance"] == "onboarding:7:42:1"
    assert document["items"][0]["next_action"].startswith("The receiver rejected the content")
    with pytest.raises(Exception, match="signature"):
        Webhook(WEBHOOK_SECRET).verify(body.replace("42", "43"), dict(request.headers))


@pytest.mark.django_db(databases=["default", "delivery"], transaction=True)
def test_a_resent_alert_is_the_same_message_and_one_that_keeps_failing_shows_on_health(
    world, settings, client
):
    settings.ALERT_EMAILS = []
    settings.ALERT_WEBHOOK_SECRET = WEBHOOK_SECRET
    rejected(42)
    with AlertReceiver(lose_first=1) as receiver:
        settings.ALERT_WEBHOOK_URL = receiver.url
        assert alerts_send_due().failed == 1
        assert alerts_send_due().webhooks_sent == 1
        first, second = receiver.received
    assert first.headers["webhook-id"] == second.headers["webhook-id"]
    assert first.document["id"] == second.document["id"] == first.headers["webhook-id"]
    assert AlertRecord.objects.get().message_id == first.headers["webhook-id"]

    rejected(43)
    with AlertReceiver(status=503) as receiver:
        settings.ALERT_WEBHOOK_URL = receiver.url
        for _ in range(5):
            alerts_send_due()
        assert len(receiver.received) == 3
        assert len({r.headers["webhook-id"] for r in receiver.received}) == 1
    client.force_login(world["olga"])
    health = client.get("/health/").content.decode()
    assert '<div class="figure" id="fig-alerts-failed">1<small>' in health
