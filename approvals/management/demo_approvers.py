"""The demo's approvers' side (issue 39): the onboarding's approval deadline (24 h, a reminder 8 h before,
escalation to the onboarding leads, closed after 72 h), request 43 of workspace 7 waiting 20 hours, so the
first sweep of `make run` mails alice and dana a reminder with their own approval link (to the demo
mailbox), alice's delegate (mallory, for her holiday), and a client erased on request (request 41, rejected,
its personal fields erased by olga). Loaded once; a later load adds what is missing."""

from datetime import timedelta

from django.contrib.auth.models import Group, Permission

from approvals.models import ApprovalDelegation, Request, RequestEvent, RequestState
from approvals.request_search import request_search_text
from approvals.services.approval_deadlines import approval_policy_set
from approvals.services.erasure import subject_erase, subject_named
from outbox.clock import db_time
from outbox.payloads import payload_hash

LEADS = "onboarding-leads"
POLICY = {
    "due_after_hours": 24,
    "remind_before_hours": 8,
    "expire_after_hours": 72,
    "escalate_to": LEADS,
}
WAITING = {
    "client_name": "Contoso Retail",
    "contact_email": "it@contoso.example",
    "plan": "enterprise",
}
ERASED = {
    "client_name": "Fabrikam Bakery",
    "contact_email": "owner@fabrikam.example",
    "plan": "standard",
}


def demo_request(workspace_id: int, number: int, payload: dict, state: str, requester) -> Request:
    request = Request(
        workflow="onboarding",
        workspace_id=workspace_id,
        number=number,
        revision=1,
        payload=payload,
        payload_hash=payload_hash(payload),
        state=state,
        requested_by=requester,
        reason_code="rejected_by_approver" if state == RequestState.REJECTED else "",
    )
    request.search_text = request_search_text(request)
    request.save(force_insert=True)
    RequestEvent.objects.create(request=request, to_state=state, actor=requester, reason="demo")
    return request


def approvers_demo_load(*, users: dict) -> list[str]:
    """What it added, in words (nothing when everything is there)."""
    added = []
    leads, _ = Group.objects.get_or_create(name=LEADS)
    users["dana"].groups.add(leads)
    if approval_policy_set(workflow="onboarding", policy=POLICY):
        added.append("the onboarding's approval deadline (24 h, reminder 8 h before)")
    now = db_time()
    if not Request.objects.filter(workspace_id=7, number=43).exists():
        waiting = demo_request(7, 43, WAITING, RequestState.AWAITING_APPROVAL, users["bob"])
        Request.objects.filter(pk=waiting.pk).update(created_at=now - timedelta(hours=20))
        added.append("request 43 waiting 20 hours: the first sweep mails its approvers a reminder")
    if not ApprovalDelegation.objects.filter(approver=users["alice"]).exists():
        ApprovalDelegation.objects.create(
            approver=users["alice"],
            delegate=users["mallory"],
            starts_at=now,
            ends_at=now + timedelta(days=14),
            reason="alice on holiday",
            created_by=users["alice"],
        )
        added.append("alice's delegate: mallory, for 14 days")
    if not Request.objects.filter(workspace_id=7, number=41).exists():
        demo_request(7, 41, ERASED, RequestState.REJECTED, users["bob"])
        users["olga"].user_permissions.add(
            Permission.objects.get(codename="erase_personal_data", content_type__app_label="outbox")
        )
        olga = type(users["olga"]).objects.get(pk=users["olga"].pk)  # permissions read afresh
        subject_erase(
            subject=subject_named(email=ERASED["contact_email"]),
            reason="the client asked (demo ticket 4711)",
            actor=olga,
        )
        added.append("request 41's client erased on request by olga")
    return added
