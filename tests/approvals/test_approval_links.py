"""Approve from a link: the reminder's link leads the signed-in approver to the approval page, deciding
nothing; it works once, for that approver, and is refused with the reason once the revision changed, was
decided, or the link expired."""

import hashlib
import re
from datetime import timedelta

import pytest
from django.contrib.auth.models import Group

from approvals.models import (
    Approval,
    ApprovalDelegation,
    ApprovalLink,
    Membership,
    Request,
    RequestState,
    Role,
)
from approvals.rules import rules_for
from approvals.services import request_reject, request_revise
from approvals.services.approval_deadlines import approval_deadlines_sweep
from approvals.services.approval_links import approval_link_issue
from approvals.services.delegations import delegation_grant, delegation_revoke
from approvals.services.workflow_files import workflows_apply
from outbox.clock import db_time
from tests.approvals.notices import recorded_mail
from tests.console.clients import client_for
from tests.factories import make_user

pytestmark = pytest.mark.django_db(databases=["default", "delivery"])


def _link(world, person="alice", hours=24) -> str:
    token = approval_link_issue(
        request=world["request"],
        approver=world[person],
        expires_at=db_time() + timedelta(hours=hours),
    )
    return f"/approvals/link/{token}/"


def _hash_of(link: str) -> str:
    return hashlib.sha256(link.split("/")[-2].encode()).hexdigest()


def _refused(client, link: str) -> str:
    response = client.get(link)
    assert response.status_code == 410
    return response.content.decode().lower()


def test_the_reminders_link_leads_to_the_approval_page_after_sign_in_deciding_nothing(
    world, client, django_capture_on_commit_callbacks
):
    world["alice"].email = "alice@example.test"
    world["alice"].save()
    Group.objects.create(name="leads")
    rules = rules_for("onboarding")
    policy = {
        "due_after_hours": 24,
        "remind_before_hours": 8,
        "expire_after_hours": 72,
        "escalate_to": "leads",
    }
    entry = {"name": "onboarding", "schema": rules.schema, "steps": list(rules.steps)}
    workflows_apply(document={"workflows": [dict(entry, approval=policy)]}, actor=None)
    Request.objects.filter(pk=world["request"].pk).update(
        created_at=db_time() - timedelta(hours=17)
    )
    with django_capture_on_commit_callbacks(execute=True):
        approval_deadlines_sweep()
    (reminder,) = [m for m in recorded_mail() if m.to == ["alice@example.test"]]
    link = re.search(r"http://[^/]+(/approvals/link/[^/]+/)", reminder.body).group(1)
    anonymous = client.get(link)
    assert anonymous.status_code == 302 and "/login" in anonymous["Location"]
    opened = client_for(world["alice"]).get(link)
    assert opened.status_code == 302 and opened["Location"] == "/approvals/7/42/1/"
    assert not Approval.objects.exists()
    assert Request.objects.get(pk=world["request"].pk).state == RequestState.AWAITING_APPROVAL
    assert "already used" in _refused(client_for(world["alice"]), link)


def test_a_link_is_refused_once_the_revision_changed(world):
    link = _link(world)
    request_revise(
        workspace_id=7,
        number=42,
        payload=dict(world["request"].payload, plan="enterprise"),
        actor=world["bob"],
        reason="bigger plan",
    )
    assert "changed since this link was sent: revision 2" in _refused(
        client_for(world["alice"]), link
    )
    assert ApprovalLink.objects.get().used_at is None


def test_a_link_is_refused_once_the_revision_was_decided(world):
    link = _link(world)
    request_reject(
        workspace_id=7,
        number=42,
        revision=1,
        actor=world["rita"],
        payload_hash=world["request"].payload_hash,
        reason="no",
    )
    assert "was already rejected" in _refused(client_for(world["alice"]), link)


def test_an_expired_link_and_someone_elses_link_are_refused(world):
    expired = _link(world)
    ApprovalLink.objects.update(expires_at=db_time() - timedelta(minutes=1))
    assert "this link expired at" in _refused(client_for(world["alice"]), expired)
    ritas = _link(world, person="rita")
    assert "sent to someone else" in _refused(client_for(world["alice"]), ritas)
    assert "not an approval link of ours" in _refused(
        client_for(world["alice"]), "/approvals/link/made-up/"
    )


@pytest.mark.parametrize("ended", ["revoked", "over"])
def test_a_delegates_link_is_refused_once_the_delegation_ended_and_stays_unused(world, ended):
    """The sweep sends an active delegate their own link; opened after the delegation ended it must say so
    (410), not spend the link on an approval page the delegate may no longer open (a 404 after the redirect)."""
    dave = world["dave"] = make_user("dave")
    now = db_time()
    delegation = delegation_grant(
        approver=world["alice"],
        delegate=dave,
        starts_at=now - timedelta(days=1),
        ends_at=now + timedelta(days=7),
        reason="alice on holiday",
        actor=world["alice"],
    )
    while_it_lasts = client_for(dave).get(_link(world, person="dave"))
    assert while_it_lasts.status_code == 302
    assert client_for(dave).get(while_it_lasts["Location"]).status_code == 200
    link = _link(world, person="dave")
    if ended == "revoked":
        delegation_revoke(delegation_id=delegation.pk, actor=world["alice"])
    else:
        ApprovalDelegation.objects.filter(pk=delegation.pk).update(
            starts_at=now - timedelta(days=2), ends_at=now - timedelta(minutes=1)
        )
    reason = _refused(client_for(dave), link)
    assert "you no longer decide requests of workspace 7" in reason
    assert ("revoked" if ended == "revoked" else "ended") in reason
    assert ApprovalLink.objects.get(token_hash=_hash_of(link)).used_at is None


def test_an_approvers_link_is_refused_once_they_no_longer_approve_there(world):
    link = _link(world)
    Membership.objects.filter(user=world["alice"], workspace_id=7, role=Role.APPROVER).delete()
    assert "you no longer decide requests of workspace 7" in _refused(
        client_for(world["alice"]), link
    )
