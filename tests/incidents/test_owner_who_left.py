"""An incident whose owner left (deactivated, no operator of its workspace any more): nobody who left is
paged (`fallback_channel`)."""

import pytest

from incidents.models import AlertChannel, Incident, IncidentKind, IncidentSeverity
from incidents.services.notifications import FALLBACK_CHANNEL, channels_at_level
from tests.factories import make_user

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
