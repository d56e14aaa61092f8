"""Recording what a call's answer means, fenced: the claims' rows are locked (in id order), each outcome
planned from its row (`outbox/outcomes.py`, pure) and written with its event and attempt, one statement per
table for the whole batch; on PostgreSQL a batch of plain deliveries is one statement in all
(`outbox/delivered.py`). A claim whose fencing token is stale (its lease was taken over) is refused."""

from dataclasses import dataclass
from time import time_ns

from django.db import connections, transaction
from django.db.models import BooleanField, DateTimeField, ExpressionWrapper, F, Q, Value
from django.db.models.functions import Coalesce, Concat

from lib.databases import DB
from lib.telemetry import past_spans
from outbox.bulk_writes import update_many
from outbox.clock import db_now, db_now_plus
from outbox.delivered import DeliveredRow, record_delivered
from outbox.destinations import Destination
from outbox.dispatch.claims import Claim
from outbox.dispatch.wakeups import wake_work_pull_in
from outbox.errors import LeaseLost
from outbox.failures import UNREACHABLE_REASONS, DeliveryResult
from outbox.models import (
    Attempt,
    AttemptOutcome,
    FailureClass,
    Handoff,
    HandoffEvent,
    HandoffState,
)
from outbox.outcomes import Plan, attempt_fields, delivered_plan, plan_outcome
from outbox.services.moves import move_changes, transition_changes
from outbox.services.transitions import lock_with_compensated_steps
from outbox.services.workflows import record_successors

S = HandoffState


def _locked_in_flight(ids: list[int], window_seconds: float) -> dict[int, Handoff]:
    """The in-flight rows, locked in id order (as every multi-row lock here, so two recorders cannot
    deadlock), each with `past_window` measured on the database clock."""
    past = ExpressionWrapper(
        Q(run_start__lt=db_now_plus(-window_seconds)), output_field=BooleanField()
    )
    rows = (
        Handoff.objects.using(DB)
        .select_for_update(no_key=True, of=("self",))
        .filter(pk__in=ids, state=S.IN_FLIGHT)
        .annotate(run_start=Coalesce("run_started_at", "created_at", output_field=DateTimeField()))
        .annotate(past_window=past)
        .order_by("pk")
    )
    return {h.pk: h for h in rows}


@dataclass(frozen=True)
class Recorded:
    """Each outcome's state afterwards (None: refused, its lease was taken over), in the order given."""

    states: list[str | None]
    # Whether the destination's breaker has nothing to reset, when the write could tell (None otherwise).
    destination_healthy: bool | None = None


def handoff_record_outcomes(
    *, outcomes: list[tuple[Claim, DeliveryResult]], destination: Destination
) -> Recorded:
    """Record several outcomes in one transaction, with one statement per table for the whole batch (on
    PostgreSQL one statement in all when every outcome is a plain delivery: `outbox/delivered.py`).
    A claim whose fencing token is stale (lease taken over) is refused: its entry is None and nothing
    is written for it. Each outcome gets a span in its handoff's trace, when traced."""
    started = time_ns()
    recorded = _record_outcomes(outcomes, destination)
    if destination.work_status.pulled and S.DELIVERED in recorded.states:
        wake_work_pull_in(destination.work_status.every_seconds)
    past_spans("handoff.record", started, _spans(outcomes, recorded))
    return recorded


def _spans(outcomes: list[tuple[Claim, DeliveryResult]], recorded: Recorded):
    for (claim, result), state in zip(outcomes, recorded.states, strict=True):
        attributes = {"handoff.state": state or "refused: lease taken over"}
        if result.reason_code:
            attributes["handoff.reason_code"] = result.reason_code
        yield claim.action_key, attributes


def _record_outcomes(
    outcomes: list[tuple[Claim, DeliveryResult]], destination: Destination
) -> Recorded:
    if _delivered_in_one_statement(outcomes):
        return _record_delivered(outcomes, destination)
    ids = sorted(claim.handoff_id for claim, _ in outcomes)
    states: list[str | None] = []
    with transaction.atomic(using=DB):
        if any(claim.follow_up for claim, _ in outcomes):
            lock_with_compensated_steps(ids)
        locked = _locked_in_flight(ids, destination.retry_policy.window_seconds)
        changed, fields, events, attempts = [], {"updated_at"}, [], []
        for claim, result in outcomes:
            handoff = locked.get(claim.handoff_id)
            if handoff is None or (handoff.lease_owner, handoff.fencing_epoch) != (
                claim.worker,
                claim.epoch,
            ):
                states.append(None)
                continue
            plan = plan_outcome(handoff, result, destination, past_window=bool(handoff.past_window))
            fields.update(_apply(handoff, plan))
            changed.append(handoff)
            events.append(
                HandoffEvent(
                    handoff_id=handoff.pk,
                    from_state=S.IN_FLIGHT,
                    to_state=plan.to_state,
                    actor_label=claim.worker,
                    reason=plan.reason,
                )
            )
            attempts.append((claim, plan.attempt_outcome, result))
            states.append(plan.to_state)
        if changed:
            _write_outcomes(
                changed, sorted(fields), events, attempts, actor_label=outcomes[0][0].worker
            )
    return Recorded(states)


def _apply(handoff: Handoff, plan: Plan) -> dict:
    """Set the plan's move on the locked row (not saved); return the fields it sets."""
    changes = transition_changes(handoff, plan.to_state, plan.changes)
    for name, value in changes.items():
        setattr(handoff, name, value)
    return changes


def _write_outcomes(
    changed: list[Handoff],
    fields: list[str],
    events: list[HandoffEvent],
    attempts: list[tuple[Claim, str, DeliveryResult]],
    *,
    actor_label: str,
) -> None:
    for handoff in changed:
        handoff.updated_at = db_now()
    update_many(changed, fields, using=DB)
    HandoffEvent.objects.using(DB).bulk_create(events)
    _finish_attempts(attempts)
    record_successors([h for h in changed if h.state == S.DELIVERED], actor_label=actor_label)


def _delivered_in_one_statement(outcomes: list[tuple[Claim, DeliveryResult]]) -> bool:
    """Every outcome a delivery whose changes do not depend on its row and that records nothing else, all claimed
    by one worker (the statement checks one lease owner)."""
    return (
        bool(outcomes)
        and connections[DB].vendor == "postgresql"
        and len({claim.worker for claim, _result in outcomes}) == 1
        and all(
            result.delivered and claim.attempt_id is not None and not claim.follow_up
            for claim, result in outcomes
        )
    )


def _record_delivered(
    outcomes: list[tuple[Claim, DeliveryResult]], destination: Destination
) -> Recorded:
    rows = []
    for claim, result in outcomes:
        plan = delivered_plan(result, destination)
        rows.append(
            DeliveredRow(
                handoff_id=claim.handoff_id,
                epoch=claim.epoch,
                attempt_id=claim.attempt_id,
                changes=move_changes(
                    S.IN_FLIGHT, plan.to_state, plan.changes, action_key=claim.action_key
                ),
                reason=plan.reason,
                attempt=attempt_fields(plan.attempt_outcome, result),
            )
        )
    written = record_delivered(rows, worker=outcomes[0][0].worker, destination=destination.name)
    return Recorded(
        [S.DELIVERED if claim.handoff_id in written.ids else None for claim, _result in outcomes],
        written.destination_healthy,
    )


def _finish_attempts(finished: list[tuple[Claim, str, DeliveryResult]]) -> None:
    unknown = [claim for claim, _outcome, _result in finished if claim.attempt_id is None]
    ids = {}
    for claim in unknown:
        ids[claim.handoff_id] = (
            Attempt.objects.using(DB)
            .values_list("id", flat=True)
            .get(handoff_id=claim.handoff_id, number=claim.attempt_number)
        )
    rows = [
        Attempt(pk=claim.attempt_id or ids[claim.handoff_id], **attempt_fields(outcome, result))
        for claim, outcome, result in finished
    ]
    update_many(
        rows,
        [
            "finished_at",
            "outcome",
            "failure_class",
            "reason_code",
            "status_code",
            "latency_ms",
            "detail",
        ],
        using=DB,
    )


def handoff_record_outcome(
    *, claim: Claim, result: DeliveryResult, destination: Destination
) -> str:
    """Record one attempt's outcome. Refuses (LeaseLost) when the claim's fencing token is stale."""
    [state] = handoff_record_outcomes(outcomes=[(claim, result)], destination=destination).states
    if state is None:
        raise LeaseLost(
            f"{claim.action_key}: lease of {claim.worker} epoch {claim.epoch} was taken over"
        )
    return state


def handoffs_probe_not_counted(*, claims: list[Claim], destination: str) -> int:
    """The claims were sent as their paused destination's probe: a probe that found the destination still
    down (unreachable, credentials refused) was the destination's call, not the handoff's attempt (issue 36,
    item 8). Its attempt says so and the handoff does not count it (`Handoff.attempts_made`). A probe that
    delivered, or whose outcome is unknown, stays the handoff's. Returns how many were not counted."""
    if not claims:
        return 0
    refused = Q(failure_class=FailureClass.CREDENTIAL) | Q(reason_code__in=UNREACHABLE_REASONS)
    probes = Q()
    for claim in claims:
        probes |= Q(handoff_id=claim.handoff_id, number=claim.attempt_number)
    with transaction.atomic(using=DB):
        ids = list(
            Attempt.objects.using(DB)
            .filter(probes, refused, outcome=AttemptOutcome.FAILED)
            .values_list("handoff_id", flat=True)
        )
        if not ids:
            return 0
        Attempt.objects.using(DB).filter(probes, handoff_id__in=ids).update(
            detail=Concat(Value(f"probe of destination {destination}, not counted: "), "detail")
        )
        return (
            Handoff.objects.using(DB)
            .filter(pk__in=ids)
            .update(attempts_not_counted=F("attempts_not_counted") + 1)
        )
