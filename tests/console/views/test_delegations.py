"""The delegation screen (issue 39): an approver names a delegate for a bounded period, sees it, ends it;
the same rules and audit as `manage.py delegations`; a bad period refused with the field named, nothing
written; nobody ends another approver's delegation from here."""

from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from approvals.models import ApprovalDelegation
from tests.console.clients import client_for

pytestmark = pytest.mark.django_db(databases=["default", "delivery"])

TODAY = timezone.now().date()  # the period's days; the service checks them on the database's clock
FORM = {
    "delegate": "olga",
    "starts": TODAY.isoformat(),
    "ends": (TODAY + timedelta(days=30)).isoformat(),
    "reason": "holiday",
}


def test_an_approver_names_a_delegate_sees_it_and_ends_it_audited(world):
    alice = client_for(world["alice"])
    answer = alice.post(reverse("approvals:delegation_new"), FORM)
    assert answer.status_code == 302
    (d,) = ApprovalDelegation.objects.all()
    assert (d.approver, d.delegate, d.created_by, d.reason) == (
        world["alice"],
        world["olga"],
        world["alice"],
        "holiday",
    )
    page = alice.get(reverse("approvals:delegations")).content.decode()
    assert "olga</strong> decides for you" in page
    assert (
        "alice" in client_for(world["olga"]).get(reverse("approvals:delegations")).content.decode()
    )

    ended = alice.post(reverse("approvals:delegation_end"), {"delegation": d.pk})
    assert ended.status_code == 302
    d.refresh_from_db()
    assert d.revoked_by == world["alice"] and d.revoked_at is not None


@pytest.mark.parametrize(
    ("change", "words"),
    [
        ({"ends": (TODAY - timedelta(days=1)).isoformat()}, "ends_at: after starts_at"),
        ({"ends": (TODAY + timedelta(days=91)).isoformat()}, "ends_at: at most 90 days"),
        ({"ends": "2026-13-01"}, "ends"),
        ({"delegate": "alice"}, "delegate: someone other than the approver"),
        ({"delegate": "nobody-here"}, "delegate: no active user"),
        ({"reason": " "}, "reason: required"),
    ],
)
def test_a_bad_delegation_is_refused_naming_the_field_and_nothing_is_written(world, change, words):
    answer = client_for(world["alice"]).post(
        reverse("approvals:delegation_new"), {**FORM, **change}
    )
    assert answer.status_code == 422
    assert words in answer.content.decode()
    assert not ApprovalDelegation.objects.exists()


def test_someone_who_approves_nowhere_has_nothing_to_delegate(world):
    answer = client_for(world["bob"]).post(reverse("approvals:delegation_new"), FORM)
    assert answer.status_code == 403
    assert not ApprovalDelegation.objects.exists()


def test_nobody_ends_another_approvers_delegation_from_the_screen(world):
    client_for(world["alice"]).post(reverse("approvals:delegation_new"), FORM)
    (d,) = ApprovalDelegation.objects.all()
    answer = client_for(world["olga"]).post(
        reverse("approvals:delegation_end"), {"delegation": d.pk}
    )
    assert answer.status_code == 404
    d.refresh_from_db()
    assert d.revoked_at is None
