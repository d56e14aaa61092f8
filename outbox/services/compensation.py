"""Compensation of a workflow instance: what it did is reversed (latest step first, each compensation
recorded when the previous one is delivered), its steps not sent yet are cancelled, and the steps nothing
can undo are residuals for a manual repair. What to do is decided in `outbox/steps.py`."""

from django.db import transaction

from lib.databases import DB
from outbox.destinations import DestinationUnavailable, destination_named
from outbox.errors import CompensationBlocked, HandoffNotFound, ReasonRequired
from outbox.models import CompensationState, Handoff, HandoffState
from outbox.services.transitions import handoff_transition
from outbox.services.workflows import mark_compensation, record_planned
from outbox.steps import (
    CompensationPlan,
    compensation_plan,
    erased_undo_missing,
    plan_compensations,
)

S = HandoffState


def _instance_locked(instance_key: str) -> list[Handoff]:
    # Locked in id order, as every multi-row lock here.
    return list(
        Handoff.objects.using(DB)
        .select_for_update(no_key=True)
        .filter(instance_key=instance_key)
        .order_by("pk")
    )


def step_undo_missing(step: Handoff) -> str:
    """Why the step's destination cannot undo it ("" when it can): no undo request configured and no undo of
    its kind, or its subject's personal data was erased on request and the undo would send "[erased]" where
    that data was (`erased_undo_missing`). A destination not served now is not decided here: its
    compensation waits like any handoff, unless the step was erased (what its undo sends is not known)."""
    try:
        destination = destination_named(step.destination)
    except DestinationUnavailable:
        return erased_undo_missing(step)
    missing = destination.undo_missing(step.action_key, step.destination_id)
    return missing or erased_undo_missing(step)


def instance_compensation_plan(handoffs: list[Handoff]) -> CompensationPlan:
    """What compensating the instance of these handoffs would do (shown before an operator confirms)."""
    return compensation_plan(handoffs, undo_missing=step_undo_missing)


def instance_compensate(*, instance_key: str, actor, reason: str) -> CompensationPlan:
    """Reverse what an instance did: cancel its steps not sent yet, record the compensation of its delivered
    steps (latest first; each next one when the previous is delivered), and mark the steps that nothing can
    undo as residuals for a manual repair. All checked and written under the instance's row locks."""
    if not reason.strip():
        raise ReasonRequired("a reason is required to compensate")
    with transaction.atomic(using=DB):
        handoffs = _instance_locked(instance_key)
        if not handoffs:
            raise HandoffNotFound(instance_key)
        plan = instance_compensation_plan(handoffs)
        if plan.blockers:
            raise CompensationBlocked("; ".join(plan.blockers))
        if plan.empty:
            raise CompensationBlocked(
                f"{instance_key}: nothing was delivered or is waiting; nothing to compensate"
            )
        for step in plan.cancel:
            handoff_transition(
                step,
                S.CANCELLED,
                actor=actor,
                action="compensate",
                reason_code="compensated",
                reason=f"not sent: the instance is compensated ({reason})",
            )
        for step in plan.residual:
            mark_compensation(
                step.pk,
                CompensationState.RESIDUAL,
                actor=actor,
                reason=f"{plan.residual_reason(step)}; a person repairs it ({reason})",
            )
        for step in plan.reverse:
            mark_compensation(step.pk, CompensationState.PLANNED, actor=actor, reason=reason)
        if plan.reverse:
            _record_first_compensation(plan, actor=actor)
    return plan


def _record_first_compensation(plan: CompensationPlan, *, actor) -> None:
    latest = plan.reverse[0]
    [first, *rest] = plan_compensations(plan.reverse)
    record_planned(latest, first, rest, actor=actor, reason=f"compensation of {latest.action_key}")


def handoff_residual_repaired(*, handoff_id: int, actor, reason: str) -> Handoff:
    """A person undid by hand what a step without a compensating operation did (manual-repair record)."""
    with transaction.atomic(using=DB):
        mark_compensation(handoff_id, CompensationState.REPAIRED, actor=actor, reason=reason)
        return Handoff.objects.using(DB).get(pk=handoff_id)


def instance_cancel(*, instance_key: str, actor, reason: str, reason_code: str) -> int:
    """Cancel the handoffs of an instance that nothing was delivered for (its request is cancelled): each
    one waiting is cancelled with the reason code. Refused when a step was delivered (compensate instead)
    or when an outcome is unknown. Returns how many were cancelled."""
    with transaction.atomic(using=DB):
        handoffs = _instance_locked(instance_key)
        plan = compensation_plan(handoffs)
        if plan.blockers:
            raise CompensationBlocked("; ".join(plan.blockers))
        if plan.reverse or plan.residual:
            raise CompensationBlocked(
                f"{instance_key}: a step was already delivered; compensate it instead"
            )
        for handoff in plan.cancel:
            handoff_transition(
                handoff,
                S.CANCELLED,
                actor=actor,
                action="cancel",
                reason=reason,
                reason_code=reason_code,
            )
        return len(plan.cancel)
