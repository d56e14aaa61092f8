"""The access-control matrix of docs/security.md, cell by cell: each role against each screen, action and
admin model. Roles are the demo's: bob (requester), alice (approver), olga (operator) of workspace 7, and
support staff (staff in the least-privilege group, no workspace role). Here olga is an operator only; the
destination admin, dora, is an operator of workspace 7 in the destination admins group (the demo puts olga
there). One request per cell."""

import pytest
from django.test import Client

from approvals.models import Request, Role
from approvals.services import request_approve, support_staff_enroll
from incidents.models import Incident, IncidentKind, IncidentSeverity
from tests.factories import grant_destination_admin, make_user, onboarding_world
from tests.module_data import module_transaction

pytestmark = pytest.mark.django_db(databases=["default", "delivery"])

ROLES = ("requester", "approver", "operator", "destination_admin", "support")
LOGIN = "login"  # redirected to a sign-in page: not allowed before signing in as someone else

# (name, method, url, {role: expected status or LOGIN}). `{h}` is a handoff of workspace 7.
MATRIX = [
    (
        "approvals queue",
        "get",
        "/approvals/",
        dict(requester=200, approver=200, operator=200, destination_admin=200, support=200),
    ),
    (
        "requests of my workspaces",
        "get",
        "/approvals/search/",
        dict(requester=200, approver=200, operator=200, destination_admin=200, support=200),
    ),
    (
        "request 42 detail",
        "get",
        "/approvals/7/42/1/",
        dict(requester=200, approver=200, operator=200, destination_admin=200, support=404),
    ),
    (
        "approve request 42",
        "post",
        "/approvals/7/42/1/decide",
        dict(requester=403, approver=302, operator=403, destination_admin=403, support=404),
    ),
    (
        "handoff list",
        "get",
        "/handoffs/",
        dict(requester=200, approver=200, operator=200, destination_admin=200, support=200),
    ),
    (
        "handoff detail",
        "get",
        "/handoffs/{h}/",
        dict(requester=200, approver=200, operator=200, destination_admin=200, support=404),
    ),
    (
        "reconcile a handoff",
        "post",
        "/handoffs/{h}/reconcile",
        dict(requester=403, approver=403, operator=302, destination_admin=302, support=404),
    ),
    (
        "assign a handoff",
        "post",
        "/handoffs/{h}/assign",
        dict(requester=403, approver=403, operator=302, destination_admin=302, support=404),
    ),
    (
        "cancel a handoff",
        "post",
        "/handoffs/{h}/cancel",
        dict(requester=403, approver=403, operator=302, destination_admin=302, support=404),
    ),
    (
        "bulk reconcile",
        "post",
        "/handoffs/bulk",
        dict(requester=403, approver=403, operator=200, destination_admin=200, support=403),
    ),
    (
        "triggers",
        "get",
        "/approvals/api/triggers/",
        dict(requester=200, approver=200, operator=200, destination_admin=200, support=200),
    ),
    (
        "health",
        "get",
        "/health/",
        dict(requester=403, approver=403, operator=200, destination_admin=200, support=403),
    ),
    # An incident is of one workspace (`{i7}`: workspace 7's, `{i8}`: workspace 8's): another workspace's is
    # a 404 to read and to act on, as one that does not exist. Support staff (no workspace role) have no
    # Incidents at all without `incidents.view_security_incident` (test_security_incident_permission.py).
    (
        "incident of workspace 7",
        "get",
        "/incidents/{i7}/",
        dict(requester=403, approver=403, operator=200, destination_admin=200, support=403),
    ),
    (
        "acknowledge an incident of workspace 7",
        "post",
        "/incidents/{i7}/acknowledge",
        dict(requester=403, approver=403, operator=302, destination_admin=302, support=403),
    ),
    (
        "incident of workspace 8",
        "get",
        "/incidents/{i8}/",
        dict(requester=403, approver=403, operator=404, destination_admin=404, support=403),
    ),
    (
        "acknowledge an incident of workspace 8",
        "post",
        "/incidents/{i8}/acknowledge",
        dict(requester=403, approver=403, operator=404, destination_admin=404, support=403),
    ),
    (
        "resolve an incident of workspace 8",
        "post",
        "/incidents/{i8}/resolve",
        dict(requester=403, approver=403, operator=404, destination_admin=404, support=403),
    ),
    (
        "replay an incident of workspace 8",
        "post",
        "/incidents/{i8}/replay",
        dict(requester=403, approver=403, operator=404, destination_admin=404, support=403),
    ),
    (
        "set a destination's limits",
        "post",
        "/health/destinations/receiver/limits",
        dict(requester=403, approver=403, operator=403, destination_admin=302, support=403),
    ),
    (
        "findings",
        "get",
        "/reconciliation/findings/",
        dict(requester=403, approver=403, operator=200, destination_admin=200, support=403),
    ),
    (
        "role changes",
        "get",
        "/approvals/roles/",
        dict(requester=200, approver=200, operator=200, destination_admin=200, support=200),
    ),
    (
        "admin index",
        "get",
        "/admin/",
        dict(requester=LOGIN, approver=LOGIN, operator=LOGIN, destination_admin=LOGIN, support=200),
    ),
    (
        "admin handoffs",
        "get",
        "/admin/outbox/handoff/",
        dict(requester=LOGIN, approver=LOGIN, operator=LOGIN, destination_admin=LOGIN, support=200),
    ),
    (
        "admin handoff detail",
        "get",
        "/admin/outbox/handoff/{h}/change/",
        dict(requester=LOGIN, approver=LOGIN, operator=LOGIN, destination_admin=LOGIN, support=200),
    ),
    (
        "admin handoff edit",
        "post",
        "/admin/outbox/handoff/{h}/change/",
        dict(requester=LOGIN, approver=LOGIN, operator=LOGIN, destination_admin=LOGIN, support=403),
    ),
    (
        "admin handoff delete",
        "post",
        "/admin/outbox/handoff/{h}/delete/",
        dict(requester=LOGIN, approver=LOGIN, operator=LOGIN, destination_admin=LOGIN, support=403),
    ),
    (
        "admin reconcile action",
        "post",
        "/admin/outbox/handoff/",
        dict(requester=LOGIN, approver=LOGIN, operator=LOGIN, destination_admin=LOGIN, support=302),
    ),
    (
        "admin receiver tasks",
        "get",
        "/admin/delivery/receivertask/",
        dict(requester=LOGIN, approver=LOGIN, operator=LOGIN, destination_admin=LOGIN, support=200),
    ),
    (
        "admin replay records",
        "get",
        "/admin/delivery/seenmessage/",
        dict(requester=LOGIN, approver=LOGIN, operator=LOGIN, destination_admin=LOGIN, support=200),
    ),
    (
        "admin grant a role",
        "get",
        "/admin/approvals/membership/add/",
        dict(requester=LOGIN, approver=LOGIN, operator=LOGIN, destination_admin=LOGIN, support=403),
    ),
    (
        "admin role changes",
        "get",
        "/admin/approvals/rolechange/",
        dict(requester=LOGIN, approver=LOGIN, operator=LOGIN, destination_admin=LOGIN, support=200),
    ),
    (
        "admin publish rules",
        "get",
        "/admin/approvals/ruleversion/add/",
        dict(requester=LOGIN, approver=LOGIN, operator=LOGIN, destination_admin=LOGIN, support=403),
    ),
    (
        "admin delivery modes",
        "get",
        "/admin/approvals/workflowmode/add/",
        dict(requester=LOGIN, approver=LOGIN, operator=LOGIN, destination_admin=LOGIN, support=403),
    ),
    (
        "admin users",
        "get",
        "/admin/auth/user/",
        dict(requester=LOGIN, approver=LOGIN, operator=LOGIN, destination_admin=LOGIN, support=403),
    ),
    (
        "admin groups",
        "get",
        "/admin/auth/group/",
        dict(requester=LOGIN, approver=LOGIN, operator=LOGIN, destination_admin=LOGIN, support=403),
    ),
    (
        "admin django-q2 schedules",
        "get",
        "/admin/django_q/schedule/",
        dict(requester=LOGIN, approver=LOGIN, operator=LOGIN, destination_admin=LOGIN, support=403),
    ),
    (
        "admin django-q2 new schedule",
        "get",
        "/admin/django_q/schedule/add/",
        dict(requester=LOGIN, approver=LOGIN, operator=LOGIN, destination_admin=LOGIN, support=403),
    ),
    (
        "admin login lockouts",
        "get",
        "/admin/axes/accessattempt/",
        dict(requester=LOGIN, approver=LOGIN, operator=LOGIN, destination_admin=LOGIN, support=403),
    ),
]

FORMS = {
    "approve request 42": lambda w, h: {
        "decision": "approve",
        "payload_hash": w["request"].payload_hash,
    },
    "assign a handoff": lambda w, h: {"owner": str(w["olga"].pk), "reason": "mine"},
    "cancel a handoff": lambda w, h: {"reason": "duplicate of another request"},
    "bulk reconcile": lambda w, h: {"bulk_action": "reconcile"},
    "set a destination's limits": lambda w, h: {
        "max_concurrency": "2",
        "reason": "receiver team asked",
    },
    "admin handoff edit": lambda w, h: {"state": "delivered"},
    "admin handoff delete": lambda w, h: {"post": "yes"},
    "admin reconcile action": lambda w, h: {"action": "reconcile", "_selected_action": [h]},
}


@pytest.fixture(scope="module")
def world(django_db_setup, django_db_blocker):
    """Built once for the module (tests/module_data.py); each cell's writes are undone after it."""
    with module_transaction(django_db_blocker):
        with django_db_blocker.unblock():
            world = _world()
        yield world


def _world():
    world = onboarding_world()
    make_user("carol")
    world["requester"], world["approver"], world["operator"] = (
        world["bob"],
        world["alice"],
        world["olga"],
    )
    world["destination_admin"] = grant_destination_admin(
        make_user("dora", workspace=world["w7"], roles=(Role.OPERATOR,))
    )
    world["support"] = make_user("support")
    support_staff_enroll(user=world["support"])
    # A second request approved now, so that request 42 stays undecided for the approve cell.
    from tests.factories import make_request

    make_request(world["w7"], 43, world["bob"])
    handoff = request_approve(
        workspace_id=7,
        number=43,
        revision=1,
        actor=world["alice"],
        payload_hash=Request.objects.get(workspace_id=7, number=43).payload_hash,
    )
    world["handoff"] = handoff.pk
    for workspace_id in (7, 8):
        world[f"incident{workspace_id}"] = Incident.objects.create(
            cause="failures:receiver:permanent",
            workspace_id=workspace_id,
            kind=IncidentKind.FAILURES,
            severity=IncidentSeverity.QUEUE,
            title="handoffs failing",
        ).pk
    return world


@pytest.mark.parametrize("role", ROLES)
@pytest.mark.parametrize(
    ("name", "method", "url", "expected"), MATRIX, ids=[row[0] for row in MATRIX]
)
def test_access_matrix_cell(world, role, name, method, url, expected):
    client = Client()
    client.force_login(world[role])
    target = url.format(h=world["handoff"], i7=world["incident7"], i8=world["incident8"])
    data = FORMS.get(name, lambda w, h: {})(world, world["handoff"])
    response = getattr(client, method)(target, data)
    want = expected[role]
    if want == LOGIN:
        assert response.status_code == 302 and "/login/" in response["Location"], (name, role)
    else:
        assert response.status_code == want, (name, role, response.status_code)


def test_role_changes_are_listed_for_operators_only(world):
    from approvals.services import membership_grant

    admin_user = make_user("root", is_staff=True, is_superuser=True)
    membership_grant(
        workspace_id=7,
        user=world["support"],
        role="approver",
        actor=admin_user,
        reason="cover for alice",
    )
    seen = {}
    for role in ROLES:
        client = Client()
        client.force_login(world[role])
        seen[role] = b"cover for alice" in client.get("/approvals/roles/").content
    assert seen == {
        "requester": False,
        "approver": False,
        "operator": True,
        "destination_admin": True,
        "support": False,
    }
