"""An incident whose owner left (deactivated, no operator of its workspace any more) is given a new owner
when it is next paged, by the rule a new failure gets, with the reason on its timeline; nobody who left is
paged (`fallback_channel`)."""

import pytest
from django.contrib.auth import get_user_model
from django.db import transaction

from approvals.models import Membership, Role
from approvals.services.memberships import membership_revoke
from incidents.models import (
    AlertChannel,
    ChannelKind,
    Incident,
    IncidentEvent,
    IncidentKind,
    IncidentSeverity,
    IncidentState,
)
from incidents.services.notifications import (
    FALLBACK_CHANNEL,
    channels_at_level,
    incident_page,
    incidents_owners_refresh,
)
from incidents.services.operator import incident_acknowledge
from incidents.sweep import alerts_send_due
from incidents.text import incident_summary
from outbox.destinations import InProcessDestination
from outbox.dispatch.dispatcher import handoff_deliver
from outbox.models import Handoff
from tests.builders import approve
from tests.factories import make_user
from tests.incidents.test_incidents import REJECTED

pytestmark = pytest.mark.django_db(databases=["default", "delivery"], transaction=True)


def incident_of(workspace, owner) -> Incident:
    return Incident.objects.create(
        cause=f"failures:receiver:permanent:payload_invalid:1:onboarding:create_client:{workspace.pk}",
        workspace_id=workspace.pk,
        kind=IncidentKind.FAILURES,
        severity=IncidentSeverity.PAGE,
        title="step create_client of onboarding failing at receiver",
        workflow="onboarding",
        owner=owner,
    )


def ops_channel() -> AlertChannel:
    return AlertChannel.objects.create(
        name="ops", kind=ChannelKind.EMAIL, target="ops@example.com", level=0
    )


def test_a_fallback_who_was_deactivated_is_not_paged(world, settings):
    """Fails on the old code: the fallback channel was seeded from nina's address and she was e-mailed
    though her account was closed."""
    settings.ALERT_EMAILS = []
    settings.ALERT_WEBHOOK_URL = settings.ALERT_PAGE_WEBHOOK_URL = ""
    settings.HANDOFF_FALLBACK_ON_CALL = "nina"
    nina = make_user("nina", email="nina@example.com")
    incident = incident_of(world["w8"], nina)
    nina.is_active = False
    nina.save()
    assert channels_at_level(incident, incident.workspace_ids, 0) == []
    assert not AlertChannel.objects.filter(name=FALLBACK_CHANNEL).exists()


@pytest.mark.parametrize("leaves", ["deactivated", "role lowered"])
def test_an_incident_whose_owner_left_is_given_the_owner_a_new_failure_gets(
    world, client, settings, leaves
):
    """Fails on the old code: the incident kept olga, its headline said "owner olga" and nothing on it
    said she could no longer act. While she can, she keeps it though oscar became the on-call."""
    ops_channel()
    olga = world["olga"]
    oscar = make_user("oscar", workspace=world["w7"], roles=(Role.OPERATOR,))
    world["w7"].on_call = oscar
    world["w7"].save()
    incident = incident_of(world["w7"], olga)
    assert incident_page(incident)
    assert Incident.objects.get(pk=incident.pk).owner == olga
    if leaves == "deactivated":
        olga.is_active = False
        olga.save()
        reason = "olga can no longer act (deactivated): owner oscar"
    else:
        Membership.objects.filter(user=olga, workspace=world["w7"]).update(role=Role.APPROVER)
        reason = "olga can no longer act (no operator of workspace 7): owner oscar"
    assert incident_page(incident)
    incident.refresh_from_db()
    assert incident.owner == oscar
    assert "(owner oscar;" in incident_summary(incident).headline
    [event] = IncidentEvent.objects.filter(incident=incident, action="owner_changed")
    assert event.note == reason
    client.force_login(oscar)
    assert reason in client.get(f"/incidents/{incident.pk}/").content.decode()
    # Once replaced, the next page changes nothing.
    incident_page(incident)
    assert IncidentEvent.objects.filter(incident=incident, action="owner_changed").count() == 1


def test_the_sweep_gives_a_queue_incident_whose_owner_left_a_new_owner(world):
    """Fails on the old code: a queue incident (it never pages again) kept olga for good (the sweep runs
    `incidents_owners_refresh`)."""
    oscar = make_user("oscar", workspace=world["w7"], roles=(Role.OPERATOR,))
    incident = incident_of(world["w7"], world["olga"])
    Incident.objects.filter(pk=incident.pk).update(severity=IncidentSeverity.QUEUE, pages_sent=1)
    # A bulk update sends no signal (`incidents/owners_left.py`): the sweep is what catches it.
    Membership.objects.filter(user=world["olga"], workspace=world["w7"]).update(role=Role.APPROVER)
    assert incidents_owners_refresh() == 1
    assert Incident.objects.get(pk=incident.pk).owner == oscar
    [event] = IncidentEvent.objects.filter(incident=incident, action="owner_changed")
    assert event.note == "olga can no longer act (no operator of workspace 7): owner oscar"
    assert incidents_owners_refresh() == 0
    assert alerts_send_due().incidents["owners_changed"] == 0, "a step of the sweep"


def test_an_acknowledgement_by_someone_who_left_is_no_acknowledgement(world):
    """Fails on the old code: olga's acknowledgement held after she was deactivated, and the incident
    stayed quiet while its cause held. While she can act, it holds."""
    handoff = approve(world)
    Handoff.objects.filter(pk=handoff.pk).update(payload=REJECTED)
    handoff_deliver(handoff_id=handoff.pk, destination=InProcessDestination())
    make_user("oscar", workspace=world["w7"], roles=(Role.OPERATOR,))
    alerts_send_due()
    incident = Incident.objects.get(workspace_id=7)
    incident_acknowledge(incident_id=incident.pk, actor=world["olga"])
    alerts_send_due()
    assert Incident.objects.get(pk=incident.pk).state == IncidentState.ACKNOWLEDGED
    world["olga"].is_active = False
    world["olga"].save()
    alerts_send_due()
    assert Incident.objects.get(pk=incident.pk).state == IncidentState.OPEN
    [event] = IncidentEvent.objects.filter(incident=incident, action="acknowledgement_void")
    assert event.note == "acknowledged by olga, who can no longer act: paging again"


class _Undone(Exception):
    pass


@pytest.mark.parametrize("leaves", ["deactivated", "role revoked", "role changed"])
def test_whoever_leaves_hands_their_incidents_on_in_the_same_transaction(world, client, leaves):
    """Fails on the old code: the incident kept olga until its next page or sweep (a queue incident for up
    to a sweep's interval), though she was deactivated or lost her role. Now the owner changes in the
    transaction that makes her leave: with it, and not at all when it rolls back."""
    olga = world["olga"]
    oscar = make_user("oscar", workspace=world["w7"], roles=(Role.OPERATOR,))
    admin = get_user_model().objects.create_superuser("root", password="x-long-enough-pw")
    incident = incident_of(world["w7"], olga)
    Incident.objects.filter(pk=incident.pk).update(severity=IncidentSeverity.QUEUE, pages_sent=1)

    def leave() -> None:
        if leaves == "deactivated":
            olga.is_active = False
            olga.save()
        elif leaves == "role revoked":
            membership_revoke(
                workspace_id=7, user=olga, role=Role.OPERATOR, actor=admin, reason="moved team"
            )
        else:
            membership = Membership.objects.get(user=olga, workspace_id=7)
            membership.role = Role.APPROVER
            membership.save()

    with pytest.raises(_Undone), transaction.atomic():
        leave()
        assert Incident.objects.get(pk=incident.pk).owner == oscar, "inside the transaction"
        raise _Undone
    assert Incident.objects.get(pk=incident.pk).owner == olga, "rolled back with it"
    assert not IncidentEvent.objects.filter(incident=incident, action="owner_changed").exists()

    olga.refresh_from_db()
    leave()
    assert Incident.objects.get(pk=incident.pk).owner == oscar
    [event] = IncidentEvent.objects.filter(incident=incident, action="owner_changed")
    assert event.note.startswith("olga can no longer act (") and event.note.endswith("owner oscar")
    assert incidents_owners_refresh() == 0, "nothing left for the sweep"


def test_an_incident_whose_owners_account_is_deleted_gets_a_new_owner_with_the_reason(world):
    """Fails on the old code: the deletion set the owner to null (SET_NULL), with nothing on the timeline,
    and no sweep looked at it again (`incidents_owners_refresh` reads incidents that have an owner)."""
    oscar = make_user("oscar", workspace=world["w7"], roles=(Role.OPERATOR,))
    incident = incident_of(world["w7"], world["olga"])
    Incident.objects.filter(pk=incident.pk).update(severity=IncidentSeverity.QUEUE, pages_sent=1)
    world["olga"].delete()
    assert Incident.objects.get(pk=incident.pk).owner == oscar
    [event] = IncidentEvent.objects.filter(incident=incident, action="owner_changed")
    assert event.note == "olga can no longer act (account deleted): owner oscar"
