"""Incidents moved out of reconciliation into an app of their own (issue 36, "a layout by subject"): the
move changes Django's state only. An incident written before it, with its members, timeline, channel and
notification, is read after it through the new app's models, its content type (with the permissions
granted on it) follows, and the alert sweep's schedule names its task at the new place."""

import pytest
from django.contrib.contenttypes.models import ContentType
from django_q.models import Schedule

from incidents.models import AlertChannel, Incident, IncidentState, Notification
from tests.migrations import latest, migrate

pytestmark = pytest.mark.django_db(transaction=True)
BEFORE = [("reconciliation", "0012_notification_handoff_drop_alertrecord"), ("incidents", None)]


def _incident_written_before_the_move(old) -> int:
    incident = old.get_model("reconciliation", "Incident").objects.create(
        cause="failures:crm:permanent:payload_invalid::onboarding:create",
        workspace_id=7,
        kind="failures",
        severity="page",
        title="onboarding failing at crm",
        member_count=2,
    )
    member = old.get_model("reconciliation", "IncidentMember").objects
    member.create(incident=incident, member_key="handoff:11", handoff_id=11, workspace_id=7)
    member.create(incident=incident, member_key="handoff:12", handoff_id=12, workspace_id=7)
    old.get_model("reconciliation", "IncidentEvent").objects.create(
        incident=incident, action="opened", to_state="open", actor_label="system"
    )
    channel = old.get_model("reconciliation", "AlertChannel").objects.create(
        workspace_id=7, name="ops-mail", kind="email", target="ops@example.com"
    )
    old.get_model("reconciliation", "Notification").objects.create(
        incident=incident,
        channel=channel,
        number=1,
        event="trigger",
        message_id=f"handoff-incident-{incident.pk}-1",
        handoff_id=99,
    )
    return incident.pk


def test_an_incident_written_before_the_move_is_read_whole_after_it():
    old = migrate(BEFORE)
    ContentType.objects.clear_cache()
    ContentType.objects.get_or_create(app_label="reconciliation", model="incident")
    Schedule.objects.create(name="send-alerts", func="reconciliation.tasks.alerts_send_due")
    try:
        pk = _incident_written_before_the_move(old)
    finally:
        migrate(latest())
    ContentType.objects.clear_cache()

    incident = Incident.objects.get(pk=pk)
    assert (incident.workspace_id, incident.state) == (7, IncidentState.OPEN)
    assert sorted(incident.members.values_list("handoff_id", flat=True)) == [11, 12]
    assert list(incident.events.values_list("action", flat=True)) == ["opened"]
    notification = Notification.objects.get(incident=incident)
    assert (notification.number, notification.handoff_id) == (1, 99)
    assert notification.channel == AlertChannel.objects.get(name="ops-mail")
    assert ContentType.objects.filter(app_label="incidents", model="incident").exists()
    assert not ContentType.objects.filter(app_label="reconciliation", model="incident").exists()
    # The sweep's schedule names the task at its new place: it keeps running after the upgrade.
    assert Schedule.objects.get(name="send-alerts").func == "incidents.tasks.alerts_send_due"
