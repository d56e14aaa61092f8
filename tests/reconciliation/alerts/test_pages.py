"""Alert severity and scope: a paused destination or many failures at once page (once per episode); one
handoff's problem goes to its workspace's grouped e-mail, which carries nothing of another workspace."""

import json

import httpx
import pytest
from django.core import mail
from standardwebhooks.webhooks import Webhook

from approvals.models import Membership, Role
from outbox.destinations import InProcessDestination
from outbox.dispatcher import handoff_deliver
from outbox.failures import DeliveryResult
from outbox.models import FailureClass
from outbox.services.breaker import destination_record_results
from reconciliation.alerts.sending import alerts_send_due
from reconciliation.models import AlertKind, AlertRecord, AlertSeverity
from tests.builders import record
from tests.factories import make_user

pytestmark = pytest.mark.django_db(databases=["default", "delivery"])
PAGE_SECRET = "whsec_cGFnZS13ZWJob29rLXNlY3JldC0zMi1ieXRlcyEhIQ=="
REJECTED = {"client_name": " ", "plan": "standard"}


@pytest.fixture(autouse=True)
def channels(settings):
    settings.ALERT_EMAILS = ["oncall@example.com"]
    settings.CONSOLE_BASE_URL = "https://console.example"
    settings.ALERT_WEBHOOK_URL = ""
    settings.ALERT_PAGE_WEBHOOK_URL = "https://pager.example/hook"
    settings.ALERT_PAGE_WEBHOOK_SECRET = PAGE_SECRET
    settings.ALERT_WIDESPREAD_THRESHOLD = 5


@pytest.fixture
def pager():
    received: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        received.append(request)
        return httpx.Response(202)

    with httpx.Client(transport=httpx.MockTransport(handler)) as client:
        client.received = received
        yield client


def refuse_credentials() -> None:
    destination_record_results(
        name="receiver",
        results=[
            DeliveryResult.failed(
                FailureClass.CREDENTIAL, "credential_rejected", "HTTP 401", status_code=401
            )
        ],
    )


def rejected(number: int, workspace_id: int = 7) -> None:
    handoff = record(number, workspace_id=workspace_id, payload=REJECTED)
    assert (
        handoff_deliver(handoff_id=handoff.pk, destination=InProcessDestination())
        == "needs_attention"
    )


def test_a_paused_destination_pages_once_per_pause(world, pager):
    record(42)
    refuse_credentials()
    alerts_send_due(http_client=pager)
    alerts_send_due(http_client=pager)
    [page] = AlertRecord.objects.filter(kind=AlertKind.DESTINATION_PAUSED)
    assert page.severity == AlertSeverity.PAGE and page.sent_at is not None
    [request] = pager.received
    body = request.content.decode()
    Webhook(PAGE_SECRET).verify(
        body, {k: v for k, v in request.headers.items() if k.startswith("webhook-")}
    )
    document = json.loads(body)
    assert (document["severity"], document["destination"], document["reason"]) == (
        "page",
        "receiver",
        "credential",
    )
    assert document["handoffs_waiting"] == 1 and "onboarding:7:42:1" not in body
    [message] = mail.outbox
    # It opens on the destination's own page (its state, events, probe now), not the whole health page.
    assert message.body.split("Open:", 1)[1].strip().endswith("/destinations/receiver/")
    assert message.subject.startswith(
        "[handoff] PAGE: destination receiver credentials refused since "
    )
    assert message.to == ["oncall@example.com"]


def test_one_handoffs_problem_goes_to_the_grouped_email_and_does_not_page(world, pager):
    rejected(42)
    alerts_send_due(http_client=pager)
    assert pager.received == []
    [message] = mail.outbox
    assert message.subject == "[handoff] 1 handoff(s) need attention: onboarding, permanent"
    assert AlertRecord.objects.get().severity == AlertSeverity.EMAIL


def test_each_workspace_gets_its_own_message_and_no_other_workspaces_keys(world, pager):
    w7_operator = world["olga"]
    w7_operator.email = "olga@example.com"
    w7_operator.save()
    w8_operator = make_user(
        "oscar", workspace=world["w8"], roles=(Role.OPERATOR,), email="oscar@example.com"
    )
    assert Membership.objects.filter(user=w8_operator).exists()
    rejected(42, workspace_id=7)
    rejected(43, workspace_id=8)
    alerts_send_due(http_client=pager)
    to_olga = [m for m in mail.outbox if "olga@example.com" in m.to]
    to_oscar = [m for m in mail.outbox if "oscar@example.com" in m.to]
    assert len(to_olga) == 1 and len(to_oscar) == 1
    assert "onboarding:7:42:1" in to_olga[0].body and "onboarding:8:43:1" not in to_olga[0].body
    assert "onboarding:8:43:1" in to_oscar[0].body and "onboarding:7:42:1" not in to_oscar[0].body


def test_many_handoffs_failing_at_once_page(world, pager):
    for number in range(50, 55):
        rejected(number)
    alerts_send_due(http_client=pager)
    [page] = AlertRecord.objects.filter(kind=AlertKind.WIDESPREAD)
    assert page.severity == AlertSeverity.PAGE
    document = json.loads(pager.received[0].content)
    assert document["by_failure_class"] == {"permanent": 5}
