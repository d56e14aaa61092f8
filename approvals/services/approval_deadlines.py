"""Approval deadlines: a workflow's policy from its file, and the periodic sweep that reminds the approvers
before an approval is due, escalates an overdue one to the policy's group, and closes a request past its
expiry (`expired_unapproved`), telling its requester in words (docs/intake.md, "Approval deadlines").

Each e-mail is one `ApprovalNotice` row (revision, person, kind): under concurrent sweeps the unique
constraint lets one insert win, and the winner records the e-mail as an outbox handoff in the same
transaction (`approvals/services/approval_notices.py`); the dispatchers send it, retried while the mail
server is down.
"""

from dataclasses import dataclass
from datetime import timedelta

from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.db import IntegrityError, transaction
from django.urls import reverse

from approvals.models import (
    ApprovalDelegation,
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
from approvals.selectors import decider_refusal
from approvals.services.approval_links import approval_link_issue
from approvals.services.approval_notices import notice_handoff_record
from approvals.services.requests import request_move
from lib.databases import DB
from outbox.clock import db_time

POLICY_PARTS = {"due_after_hours", "remind_before_hours", "expire_after_hours", "escalate_to"}


def _hours(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and 1 <= value <= 24 * 366


def _policy_shape(where: str, policy: dict) -> list[str]:
    problems = [f"{where}.{name}: unknown part" for name in sorted(set(policy) - POLICY_PARTS)]
    problems += [f"{where}.{name}: required" for name in sorted(POLICY_PARTS - set(policy))]
    hours = ("due_after_hours", "remind_before_hours", "expire_after_hours")
    problems += [
        f"{where}.{name}: a whole number of hours, 1 to 8784"
        for name in hours
        if name in policy and not _hours(policy[name])
    ]
    return problems


def approval_policy_problems(where: str, policy: object) -> list[str]:
    """Why a workflow's `approval` part cannot be applied, each problem naming its field."""
    if not isinstance(policy, dict):
        return [f"{where}: an object with {', '.join(sorted(POLICY_PARTS))}"]
    if problems := _policy_shape(where, policy):
        return problems
    group = policy["escalate_to"]
    checks = [
        (
            policy["remind_before_hours"] < policy["due_after_hours"],
            "remind_before_hours: less than due_after_hours",
        ),
        (
            policy["expire_after_hours"] > policy["due_after_hours"],
            "expire_after_hours: more than due_after_hours",
        ),
        (
            isinstance(group, str) and Group.objects.filter(name=group).exists(),
            f"escalate_to: {group!r} is not a group",
        ),
    ]
    return [f"{where}.{words}" for ok, words in checks if not ok]


def approval_policy_set(*, workflow: str, policy: dict | None) -> bool:
    """Store (or, with None, remove) a workflow's approval policy; whether anything changed. Checked first
    by `approval_policy_problems`; call inside the caller's transaction."""
    if policy is None:
        return ApprovalPolicy.objects.filter(workflow=workflow).delete()[0] > 0
    values = {name: policy[name] for name in POLICY_PARTS - {"escalate_to"}}
    values["escalate_to"] = Group.objects.get(name=policy["escalate_to"])
    current = ApprovalPolicy.objects.filter(workflow=workflow).first()
    if current is not None and all(getattr(current, k) == v for k, v in values.items()):
        return False
    ApprovalPolicy.objects.update_or_create(workflow=workflow, defaults=values)
    return True


@dataclass
class SweepStats:
    reminded: int = 0
    escalated: int = 0
    expired: int = 0


def active_delegates(approver_ids: list[int], at) -> dict[int, list[int]]:
    """The delegates acting, at `at`, for each of these approvers (revoked and out-of-period ones never)."""
    found: dict[int, list[int]] = {}
    rows = ApprovalDelegation.objects.filter(
        approver_id__in=approver_ids,
        starts_at__lte=at,
        ends_at__gt=at,
        revoked_at__isnull=True,
        delegate__is_active=True,
    ).values_list("approver_id", "delegate_id")
    for approver_id, delegate_id in rows:
        found.setdefault(approver_id, []).append(delegate_id)
    return found


def _deciders(request: Request, at) -> list[int]:
    """Who may decide this revision now: its workspace's approvers and their delegates, less anyone four eyes
    refuse (its requester, the approver who corrected it)."""
    approvers = list(
        Membership.objects.filter(
            workspace_id=request.workspace_id, role=Role.APPROVER, user__is_active=True
        ).values_list("user_id", flat=True)
    )
    delegates = [d for ds in active_delegates(approvers, at).values() for d in ds]
    people = dict.fromkeys(approvers + delegates)
    return [pk for pk in people if not decider_refusal(pk, request)]


def _escalation_group(request: Request, policy: ApprovalPolicy) -> list[int]:
    members = policy.escalate_to.user_set.filter(is_active=True).values_list("pk", flat=True)
    return [pk for pk in members if not decider_refusal(pk, request)]


def _names(people: list[int]) -> str:
    users = get_user_model().objects.filter(pk__in=people).order_by("username")
    return ", ".join(users.values_list("username", flat=True))


def _who_decides(request: Request, deciders: list[int]) -> str:
    ws = request.workspace_id
    if deciders:
        return f"ask its approvers ({_names(deciders)})"
    return (
        f"nobody may decide it now: the operators of workspace {ws} give another person the "
        "approver role"
    )


def _escalation_unheard(request: Request, policy: ApprovalPolicy, deciders: list[int]) -> None:
    """Record, once per revision, in the request's history that its escalation reached nobody who may decide
    it: who may (or that nobody may, and who fixes that). A history row, not a move: it still waits."""
    waits = RequestState.AWAITING_APPROVAL
    said = RequestEvent.objects.filter(request=request, from_state=waits, to_state=waits)
    if said.exists():  # every later sweep: no lock taken
        return
    with transaction.atomic(using=DB):
        locked = Request.objects.select_for_update(no_key=True).filter(pk=request.pk, state=waits)
        if not locked.exists() or said.exists():
            return
        RequestEvent.objects.create(
            request=request,
            from_state=waits,
            to_state=waits,
            reason=f"overdue, escalated to {policy.escalate_to.name}, but none of its members may "
            f"decide it in workspace {request.workspace_id}: {_who_decides(request, deciders)}",
        )


def _escalate(request: Request, policy: ApprovalPolicy, now, stats: SweepStats) -> None:
    """Tell each member of the group; only those who may decide it get its page (the others: who does)."""
    deciders = _deciders(request, now)
    group = _escalation_group(request, policy)
    for person_id in group:
        words = _escalation_words(request, policy, person_id, deciders)
        stats.escalated += _notify_once(request, person_id, NoticeKind.ESCALATION, policy, words)
    if not set(group) & set(deciders):
        _escalation_unheard(request, policy, deciders)


def _page(request: Request) -> str:
    path = reverse(
        "approvals:detail", args=[request.workspace_id, request.number, request.revision]
    )
    return f"{settings.CONSOLE_BASE_URL}{path}"


def _link(request: Request, person_id: int, closes) -> str:
    """The approver's own link, usable once, valid until the request closes unapproved."""
    approver = get_user_model().objects.get(pk=person_id)
    token = approval_link_issue(request=request, approver=approver, expires_at=closes)
    return f"{settings.CONSOLE_BASE_URL}{reverse('approvals:link', args=[token])}"


def _words(kind: str, request: Request, policy: ApprovalPolicy, person_id: int) -> tuple[str, str]:
    what = f"{request.workflow} request {request.number} (revision {request.revision})"
    due = request.created_at + timedelta(hours=policy.due_after_hours)
    closes = request.created_at + timedelta(hours=policy.expire_after_hours)
    if kind == NoticeKind.REMINDER:
        return f"Approval due {due:%Y-%m-%d %H:%M} UTC: {what}", (
            f"{what} waits for your decision; it is due {due:%Y-%m-%d %H:%M} UTC.\n"
            f"Open it (sign in; this link works once, for you only): "
            f"{_link(request, person_id, closes)}\n"
        )
    return f"Closed unapproved: {what}", (
        f"Your {what} was closed: nobody decided it before {closes:%Y-%m-%d %H:%M} UTC, the "
        f"{request.workflow} workflow's approval expiry. Nothing of it was sent. Submit it again if it "
        f"is still needed.\nIt: {_page(request)}\n"
    )


def _escalation_act(request: Request, person_id: int, deciders: list[int]) -> str:
    ws = request.workspace_id
    if person_id in deciders:
        return f"Open it: {_page(request)}\n"
    if Membership.objects.filter(workspace_id=ws, user_id=person_id).exists():
        return (
            f"You may read it ({_page(request)}) but do not decide in workspace {ws}: "
            f"{_who_decides(request, deciders)}.\n"
        )
    who = _who_decides(request, deciders)
    return f"You do not decide in workspace {ws} and cannot open it: {who}.\n"


def _escalation_words(
    request: Request, policy: ApprovalPolicy, person_id: int, deciders: list[int]
):
    """An escalation grants no rights: the page link goes only to a member who may decide the request; the
    others are told they do not decide in its workspace, and who does."""

    def words() -> tuple[str, str]:
        what = f"{request.workflow} request {request.number} (revision {request.revision})"
        due = request.created_at + timedelta(hours=policy.due_after_hours)
        closes = request.created_at + timedelta(hours=policy.expire_after_hours)
        act = _escalation_act(request, person_id, deciders)
        return f"Overdue approval: {what}", (
            f"Nobody has decided {what}; it was due {due:%Y-%m-%d %H:%M} UTC and is escalated to "
            f"{policy.escalate_to.name}. It closes unapproved at {closes:%Y-%m-%d %H:%M} UTC.\n{act}"
        )

    return words


def _notify_once(
    request: Request, person_id: int, kind: str, policy: ApprovalPolicy, words=None
) -> bool:
    """Record the notice and, with it, its e-mail as an outbox handoff (a person without an address gets
    none); False (nothing recorded) when the notice was already recorded. `words`, when given, writes the
    e-mail instead of `_words`."""
    email = get_user_model().objects.filter(pk=person_id).values_list("email", flat=True).first()
    try:
        with transaction.atomic(using=DB):
            ApprovalNotice.objects.create(request=request, person_id=person_id, kind=kind)
            if email:
                subject, body = words() if words else _words(kind, request, policy, person_id)
                notice_handoff_record(
                    request=request,
                    kind=kind,
                    person_id=person_id,
                    to=email,
                    subject=subject,
                    body=body,
                )
    except IntegrityError:
        return False
    return True


def _awaiting(policy: ApprovalPolicy, older_than):
    return Request.objects.filter(
        workflow=policy.workflow, state=RequestState.AWAITING_APPROVAL, created_at__lte=older_than
    ).order_by("created_at", "id")


def request_expire(*, request_id: int, policy: ApprovalPolicy) -> bool:
    """Close one revision past its expiry, if it still awaits approval, and tell its requester."""
    with transaction.atomic(using=DB):
        request = Request.objects.select_for_update(no_key=True).filter(pk=request_id).first()
        if request is None or request.state != RequestState.AWAITING_APPROVAL:
            return False
        request_move(
            request,
            RequestState.CANCELLED,
            reason=f"nobody decided it within {policy.expire_after_hours} hours",
            reason_code=RequestReasonCode.EXPIRED_UNAPPROVED,
        )
        _notify_once(request, request.requested_by_id, NoticeKind.EXPIRED, policy)
    return True


def _sweep_policy(policy: ApprovalPolicy, now, stats: SweepStats) -> None:
    hours = timedelta(hours=1)
    for request in _awaiting(policy, now - policy.expire_after_hours * hours):
        stats.expired += request_expire(request_id=request.pk, policy=policy)
    for request in _awaiting(policy, now - policy.due_after_hours * hours):
        _escalate(request, policy, now, stats)
    remind_from = now - (policy.due_after_hours - policy.remind_before_hours) * hours
    for request in _awaiting(policy, remind_from):
        for person_id in _deciders(request, now):
            stats.reminded += _notify_once(request, person_id, NoticeKind.REMINDER, policy)


def approval_deadlines_sweep() -> SweepStats:
    """One pass over every workflow with an approval policy; safe to run at once on several workers."""
    stats = SweepStats()
    now = db_time(DB)
    for policy in ApprovalPolicy.objects.select_related("escalate_to").order_by("workflow"):
        _sweep_policy(policy, now, stats)
    return stats
