"""No failure without an owner: a workspace with no operator has its failures owned by the fallback on-call
(`HANDOFF_FALLBACK_ON_CALL`), who is paged by e-mail at a real SMTP server (a process of its own); starting
with such a workspace and no fallback is a warning naming it."""

import pytest
from django.core import checks

from approvals.models import Role
from incidents.models import Incident, Notification
from outbox.destinations import InProcessDestination
from outbox.destinations.smtp.destination import message_id_for
from outbox.dispatch.dispatcher import handoff_deliver
from outbox.models import Handoff, HandoffState
from tests.builders import approve
from tests.factories import make_user
from tests.incidents.engine import alerts_send_due
from tests.incidents.test_incidents import REJECTED

pytestmark = pytest.mark.django_db(databases=["default", "delivery"], transaction=True)


@pytest.fixture
def smtp(mailbox, settings):
    settings.EMAIL_BACKEND = "django.core.mail.backends.smtp.EmailBackend"
    settings.EMAIL_HOST_USER = settings.EMAIL_HOST_PASSWORD = ""
    settings.ALERT_EMAILS = []
    settings.ALERT_WEBHOOK_URL = settings.ALERT_PAGE_WEBHOOK_URL = ""
    settings.CONSOLE_BASE_URL = "https://console.example"
    return mailbox


def failed_in_workspace_8(world):
    """Request 9 of workspace 8 approved, then refused by the receiver (its payload lost a required field
    on the way: the receiver's validation is stricter than the rules)."""
    rex = make_user("rex", workspace=world["w8"], roles=(Role.REQUESTER,))
    handoff = approve(world, number=9, workspace=world["w8"], requested_by=rex)
    Handoff.objects.filter(pk=handoff.pk).update(payload=REJECTED)
    handoff_deliver(handoff_id=handoff.pk, destination=InProcessDestination())
    return handoff


def unowned_warnings() -> list[checks.CheckMessage]:
    return [m for m in checks.run_checks(databases=["default"]) if m.id == "approvals.W001"]


def test_a_failure_in_a_workspace_without_an_operator_is_owned_by_the_fallback_who_is_paged(
    world, smtp, settings
):
    """Fails on the old code: the handoff and its incident had no owner, and with no channel and
    ALERT_EMAILS empty no message went anywhere."""
    settings.HANDOFF_FALLBACK_ON_CALL = "nina"
    nina = make_user("nina", email="nina@example.com")
    handoff = failed_in_workspace_8(world)
    assert handoff.owner == nina
    assert Handoff.objects.get(pk=handoff.pk).state == HandoffState.NEEDS_ATTENTION
    alerts_send_due()
    incident = Incident.objects.get(workspace_id=8)
    assert incident.owner == nina
    # One message to nina: the incident's (the per-handoff alert e-mail is retired).
    [page] = smtp.wait_for_messages(1)
    assert page["To"] == "nina@example.com"
    [notification] = Notification.objects.filter(incident=incident)
    key = Handoff.objects.get(pk=notification.handoff_id).action_key
    assert page["Message-ID"] == message_id_for(key, "handoff-console")
    assert f"Notification incident-{incident.pk}-1" in page.get_payload()
    assert "onboarding:8:9:1" in page.get_payload()
    assert "owner nina" in page["Subject"]
    alerts_send_due()
    assert len(smtp.messages()) == 1, "told once"


def test_the_fallback_reads_and_acknowledges_the_incident_they_own(world, client, settings):
    settings.HANDOFF_FALLBACK_ON_CALL = "nina"
    nina = make_user("nina", email="nina@example.com")
    failed_in_workspace_8(world)
    alerts_send_due()
    incident = Incident.objects.get(workspace_id=8)
    client.force_login(nina)
    assert "onboarding:8:9:1" in client.get(f"/incidents/{incident.pk}/").content.decode()
    assert client.post(f"/incidents/{incident.pk}/acknowledge").status_code == 302
    client.force_login(world["olga"])
    assert client.get(f"/incidents/{incident.pk}/").status_code == 404


def test_a_workspace_without_an_operator_and_no_fallback_is_a_startup_warning(world, settings):
    """Fails on the old code: nothing warned."""
    settings.HANDOFF_FALLBACK_ON_CALL = ""
    [warning] = unowned_warnings()
    assert warning.obj == world["w8"] and "has no operator" in warning.msg
    settings.HANDOFF_FALLBACK_ON_CALL = "nobody-here"
    [warning] = unowned_warnings()
    assert "'nobody-here', who is no active user" in warning.hint
    make_user("nina")
    settings.HANDOFF_FALLBACK_ON_CALL = "nina"
    assert unowned_warnings() == []


def test_health_shows_the_fallback_the_workspaces_they_cover(world, client, settings):
    settings.HANDOFF_FALLBACK_ON_CALL = "olga"
    client.force_login(world["olga"])
    page = client.get("/health/").content.decode()
    assert 'id="fallback-duty"' in page and "Supplier onboarding (#8)" in page
    other = make_user("oscar", workspace=world["w7"], roles=(Role.OPERATOR,))
    client.force_login(other)
    assert 'id="fallback-duty"' not in client.get("/health/").content.decode()
