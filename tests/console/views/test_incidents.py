"""The incident screens: scoped to the operator's workspaces (another workspace's incident is a 404, its
members are neither listed nor counted), acknowledge and resolve as audited moves, bad moves refused."""

import pytest

from outbox.destinations import InProcessDestination
from outbox.dispatcher import handoff_deliver
from reconciliation.alerts.incidents import incidents_sync
from reconciliation.models import Incident, IncidentState
from tests.builders import record
from tests.reconciliation.alerts.test_incidents import REJECTED

pytestmark = pytest.mark.django_db(databases=["default", "delivery"])


def failing(number: int, workspace_id: int = 7) -> None:
    handoff = record(number, payload=REJECTED, workspace_id=workspace_id)
    handoff_deliver(handoff_id=handoff.pk, destination=InProcessDestination())


@pytest.fixture
def incident(world) -> Incident:
    failing(101)
    failing(102)
    failing(201, workspace_id=8)
    incidents_sync()
    return Incident.objects.get()


def test_the_list_and_page_show_only_the_viewers_members(client, world, incident):
    client.force_login(world["olga"])
    listing = client.get("/incidents/")
    assert listing.status_code == 200 and f"/incidents/{incident.pk}/" in listing.content.decode()
    page = client.get(f"/incidents/{incident.pk}/").content.decode()
    assert "onboarding:7:101:1" in page and "onboarding:7:102:1" in page
    assert "onboarding:8:201:1" not in page
    assert "Members (0 of 2 settled)" in page
    assert "Safest next action" in page and "Last delivered step" in page


def test_an_incident_of_no_workspace_of_mine_is_a_404(client, world):
    failing(301, workspace_id=8)
    incidents_sync()
    other = Incident.objects.get()
    client.force_login(world["olga"])
    assert client.get(f"/incidents/{other.pk}/").status_code == 404
    assert client.post(f"/incidents/{other.pk}/acknowledge").status_code == 404
    assert f"/incidents/{other.pk}/" not in client.get("/incidents/").content.decode()
    other.refresh_from_db()
    assert other.state == IncidentState.OPEN


def test_a_requester_may_not_see_incidents(client, world, incident):
    client.force_login(world["bob"])
    assert client.get("/incidents/").status_code == 403


def test_acknowledge_then_resolve_are_recorded_and_a_second_acknowledge_is_refused(
    client, world, incident
):
    client.force_login(world["olga"])
    response = client.post(
        f"/incidents/{incident.pk}/acknowledge", {"note": "looking"}, headers={"HX-Request": "true"}
    )
    assert response.status_code == 200 and "Acknowledged by olga" in response.content.decode()
    incident.refresh_from_db()
    assert incident.state == IncidentState.ACKNOWLEDGED and incident.next_escalation_at is None
    again = client.post(f"/incidents/{incident.pk}/acknowledge", headers={"HX-Request": "true"})
    assert again.status_code == 409 and "cannot be acknowledged" in again.content.decode()
    assert client.post(f"/incidents/{incident.pk}/resolve", {"note": "fixed"}).status_code == 302
    incident.refresh_from_db()
    assert incident.state == IncidentState.RESOLVED and incident.resolved_by == world["olga"]
    actions = list(incident.events.values_list("action", "actor_label"))
    assert ("acknowledged", "olga") in actions and ("resolved", "olga") in actions


def test_members_a_person_resolved_do_not_open_the_next_incident(client, world, incident):
    client.force_login(world["olga"])
    client.post(f"/incidents/{incident.pk}/resolve", {"note": "handled with the client"})
    incidents_sync()
    assert Incident.objects.live().count() == 0
    failing(103)
    incidents_sync()
    [fresh] = Incident.objects.live()
    assert fresh.member_count == 1


def test_a_get_to_acknowledge_is_refused(client, world, incident):
    client.force_login(world["olga"])
    assert client.get(f"/incidents/{incident.pk}/acknowledge").status_code == 405
