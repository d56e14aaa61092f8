"""approvals.selectors.memberships_read_once_per_request: a GET reads its user's roles once however many of
its parts ask; a POST (which may grant or take a role and then draw the page) reads them each time asked, and
no request sees the roles the one before it read."""

import pytest
from django.contrib.auth import get_user_model
from django.db import connection
from django.http import HttpResponse
from django.test import RequestFactory
from django.test.utils import CaptureQueriesContext

from approvals import selectors
from approvals.models import Role
from approvals.services import membership_grant

pytestmark = pytest.mark.django_db(databases=["default", "delivery"])


@pytest.fixture
def admin():
    return get_user_model().objects.create_superuser("roles-admin", password="x-long-enough-pw")


def answered(method: str, user, view) -> list:
    """What `view` saw, run as a `method` request of `user` through the middleware."""
    seen: list = []

    def get_response(request):
        view(request, seen)
        return HttpResponse()

    request = getattr(RequestFactory(), method.lower())("/")
    request.user = user
    selectors.memberships_read_once_per_request(get_response)(request)
    return seen


def test_a_get_reads_the_roles_once_however_many_parts_ask(world):
    def view(request, seen):
        with CaptureQueriesContext(connection) as captured:
            seen.append(selectors.workspace_ids_for(request.user))
            seen.append(selectors.workspace_ids_for(request.user, Role.APPROVER))
            seen.append(selectors.user_has_role(request.user, 7, Role.REQUESTER))
            seen.append(selectors.is_operator_of(request.user.pk, 7))
            seen.append(selectors.roles_by_workspace(request.user))
        seen.append(len(captured.captured_queries))

    assert answered("GET", world["rita"], view) == [
        [7],
        [7],
        True,
        False,
        {7: [Role.APPROVER, Role.REQUESTER]},
        1,
    ]


@pytest.mark.parametrize("method", ["POST", "PUT", "PATCH", "DELETE"])
def test_a_request_that_may_change_roles_sees_the_role_it_granted(world, admin, method):
    def view(request, seen):
        seen.append(selectors.workspace_ids_for(request.user))
        seen.append(selectors.user_has_role(request.user, 8, Role.OPERATOR))
        membership_grant(
            workspace_id=8,
            user=request.user,
            role=Role.OPERATOR,
            actor=admin,
            reason="on call for workspace 8 this week",
        )
        seen.append(selectors.workspace_ids_for(request.user))
        seen.append(selectors.user_has_role(request.user, 8, Role.OPERATOR))
        seen.append(selectors.is_operator_of(request.user.pk, 8))

    assert answered(method, world["rita"], view) == [[7], False, [7, 8], True, True]


def test_the_next_get_sees_a_role_granted_after_the_last_one(world, admin):
    def view(request, seen):
        seen.append(selectors.workspace_ids_for(request.user))

    assert answered("GET", world["rita"], view) == [[7]]
    membership_grant(
        workspace_id=8,
        user=world["rita"],
        role=Role.OPERATOR,
        actor=admin,
        reason="on call for workspace 8 this week",
    )
    assert answered("GET", world["rita"], view) == [[7, 8]]
    assert selectors.workspace_ids_for(world["rita"]) == [7, 8], "outside a request, read each time"


def test_the_workspace_names_a_get_reads_once_are_only_those_asked_for(world):
    def view(request, seen):
        with CaptureQueriesContext(connection) as captured:
            seen.append(selectors.workspace_names([8, 7, 7]))
            seen.append(selectors.workspace_names([7, 8]))
            seen.append(selectors.workspace_names([7]))
        seen.append(len(captured.captured_queries))

    assert answered("GET", world["rita"], view) == [
        {7: "Client onboarding", 8: "Supplier onboarding"},
        {7: "Client onboarding", 8: "Supplier onboarding"},
        {7: "Client onboarding"},
        2,
    ]
