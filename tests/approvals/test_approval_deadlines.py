"""Approval deadlines: a workflow's file sets how long an approval may wait; the sweep reminds the approvers
(and their delegates) once before it is due, escalates an overdue one to the named group, and closes a request
past its expiry, telling its requester in words. Four eyes hold throughout."""

from datetime import timedelta
from io import StringIO

import pytest
from django.conf import settings
from django.contrib.auth.models import Group
from django.core.management import call_command
from django_q.models import Schedule

from approvals.errors import InvalidPayload
from approvals.models import (
    ApprovalNotice,
    ApprovalPolicy,
    Membership,
    NoticeKind,
    Request,
    RequestEvent,
    RequestReasonCode,
    RequestState,
    Role,
)
from approvals.rules import rules_for
from approvals.services.approval_deadlines import approval_deadlines_sweep
from approvals.services.delegations import delegation_grant
from approvals.services.workflow_files import workflows_apply
from outbox.clock import db_time
from tests.approvals.notices import recorded_mail
from tests.factories import make_user

pytestmark = pytest.mark.django_db(databases=["default", "delivery"])

POLICY = {
    "due_after_hours": 24,
    "remind_before_hours": 8,
    "expire_after_hours": 72,
    "escalate_to": "onboarding-leads",
}


def _document(approval) -> dict:
    rules = rules_for("onboarding")
    entry = {"name": "onboarding", "schema": rules.schema, "steps": list(rules.steps)}
    if approval is not None:
        entry["approval"] = approval
    return {"workflows": [entry]}


@pytest.fixture
def sweep(django_capture_on_commit_callbacks):
    """The periodic sweep, its after-commit e-mails sent."""

    def run():
        with django_capture_on_commit_callbacks(execute=True):
            return approval_deadlines_sweep()

    return run


@pytest.fixture
def deadlines(world, sweep):
    """The onboarding world with emails, the leads group (dana), and the 24 h deadline applied from a file."""
    for name in ("alice", "bob", "rita"):
        world[name].email = f"{name}@example.test"
        world[name].save()
    leads = Group.objects.create(name="onboarding-leads")
    world["dana"] = make_user("dana", email="dana@example.test")
    world["dana"].groups.add(leads)
    workflows_apply(document=_document(POLICY), actor=None)
    return world


def _aged(request: Request, hours: float) -> None:
    Request.objects.filter(pk=request.pk).update(created_at=db_time() - timedelta(hours=hours))


def _mailed(subject_start: str) -> list[str]:
    return sorted(m.to[0] for m in recorded_mail() if m.subject.startswith(subject_start))


def test_the_files_approval_deadline_is_stored_and_a_bad_one_refused_naming_the_field(world):
    Group.objects.create(name="onboarding-leads")
    bad = dict(POLICY, remind_before_hours=30, escalate_to="nobody")
    with pytest.raises(InvalidPayload) as refused:
        workflows_apply(document=_document(bad), actor=None)
    said = str(refused.value)
    assert (
        "workflows[0] (onboarding).approval.remind_before_hours: less than due_after_hours" in said
    )
    assert "workflows[0] (onboarding).approval.escalate_to: 'nobody' is not a group" in said
    assert not ApprovalPolicy.objects.exists()
    changes = workflows_apply(document=_document(POLICY), actor=None)
    assert changes[0].describe().endswith("; approval deadline set")
    policy = ApprovalPolicy.objects.get(workflow="onboarding")
    assert (policy.due_after_hours, policy.escalate_to.name) == (24, "onboarding-leads")
    assert workflows_apply(document=_document(None), actor=None)[0].approval == "removed"
    assert not ApprovalPolicy.objects.exists()


def test_approvers_are_reminded_once_before_it_is_due_never_the_requester(deadlines, sweep):
    request = deadlines["request"]
    _aged(request, 10)
    assert sweep().reminded == 0
    _aged(request, 17)
    stats = sweep()
    # alice and rita approve in workspace 7; bob requested it.
    assert stats.reminded == 2
    assert _mailed("Approval due") == ["alice@example.test", "rita@example.test"]
    body = recorded_mail()[0].body
    assert "/approvals/link/" in body and "works once, for you only" in body
    assert sweep().reminded == 0
    assert len(recorded_mail()) == 2


def test_a_reminder_another_worker_already_recorded_is_not_sent_again(deadlines, sweep):
    request = deadlines["request"]
    _aged(request, 17)
    ApprovalNotice.objects.create(
        request=request, person=deadlines["alice"], kind=NoticeKind.REMINDER
    )
    sweep()
    assert _mailed("Approval due") == ["rita@example.test"]


def test_an_overdue_approval_escalates_to_the_group_but_not_to_its_requester(deadlines, sweep):
    deadlines["bob"].groups.add(Group.objects.get(name="onboarding-leads"))
    _aged(deadlines["request"], 30)
    stats = sweep()
    assert stats.escalated == 1
    assert _mailed("Overdue approval") == ["dana@example.test"]
    assert sweep().escalated == 0
    assert Request.objects.get(pk=deadlines["request"].pk).is_awaiting_approval


def _escalation_to(address: str) -> str:
    (mail,) = [m for m in recorded_mail() if m.subject.startswith("Overdue") and m.to == [address]]
    return mail.body


def _unheard(request: Request) -> list[str]:
    waits = RequestState.AWAITING_APPROVAL
    rows = RequestEvent.objects.filter(request=request, from_state=waits, to_state=waits)
    return list(rows.values_list("reason", flat=True))


def test_an_escalation_links_the_page_only_for_members_who_may_decide_it(deadlines, sweep):
    leads = Group.objects.get(name="onboarding-leads")
    leads.user_set.add(deadlines["alice"], deadlines["oscar"])
    deadlines["oscar"].email = "oscar@example.test"
    deadlines["oscar"].save()
    request = deadlines["request"]
    _aged(request, 30)
    assert sweep().escalated == 3
    page = f"/approvals/7/{request.number}/{request.revision}/"
    # alice approves in workspace 7: the page, as before.
    assert f"Open it: {settings.CONSOLE_BASE_URL}{page}" in _escalation_to("alice@example.test")
    # oscar operates workspace 7: he may read the page, not decide it.
    oscar = _escalation_to("oscar@example.test")
    assert "Open it" not in oscar
    assert "do not decide in workspace 7: ask its approvers (alice, rita)" in oscar
    # dana is in no role there: the page would answer 404, so no link, and who does decide.
    dana = _escalation_to("dana@example.test")
    assert page not in dana and settings.CONSOLE_BASE_URL not in dana
    assert (
        "You do not decide in workspace 7 and cannot open it: ask its approvers (alice, rita)."
        in dana
    )
    assert _unheard(request) == []


def test_an_escalation_nobody_of_the_group_may_decide_is_recorded_in_its_history_once(
    deadlines, sweep
):
    request = deadlines["request"]
    _aged(request, 30)
    sweep()
    sweep()
    assert _unheard(request) == [
        "overdue, escalated to onboarding-leads, but none of its members may decide it in "
        "workspace 7: ask its approvers (alice, rita)"
    ]
    assert Request.objects.get(pk=request.pk).is_awaiting_approval


def test_an_escalation_when_nobody_may_decide_says_who_gives_the_role(deadlines, sweep):
    Membership.objects.filter(workspace_id=7, role=Role.APPROVER).delete()
    request = deadlines["request"]
    _aged(request, 30)
    sweep()
    said = (
        "nobody may decide it now: the operators of workspace 7 give another person the "
        "approver role"
    )
    assert said in _escalation_to("dana@example.test")
    assert _unheard(request) == [
        f"overdue, escalated to onboarding-leads, but none of its members may decide it in "
        f"workspace 7: {said}"
    ]


def test_a_request_past_its_expiry_is_closed_with_its_reason_and_the_requester_told(
    deadlines, sweep
):
    _aged(deadlines["request"], 80)
    assert sweep().expired == 1
    request = Request.objects.get(pk=deadlines["request"].pk)
    assert request.state == RequestState.CANCELLED
    assert request.reason_code == RequestReasonCode.EXPIRED_UNAPPROVED
    (told,) = [m for m in recorded_mail() if m.subject.startswith("Closed unapproved")]
    assert told.to == ["bob@example.test"]
    assert "nobody decided it before" in told.body and "Nothing of it was sent" in told.body
    assert sweep().expired == 0
    assert len([m for m in recorded_mail() if m.to == ["bob@example.test"]]) == 1


def test_an_active_delegate_is_reminded_beside_the_approver(deadlines, sweep):
    dave = make_user("dave", email="dave@example.test")
    now = db_time()
    delegation_grant(
        approver=deadlines["alice"],
        delegate=dave,
        starts_at=now - timedelta(days=1),
        ends_at=now + timedelta(days=7),
        reason="alice on holiday",
        actor=deadlines["alice"],
    )
    _aged(deadlines["request"], 17)
    sweep()
    assert _mailed("Approval due") == [
        "alice@example.test",
        "dave@example.test",
        "rita@example.test",
    ]


def test_schedule_approvals_schedules_the_sweep_once():
    call_command("schedule_approvals", stdout=StringIO())
    call_command("schedule_approvals", stdout=StringIO())
    (schedule,) = Schedule.objects.filter(name="approval-deadlines")
    assert schedule.func == "approvals.tasks.approval_deadlines_sweep"
