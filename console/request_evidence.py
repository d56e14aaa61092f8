"""The reads behind a requester's status lines (`console/request_status.py`): for a page of request revisions,
every handoff of each (its steps and their compensations, never only "the newest row"), their live findings,
who cancelled a step, who rejected, cancelled or approved the request, and who may still decide it. A fixed
number of queries whatever the page holds."""

import re
from collections import defaultdict

from approvals.models import Approval, Decision, Request, RequestEvent, RequestState
from approvals.selectors import approvers_by_workspace, decider_refusal
from console.request_status import RequestContext, RequestStatus, request_status
from console.step_status import Evidence
from outbox.hold_lines import DestinationHolds, destinations_holds
from outbox.models import ArchivedHandoff, Handoff, HandoffEvent, HandoffKind, HandoffState
from outbox.page_clock import page_now
from reconciliation.models import Finding, ManualRepair

# A reason stored with its code ("[cancelled_by_requester] no longer needed") is shown without the code.
_CODE = re.compile(r"^\[[a-z_]+\]\s*")


def _handoffs_by_request(rows: list[Request]) -> dict[int, list[Handoff]]:
    found: dict[int, list[Handoff]] = defaultdict(list)
    handoffs = Handoff.objects.filter(
        source_id__in=[r.pk for r in rows],
        workspace_id__in={r.workspace_id for r in rows},
    ).select_related("owner", "case_hold")
    for handoff in handoffs.order_by("id"):
        found[handoff.source_id].append(handoff)
    return found


def _live_findings(handoffs: list[Handoff]) -> dict[str, list[Finding]]:
    found: dict[str, list[Finding]] = defaultdict(list)
    if not handoffs:
        return found
    rows = (
        Finding.objects.live()
        .filter(
            action_key__in=[h.action_key for h in handoffs],
            workspace_id__in={h.workspace_id for h in handoffs},
        )
        .select_related("owner")
        .order_by("kind", "id")
    )
    for finding in rows:
        found[finding.action_key].append(finding)
    return found


def _cancel_events(handoffs: list[Handoff]) -> dict[int, HandoffEvent]:
    ids = [h.pk for h in handoffs if h.state == HandoffState.CANCELLED]
    if not ids:
        return {}
    rows = HandoffEvent.objects.filter(handoff_id__in=ids, to_state=HandoffState.CANCELLED)
    events = {e.handoff_id: e for e in rows.select_related("actor").order_by("at", "id")}
    for event in events.values():
        event.reason = _CODE.sub("", event.reason)
    return events


def _repairs(handoffs: list[Handoff]) -> dict[str, list[ManualRepair]]:
    """The manual repairs of the delivered steps' keys, oldest first: they settle an outcome by hand, account
    for a deleted task or finish the work by hand (`console/evidence_words.py`). No query without one."""
    delivered = [h for h in handoffs if h.state == HandoffState.DELIVERED]
    found: dict[str, list[ManualRepair]] = defaultdict(list)
    if not delivered:
        return found
    rows = ManualRepair.objects.filter(
        action_key__in=[h.action_key for h in delivered],
        workspace_id__in={h.workspace_id for h in delivered},
    ).order_by("at", "id")
    for repair in rows:
        found[repair.action_key].append(repair)
    return found


def _archived(rows: list[Request], handoffs: dict[int, list[Handoff]]) -> dict[str, list]:
    """The archived rows of the approved requests whose steps in the hot table are not the whole workflow
    (none, or the last one still plans more): retention may have moved the others. One query, or none."""

    def partial(r: Request) -> bool:
        steps = [h for h in handoffs.get(r.pk, []) if h.kind == HandoffKind.ACTION]
        last = max(steps, key=lambda h: h.step_index, default=None)
        return last is None or bool(last.plan) or min(h.step_index for h in steps) > 0

    keys = [r.action_key for r in rows if r.state == RequestState.APPROVED and partial(r)]
    found: dict[str, list] = defaultdict(list)
    if keys:
        for row in ArchivedHandoff.objects.filter(instance_key__in=keys).defer(
            "history", "request"
        ):
            found[row.instance_key].append(row)
    return found


def _destinations(handoffs: list[Handoff]) -> dict[str, DestinationHolds]:
    """The holds (`outbox/hold_lines.py`) of the destinations that steps not sent yet wait for: one query."""
    return destinations_holds({h.destination for h in handoffs if h.state == HandoffState.PENDING})


def _closing_events(rows: list[Request]) -> dict[int, RequestEvent]:
    """The event that rejected or cancelled each such request (who, when, why)."""
    closed = [r.pk for r in rows if r.state in (RequestState.REJECTED, RequestState.CANCELLED)]
    if not closed:
        return {}
    events = RequestEvent.objects.filter(
        request_id__in=closed, to_state__in=(RequestState.REJECTED, RequestState.CANCELLED)
    ).select_related("actor")
    found = {e.request_id: e for e in events.order_by("at", "id")}
    for event in found.values():
        event.reason = _CODE.sub("", event.reason)
    return found


def _approvals(rows: list[Request]) -> dict[int, Approval]:
    approved = [r.pk for r in rows if r.state == RequestState.APPROVED]
    if not approved:
        return {}
    found = Approval.objects.filter(request_id__in=approved, decision=Decision.APPROVE)
    return {a.request_id: a for a in found.select_related("decided_by")}


def _deciders(rows: list[Request]) -> dict[int, list[str]]:
    """Who may decide each request still awaiting a decision: its workspace's approvers, less its requester
    and the approver who corrected it."""
    waiting = [r for r in rows if r.state == RequestState.AWAITING_APPROVAL]
    if not waiting:
        return {}
    approvers = approvers_by_workspace(sorted({r.workspace_id for r in waiting}))
    return {
        r.pk: [
            name
            for user_id, name in approvers.get(r.workspace_id, [])
            if not decider_refusal(user_id, r)
        ]
        for r in waiting
    }


def statuses_of(rows: list[Request]) -> dict[int, RequestStatus]:
    """Each request revision's status lines, by its id. `rows` come scoped to the viewer's workspaces, with
    `corrected_by` selected."""
    if not rows:
        return {}
    now = page_now()  # the stored times' own clock (the database's)
    handoffs = _handoffs_by_request(rows)
    every = [h for group in handoffs.values() for h in group]
    findings, events, destinations = (
        _live_findings(every),
        _cancel_events(every),
        _destinations(every),
    )
    repairs, archived = _repairs(every), _archived(rows, handoffs)
    closing, approvals, deciders = _closing_events(rows), _approvals(rows), _deciders(rows)
    return {
        r.pk: request_status(
            r,
            RequestContext(
                event=closing.get(r.pk),
                approval=approvals.get(r.pk),
                approvers=deciders.get(r.pk, []),
            ),
            Evidence(
                handoffs=handoffs.get(r.pk, []),
                now=now,
                findings=findings,
                events=events,
                destinations=destinations,
                repairs=repairs,
                archived=archived.get(r.action_key, []),
            ),
        )
        for r in rows
    }
