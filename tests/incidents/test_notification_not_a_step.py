"""A notification rides the outbox as a handoff, but it is no step of any request: an incident whose id equals
a request's id in the same workspace must not show its page as that request's step (the request's status lines
are read from the handoffs whose `source_id` is the request's id)."""

import pytest

from approvals.models import Request, RequestState
from console.request_evidence import statuses_of
from incidents.channels.delivery import NOTIFICATION_WORKFLOW
from incidents.models import Incident
from outbox.models import Handoff
from tests.factories import RequestFactory
from tests.incidents.alert_receiver import AlertReceiver
from tests.incidents.engine import alerts_send_due
from tests.incidents.test_incidents import SECRET, fail, webhook_channel

pytestmark = pytest.mark.django_db(databases=["default", "delivery"], transaction=True)


def test_an_incidents_page_is_no_step_of_the_request_that_shares_its_number(
    world, settings, monkeypatch
):
    """Fails when a notification's handoff carries its incident's id as `source_id` (8817b72)."""
    settings.ALERT_EMAILS = []
    settings.CONSOLE_BASE_URL = "https://console.example"
    monkeypatch.setenv("INCIDENT_WEBHOOK_SECRET", SECRET)
    with AlertReceiver() as receiver:
        webhook_channel(receiver)
        for n in range(1000, 1020):
            fail(n)
        alerts_send_due()
    [incident] = Incident.objects.all()
    assert Handoff.objects.filter(workflow=NOTIFICATION_WORKFLOW).exists(), "the page is a handoff"
    # An approved request of workspace 7 with the incident's id (the world's own request if it has it).
    request = Request.objects.filter(pk=incident.pk).first() or RequestFactory(
        pk=incident.pk, workspace=world["w7"], requested_by=world["bob"]
    )
    Request.objects.filter(pk=request.pk).update(state=RequestState.APPROVED)
    request.refresh_from_db()
    assert request.workspace_id == incident.workspace_id == 7
    status = statuses_of([request])[request.pk]
    assert status.steps == [], status.steps
    assert not Handoff.objects.filter(workflow=NOTIFICATION_WORKFLOW, source_id__gt=0).exists()
