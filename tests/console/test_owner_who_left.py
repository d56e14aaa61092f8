"""A failure's owner is a person who can act: one who was deactivated, or is no operator of the workspace
any more, is never given a failure (not when it fails, not by the console, the CLI or the admin's bulk
assign) nor offered as an owner; a workspace whose operators are all deactivated is a workspace without one;
and a failure whose owner left since is listed with the unowned (owner: nobody).
Each fails on the old code, which checked the membership or the on-call field alone."""

from io import StringIO

import pytest
from django.core import checks
from django.core.management import CommandError, call_command

from approvals.models import Membership, Role
from outbox.models import Handoff
from tests.console.clients import HTMX, client_for

pytestmark = pytest.mark.django_db(databases=["default", "delivery"])


def deactivate(user) -> None:
    user.is_active = False
    user.save(update_fields=["is_active"])


def unowned_warnings() -> list[checks.CheckMessage]:
    return [m for m in checks.run_checks(databases=["default"]) if m.id == "approvals.W001"]


@pytest.fixture
def olga_deactivated(world):
    """olga, workspace 7's on-call, is deactivated (she left) before a failure in workspace 7."""
    deactivate(world["olga"])
    return world


def test_a_failure_is_owned_by_an_active_operator_when_the_on_call_was_deactivated(
    olga_deactivated, rejected
):
    assert rejected.owner == olga_deactivated["oscar"]


def test_a_failure_is_owned_by_an_active_operator_when_the_on_call_lost_the_role(world, request):
    Membership.objects.filter(user=world["olga"], workspace=world["w7"]).delete()
    rejected = request.getfixturevalue("rejected")
    assert rejected.owner == world["oscar"]


def test_a_workspace_whose_operators_are_all_deactivated_has_none(world, request, settings):
    settings.HANDOFF_FALLBACK_ON_CALL = ""
    assert world["w7"] not in [w.obj for w in unowned_warnings()]
    deactivate(world["olga"])
    deactivate(world["oscar"])
    assert world["w7"] in [w.obj for w in unowned_warnings()]
    settings.HANDOFF_FALLBACK_ON_CALL = "alice"
    assert request.getfixturevalue("rejected").owner == world["alice"]


def test_a_deactivated_operator_is_not_offered_nor_assigned(world, rejected):
    deactivate(world["oscar"])
    olga = client_for(world["olga"])
    page = olga.get(f"/handoffs/{rejected.pk}/").content.decode()
    assert f'<option value="{world["olga"].pk}"' in page
    assert f'<option value="{world["oscar"].pk}"' not in page
    listing = olga.get("/handoffs/").content.decode()
    bulk_owners = listing.split('name="bulk_owner"', 1)[1].split("</select>", 1)[0]
    assert f'<option value="{world["olga"].pk}">' in bulk_owners
    assert f'<option value="{world["oscar"].pk}">' not in bulk_owners
    response = olga.post(f"/handoffs/{rejected.pk}/assign", {"owner": world["oscar"].pk}, **HTMX)
    assert response.status_code == 422
    with pytest.raises(CommandError, match="oscar is not an operator of workspace 7"):
        args = ("assign", str(rejected.pk), "--as", "olga", "--to", "oscar")
        call_command("handoffs", *args, stdout=StringIO())
    assert Handoff.objects.get(pk=rejected.pk).owner == world["olga"]


def test_the_admin_bulk_assign_skips_a_deactivated_operator(world, rejected):
    deactivate(world["oscar"])
    world["olga"].is_staff = world["olga"].is_superuser = True
    world["olga"].save()
    admin = client_for(world["olga"])
    form = admin.post(
        "/admin/outbox/handoff/",
        {"action": "assign", "_selected_action": [rejected.pk]},
    ).content.decode()
    assert f'<option value="{world["oscar"].pk}"' not in form
    admin.post(
        "/admin/outbox/handoff/",
        {
            "action": "assign",
            "_selected_action": [rejected.pk],
            "apply": "1",
            "owner": world["oscar"].pk,
            "reason": "shift",
        },
    )
    assert Handoff.objects.get(pk=rejected.pk).owner == world["olga"]


@pytest.mark.parametrize("leaves", ["deactivated", "role removed"])
def test_a_failure_whose_owner_left_is_listed_as_owned_by_nobody(world, rejected, leaves):
    """Fails on the old code: owner=nobody listed only rows with no owner at all."""
    oscar = client_for(world["oscar"])
    assert rejected.owner == world["olga"]
    assert rejected.action_key not in oscar.get("/handoffs/?owner=nobody").content.decode()
    if leaves == "deactivated":
        deactivate(world["olga"])
    else:
        Membership.objects.filter(user=world["olga"], role=Role.OPERATOR).delete()
    assert rejected.action_key in oscar.get("/handoffs/?owner=nobody").content.decode()
    assert (
        rejected.action_key in oscar.get("/handoffs/?state=attention&owner=nobody").content.decode()
    )
