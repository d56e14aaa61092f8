"""An approver's delegates (issue 39): the approver names a delegate for a bounded period, sees their
delegations and the ones they hold for others, and ends one; the same rules and audit as
`manage.py delegations` (`approvals/services/delegations.py`). Phone-friendly: one column, no table."""

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpResponse, HttpResponseRedirect
from django.shortcuts import render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_POST

from approvals.errors import ApprovalDenied, InvalidPayload
from approvals.models import ApprovalDelegation
from approvals.selectors import active_user_named
from approvals.services.delegations import delegation_grant, delegation_revoke
from lib.moments import BadMoment, parse_moment
from lib.querystring import id_or_none
from outbox.clock import db_time

FIELDS = ("delegate", "starts", "ends", "reason")


def _page(request, *, typed: dict | None = None, problems=(), status: int = 200) -> HttpResponse:
    now = db_time()
    rows = ApprovalDelegation.objects.select_related("approver", "delegate", "revoked_by")
    context = {
        "mine": rows.filter(approver=request.user, ends_at__gt=now).order_by("starts_at", "id"),
        "for_others": rows.filter(
            delegate=request.user, ends_at__gt=now, revoked_at__isnull=True
        ).order_by("starts_at", "id"),
        "typed": typed or {},
        "problems": list(problems),
        "now": now,
    }
    return render(request, "approvals/delegations.html", context, status=status)


@require_GET
@login_required
def my_delegations(request) -> HttpResponse:
    return _page(request)


def _delegate(username: str):
    found = active_user_named(username.strip())
    if found is None:
        raise InvalidPayload([f"delegate: no active user {username.strip()!r}"])
    return found


@require_POST
@login_required
def delegation_new(request) -> HttpResponse:
    typed = {name: request.POST.get(name, "") for name in FIELDS}
    try:
        delegation = delegation_grant(
            approver=request.user,
            delegate=_delegate(typed["delegate"]),
            starts_at=parse_moment(typed["starts"], field="starts"),
            ends_at=parse_moment(typed["ends"], field="ends"),
            reason=typed["reason"],
            actor=request.user,
        )
    except InvalidPayload as exc:
        return _page(request, typed=typed, problems=exc.reasons, status=422)
    except BadMoment as exc:
        return _page(request, typed=typed, problems=[str(exc)], status=422)
    except ApprovalDenied as exc:
        return _page(request, typed=typed, problems=[str(exc)], status=403)
    messages.success(
        request,
        f"{delegation.delegate} decides for you from {delegation.starts_at:%Y-%m-%d %H:%M} "
        f"to {delegation.ends_at:%Y-%m-%d %H:%M} UTC.",
    )
    return HttpResponseRedirect(reverse("approvals:delegations"))


@require_POST
@login_required
def delegation_end(request) -> HttpResponse:
    delegation_id = id_or_none(request.POST.get("delegation", ""))
    mine = ApprovalDelegation.objects.filter(pk=delegation_id, approver=request.user).exists()
    if delegation_id is None or not mine:
        return _page(request, problems=["delegation: none of yours by that number"], status=404)
    delegation = delegation_revoke(delegation_id=delegation_id, actor=request.user)
    messages.success(request, f"{delegation.delegate} no longer decides for you.")
    return HttpResponseRedirect(reverse("approvals:delegations"))
