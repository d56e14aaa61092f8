"""Security incidents (of no workspace) are shown to holders of `incidents.view_security_incident` only, on
every screen that shows incidents: the list, the page, acknowledge and resolve, the nav's count, a replay and
the admin. Being staff (support staff, with the support group's view of incidents) is not enough, and a
workspace's operator never sees them; the migration creates the permission and gives it to no one."""

import pytest
from django.contrib.auth.models import Group, Permission
from django.test import Client

from approvals.services import support_staff_enroll
from incidents.models import Incident, IncidentKind, IncidentSeverity
from tests.factories import make_user

pytestmark = pytest.mark.django_db(databases=["default", "delivery"])


@pytest.fixture
def incidents(world):
    security = Incident.objects.create(
        cause="security:forged_signature",
        workspace_id=None,
        kind=IncidentKind.SECURITY,
        severity=IncidentSeverity.PAGE,
        title="forged signatures at intake",
    )
    ours = Incident.objects.create(
        cause="failures:receiver:permanent",
        workspace_id=7,
        kind=IncidentKind.FAILURES,
        severity=IncidentSeverity.QUEUE,
        title="handoffs failing",
    )
    return security, ours


def _permission() -> Permission:
    return Permission.objects.get(
        content_type__app_label="incidents", codename="view_security_incident"
    )


def _support(name: str, *, granted: bool):
    user = make_user(name)
    support_staff_enroll(user=user)
    if granted:
        user.user_permissions.add(_permission())
    client = Client()
    client.force_login(user)
    return client


def _listed(client: Client) -> set[int]:
    page = client.get("/incidents/", {"state": "all"})
    assert page.status_code == 200
    return {incident.pk for incident in page.context["incidents"]}


def _admin_listed(client: Client) -> set[int]:
    page = client.get("/admin/incidents/incident/")
    assert page.status_code == 200
    return {incident.pk for incident in page.context["cl"].result_list}


def test_staff_without_the_permission_see_no_security_incident_anywhere(world, incidents):
    security, _ours = incidents
    support = _support("sam", granted=False)
    # With no workspace role and without the permission, Incidents has nothing for them.
    assert support.get("/incidents/").status_code == 403
    assert support.get(f"/incidents/{security.pk}/").status_code == 403
    assert support.post(f"/incidents/{security.pk}/acknowledge").status_code == 403
    assert support.post(f"/incidents/{security.pk}/resolve").status_code == 403
    assert security.pk not in _admin_listed(support)
    assert support.get(f"/admin/incidents/incident/{security.pk}/change/").status_code == 302
    security.refresh_from_db()
    assert security.state == "open"


def test_a_holder_of_the_permission_sees_and_acts_on_them(world, incidents):
    security, _ours = incidents
    support = _support("sue", granted=True)
    assert _listed(support) == {security.pk}
    page = support.get(f"/incidents/{security.pk}/")
    assert page.status_code == 200 and b"forged signatures at intake" in page.content
    assert _admin_listed(support) == {security.pk, _ours.pk}
    assert support.post(f"/incidents/{security.pk}/acknowledge").status_code == 302
    security.refresh_from_db()
    assert security.state == "acknowledged"


def test_a_holder_without_a_workspace_role_finds_incidents_in_the_nav_with_their_count(
    world, incidents
):
    """The nav offered Incidents to operators only, and its count was 0 for anyone without a workspace: a
    holder of the permission reached the security incidents only by typing the address."""
    support, refused = _support("sue", granted=True), _support("sam", granted=False)
    page = support.get("/incidents/").content.decode()
    assert 'href="/incidents/"' in page
    assert ">1 open<" in support.get("/incidents/open-count").content.decode()
    assert 'href="/incidents/"' not in refused.get("/").content.decode()
    assert refused.get("/incidents/open-count").content.decode().strip() == ""


def test_a_workspace_operator_never_sees_them_staff_or_not(world, incidents):
    security, ours = incidents
    olga = Client()
    olga.force_login(world["olga"])
    assert _listed(olga) == {ours.pk}
    assert olga.get(f"/incidents/{security.pk}/").status_code == 404
    # Staff too, as an operator was made before: the flag gives nothing without the permission.
    world["olga"].is_staff = True
    world["olga"].save(update_fields=["is_staff"])
    assert _listed(olga) == {ours.pk}
    assert olga.get(f"/incidents/{security.pk}/").status_code == 404
    assert olga.post(f"/incidents/{security.pk}/replay").status_code == 404


def test_the_migration_gives_the_permission_to_no_one(world):
    permission = _permission()
    support_staff_enroll(user=make_user("sid"))
    assert not permission.user_set.exists()
    assert not permission.group_set.exists()
    assert not Group.objects.filter(permissions=permission).exists()
