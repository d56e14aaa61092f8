"""Delegation: an approver names a delegate for bounded dates; the delegate decides in their own name while
it lasts, never after, and four eyes hold for them (nobody decides what they requested or corrected)."""

from datetime import timedelta
from io import StringIO

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from approvals.errors import ApprovalDenied, InvalidPayload
from approvals.models import Approval, ApprovalDelegation, RequestState
from approvals.services import request_approve, request_correct_by_approver, request_reject
from approvals.services.delegations import delegation_grant, delegation_revoke
from outbox.clock import db_time
from tests.console.clients import client_for
from tests.factories import make_user

pytestmark = pytest.mark.django_db(databases=["default", "delivery"])


def _delegate(world, delegate, *, start_days=-1, end_days=7):
    now = db_time()
    return delegation_grant(
        approver=world["alice"],
        delegate=delegate,
        starts_at=now + timedelta(days=start_days),
        ends_at=now + timedelta(days=end_days),
        reason="alice on holiday",
        actor=world["alice"],
    )


def _approve(world, actor):
    request = world["request"]
    return request_approve(
        workspace_id=7,
        number=42,
        revision=request.revision,
        actor=actor,
        payload_hash=request.payload_hash,
    )


def test_a_delegate_approves_in_their_own_name_while_the_delegation_lasts(world):
    dave = make_user("dave")
    with pytest.raises(ApprovalDenied):
        _approve(world, dave)
    delegation = _delegate(world, dave)
    _approve(world, dave)
    approval = Approval.objects.get(request=world["request"])
    assert approval.decided_by == dave
    assert (delegation.approver, delegation.created_by) == (world["alice"], world["alice"])


@pytest.mark.parametrize("when", ["not yet begun", "ended", "revoked"])
def test_a_delegate_outside_the_period_or_revoked_cannot_decide(world, when):
    dave = make_user("dave")
    if when == "not yet begun":
        _delegate(world, dave, start_days=1, end_days=5)
    elif when == "ended":
        delegation = _delegate(world, dave)
        now = db_time()
        ApprovalDelegation.objects.filter(pk=delegation.pk).update(
            starts_at=now - timedelta(days=5), ends_at=now - timedelta(days=1)
        )
    else:
        delegation = _delegate(world, dave)
        delegation_revoke(delegation_id=delegation.pk, actor=world["alice"])
        assert ApprovalDelegation.objects.get(pk=delegation.pk).revoked_by == world["alice"]
    with pytest.raises(ApprovalDenied):
        request_reject(
            workspace_id=7,
            number=42,
            revision=1,
            actor=dave,
            payload_hash=world["request"].payload_hash,
            reason="no",
        )
    world["request"].refresh_from_db()
    assert world["request"].state == RequestState.AWAITING_APPROVAL


def test_four_eyes_hold_for_a_delegate_who_requested_the_request(world):
    _delegate(world, world["bob"])
    with pytest.raises(ApprovalDenied, match="cannot decide their own request"):
        _approve(world, world["bob"])
    assert not Approval.objects.exists()


@pytest.mark.parametrize(
    "start_days,end_days,field",
    [(2, 1, "ends_at: after starts_at"), (0, 120, "ends_at: at most 90 days")],
)
def test_a_delegation_without_sound_bounds_is_refused_naming_the_field(
    world, start_days, end_days, field
):
    with pytest.raises(InvalidPayload, match=field):
        _delegate(world, make_user("dave"), start_days=start_days, end_days=end_days)
    assert not ApprovalDelegation.objects.exists()


def test_only_the_approver_or_an_administrator_names_their_delegate(world):
    with pytest.raises(ApprovalDenied):
        now = db_time()
        delegation_grant(
            approver=world["alice"],
            delegate=world["olga"],
            starts_at=now,
            ends_at=now + timedelta(days=1),
            reason="takeover",
            actor=world["olga"],
        )
    assert not ApprovalDelegation.objects.exists()


def test_the_approval_page_lets_a_delegate_decide_and_records_their_name(world):
    dave = make_user("dave")
    client = client_for(dave)
    assert client.get("/approvals/7/42/1/").status_code == 404
    _delegate(world, dave)
    page = client.get("/approvals/7/42/1/")
    assert page.status_code == 200
    assert b"Approve exactly this payload" in page.content
    response = client.post(
        "/approvals/7/42/1/decide",
        {
            "decision": "approve",
            "payload_hash": world["request"].payload_hash,
            "requests_hash": page.context["routes"].requests_hash if page.context["routes"] else "",
        },
    )
    assert response.status_code in (200, 302)
    assert Approval.objects.get(request=world["request"]).decided_by == dave


def test_a_delegate_who_corrected_the_request_cannot_approve_it(world):
    dave = make_user("dave")
    _delegate(world, dave)
    corrected = request_correct_by_approver(
        workspace_id=7,
        number=42,
        revision=1,
        actor=dave,
        payload_hash=world["request"].payload_hash,
        edits={"plan": "enterprise"},
        reason="the client asked for enterprise",
    )
    assert corrected.corrected_by == dave
    with pytest.raises(ApprovalDenied, match="corrected a request cannot also approve it"):
        request_approve(
            workspace_id=7,
            number=42,
            revision=corrected.revision,
            actor=dave,
            payload_hash=corrected.payload_hash,
        )
    assert not Approval.objects.exists()


def test_the_delegations_command_grants_lists_and_revokes_and_refuses_unbounded_dates(world):
    make_user("dave")
    out = StringIO()
    with pytest.raises(CommandError, match="ends_at: at most 90 days"):
        call_command(
            "delegations",
            "grant",
            "alice",
            "dave",
            "--from",
            "2026-01-01",
            "--until",
            "2099-01-01",
            "--reason",
            "holiday",
            stdout=out,
        )
    assert not ApprovalDelegation.objects.exists()
    now = db_time()
    call_command(
        "delegations",
        "grant",
        "alice",
        "dave",
        "--from",
        (now - timedelta(days=1)).isoformat(),
        "--until",
        (now + timedelta(days=7)).isoformat(),
        "--reason",
        "holiday",
        stdout=out,
    )
    delegation = ApprovalDelegation.objects.get()
    assert delegation.created_by == world["alice"]
    call_command("delegations", "list", stdout=out)
    assert "dave for alice" in out.getvalue()
    call_command("delegations", "revoke", str(delegation.pk), "--as", "alice", stdout=out)
    assert ApprovalDelegation.objects.get().revoked_by == world["alice"]
