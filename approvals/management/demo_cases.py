"""The demo's cases of issue 39's delivery side: a step's business times, ordering per client and one case
held by an operator. The onboarding's `create_client` step is ordered by the client's name, may not go before
the payload's `start_at` and must have gone a week after the approval (`demo.ONBOARDING_STEPS`). Request 44
(Tailspin Toys) is approved and its case held by olga with her reason; request 45, the same client approved
after it, waits behind it; request 46 (Wide World Importers) starts in three days, so its first step waits
for that time. Each is approved and held through the product's own services. Loaded once; a later load adds
what is missing."""

from datetime import timedelta

from approvals.management.demo_approvers import demo_request
from approvals.models import ApprovalPolicy, Request, RequestState
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


def _first_step(number: int) -> Handoff | None:
    return (
        Handoff.objects.filter(workspace_id=7, action_key__startswith=f"onboarding:7:{number}:")
        .order_by("pk")
        .first()
    )


def _was(moment, now) -> str:
    return f"{moment:%Y-%m-%d %H:%M} UTC" + (" (passed)" if moment <= now else "")


def demo_times_now(*, now) -> list[str]:
    """What time did to the demo since it was loaded (once: a later `make run` keeps its rows; its load is
    request 42's creation), read from the rows themselves on the database clock, so that a run a day later
    says why request 43 is overdue or request 46's step went; nothing within the hour of the load."""
    first = Request.objects.filter(workspace_id=7, number=42).order_by("pk").first()
    if first is None or now - first.created_at < timedelta(hours=1):
        return []
    loaded_at = first.created_at
    hours = int((now - loaded_at).total_seconds() // 3600)
    lines = [
        f"The demo was loaded {loaded_at:%Y-%m-%d %H:%M} UTC, {hours} hours ago; its times run on from then:"
    ]
    waiting = Request.objects.filter(workspace_id=7, number=43).first()
    policy = ApprovalPolicy.objects.filter(workflow="onboarding").first()
    if waiting is not None and policy is not None and waiting.is_awaiting_approval:
        due = waiting.created_at + timedelta(hours=policy.due_after_hours)
        closes = waiting.created_at + timedelta(hours=policy.expire_after_hours)
        lines.append(
            f"request 43: its approval due {_was(due, now)}, escalated once overdue, closed "
            f"unapproved at {_was(closes, now)}"
        )
    elif waiting is not None:
        lines.append(f"request 43: {waiting.get_state_display().lower()}")
    for number, field, words in (
        (46, "not_before", "may not go before"),
        (44, "finish_by", "must have gone by (else it goes to a person)"),
    ):
        step = _first_step(number)
        if step is not None and getattr(step, field):
            lines.append(
                f"request {number}'s first step {words} {_was(getattr(step, field), now)}: "
                f"{step.get_state_display().lower()} now"
            )
    return lines
