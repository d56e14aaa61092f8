"""The link in an approver's reminder: after sign-in it leads to the revision's approval page, deciding
nothing; a link that cannot be used says why."""

from django.contrib.auth.decorators import login_required
from django.http import HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET

from approvals.errors import ApprovalLinkRefused
from approvals.services.approval_links import approval_link_open


@require_GET
@login_required
def open_link(request, token: str) -> HttpResponse:
    try:
        obj = approval_link_open(token=token, user=request.user)
    except ApprovalLinkRefused as refused:
        return render(request, "approvals/link_refused.html", {"reason": str(refused)}, status=410)
    return redirect(reverse("approvals:detail", args=(obj.workspace_id, obj.number, obj.revision)))
