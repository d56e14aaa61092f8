"""Workflow steps and their compensation, decided before anything is written.

A workflow instance (one approved request revision, `onboarding:7:42:1`) runs as one handoff per step,
each with its own key `<instance>:<step>`. Only the first step is recorded with the approval; each later
step is recorded in the transaction that records its predecessor as delivered, never earlier: the
delivered handoff carries the rest of the plan. Compensation runs the same way in reverse: each
delivered step with a compensating operation gets a compensation handoff `<instance>:<step>:compensate`,
the latest step first; a delivered step without one is a residual for a person. Each step goes to the
destination its rule version names (the default destination when it names none); each compensation to the
destination of the step it reverses.
"""

import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from django.utils.dateparse import parse_datetime

from lib.moments import BadMoment, parse_moment
from outbox.clock import db_time
from outbox.destinations import DestinationUnavailable, destination_named
from outbox.models import Handoff, HandoffKind, HandoffState
from outbox.models.erasures import ERASED

S = HandoffState
COMPENSATE = "compensate"
# Added to each step's payload so that the receiver knows which operation the task is.
OPERATION_FIELD = "operation"
# A step's business times (issue 39, "Business deadlines"): not sent before the one, never after the other.
TIMING_PARTS = ("not_before", "finish_by")


def step_key(instance_key: str, step: str) -> str:
    return f"{instance_key}:{step}"


def compensation_key(step_action_key: str) -> str:
    return f"{step_action_key}:{COMPENSATE}"


def step_payload(base: dict, operation: str) -> dict:
    return {**base, OPERATION_FIELD: operation}


def base_payload(payload: dict) -> dict:
    """The approved payload a step's payload was made from."""
    return {name: value for name, value in payload.items() if name != OPERATION_FIELD}


def step_times(steps: Sequence[dict], payload: dict) -> dict[str, dict]:
    """Each timed step's not-before and must-finish-by as times (ISO 8601), by step name, fixed at the
    approval: a rule is {"field": <payload field holding a time>} or {"after_approval": <seconds>}, the
    approval's moment read from the database clock (one query, only when a step is timed). A field that
    holds no time sets none (the workflow's schema requires it where it matters)."""
    timed = [s for s in steps if any(s.get(part) for part in TIMING_PARTS)]
    if not timed:
        return {}
    approved_at = db_time()
    return {
        step["name"]: {
            part: moment.isoformat()
            for part in TIMING_PARTS
            if (moment := _moment(step.get(part), payload, approved_at)) is not None
        }
        for step in timed
    }


def _moment(rule: dict | None, payload: dict, approved_at: datetime) -> datetime | None:
    if not rule:
        return None
    if "after_approval" in rule:
        return approved_at + timedelta(seconds=rule["after_approval"])
    raw = payload.get(rule.get("field", ""))
    if not isinstance(raw, str):
        return None
    try:
        # The one parser (`lib.moments`): a day or an ISO 8601 time, UTC without an offset, in range.
        return parse_moment(raw, field=rule["field"])
    except BadMoment:
        return None


def fixed_at_approval(steps: Sequence[dict], payload: dict) -> dict[str, dict]:
    """What each step takes from the approval, by step name: its times (`step_times`) and, for a step that
    declares "order_by": {"field": …}, its ordering key, the payload's value of that field (none when the
    payload has none): its destination receives the steps of one key in approval order."""
    fixed = step_times(steps, payload)
    for step in steps:
        field_name = (step.get("order_by") or {}).get("field")
        value = payload.get(field_name) if field_name else None
        if value not in (None, ""):
            fixed.setdefault(step["name"], {})["order_key"] = str(value)[:200]
    return fixed


def entry_fixed(entry: dict) -> dict:
    """A plan entry's approval-time values as the handoff's fields (`not_before`, `finish_by`,
    `order_key`)."""
    fields = {part: parse_datetime(entry[part]) for part in TIMING_PARTS if entry.get(part)}
    if entry.get("order_key"):
        fields["order_key"] = entry["order_key"]
    return fields


def plan_steps(
    instance_key: str,
    steps: Sequence[dict],
    *,
    default_destination: str,
    start: int = 1,
    requests: Mapping[str, dict] | None = None,
    fixed: Mapping[str, dict] | None = None,
) -> list[dict]:
    """The plan entries of steps[start:], in order. A step is {"name", "operation"?, "compensation"?,
    "destination"?}; a step that names no destination goes to `default_destination`. `requests`: the
    requests approved with the decision, by step name; an entry holds its step's (frozen until sent).
    `fixed`: what each step took from the approval: its times and ordering key (`fixed_at_approval`)."""
    requests, fixed = requests or {}, fixed or {}
    return [
        {
            "kind": HandoffKind.ACTION,
            "index": index,
            "step": step["name"],
            "key": step_key(instance_key, step["name"]),
            "operation": step.get("operation") or step["name"],
            "compensation": step.get("compensation") or "",
            "destination": step.get("destination") or default_destination,
            **({"request": requests[step["name"]]} if step["name"] in requests else {}),
            **fixed.get(step["name"], {}),
        }
        for index, step in enumerate(steps)
        if index >= start
    ]


def plan_compensations(delivered: Iterable[Handoff]) -> list[dict]:
    """Compensation entries for delivered steps, latest step first; each goes to the destination of the step
    it reverses."""
    return [
        {
            "kind": HandoffKind.COMPENSATION,
            "index": step.step_index,
            "step": step.step,
            "key": compensation_key(step.action_key),
            "operation": step.compensation_operation,
            "compensates": step.pk,
            "destination": step.destination,
        }
        for step in sorted(delivered, key=lambda h: h.step_index, reverse=True)
    ]


# What blocks a compensation: a step whose outcome nobody knows yet cannot be counted as done or not done.
def _blocker(handoff: Handoff) -> str:
    if handoff.state in (S.IN_FLIGHT, S.UNCERTAIN):
        return f"{handoff.action_key} is {handoff.get_state_display().lower()}: settle it first"
    if handoff.awaits_receiver_check:
        return f"{handoff.action_key}: its outcome is unknown; reconcile it or record what the receiver has"
    if handoff.kind == HandoffKind.COMPENSATION:
        return "this instance is already being compensated"
    return ""


@dataclass
class CompensationPlan:
    """What compensating an instance does: steps reversed (in this order), residuals for a person, steps
    never sent that are cancelled instead, and what blocks it."""

    reverse: list[Handoff] = field(default_factory=list)
    residual: list[Handoff] = field(default_factory=list)
    cancel: list[Handoff] = field(default_factory=list)
    blockers: list[str] = field(default_factory=list)
    # Why each residual (by id) is one, naming what a person undoes by hand where its destination has no undo.
    residual_reasons: dict[int, str] = field(default_factory=dict)

    @property
    def empty(self) -> bool:
        return not (self.reverse or self.residual or self.cancel)

    def residual_reason(self, step: Handoff) -> str:
        return self.residual_reasons.get(step.pk, "no compensating operation")

    @property
    def residual_lines(self) -> list[str]:
        return [f"{step.step}: {self.residual_reason(step)}" for step in self.residual]


def _no_undo_missing(step: Handoff) -> str:
    return ""


def compensation_plan(
    handoffs: Sequence[Handoff], *, undo_missing: Callable[[Handoff], str] = _no_undo_missing
) -> CompensationPlan:
    """What compensating these handoffs would do. `undo_missing(step)` says why a delivered step's destination
    cannot undo it ("" when it can): such a step is a residual for a person, never sent a second create."""
    plan = CompensationPlan()
    for handoff in handoffs:
        if reason := _blocker(handoff):
            plan.blockers.append(reason)
        elif handoff.state == S.DELIVERED and handoff.kind == HandoffKind.ACTION:
            _reverse_or_residual(plan, handoff, undo_missing)
        elif handoff.state in (S.PENDING, S.NEEDS_ATTENTION):
            plan.cancel.append(handoff)
    plan.reverse.sort(key=lambda h: h.step_index, reverse=True)
    plan.residual.sort(key=lambda h: h.step_index, reverse=True)
    return plan


def _reverse_or_residual(
    plan: CompensationPlan, step: Handoff, undo_missing: Callable[[Handoff], str]
) -> None:
    if not step.compensation_operation:
        plan.residual.append(step)
    elif reason := undo_missing(step):
        plan.residual.append(step)
        plan.residual_reasons[step.pk] = reason
    else:
        plan.reverse.append(step)


def erased_undo_missing(step: Handoff) -> str:
    """Why a delivered step whose subject was erased cannot be undone by a call ("" when it can, or when it
    was not erased): its undo would send "[erased]" where the subject's data was (a kind-native undo sends
    the whole payload, an undo request the fields its body names), or its destination cannot say now."""
    if not step.erasure_id:
        return ""
    try:
        sent = destination_named(step.destination).undo_payload_fields()
    except DestinationUnavailable:
        return _undone_by_hand(step, "and what an undo there would send is not known now")
    erased = sorted(
        name
        for name, value in base_payload(step.payload).items()
        if (sent is None or name in sent) and ERASED in json.dumps(value)
    )
    if not erased:
        return ""  # its undo sends none of them (an undo request by the receipt id)
    return _undone_by_hand(step, f"its undo would send {ERASED} for {', '.join(erased)}")


def _undone_by_hand(step: Handoff, why: str) -> str:
    return (
        f"its subject's personal data was erased on request, {why}; undo by hand "
        f"{step.destination_id or '(no receipt id)'} (key {step.action_key}) at {step.destination}"
    )
