"""One line per workflow step for the requester: what is known about the step, with who confirmed it and
when, what happens next and who owns that. Pure: everything is read beforehand (`console/request_evidence.py`)
and passed in as `Evidence`, so a page of requests costs the same few queries whatever it holds.

Each line is derived from the step's own handoff, the compensation that reverses it (never the other way
round: a compensation's task is not the step's task) and the step's live reconciliation findings. A line
never says more than its source: a task "created" names the receipt and its time, work "done" names the
receiver's report and when it was read, and a task reconciliation no longer finds is "unknown"."""

from dataclasses import dataclass, field, replace
from datetime import datetime

from django.utils.timesince import timesince

from console.claims import Claim, handoff_claims, handoff_subject, owner_claim, record_claim
from console.evidence_words import (
    RECEIPT_VALIDATED,
    SYSTEM,
    WORKERS,
    outcome_known,
    task_now,
    work_by_hand,
)
from console.waiting_status import case_held, held
from outbox.destinations.smtp.destination import is_message_id
from outbox.models import (
    ArchivedHandoff,
    CompensationState,
    Handoff,
    HandoffKind,
    HandoffState,
)
from outbox.models.handoffs import earlier_of_its_key
from outbox.models.states import NEEDS_PERSON_STATES, WORK_DONE, WORK_FAILED, WORK_UNFINISHED
from outbox.services.deadlines import DEADLINE_PASSED
from reconciliation.models import Finding, FindingKind

S = HandoffState
C = CompensationState

# Tones, as the screen colours them: confirmed, on its way, nobody knows, will not happen, needs a person.
YES, WAITING, UNKNOWN, NO, STUCK = "yes", "waiting", "unknown", "no", "stuck"


@dataclass(frozen=True)
class StatusLine:
    """What is known (`text`, with its evidence and time), what happens next, and who owns that."""

    label: str
    text: str
    tone: str
    next: str = ""
    owner: str = ""
    # What the line states, for a machine (`console/claims.py`): about the text, and who owns the next step.
    claims: tuple[Claim, ...] = ()

    @property
    def text_claims(self) -> tuple[Claim, ...]:
        return tuple(c for c in self.claims if not c.name.endswith(".next_owner"))

    @property
    def owner_claim(self) -> Claim | None:
        return next((c for c in self.claims if c.name.endswith(".next_owner")), None)


@dataclass
class Evidence:
    """What the lines of one request revision are derived from, read beforehand.

    `handoffs`: its steps and their compensations; `findings`: live findings by action key; `events`: per
    handoff id, the event a person (or a compensation) cancelled it with; `now`: the clock of the page."""

    handoffs: list[Handoff]
    now: datetime
    findings: dict[str, list[Finding]] = field(default_factory=dict)
    events: dict[int, object] = field(default_factory=dict)
    # Its steps' destinations' holds (`outbox.hold_lines.DestinationHolds`), by name.
    destinations: dict[str, object] = field(default_factory=dict)
    repairs: dict[str, list] = field(default_factory=dict)
    # Its steps that retention archived (`ArchivedHandoff`): gone from `handoffs`, settled for good.
    archived: list[ArchivedHandoff] = field(default_factory=list)

    def repairs_of(self, handoff: Handoff) -> list:
        """The manual repairs recorded for the handoff's key, oldest first."""
        return self.repairs.get(handoff.action_key, [])

    @property
    def steps(self) -> list[Handoff]:
        return sorted(
            (h for h in self.handoffs if h.kind == HandoffKind.ACTION), key=lambda h: h.step_index
        )

    def compensation_of(self, step: Handoff) -> Handoff | None:
        return next((h for h in self.handoffs if h.compensates_id == step.pk), None)


def at(moment: datetime | None, now: datetime) -> str:
    """A time of record as the screens write it: the hour on the day of `now`, else the date too."""
    if moment is None:
        return "an unknown time"
    if moment.date() == now.date():
        return f"{moment:%H:%M} UTC"
    return f"{moment:%Y-%m-%d %H:%M} UTC"


def ago(moment: datetime | None, now: datetime) -> str:
    return f"{timesince(moment, now)} ago" if moment else "never"


def task_words(handoff: Handoff, now: datetime, repairs: list | tuple = ()) -> str:
    """The task the receiver created and how that is known (`console/evidence_words.py`): its receipt, a
    lookup of its key, or a person's repair."""
    task = handoff.destination_id or "?"
    short = f"{task[:8]}…" if len(task) > 12 else task
    how = outcome_known(handoff, repairs)
    how = f"confirmed by the receiver ({how})" if how == RECEIPT_VALIDATED else how
    words = f"task {short} {how} at {at(handoff.delivered_at, now)}"
    again = handoff.task_checked_at
    if handoff.task_seen and again and handoff.delivered_at and again > handoff.delivered_at:
        words += f", seen there again by {handoff.task_checked_by} at {at(again, now)} ({ago(again, now)})"
    return words


def operator_of(handoff: Handoff, finding: Finding | None = None) -> str:
    person = (finding.owner if finding is not None else None) or handoff.owner
    return (
        f"{person.get_username()} (operator)"
        if person
        else f"the operators of workspace {handoff.workspace_id}"
    )


def _archived_steps(evidence: Evidence, recorded: set[str]) -> list[ArchivedHandoff]:
    """The steps retention archived (not their compensations), in the order they were created."""
    rows = [
        a
        for a in evidence.archived
        if a.step not in recorded and not a.action_key.endswith(":compensate")
    ]
    return sorted(rows, key=lambda a: (a.created_at, a.pk))


StepRow = tuple[str, "Handoff | ArchivedHandoff | None", "dict | None"]


def _step_rows(evidence: Evidence) -> list[StepRow]:
    """(name, its handoff or archived row, its plan entry) of each step in order: archived before the hot
    ones, the hot ones, then the last hot one's plan (an entry retention archived is its archived row)."""
    steps = evidence.steps
    planned = list(steps[-1].plan) if steps else []
    later = {entry.get("step", "") for entry in planned}
    archived = _archived_steps(evidence, {step.step for step in steps})
    by_name = {a.step: a for a in archived}
    earlier = [(a.step, a, None) for a in archived if a.step not in later]
    hot = [(step.step, step, None) for step in steps]
    return [
        *earlier,
        *hot,
        *((e.get("step", ""), by_name.get(e.get("step", "")), e) for e in planned),
    ]


def step_labels(evidence: Evidence) -> list[StepRow]:
    """Each step of the workflow in order, recorded, archived or still to come: (label, its handoff or
    archived row, its plan entry). A step not in the hot table is named by the plan of the last recorded
    one; one that retention archived is its archived row, never a step "not started"."""
    rows = _step_rows(evidence)
    total = len(rows)
    if total == 1 and not rows[0][0]:
        return [("The handoff", rows[0][1], rows[0][2])]
    return [(f"Step {i} of {total}: {name}", h, e) for i, (name, h, e) in enumerate(rows, 1)]


def step_lines(evidence: Evidence) -> list[StatusLine]:
    lines = []
    for label, handoff, _entry in step_labels(evidence):
        if handoff is None:
            lines.append(_not_started(label, evidence))
        elif isinstance(handoff, ArchivedHandoff):
            lines.append(_archived_line(label, handoff, evidence.now))
        else:
            lines.append(step_line(label, handoff, evidence))
    return lines


def _archived_line(label: str, row: ArchivedHandoff, now: datetime) -> StatusLine:
    """A step retention archived: settled for good, its record in the archive; nobody owns a next step."""
    claims = (record_claim(row, "final_state"),)
    if row.final_state == S.DELIVERED and row.work_status == WORK_DONE:
        text = f"done, and archived: delivered at {at(row.delivered_at, now)}, its work done"
        return StatusLine(label, text, YES, claims=claims)
    state = S(row.final_state).label.lower() if row.final_state in S.values else row.final_state
    work = f", its work {row.work_status.replace('_', ' ')}" if row.work_status else ""
    text = f"settled and archived: {state} at {at(row.settled_at, now)}{work}; nothing more happens to it"
    return StatusLine(label, text, NO, claims=claims)


def _not_started(label: str, evidence: Evidence) -> StatusLine:
    steps = evidence.steps
    stopped = any(h.compensation_state or h.state == S.CANCELLED for h in steps)
    if stopped:
        return StatusLine(label, "will not run: the workflow was stopped before it", NO)
    return StatusLine(
        label,
        "not started: it is sent once the step before it has its task",
        WAITING,
        "the system sends it after the step before",
        SYSTEM,
    )


def step_line(label: str, handoff: Handoff, evidence: Evidence) -> StatusLine:
    """The step's line with its claims: the state, the evidence of the task and work it names (made by the
    choosers its words come from) and who owns the next step (read from the owner it names)."""
    line = _step_line(label, handoff, evidence)
    claims = handoff_claims(
        handoff, evidence.findings.get(handoff.action_key, []), evidence.repairs_of(handoff)
    )
    owner = owner_claim(handoff_subject(handoff), line.owner)
    return replace(line, claims=(*claims.values(), owner))


def _step_line(label: str, handoff: Handoff, evidence: Evidence) -> StatusLine:
    if handoff.compensation_state:
        return _reversal_line(label, handoff, evidence)
    if handoff.state == S.DELIVERED and is_message(handoff):
        return _message_line(label, handoff, evidence.now)
    if handoff.state == S.DELIVERED:
        return _delivered_line(label, handoff, evidence)
    return _STATE_LINES.get(handoff.state, _unknown_state)(label, handoff, evidence)


# --- A step that was reversed, or is being reversed --------------------------------------------------


def _reversal_line(label: str, step: Handoff, evidence: Evidence) -> StatusLine:
    now, undo = evidence.now, evidence.compensation_of(step)
    made = task_words(step, now)
    if step.compensation_state == C.COMPENSATED and undo is not None:
        return StatusLine(
            label,
            f"reversed: {made}; its compensation, {task_words(undo, now)}",
            NO,
            "nothing more happens to this step",
        )
    if step.compensation_state == C.REPAIRED:
        return StatusLine(label, f"reversed by hand (a manual repair was recorded); {made}", NO)
    if step.compensation_state == C.RESIDUAL:
        return StatusLine(
            label,
            f"cannot be reversed automatically: {made} and stays until undone by hand",
            STUCK,
            "an operator undoes it at the receiver and records the repair",
            operator_of(step),
        )
    if undo is not None and undo.state in NEEDS_PERSON_STATES:
        return StatusLine(
            label,
            f"being reversed, but its compensation is {undo.get_state_display().lower()}: {made}",
            STUCK,
            "an operator settles the compensation",
            operator_of(undo),
        )
    if undo is None and (stuck := _later_compensation_stuck(step, evidence)) is not None:
        return StatusLine(
            label,
            f"being reversed: {made}; its compensation waits for a later step's, which is "
            f"{stuck.get_state_display().lower()}",
            STUCK,
            "an operator settles the later step's compensation; then the system sends this one",
            operator_of(stuck),
        )
    return StatusLine(
        label,
        f"being reversed: {made}; its compensation is not confirmed yet",
        WAITING,
        "the system sends the compensation",
        SYSTEM,
    )


def _later_compensation_stuck(step: Handoff, evidence: Evidence) -> Handoff | None:
    """A later step's compensation that a person must settle: compensations go latest step first, so this
    step's is not sent before it."""
    later = [h for h in evidence.steps if h.step_index > step.step_index]
    undos = [evidence.compensation_of(h) for h in later]
    return next((u for u in undos if u is not None and u.state in NEEDS_PERSON_STATES), None)


# --- A delivered e-mail step: a message sent, not a task -------------------------------------------


def is_message(handoff: Handoff) -> bool:
    """An e-mail step: its id at the receiver is a Message-ID (`is_message_id`, as the handoff page's
    guidance asks). Its effect is a message sent, not a task someone works on, and its line says so."""
    return is_message_id(handoff.destination_id or "")


def _message_line(label: str, handoff: Handoff, now: datetime) -> StatusLine:
    found = handoff.destination_id
    short = f"{found[:8]}…" if len(found) > 12 else found
    return StatusLine(
        label,
        f"sent: message {short} accepted by the mail server at {at(handoff.delivered_at, now)}; "
        "sending it was the work",
        YES,
    )


# --- A delivered step: the task, then the work --------------------------------------------------------


def _delivered_line(label: str, handoff: Handoff, evidence: Evidence) -> StatusLine:
    now, repairs = evidence.now, evidence.repairs_of(handoff)
    findings = {f.kind: f for f in evidence.findings.get(handoff.action_key, [])}
    missing = findings.get(FindingKind.MISSING_AT_RECEIVER)
    there = task_now(handoff, evidence.findings.get(handoff.action_key, []), repairs)
    if there is not None and not there.found:
        return _gone_line(label, handoff, there, missing, evidence)
    failed = findings.get(FindingKind.WORK_FAILED)
    by_hand = work_by_hand(handoff, repairs)
    if by_hand is not None and failed is None:
        return StatusLine(
            label,
            f"done by hand: {task_words(handoff, now, repairs)}; {by_hand.actor_label} recorded a manual "
            f"repair at {at(by_hand.at, now)}: {by_hand.what_was_done}",
            YES,
        )
    if handoff.work_status == WORK_FAILED or failed is not None:
        return _failed_line(label, handoff, failed, now, repairs)
    line = _work_line(label, handoff, now, repairs)
    other = next(iter(findings.values()), None)
    if other is not None and line.tone != STUCK:
        return StatusLine(
            label,
            f"{line.text}; an operator is checking a finding: {other.get_kind_display().lower()}",
            STUCK,
            "an operator settles the finding",
            operator_of(handoff, other),
        )
    return line


def _gone_line(
    label: str, handoff: Handoff, there, missing: Finding | None, evidence: Evidence
) -> StatusLine:
    now = evidence.now
    made = task_words(handoff, now, evidence.repairs_of(handoff))
    if there.accounted is not None:
        repair = there.accounted
        return StatusLine(
            label,
            f"task deleted at the receiver: {made}, but it has none for this key now ({there.by}, at "
            f"{at(there.at, now)}); {repair.actor_label} recorded a manual repair at "
            f"{at(repair.at, now)}: {repair.what_was_done}",
            NO,
        )
    return StatusLine(
        label,
        f"unknown: the receiver had a task ({made}), but has none for this "
        f"key now ({there.by}, at {at(there.at, now)}): it may have been deleted there",
        UNKNOWN,
        "an operator checks at the receiver and re-creates the task or records what happened",
        operator_of(handoff, missing),
    )


def _failed_line(
    label: str, handoff: Handoff, failed: Finding | None, now: datetime, repairs: list
) -> StatusLine:
    when = handoff.work_reported_at or handoff.work_checked_at
    when = when or (failed.first_seen_at if failed else None)
    return StatusLine(
        label,
        f"failed at the receiver: {task_words(handoff, now, repairs)}; the receiver reported the work "
        f"failed at {at(when, now)}",
        STUCK,
        "an operator decides: the work is redone at the receiver, or the workflow compensated",
        operator_of(handoff, failed),
    )


def _work_line(label: str, handoff: Handoff, now: datetime, repairs: list) -> StatusLine:
    made, status = task_words(handoff, now, repairs), handoff.work_status
    checked = _work_evidence(handoff, now)
    if handoff.work_done_by_delivery:
        return StatusLine(label, f"done: {made}; delivering it was the work", YES)
    if status == WORK_DONE:
        return StatusLine(
            label, f"done: {made}; the receiver reports the work done ({checked})", YES
        )
    if status in WORK_UNFINISHED:
        return StatusLine(
            label,
            f"task created, work not done yet: {made}; the receiver reports it "
            f"{status.replace('_', ' ')} ({checked})",
            WAITING,
            "the people doing the task finish the work; the receiver reports it",
            WORKERS,
        )
    return StatusLine(
        label,
        f"task created, work unknown: {made}; the receiver has not reported the work yet",
        WAITING,
        "the receiver reports the work's status when it changes",
        WORKERS,
    )


def _work_evidence(handoff: Handoff, now: datetime) -> str:
    """When the receiver said what the work is: its own time (a status event), when it was read back, or
    with the receipt."""
    if handoff.work_reported_at:
        return (
            f"at {at(handoff.work_reported_at, now)}, its time; recorded "
            f"{ago(handoff.work_checked_at or handoff.work_reported_at, now)}"
        )
    if handoff.work_checked_at:
        return f"read at {at(handoff.work_checked_at, now)}, {ago(handoff.work_checked_at, now)}"
    return f"with its receipt at {at(handoff.delivered_at, now)}"


# --- A step not delivered: on its way, unknown, with an operator, or stopped -------------------------


def _waiting_for_its_case(label: str, handoff: Handoff, now: datetime) -> StatusLine | None:
    """A pending step held back by its own case: an operator's hold, or its not-before still ahead."""
    if handoff.state != S.PENDING:
        return None
    if handoff.is_held:
        stopped = case_held(handoff.case_hold, now)
        return StatusLine(
            label, f"not sent yet: {stopped.why}", WAITING, stopped.next, stopped.owner
        )
    if handoff.not_before and handoff.not_before > now:
        return StatusLine(
            label,
            f"not sent yet: it may not go before {at(handoff.not_before, now)}, its business "
            "time fixed at the approval",
            WAITING,
            f"the system sends it at {at(handoff.not_before, now)}",
            SYSTEM,
        )
    return None


def _behind_its_key(label: str, handoff: Handoff) -> StatusLine | None:
    """A pending step of an ordering key (docs/intake.md, "Order per business entity") that waits while a
    step approved before it for the same key is open at its destination (`HandoffQuerySet.due`). Neither
    the key's value (a payload field's, perhaps personal) nor the other request is named. One query, for
    ordered pending steps only."""
    if handoff.state != S.PENDING or not handoff.order_key or handoff.order_position is None:
        return None
    first = (
        earlier_of_its_key(handoff.destination, handoff.order_key, handoff.order_position)
        .order_by("order_position", "pk")
        .first()
    )
    if first is None:
        return None
    # Its own next owner stays the system (what the oracle's truth says of a pending step): the earlier
    # step's page names that one's owner, and who holds it.
    with_person = " (an operator decides that one)" if first.state in NEEDS_PERSON_STATES else ""
    if first.is_held:
        with_person = f"{with_person} (an operator holds that one's case)"
    return StatusLine(
        label,
        f"not sent yet: a step approved before it for the same ordering key is "
        f"{first.get_state_display().lower()} at {handoff.destination}{with_person}, which receives "
        "them in approval order",
        WAITING,
        "the system sends it once that one is "
        + ("resumed and settled" if first.is_held else "settled"),
        SYSTEM,
    )


def _sending(label: str, handoff: Handoff, evidence: Evidence) -> StatusLine:
    if (own := _waiting_for_its_case(label, handoff, evidence.now)) is not None:
        return own
    waits = held(evidence.destinations.get(handoff.destination))
    if waits is not None and handoff.state == S.PENDING:
        return StatusLine(
            label, f"not sent yet, waiting: {waits.why}", WAITING, waits.next, waits.owner
        )
    if handoff.retry_scheduled:
        why = " · ".join(x for x in (handoff.get_failure_class_display(), handoff.reason_code) if x)
        return StatusLine(
            label,
            f"not sent yet: attempt {handoff.attempts} to {handoff.destination} failed ({why}); "
            f"next try at {at(handoff.next_attempt_at, evidence.now)}",
            WAITING,
            "the system tries again by itself",
            SYSTEM,
        )
    if (behind := _behind_its_key(label, handoff)) is not None:
        return behind
    return StatusLine(
        label, f"being sent to {handoff.destination}", WAITING, "the system sends it", SYSTEM
    )


def _uncertain(label: str, handoff: Handoff, evidence: Evidence) -> StatusLine:
    return StatusLine(
        label,
        f"unknown: {handoff.destination} may or may not have created the task; the answer was lost",
        UNKNOWN,
        "the system asks the receiver for this key before sending anything again",
        SYSTEM,
    )


def _with_operator(label: str, handoff: Handoff, evidence: Evidence) -> StatusLine:
    why = " · ".join(x for x in (handoff.get_failure_class_display(), handoff.reason_code) if x)
    since = at(handoff.attention_since or handoff.updated_at, evidence.now)
    if handoff.reason_code == DEADLINE_PASSED:
        return StatusLine(
            label,
            f"stuck with an operator since {since}: its must-finish-by, "
            f"{at(handoff.finish_by, evidence.now)}, passed before it could be sent; it is not sent late",
            STUCK,
            "the operator cancels it, corrects the request (a new revision to approve) or settles it by hand",
            operator_of(handoff),
        )
    return StatusLine(
        label,
        f"stuck with an operator since {since}: {handoff.destination} did not take it ({why})",
        STUCK,
        "the operator retries it, corrects the request (a new revision to approve) or cancels it",
        operator_of(handoff),
    )


def _cancelled(label: str, handoff: Handoff, evidence: Evidence) -> StatusLine:
    event = evidence.events.get(handoff.pk)
    if event is None:
        return StatusLine(label, "cancelled before it was sent", NO)
    who = event.actor.get_username() if event.actor else event.actor_label
    return StatusLine(
        label,
        f"cancelled before it was sent, by {who} at {at(event.at, evidence.now)}: {event.reason}",
        NO,
    )


def _superseded(label: str, handoff: Handoff, evidence: Evidence) -> StatusLine:
    return StatusLine(
        label,
        "replaced by a correction: a new revision of the request replaces it",
        NO,
        "the new revision is approved, then sent under a new key",
        "the approvers",
    )


def _observed(label: str, handoff: Handoff, evidence: Evidence) -> StatusLine:
    return StatusLine(label, "recorded in observe-only mode: it is not sent", NO)


def _unknown_state(label: str, handoff: Handoff, evidence: Evidence) -> StatusLine:
    return StatusLine(label, f"unknown ({handoff.get_state_display().lower()})", UNKNOWN)


_STATE_LINES = {
    S.PENDING: _sending,
    S.IN_FLIGHT: _sending,
    S.UNCERTAIN: _uncertain,
    S.NEEDS_ATTENTION: _with_operator,
    S.CANCELLED: _cancelled,
    S.SUPERSEDED: _superseded,
    S.OBSERVED: _observed,
}
