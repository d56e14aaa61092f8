"""The demo's cases of issue 39's delivery side: a step's business times, ordering per client and one case
held by an operator. The onboarding's `create_client` step is ordered by the client's name, may not go before
the payload's `start_at` and must have gone a week after the approval (`demo.ONBOARDING_STEPS`). Request 44
(Tailspin Toys) is approved and its case held by olga with her reason; request 45, the same client approved
after it, waits behind it; request 46 (Wide World Importers) starts in three days, so its first step waits
for that time. Each is approved and held through the product's own services. Loaded once; a later load adds
what is missing."""

from datetime import timedelta

from approvals.management.demo_approvers import demo_request
from approvals.models import Request, RequestState
from approvals.rules import rules_for
from approvals.services import request_approve
from outbox.clock import db_time
from outbox.models import Handoff
from outbox.services.case_holds import case_hold

HELD = {"client_name": "Tailspin Toys", "contact_email": "it@tailspin.example", "plan": "standard"}
BEHIND = {**HELD, "plan": "enterprise", "notes": "Upgraded before the first plan was set up."}
STARTS_LATER = {
    "client_name": "Wide World Importers",
    "contact_email": "ops@wideworld.example",
    "plan": "starter",
}
HOLD_REASON = "calling Tailspin Toys to confirm the plan (demo ticket 4712)"


def _approved(number: int, payload: dict, *, requester, approver) -> Handoff:
    request = demo_request(7, number, payload, RequestState.AWAITING_APPROVAL, requester)
    return request_approve(
        workspace_id=7,
        number=number,
        revision=1,
        actor=approver,
        payload_hash=request.payload_hash,
        reason="demo",
    )


def cases_demo_load(*, users: dict) -> list[str]:
    """What it added, in words (nothing when everything is there, or when the onboarding in force has no
    ordering key: a workflows file applied since is left as it is)."""
    if "order_by" not in rules_for("onboarding").steps[0]:
        return []
    added = []
    approver = {"requester": users["bob"], "approver": users["alice"]}
    if not Request.objects.filter(workspace_id=7, number=44).exists():
        first = _approved(44, HELD, **approver)
        case_hold(handoff_id=first.pk, actor=users["olga"], reason=HOLD_REASON, whole_case=True)
        added.append("request 44 approved, its case held by olga: " + HOLD_REASON)
    if not Request.objects.filter(workspace_id=7, number=45).exists():
        _approved(45, BEHIND, **approver)
        added.append("request 45 approved for the same client: it waits behind request 44")
    if not Request.objects.filter(workspace_id=7, number=46).exists():
        start = (db_time() + timedelta(days=3)).replace(microsecond=0)
        _approved(46, {**STARTS_LATER, "start_at": start.isoformat()}, **approver)
        added.append(
            f"request 46 approved to start at {start:%Y-%m-%d %H:%M} UTC: it waits until then"
        )
    return added
