"""Approve from a link: the reminder's link leads the signed-in approver to the approval page, deciding
nothing; it works once, for that approver, and is refused with the reason once the revision changed, was
decided, or the link expired."""

import re
from datetime import timedelta

import pytest
from django.contrib.auth.models import Group

from approvals.models import Approval, ApprovalLink, Request, RequestState
from approvals.rules import rules_for
from approvals.services import request_reject, request_revise
from approvals.services.approval_deadlines import approval_deadlines_sweep
from approvals.services.approval_links import approval_link_issue
from approvals.services.workflow_files import workflows_apply
from outbox.clock import db_time
from tests.approvals.notices import recorded_mail
from tests.console.clients import client_for

pytestmark = pytest.mark.django_db(databases=["default", "delivery"])


def _link(world, person="alice", hours=24) -> str:
    token = approval_link_issue(
        request=world["request"],
        approver=world[person],
        expires_at=db_time() + timedelta(hours=hours),
    )
    return f"/approvals/link/{token}/"


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
