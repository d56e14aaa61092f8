"""Delegation: an approver names a delegate for a bounded period (audited: who, for whom, when, why, who
revoked it). The delegate decides in their own name; four eyes hold for them as for anyone
(`approvals/selectors.py` `decider_refusal`)."""

from datetime import timedelta

from django.db import transaction

from approvals.errors import ApprovalDenied, InvalidPayload
from approvals.models import ApprovalDelegation, Membership, Role
from approvals.selectors import may_decide_in
from lib.databases import DB
from outbox.clock import db_time

LONGEST_DELEGATION = timedelta(days=90)


def _grant_problems(*, approver, delegate, starts_at, ends_at, reason: str, now) -> list[str]:
    checks = [
        (delegate.pk != approver.pk, "delegate: someone other than the approver"),
        (delegate.is_active, "delegate: an active user"),
        (ends_at > starts_at, "ends_at: after starts_at"),
        (ends_at > now, "ends_at: in the future"),
        (ends_at - starts_at <= LONGEST_DELEGATION, "ends_at: at most 90 days after starts_at"),
        (bool(reason.strip()), "reason: required"),
    ]
    return [words for ok, words in checks if not ok]


def delegation_grant(
    *, approver, delegate, starts_at, ends_at, reason: str, actor
) -> ApprovalDelegation:
    """`delegate` decides for `approver` from `starts_at` to `ends_at`. The approver names their own delegate;
    someone else needs the permission to add delegations (an administrator covering an absence)."""
    if actor.pk != approver.pk and not actor.has_perm("approvals.add_approvaldelegation"):
        raise ApprovalDenied(f"{actor} may not name a delegate for {approver}")
    if not Membership.objects.filter(user=approver, role=Role.APPROVER).exists():
        raise ApprovalDenied(f"{approver} approves in no workspace: nothing to delegate")
    problems = _grant_problems(
        approver=approver,
        delegate=delegate,
        starts_at=starts_at,
        ends_at=ends_at,
        reason=reason,
        now=db_time(DB),
    )
    if problems:
        raise InvalidPayload(problems)
    with transaction.atomic(using=DB):
        return ApprovalDelegation.objects.create(
            approver=approver,
            delegate=delegate,
            starts_at=starts_at,
            ends_at=ends_at,
            reason=reason,
            created_by=actor,
        )


def delegation_revoke(*, delegation_id: int, actor) -> ApprovalDelegation:
    with transaction.atomic(using=DB):
        delegation = ApprovalDelegation.objects.select_for_update().filter(pk=delegation_id).first()
        if delegation is None:
            raise InvalidPayload([f"no delegation {delegation_id}"])
        if actor.pk != delegation.approver_id and not actor.has_perm(
            "approvals.change_approvaldelegation"
        ):
            raise ApprovalDenied(f"{actor} may not revoke delegation {delegation_id}")
        if delegation.revoked_at is None:
            delegation.revoked_at = db_time(DB)
            delegation.revoked_by = actor
            delegation.save(update_fields=["revoked_at", "revoked_by"])
        return delegation


def require_approver_or_delegate(actor, workspace_id: int) -> None:
    """The actor approves in the workspace, or is, right now, the delegate of someone who does."""
    if not may_decide_in(actor, workspace_id):
        raise ApprovalDenied(
            f"{actor} is not approver in workspace {workspace_id}, nor anyone's delegate there now"
        )
