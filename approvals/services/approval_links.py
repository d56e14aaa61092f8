"""Approval links: the link in an approver's reminder. A random token (`secrets.token_urlsafe`), stored only
as its SHA-256, bound to one revision, its payload hash, one approver and an expiry; usable once. Opening it,
signed in as that approver, only leads to the revision's approval page: nothing is decided by opening it.
It is refused, with the reason, once the revision changed, was decided, or the link expired or was used
(docs/security.md, "Approval links")."""

import hashlib
import secrets
from datetime import datetime

from django.db import transaction
from django.db.models import Max

from approvals.errors import ApprovalLinkRefused
from approvals.models import ApprovalDelegation, ApprovalLink, Request, RequestState
from approvals.selectors import may_decide_in
from lib.databases import DB
from outbox.clock import db_time


def _hashed(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def approval_link_issue(*, request: Request, approver, expires_at: datetime) -> str:
    """A new link's token for `approver` to open `request` (this revision, this payload) until `expires_at`
    (on the database clock). The token is returned once and never stored."""
    token = secrets.token_urlsafe(32)
    ApprovalLink.objects.create(
        token_hash=_hashed(token),
        request=request,
        payload_hash=request.payload_hash,
        approver=approver,
        expires_at=expires_at,
    )
    return token


def _newest_revision(request: Request) -> int:
    return Request.objects.filter(
        workspace_id=request.workspace_id, workflow=request.workflow, number=request.number
    ).aggregate(n=Max("revision"))["n"]


def _no_longer_deciding(user, workspace_id: int, now) -> str:
    """Why the link's own approver may no longer decide there ("" while they may): the delegation that made
    them a decider ended or was revoked, or their approver role there was removed. The link is then refused
    before it is used: opening it would spend it on a page they may no longer open or act on."""
    if may_decide_in(user, workspace_id):
        return ""
    ended = (
        ApprovalDelegation.objects.filter(delegate=user, starts_at__lte=now)
        .select_related("approver")
        .order_by("-ends_at", "-id")
        .first()
    )
    why = "your approver role there was removed"
    if ended is not None and ended.revoked_at is not None:
        why = f"{ended.approver}'s delegation to you was revoked at {ended.revoked_at:%Y-%m-%d %H:%M} UTC"
    elif ended is not None:
        why = f"{ended.approver}'s delegation to you ended at {ended.ends_at:%Y-%m-%d %H:%M} UTC"
    return f"you no longer decide requests of workspace {workspace_id}: {why}"


def _refusal(link: ApprovalLink, user, now) -> str:
    request = link.request
    newest = _newest_revision(request)
    if link.approver_id != user.pk:
        return "this link was sent to someone else: sign in as the approver it was sent to"
    if no_longer := _no_longer_deciding(user, request.workspace_id, now):
        return no_longer
    if newest != request.revision or request.payload_hash != link.payload_hash:
        return (
            f"request {request.number} changed since this link was sent: revision {newest} "
            "replaced the one it was for, and needs its own decision"
        )
    if request.state != RequestState.AWAITING_APPROVAL:
        return (
            f"request {request.number} revision {request.revision} was already "
            f"{request.get_state_display().lower()}: there is nothing left to decide"
        )
    if link.expires_at <= now:
        return f"this link expired at {link.expires_at:%Y-%m-%d %H:%M} UTC"
    if link.used_at is not None:
        return f"this link was already used at {link.used_at:%Y-%m-%d %H:%M} UTC; it works once"
    return ""


def approval_link_open(*, token: str, user) -> Request:
    """The revision the link leads to, the link now used; ApprovalLinkRefused with the reason otherwise."""
    with transaction.atomic(using=DB):
        link = (
            ApprovalLink.objects.select_for_update()
            .select_related("request")
            .filter(token_hash=_hashed(token))
            .first()
        )
        if link is None:
            raise ApprovalLinkRefused(
                "this is not an approval link of ours (mistyped or cut short?)"
            )
        now = db_time(DB)
        if refusal := _refusal(link, user, now):
            raise ApprovalLinkRefused(refusal)
        # Used once: a conditional update, so two tabs opening it at once cannot both use it (SQLite too).
        if not ApprovalLink.objects.filter(pk=link.pk, used_at__isnull=True).update(used_at=now):
            raise ApprovalLinkRefused("this link was already used; it works once")
        return link.request
