"""A page's channels in a fixed order (by id): the timeline names them, and the notifications are numbered,
in that order, and of two channels to one address the older one sends. Without an ORDER BY PostgreSQL
returns the rows in its heap's order, which an update changes: each test moves the older channel's row
after the newer one's, as an update can, and fails on the old code there."""

import pytest

from incidents.models import (
    AlertChannel,
    ChannelKind,
    Incident,
    IncidentEvent,
    IncidentKind,
    IncidentSeverity,
    Notification,
)
from incidents.services.notifications import incident_page

pytestmark = pytest.mark.django_db(databases=["default", "delivery"])


@pytest.fixture(autouse=True)
def _no_seeded_channels(settings):
    settings.ALERT_EMAILS = []
    settings.ALERT_WEBHOOK_URL = settings.ALERT_PAGE_WEBHOOK_URL = ""


def incident_of(world) -> Incident:
    return Incident.objects.create(
        cause="failures:receiver:permanent:payload_invalid:1:onboarding:create_client:7",
        workspace_id=world["w7"].pk,
        kind=IncidentKind.FAILURES,
        severity=IncidentSeverity.PAGE,
        title="step create_client of onboarding failing at receiver",
        workflow="onboarding",
        owner=world["olga"],
    )


def channel(name: str, target: str) -> AlertChannel:
    return AlertChannel.objects.create(name=name, kind=ChannelKind.EMAIL, target=target, level=0)


def inserted_again(row: AlertChannel) -> None:
    """The same row, deleted and inserted again: on PostgreSQL its tuple now comes after the others."""
    pk = row.pk
    row.delete()
    row.pk = pk
    row.save(force_insert=True)


def test_a_page_names_and_numbers_its_channels_in_the_order_they_were_made(world):
    older, newer = channel("ops", "ops@example.com"), channel("on-call", "on-call@example.com")
    inserted_again(older)
    incident = incident_of(world)
    assert incident_page(incident)
    [paged] = IncidentEvent.objects.filter(incident=incident, action="paged")
    assert paged.note.endswith(" to ops, on-call")
    sent = Notification.objects.filter(incident=incident).order_by("pk")
    assert [n.channel_id for n in sent] == [older.pk, newer.pk]


def test_of_two_channels_to_one_address_the_older_one_sends(world):
    older, _newer = channel("ops", "ops@example.com"), channel("ops again", "OPS@example.com")
    inserted_again(older)
    incident = incident_of(world)
    assert incident_page(incident)
    [sent] = Notification.objects.filter(incident=incident)
    assert sent.channel_id == older.pk
