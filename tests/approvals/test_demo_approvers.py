"""The demo's workspace 7 has two approvers, so a request one of them corrects can be approved by the
other (a correction was a dead end with alice alone); demo data loaded before gets the second one."""

from io import StringIO

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command

from approvals.models import Membership, Role
from approvals.selectors import approvers_by_workspace

pytestmark = pytest.mark.django_db(databases=["default", "delivery"])


def test_the_demo_has_two_approvers_in_workspace_7():
    call_command("demo", password="demo-password-long", stdout=StringIO())
    assert [name for _, name in approvers_by_workspace([7])[7]] == ["alice", "dana"]


def test_demo_data_loaded_before_the_second_approver_gets_her_with_her_password_on_its_own_line():
    call_command("demo", password="demo-password-long", stdout=StringIO())
    get_user_model().objects.filter(username="dana").delete()
    out = StringIO()
    call_command("demo", password="another-password-long", stdout=out)
    dana = get_user_model().objects.get(username="dana")
    assert dana.check_password("another-password-long")
    assert Membership.objects.filter(user=dana, workspace_id=7, role=Role.APPROVER).exists()
    assert "another-password-long" in out.getvalue().splitlines()
    # The others keep theirs.
    assert get_user_model().objects.get(username="alice").check_password("demo-password-long")
