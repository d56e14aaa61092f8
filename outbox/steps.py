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

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from outbox.models import Handoff, HandoffKind, HandoffState

S = HandoffState
COMPENSATE = "compensate"
# Added to each step's payload so that the receiver knows which operation the task is.
OPERATION_FIELD = "operation"


def step_key(instance_key: str, step: str) -> str:
    return f"{instance_key}:{step}"


def compensation_key(step_action_key: str) -> str:
    return f"{step_action_key}:{COMPENSATE}"


def step_payload(base: dict, operation: str) -> dict:
    return {**base, OPERATION_FIELD: operation}


def base_payload(payload: dict) -> dict:
    """The approved payload a step's payload was made from."""
    return {name: value for name, value in payload.items() if name != OPERATION_FIELD}


def plan_steps(
    instance_key: str,
    steps: Sequence[dict],
    *,
    default_destination: str,
    start: int = 1,
    requests: Mapping[str, dict] | None = None,
) -> list[dict]:
    """The plan entries of steps[start:], in order. A step is {"name", "operation"?, "compensation"?,
    "destination"?}; a step that names no destination goes to `default_destination`. `requests`: the
    requests approved with the decision, by step name; an entry holds its step's (frozen until sent)."""
    requests = requests or {}
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
