"""Where a request stands, for its requester: one line for the request and one per step
(`console/step_status.py`), each saying what is known, with who confirmed it and when, what happens next and
who owns that. Pure: the rows are read beforehand (`console/request_evidence.py`).

The request's line is derived from its own state, then from every step's line: a workflow is done only
when each step's work is reported done, stuck when any step is with a person, and undone when its
delivered steps were compensated."""

from dataclasses import dataclass, field, replace

from approvals.models import Request, RequestState
from console.claims import Claim, owner_claim
from console.step_status import (
    NO,
    STUCK,
    SYSTEM,
    UNKNOWN,
    WAITING,
    YES,
    Evidence,
    StatusLine,
    at,
    step_lines,
)
from outbox.models import HandoffState
from outbox.selectors import instance_status

R = RequestState


@dataclass
class RequestContext:
    """What the request's own line is derived from: the event that put it in its state, its approval, and the
    approvers who may decide it (neither its requester nor the approver who corrected it)."""

    event: object = None
    approval: object = None
    approvers: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class RequestStatus:
    headline: StatusLine
    steps: list[StatusLine]


def request_status(request: Request, context: RequestContext, evidence: Evidence) -> RequestStatus:
    if request.state != R.APPROVED:
        return RequestStatus(_claimed(request, _undecided_line(request, context, evidence)), [])
    steps = step_lines(evidence)
    return RequestStatus(
        _claimed(request, _approved_line(request, context, evidence, steps)), steps
    )


def _claimed(request: Request, line: StatusLine) -> StatusLine:
    """The request's line with its claims (`console/claims.py`): its state, and who owns the next step."""
    subject = f"request:{request.pk}"
    state = Claim("request.state", subject, request.state)
    return replace(line, claims=(state, owner_claim(subject, line.owner)))


def _by(event, now) -> str:
    if event is None:
        return ""
    who = event.actor.get_username() if event.actor else "the system"
    return f" by {who} at {at(event.at, now)}" + (f": {event.reason}" if event.reason else "")


def _undecided_line(request: Request, context: RequestContext, evidence: Evidence) -> StatusLine:
    now = evidence.now
    if request.state == R.REJECTED:
        return StatusLine(
            "Request",
            f"rejected{_by(context.event, now)}",
            NO,
            "you may revise it and submit it again",
            "you",
        )
    if request.state == R.CANCELLED:
        return StatusLine("Request", f"cancelled{_by(context.event, now)}; nothing is sent", NO)
    if request.state == R.SUPERSEDED:
        return StatusLine("Request", "replaced by a newer revision", NO)
    return _awaiting_line(request, context, evidence)


def _awaiting_line(request: Request, context: RequestContext, evidence: Evidence) -> StatusLine:
    since = at(request.created_at, evidence.now)
    ws = request.workspace_id
    corrected = (
        f"corrected by {request.corrected_by.get_username()} (an approver) at {since}; "
        if request.corrected_by_id
        else ""
    )
    if not context.approvers:
        nobody = (
            f"{request.corrected_by.get_username()} corrected it and may not also approve it, and "
            "no other approver is in the workspace"
            if request.corrected_by_id
            else "no approver in the workspace may decide it"
        )
        return StatusLine(
            "Request",
            f"{corrected}waiting, but nobody can approve it: {nobody}",
            STUCK,
            f"an operator of workspace {ws} gives another person the approver role",
            f"the operators of workspace {ws}",
        )
    who = ", ".join(context.approvers)
    return StatusLine(
        "Request",
        f"{corrected}awaiting another approver"
        if corrected
        else f"awaiting an approver since {since}",
        WAITING,
        "an approver approves or rejects it"
        + (" (not the one who corrected it)" if corrected else ""),
        f"the approvers who may decide it: {who}",
    )


def _approved_line(
    request: Request, context: RequestContext, evidence: Evidence, steps: list[StatusLine]
) -> StatusLine:
    approved = _approved_by(context, evidence)
    stuck = next((s for s in steps if s.tone in (STUCK, UNKNOWN) and s.owner != SYSTEM), None)
    if stuck is not None:
        return StatusLine(
            "Request",
            f"{approved}; stuck with an operator at {stuck.label.lower()}",
            STUCK,
            stuck.next,
            stuck.owner,
        )
    if not evidence.handoffs:
        return StatusLine("Request", f"{approved}; nothing recorded for sending", UNKNOWN)
    if all(h.state == HandoffState.OBSERVED for h in evidence.handoffs):
        return StatusLine(
            "Request", f"{approved}; recorded in observe-only mode: nothing is sent", NO
        )
    return _instance_line(approved, instance_status(evidence.handoffs), steps)


def _approved_by(context: RequestContext, evidence: Evidence) -> str:
    approval = context.approval
    if approval is None:
        return "approved"
    return f"approved by {approval.decided_by.get_username()} at {at(approval.decided_at, evidence.now)}"


# Where an instance stands (`outbox.selectors.instance_status`), when no step waits for a person:
# what the request's line says after "approved by …; ", its tone, what happens next and who owns that.
_INSTANCE_LINES = {
    "complete": ("done: the work of every step is done", YES, "", ""),
    "compensated": (
        "undone: its delivered steps were reversed (compensated)",
        NO,
        "nothing more happens; submit a new request if the work is still wanted",
        "you",
    ),
    "compensating": (
        "being undone: its delivered steps are being reversed",
        WAITING,
        "the system sends the compensations, latest step first",
        SYSTEM,
    ),
    "cancelled": ("cancelled before anything was sent", NO, "", ""),
}


def _current_step(steps: list[StatusLine]) -> StatusLine | None:
    """The step the request is at: the first whose work is not done that someone still owns. A step settled
    with nothing more to happen (its deleted task accounted for by a repair, a settled row retention archived)
    is passed over, so a later step's owner (the receiver's workers, say) owns the request's next step, as
    `request.next_owner` says (docs/console.md). When no step left owns anything, the first not done."""
    left = [s for s in steps if s.tone != YES]
    return next((s for s in left if s.owner), left[0] if left else None)


def _settled_line(approved: str, steps: list[StatusLine]) -> StatusLine:
    """Every step whose work is not done is settled with nothing more to happen (nobody owns it: its deleted
    task accounted for by a person's repair, a settled row retention archived): the request is not in
    progress. Its line says so, with the first such step's own words (what happened, the evidence and when),
    and that no one needs to act; its next owner is nobody, as every step's."""
    left = [s for s in steps if s.tone != YES]
    first = left[0]
    more = (
        f" (and {len(left) - 1} more step(s) settled without their work done)"
        if len(left) > 1
        else ""
    )
    return StatusLine(
        "Request",
        f"{approved}; ended, not every step's work done: {first.label.lower()}: {first.text}{more}",
        NO,
        "nothing more happens and no one needs to act; submit a new request if the work is still wanted",
        "",
    )


def _instance_line(approved: str, status: str, steps: list[StatusLine]) -> StatusLine:
    if status in _INSTANCE_LINES:
        text, tone, next_, owner = _INSTANCE_LINES[status]
        return StatusLine("Request", f"{approved}; {text}", tone, next_, owner)
    current = _current_step(steps)
    if current is None:
        # Every step's line says its work is done (some steps perhaps archived by retention already).
        text, tone, next_, owner = _INSTANCE_LINES["complete"]
        return StatusLine("Request", f"{approved}; {text}", tone, next_, owner)
    if not current.owner:
        return _settled_line(approved, steps)
    return StatusLine(
        "Request",
        f"{approved}; in progress at {current.label.lower()}",
        WAITING,
        current.next,
        current.owner,
    )
