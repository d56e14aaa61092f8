"""approvals/services/groups.py: the support staff group and its members."""

import pytest
from django.contrib.auth.models import Group, Permission

from approvals import services
from approvals.models import (
    RequestState,
)
from tests.factories import make_user

pytestmark = pytest.mark.django_db(databases=["default", "delivery"])

R = RequestState


# --- support_group_sync, support_staff_enroll --------------------------------------------------


def support_permissions(group: Group) -> set[str]:
    return {
        f"{p.content_type.app_label}.{p.codename}"
        for p in group.permissions.select_related("content_type")
    }


def test_support_group_holds_view_permissions_plus_reconcile_and_assign_only(db):
    granted = support_permissions(services.support_group_sync())
    assert {
        "outbox.reconcile_handoff",
        "outbox.assign_handoff",
        "outbox.view_handoff",
        "approvals.view_membership",
        "delivery.view_receivertask",
    } <= granted
    assert {p.split(".")[1].split("_")[0] for p in granted} == {"view", "reconcile", "assign"}


def test_support_group_sync_removes_extra_permissions_and_can_run_again(db):
    group = services.support_group_sync()
    before = support_permissions(group)
    group.permissions.add(Permission.objects.get(codename="delete_handoff"))
    assert support_permissions(services.support_group_sync()) == before
    assert Group.objects.filter(name=services.SUPPORT_GROUP).count() == 1


def test_enrolled_support_staff_is_staff_in_the_support_group_and_never_superuser(db):
    user = make_user("sam", is_superuser=True)
    services.support_staff_enroll(user=user)
    user.refresh_from_db()
    assert (user.is_staff, user.is_superuser) == (True, False)
    assert list(user.groups.values_list("name", flat=True)) == [services.SUPPORT_GROUP]
