"""Every write to a handoff: recording it, the operators' actions, and the dispatcher's claim, outcome,
lease renewal, lease expiry and settlement. Each transition locks the row, checks the state under the
lock and writes the event, all or nothing. What an answer means is decided in `outbox/outcomes.py`."""

import contextlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import timedelta

from django.conf import settings
from django.db import IntegrityError, connections, transaction
from django.db.models import BooleanField, ExpressionWrapper, F, Q
from django.db.models.functions import Coalesce
from django.utils import timezone
from django.utils.module_loading import import_string

from outbox.bulk_writes import update_many
from outbox.clock import POSTGRES_NOW_PLUS, db_now, db_now_plus
from outbox.delivered import DeliveredRow, record_delivered
from outbox.destinations import Destination, LookupFailed, RemoteTask, get_destination
from outbox.errors import (
    ActionKeyExists,
    AssigneeNotOperator,
    CompensationBlocked,
    HandoffNotFound,
    InvalidActionInput,
    InvalidTransition,
    LeaseLost,
    OutboxError,
    ReasonRequired,
    RiskNotConfirmed,
)
from outbox.failures import DeliveryResult, Outgoing
from outbox.limits import LimitedLookups
from outbox.models import (
    COMPENSATION_TRANSITIONS,
    HANDOFF_TRANSITIONS,
    NEEDS_PERSON_STATES,
    Attempt,
    AttemptOutcome,
    BulkJob,
    BulkJobState,
    CompensationState,
    FailureClass,
    Handoff,
    HandoffEvent,
    HandoffKind,
    HandoffState,
)
from outbox.outcomes import (
    Plan,
    delivered_plan,
    plan_outcome,
    settlement_for,
    settlement_without_answer,
)
from outbox.payloads import payload_hash
from outbox.redaction import redact_text
from outbox.steps import (
    CompensationPlan,
    base_payload,
    compensation_plan,
    plan_compensations,
    plan_steps,
    step_payload,
)
from outbox.wakeups import wake_dispatcher_on_commit

DB = "default"
S = HandoffState


def _lock_with_compensated_steps(ids: list[int]) -> None:
    """A delivered compensation marks the step it reversed (`_mark_compensation`), under that step's row lock.
    Take those locks first, with the rows themselves and in one id order: the step's id is below its compensation's,
    and `instance_compensate` locks an instance's rows in id order, so taking the step after the rows
    could deadlock against it. A row's `compensates_id` never changes, so it is read before the lock."""
    steps = set(
        Handoff.objects.using(DB)
        .filter(pk__in=ids, compensates_id__isnull=False)
        .values_list("compensates_id", flat=True)
    )
    if steps:
        list(
            Handoff.objects.using(DB)
            .select_for_update(no_key=True)
            .filter(pk__in=sorted(set(ids) | steps))
            .order_by("pk")
            .values_list("pk", flat=True)
        )


def handoff_lock(handoff_id: int) -> Handoff:
    """The handoff's row, locked for a write in the caller's transaction; a compensation's step is locked
    first (a compensation settled as delivered marks it). Every service that writes one handoff locks it
    here, and so must any other app that locks a handoff before calling them. HandoffNotFound when absent."""
    _lock_with_compensated_steps([handoff_id])
    handoff = Handoff.objects.using(DB).select_for_update(no_key=True).filter(pk=handoff_id).first()
    if handoff is None:
        raise HandoffNotFound(handoff_id)
    return handoff


def transition_changes(handoff: Handoff, to_state: str, changes: dict) -> dict:
    """Check the move and return every field it sets (the state's own defaults added). Changes nothing."""
    return move_changes(handoff.state, to_state, changes, action_key=handoff.action_key)


def move_changes(from_state: str, to_state: str, changes: dict, *, action_key: str = "") -> dict:
    """`transition_changes` for a row known to be in `from_state` (locked, or written under its fencing token)."""
    if to_state != from_state and to_state not in HANDOFF_TRANSITIONS[from_state]:
        raise InvalidTransition(action_key, from_state, to_state)
    changes = dict(changes)
    now = timezone.now()
    if to_state == S.NEEDS_ATTENTION and from_state != S.NEEDS_ATTENTION:
        changes.setdefault("attention_since", now)
        changes.setdefault("sla_due_at", now + timedelta(minutes=settings.HANDOFF_SLA_MINUTES))
        changes.setdefault("acknowledged_at", None)
        changes.setdefault("acknowledged_by", None)
    if to_state in (S.DELIVERED, S.CANCELLED, S.SUPERSEDED):
        changes.setdefault("sla_due_at", None)
    if to_state != S.IN_FLIGHT:
        changes.setdefault("lease_owner", "")
        changes.setdefault("lease_expires_at", None)
    changes["state"] = to_state
    return changes


def handoff_transition(
    handoff: Handoff,
    to_state: str,
    *,
    actor=None,
    actor_label: str = "",
    reason: str = "",
    action: str = "",
    **changes,
) -> HandoffEvent:
    """Move a locked handoff to `to_state` and write the event. Call inside an atomic block."""
    from_state = handoff.state
    changes = transition_changes(handoff, to_state, changes)
    for name, value in changes.items():
        setattr(handoff, name, value)
    handoff.save(using=DB, update_fields=[*changes, "updated_at"])
    event = HandoffEvent.objects.using(DB).create(
        handoff=handoff,
        from_state=from_state,
        to_state=to_state,
        actor=actor,
        actor_label=actor_label or (actor.get_username() if actor else "system"),
        action=action,
        reason=reason,
    )
    if to_state == S.DELIVERED and from_state != S.DELIVERED:
        _record_successors([handoff], actor_label=event.actor_label)
    return event


def handoff_record(
    *,
    workflow: str,
    workspace_id: int,
    source_ref: str,
    source_id: int,
    action_key: str,
    payload: dict,
    rule_version: str = "",
    owner=None,
    actor=None,
    observe_only: bool = False,
    steps: Sequence[dict] = (),
) -> Handoff:
    """Write the outbox row for an approved action. Meant to run inside the caller's transaction.

    `action_key` is the instance's key. A workflow of several `steps` records only its first step now, with
    its own key `<instance>:<step>` and the rest of the plan; each later step is recorded when the one
    before it is delivered (`_record_successors`)."""
    fields = {"action_key": action_key, "payload": payload}
    if steps:
        [first, *_rest] = plan_steps(action_key, steps, start=0)
        fields = {
            "action_key": first["key"],
            "payload": step_payload(payload, first["operation"]),
            "step": first["step"],
            "compensation_operation": first["compensation"],
            "plan": plan_steps(action_key, steps),
        }
    with transaction.atomic(using=DB):
        handoff = _create_handoff(
            workflow=workflow,
            workspace_id=workspace_id,
            source_ref=source_ref,
            source_id=source_id,
            rule_version=rule_version,
            owner=owner,
            instance_key=action_key,
            observe_only=observe_only,
            **fields,
        )
        HandoffEvent.objects.using(DB).create(
            handoff=handoff,
            from_state="",
            to_state=handoff.state,
            actor=actor,
            actor_label=actor.get_username() if actor else "system",
            reason="observe-only: recorded, not sent"
            if observe_only
            else "approved; handoff recorded",
        )
    if not observe_only:
        wake_dispatcher_on_commit()
    return handoff


def _create_handoff(
    *, observe_only: bool = False, payload: dict, action_key: str, **fields
) -> Handoff:
    """Insert one outbox row, due at once (or observed only); a key that exists is ActionKeyExists."""
    try:
        with transaction.atomic(using=DB):
            return Handoff.objects.using(DB).create(
                action_key=action_key,
                payload=payload,
                payload_hash=payload_hash(payload),
                state=S.OBSERVED if observe_only else S.PENDING,
                next_attempt_at=None if observe_only else db_now(),
                run_started_at=None if observe_only else db_now(),
                reason_code="observe_mode" if observe_only else "",
                **fields,
            )
    except IntegrityError as exc:
        raise ActionKeyExists(action_key) from exc


def _record_planned(
    after: Handoff, entry: dict, rest: list[dict], *, reason: str, actor=None, actor_label: str = ""
) -> Handoff:
    """The handoff a plan entry names (a later step, or a compensation), of the same instance as `after`, with
    the rest of the plan; its event says why. ActionKeyExists when it was recorded before."""
    planned = _create_handoff(
        workflow=after.workflow,
        workspace_id=after.workspace_id,
        source_ref=after.source_ref,
        source_id=after.source_id,
        rule_version=after.rule_version,
        owner_id=after.owner_id,
        destination=after.destination,
        instance_key=after.instance_key,
        action_key=entry["key"],
        payload=step_payload(base_payload(after.payload), entry["operation"]),
        step=entry["step"],
        step_index=entry["index"],
        kind=entry["kind"],
        compensation_operation=entry.get("compensation", ""),
        compensates_id=entry.get("compensates"),
        plan=rest,
    )
    HandoffEvent.objects.using(DB).create(
        handoff=planned,
        from_state="",
        to_state=planned.state,
        actor=actor,
        actor_label=actor_label or (actor.get_username() if actor else "system"),
        action="compensate" if entry["kind"] == HandoffKind.COMPENSATION and actor else "",
        reason=reason,
    )
    wake_dispatcher_on_commit()
    return planned


def _record_successors(delivered: Iterable[Handoff], *, actor_label: str) -> None:
    """In the transaction that records these handoffs delivered: the next step of each (or the next
    compensation), and a delivered compensation marks the step it reversed. Never earlier."""
    for handoff in delivered:
        if handoff.kind == HandoffKind.COMPENSATION and handoff.compensates_id:
            _mark_compensation(
                handoff.compensates_id,
                CompensationState.COMPENSATED,
                actor_label=actor_label,
                reason=f"reversed by {handoff.action_key}",
            )
        if not handoff.plan:
            continue
        with contextlib.suppress(
            ActionKeyExists
        ):  # recorded before (its predecessor delivered again)
            _record_planned(
                handoff,
                handoff.plan[0],
                handoff.plan[1:],
                actor_label=actor_label,
                reason=f"recorded when {handoff.action_key} was delivered",
            )


def _mark_compensation(
    handoff_id: int, to_state: str, *, actor=None, actor_label: str = "", reason: str
) -> None:
    step = Handoff.objects.using(DB).select_for_update(no_key=True).get(pk=handoff_id)
    if to_state not in COMPENSATION_TRANSITIONS[step.compensation_state]:
        raise InvalidTransition(
            step.action_key, step.compensation_state or "not compensated", to_state
        )
    step.compensation_state = to_state
    step.save(using=DB, update_fields=["compensation_state", "updated_at"])
    HandoffEvent.objects.using(DB).create(
        handoff=step,
        from_state=step.state,
        to_state=step.state,
        actor=actor,
        actor_label=actor_label or (actor.get_username() if actor else "system"),
        action="compensate",
        reason=f"{to_state}: {reason}",
    )


# --- The dispatcher's writes: claim, record, renew, expire, settle ----------------------------------
# A claim and its outcome are two short transactions with the network call between them. A claim carries
# a fencing token (lease owner + epoch); an outcome whose token no longer matches is refused.


@dataclass(frozen=True)
class Claim:
    handoff_id: int
    action_key: str
    payload: dict
    payload_hash: str
    attempt_number: int
    worker: str
    epoch: int
    attempt_id: int | None = None
    # The attempt's number within its run (the handoff was recorded, retried or settled by a person since).
    run_attempt: int = 1
    # Its delivery records more than itself (a workflow's next step, or marks the step a compensation
    # reversed): its outcome is written on the locked path, which reads the row. True unless the claim said.
    follow_up: bool = True

    @property
    def outgoing(self) -> Outgoing:
        return Outgoing(
            action_key=self.action_key, payload=self.payload, payload_hash=self.payload_hash
        )


def _due():
    return Handoff.objects.using(DB).due()


def _claim_skip_locked(due, *, worker: str, limit: int, lease_seconds: int) -> list[tuple]:
    """PostgreSQL, one statement and one round trip: lock due rows (skipping those another worker holds), lease
    them, open an attempt and write the claim event for each, and read them back with their attempt ids:
    `WITH due AS (SELECT … FOR NO KEY UPDATE SKIP LOCKED), claimed AS (UPDATE … RETURNING), attempt AS
    (INSERT … RETURNING), event AS (INSERT …) SELECT …`. Committed on its own (autocommit): a claim is
    all of it or none of it. The attempt's start and the event's time are the dispatcher's clock, as for
    every other attempt and event."""
    connection = connections[DB]
    qn = connection.ops.quote_name
    select_sql, select_params = (
        due.order_by("next_attempt_at", "id").values("id")[:limit].query.sql_with_params()
    )
    # The row locks are written here, not by select_for_update(): Django compiles that only inside a
    # transaction, and this statement is its own.
    select_sql += " FOR NO KEY UPDATE SKIP LOCKED"
    handoffs, attempts, events = (
        qn(model._meta.db_table) for model in (Handoff, Attempt, HandoffEvent)
    )
    sql = (
        f"WITH due AS ({select_sql}), "  # noqa: S608 - the inner query is Django's, every value a parameter
        f"claimed AS (UPDATE {handoffs} AS h SET state = %s, lease_owner = %s, "
        f"lease_expires_at = {POSTGRES_NOW_PLUS}, fencing_epoch = h.fencing_epoch + 1, "
        "attempts = h.attempts + 1, attempts_in_run = h.attempts_in_run + 1, updated_at = now() "
        "FROM due WHERE h.id = due.id "
        "RETURNING h.id, h.action_key, h.payload, h.payload_hash, h.attempts, h.fencing_epoch, h.attempts_in_run, "
        "h.plan <> '[]'::jsonb OR h.compensates_id IS NOT NULL AS follow_up), "
        f"attempt AS (INSERT INTO {attempts} (handoff_id, number, fencing_epoch, worker, started_at, outcome, "
        "failure_class, reason_code, detail) "
        "SELECT id, attempts, fencing_epoch, %s, %s, %s, '', '', '' FROM claimed RETURNING id, handoff_id), "
        f"event AS (INSERT INTO {events} (handoff_id, from_state, to_state, actor_label, action, reason, at) "
        "SELECT id, %s, %s, %s, '', 'claimed for attempt ' || attempts, %s FROM claimed) "
        "SELECT c.id, c.action_key, c.payload, c.payload_hash, c.attempts, c.fencing_epoch, c.attempts_in_run, "
        "a.id, c.follow_up FROM claimed c JOIN attempt a ON a.handoff_id = c.id"
    )
    now = timezone.now()
    params = [
        *select_params,
        S.IN_FLIGHT,
        worker,
        lease_seconds,
        worker,
        now,
        AttemptOutcome.IN_PROGRESS,
        S.PENDING,
        S.IN_FLIGHT,
        worker,
        now,
    ]
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        fetched = cursor.fetchall()
    payload_field = Handoff._meta.get_field("payload")
    return [
        (
            pk,
            key,
            payload_field.from_db_value(payload, None, connection),
            digest,
            attempts,
            epoch,
            in_run,
            attempt,
            follow_up,
        )
        for pk, key, payload, digest, attempts, epoch, in_run, attempt, follow_up in fetched
    ]


def _claim_row_count(due, *, worker: str, limit: int, lease_seconds: int) -> list[tuple]:
    """SQLite has no row locks: claim each row with an update that only succeeds while the row is still
    pending, checked by its row count."""
    changes = {
        "state": S.IN_FLIGHT,
        "lease_owner": worker,
        # The lease is measured on the database clock, so workers on other machines agree on it.
        "lease_expires_at": db_now_plus(lease_seconds),
        "fencing_epoch": F("fencing_epoch") + 1,
        "attempts": F("attempts") + 1,
        "attempts_in_run": F("attempts_in_run") + 1,
        "updated_at": db_now(),
    }
    candidates = list(due.order_by("next_attempt_at", "id").values_list("id", flat=True)[:limit])
    still_pending = Handoff.objects.using(DB).filter(state=S.PENDING)
    ids = [pk for pk in candidates if still_pending.filter(pk=pk).update(**changes)]
    if not ids:
        return []
    return list(
        Handoff.objects.using(DB)
        .filter(pk__in=ids, lease_owner=worker, state=S.IN_FLIGHT)
        .values_list(
            "id",
            "action_key",
            "payload",
            "payload_hash",
            "attempts",
            "fencing_epoch",
            "attempts_in_run",
        )
    )


def handoff_claim_due(
    *,
    worker: str,
    limit: int = 20,
    lease_seconds: int | None = None,
    handoff_id: int | None = None,
    destination_name: str | None = None,
) -> list[Claim]:
    """Claim up to `limit` due handoffs for `worker` and open an attempt for each."""
    lease_seconds = lease_seconds or settings.HANDOFF_LEASE_SECONDS
    due = _due()
    if destination_name is not None:
        due = due.filter(destination=destination_name)
    if handoff_id is not None:
        due = due.filter(pk=handoff_id)
    if connections[DB].features.has_select_for_update_skip_locked:
        rows = _claim_skip_locked(due, worker=worker, limit=limit, lease_seconds=lease_seconds)
    else:
        rows = _claim_and_record_row_count(
            due, worker=worker, limit=limit, lease_seconds=lease_seconds
        )
    return [
        Claim(
            handoff_id=pk,
            action_key=key,
            payload=payload,
            payload_hash=digest,
            attempt_number=number,
            worker=worker,
            epoch=epoch,
            attempt_id=attempt_id,
            run_attempt=in_run,
            follow_up=follow_up,
        )
        for pk, key, payload, digest, number, epoch, in_run, attempt_id, follow_up in rows
    ]


def _claim_and_record_row_count(due, *, worker: str, limit: int, lease_seconds: int) -> list[tuple]:
    """Elsewhere (SQLite): the claim, then an attempt and a claim event per row, in one transaction."""
    with transaction.atomic(using=DB):
        rows = _claim_row_count(due, worker=worker, limit=limit, lease_seconds=lease_seconds)
        if not rows:
            return []
        now = timezone.now()
        attempts = Attempt.objects.using(DB).bulk_create(
            Attempt(
                handoff_id=pk, number=attempts, fencing_epoch=epoch, worker=worker, started_at=now
            )
            for pk, _key, _payload, _hash, attempts, epoch, _in_run in rows
        )
        HandoffEvent.objects.using(DB).bulk_create(
            HandoffEvent(
                handoff_id=pk,
                from_state=S.PENDING,
                to_state=S.IN_FLIGHT,
                actor_label=worker,
                reason=f"claimed for attempt {attempts}",
            )
            for pk, _key, _payload, _hash, attempts, _epoch, _in_run in rows
        )
    attempt_ids = {attempt.handoff_id: attempt.pk for attempt in attempts}
    return [(*row, attempt_ids.get(row[0]), True) for row in rows]


def _attempt_fields(outcome: str, result: DeliveryResult | None, detail: str = "") -> dict:
    return {
        "finished_at": timezone.now(),
        "outcome": outcome,
        "failure_class": result.failure_class if result else "",
        "reason_code": result.reason_code if result else "",
        "status_code": result.status_code if result else None,
        "latency_ms": result.latency_ms if result else None,
        "detail": redact_text(detail or (result.detail if result else ""))[:2000],
    }


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
        .annotate(run_start=Coalesce("run_started_at", "created_at"))
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
    is written for it."""
    if _delivered_in_one_statement(outcomes):
        return _record_delivered(outcomes, destination)
    ids = sorted(claim.handoff_id for claim, _ in outcomes)
    states: list[str | None] = []
    with transaction.atomic(using=DB):
        if any(claim.follow_up for claim, _ in outcomes):
            _lock_with_compensated_steps(ids)
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
    now = timezone.now()
    for handoff in changed:
        handoff.updated_at = now
    update_many(changed, fields, using=DB)
    HandoffEvent.objects.using(DB).bulk_create(events)
    _finish_attempts(attempts)
    _record_successors([h for h in changed if h.state == S.DELIVERED], actor_label=actor_label)


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
        plan = delivered_plan(result)
        rows.append(
            DeliveredRow(
                handoff_id=claim.handoff_id,
                epoch=claim.epoch,
                attempt_id=claim.attempt_id,
                changes=move_changes(
                    S.IN_FLIGHT, plan.to_state, plan.changes, action_key=claim.action_key
                ),
                reason=plan.reason,
                attempt=_attempt_fields(plan.attempt_outcome, result),
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
        Attempt(pk=claim.attempt_id or ids[claim.handoff_id], **_attempt_fields(outcome, result))
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


def handoff_renew_leases(*, claims: list[Claim], lease_seconds: float) -> set[int]:
    """Extend the leases this worker still holds (same owner, same fencing epoch, still in flight) and
    return their ids."""
    if not claims:
        return set()
    mine = Q()
    for claim in claims:
        mine |= Q(pk=claim.handoff_id, fencing_epoch=claim.epoch)
    held = Handoff.objects.using(DB).filter(mine, state=S.IN_FLIGHT, lease_owner=claims[0].worker)
    with transaction.atomic(using=DB):
        held.update(lease_expires_at=db_now_plus(lease_seconds))
        return set(held.values_list("pk", flat=True))


def handoff_release_claims(*, claims: list[Claim], reason: str) -> int:
    """Give back claims that were never sent (their destination was paused meanwhile): pending again, due
    at once, the attempt marked not sent and not counted against the handoff's run."""
    released = 0
    for claim in sorted(claims, key=lambda c: c.handoff_id):
        with transaction.atomic(using=DB):
            handoff = (
                Handoff.objects.using(DB)
                .select_for_update(no_key=True)
                .filter(
                    pk=claim.handoff_id,
                    state=S.IN_FLIGHT,
                    lease_owner=claim.worker,
                    fencing_epoch=claim.epoch,
                )
                .first()
            )
            if handoff is None:
                continue
            Attempt.objects.using(DB).filter(
                handoff_id=handoff.pk, number=claim.attempt_number
            ).update(outcome=AttemptOutcome.SKIPPED, finished_at=timezone.now(), detail=reason)
            handoff_transition(
                handoff,
                S.PENDING,
                actor_label=claim.worker,
                reason=reason,
                next_attempt_at=db_now(),
                attempts_in_run=max(handoff.attempts_in_run - 1, 0),
            )
            released += 1
    return released


def handoff_expire_leases(*, actor_label: str = "sweep") -> int:
    """In-flight handoffs whose lease ran out become uncertain: the call may have reached the receiver."""
    expired = list(
        Handoff.objects.using(DB).lease_expired().values_list("id", "fencing_epoch")[:500]
    )
    count = 0
    for pk, epoch in expired:
        with transaction.atomic(using=DB):
            handoff = (
                Handoff.objects.using(DB)
                .select_for_update(no_key=True)
                .lease_expired()
                .filter(pk=pk, fencing_epoch=epoch)
                .first()
            )
            if handoff is None:
                continue
            Attempt.objects.using(DB).filter(
                handoff_id=pk, fencing_epoch=epoch, outcome=AttemptOutcome.IN_PROGRESS
            ).update(
                outcome=AttemptOutcome.ABANDONED,
                finished_at=timezone.now(),
                failure_class=FailureClass.UNCERTAIN,
                reason_code="lease_expired",
                detail=f"worker {handoff.lease_owner} did not report back before its lease ran out",
            )
            handoff_transition(
                handoff,
                S.UNCERTAIN,
                actor_label=actor_label,
                reason=f"lease of {handoff.lease_owner} expired mid-call; outcome unknown",
                failure_class=FailureClass.UNCERTAIN,
                reason_code="lease_expired",
                last_error=f"worker {handoff.lease_owner} stopped reporting during the call",
            )
            count += 1
    return count


# How long a person's reconcile waits for the destination's limits (or its Retry-After hold) before it reports
# that the receiver could not be asked.
PERSON_LOOKUP_WAIT_SECONDS = 5.0


def _ask_receiver(destination: Destination, action_key: str) -> tuple[RemoteTask | None, str]:
    """The receiver's task for the key and "", or None and why nothing is known."""
    if not destination.supports_lookup:
        return None, "the destination cannot be asked about a key; check at the receiver by hand"
    try:
        return destination.lookup(action_key), ""
    except LookupFailed as exc:
        return None, str(exc)


def handoff_settle(
    *,
    handoff_id: int,
    destination: Destination | None = None,
    actor=None,
    actor_label: str = "settlement",
    reason: str = "",
) -> str:
    """Settle an unknown outcome by asking the receiver about the action key, before any new attempt.
    Also serves an operator's `reconcile` on a handoff that needs attention. Returns the state after.
    Without a `destination`, the configured one is asked under its limits (waiting a few seconds for them)."""
    destination = destination or LimitedLookups(
        get_destination(), worker=actor_label, wait_seconds=PERSON_LOOKUP_WAIT_SECONDS
    )
    handoff = Handoff.objects.using(DB).get(pk=handoff_id)
    if handoff.state not in NEEDS_PERSON_STATES:
        return handoff.state
    remote, lookup_error = _ask_receiver(destination, handoff.action_key)
    with transaction.atomic(using=DB):
        # Only if nothing moved the handoff while the receiver was asked (no lock was held meanwhile).
        locked = (
            Handoff.objects.using(DB)
            .select_for_update(no_key=True)
            .filter(pk=handoff_id, state=handoff.state, fencing_epoch=handoff.fencing_epoch)
            .first()
        )
        return _apply_settlement(
            locked,
            handoff_id,
            destination,
            remote,
            lookup_error,
            actor=actor,
            actor_label=actor_label,
            note=reason,
        )


def _apply_settlement(
    locked: Handoff | None,
    handoff_id: int,
    destination: Destination,
    remote: RemoteTask | None,
    lookup_error: str,
    *,
    actor,
    actor_label: str,
    note: str,
) -> str:
    if locked is None:
        return Handoff.objects.using(DB).values_list("state", flat=True).get(pk=handoff_id)
    settled = (
        settlement_without_answer(locked, destination, lookup_error)
        if lookup_error
        else settlement_for(locked, remote, destination)
    )
    if settled.to_state is None and lookup_error and actor is None:
        return locked.state  # nothing learnt, nobody asked: no event
    handoff_transition(
        locked,
        settled.to_state or locked.state,
        actor=actor,
        actor_label=actor_label if actor is None else "",
        action="reconcile" if actor is not None else "",
        reason=f"{settled.reason} (note: {note})" if note else settled.reason,
        **settled.changes,
    )
    return locked.state


def handoff_supersede(
    *, handoff_id: int, actor=None, reason: str, only_from: tuple[str, ...] | None = None
) -> Handoff:
    """A correction replaced the handoff. `only_from` names the states it may be in, checked under the lock."""
    with transaction.atomic(using=DB):
        handoff = handoff_lock(handoff_id)
        if only_from is not None and handoff.state not in only_from:
            raise InvalidTransition(handoff.action_key, handoff.state, S.SUPERSEDED)
        handoff_transition(
            handoff,
            S.SUPERSEDED,
            actor=actor,
            reason=reason,
            action="correct",
            reason_code="corrected",
        )
    return handoff


def handoff_cancel(*, handoff_id: int, actor, reason: str) -> Handoff:
    if not reason.strip():
        raise ReasonRequired("a reason is required to cancel a handoff")
    with transaction.atomic(using=DB):
        handoff = handoff_lock(handoff_id)
        if not handoff.cancellable_alone:
            raise CompensationBlocked(
                f"{handoff.action_key} is a later step or a compensation of a workflow: "
                "compensate the workflow instead"
            )
        handoff_transition(
            handoff,
            S.CANCELLED,
            actor=actor,
            reason=reason,
            action="cancel",
            reason_code="cancelled_by_operator",
        )
    return handoff


def handoff_retry(
    *, handoff_id: int, actor, reason: str = "", confirm_risk: bool = False
) -> Handoff:
    """Send again with the same action key: from needs_attention, or `run now` for one in backoff.

    A handoff whose last outcome is unknown may already exist at the receiver: sending again
    without reconciling first needs `confirm_risk`.
    """
    with transaction.atomic(using=DB):
        handoff = handoff_lock(handoff_id)
        if handoff.state == S.UNCERTAIN or (
            handoff.state == S.NEEDS_ATTENTION
            and handoff.failure_class in (FailureClass.UNCERTAIN, FailureClass.MALFORMED)
        ):
            if not confirm_risk:
                raise RiskNotConfirmed(
                    f"{handoff.action_key}: the last outcome is unknown; the receiver may already have the "
                    "task. Reconcile first, or confirm that you accept sending again."
                )
            if handoff.state == S.UNCERTAIN:
                handoff_transition(
                    handoff,
                    S.NEEDS_ATTENTION,
                    actor=actor,
                    reason="operator overrides settlement",
                    action="retry",
                )
        if handoff.state == S.PENDING:
            handoff_transition(
                handoff,
                S.PENDING,
                actor=actor,
                action="run_now",
                reason=reason or "run now instead of waiting for the backoff",
                next_attempt_at=db_now(),
            )
        else:
            handoff_transition(
                handoff,
                S.PENDING,
                actor=actor,
                reason=reason or "retry with the same action key",
                action="retry",
                next_attempt_at=db_now(),
                failure_class="",
                reason_code="",
                # A manual retry gets a fresh allowance: attempts and retry window start again.
                attempts_in_run=0,
                run_started_at=db_now(),
            )
    wake_dispatcher_on_commit()
    return handoff


def _may_own(user_id: int, workspace_id: int) -> bool:
    # Who may own a handoff is the source application's rule (operators of the workspace); it is wired in
    # by a setting so that the outbox core imports nothing from it.
    return import_string(settings.HANDOFF_ASSIGNEE_CHECK)(user_id, workspace_id)


def handoff_assign(*, handoff_id: int, actor, owner, reason: str = "") -> Handoff:
    """Give the handoff an owner (or none). The owner must be an operator of the handoff's workspace."""
    with transaction.atomic(using=DB):
        handoff = handoff_lock(handoff_id)
        if owner is not None and not _may_own(owner.pk, handoff.workspace_id):
            raise AssigneeNotOperator(
                f"{owner.get_username()} is not an operator of workspace {handoff.workspace_id}"
            )
        previous = handoff.owner.get_username() if handoff.owner else "nobody"
        handoff_transition(
            handoff,
            handoff.state,
            actor=actor,
            action="assign",
            reason=reason
            or f"assigned from {previous} to {owner.get_username() if owner else 'nobody'}",
            owner=owner,
        )
    return handoff


def handoff_acknowledge(*, handoff_id: int, actor, reason: str = "") -> Handoff:
    """The failure is seen by a person: records who and when (time to acknowledgement is a metric)."""
    with transaction.atomic(using=DB):
        handoff = handoff_lock(handoff_id)
        if handoff.state != S.NEEDS_ATTENTION:
            raise InvalidTransition(handoff.action_key, handoff.state, "acknowledged")
        handoff_transition(
            handoff,
            handoff.state,
            actor=actor,
            action="acknowledge",
            reason=reason or "failure acknowledged",
            acknowledged_at=timezone.now(),
            acknowledged_by=actor,
        )
    return handoff


def manual_settle_applies(handoff: Handoff) -> bool:
    """A person's check at the receiver can settle it: delivered, or needing attention with an unknown outcome."""
    return handoff.state == S.DELIVERED or _outcome_unknown(handoff)


def _outcome_unknown(handoff: Handoff) -> bool:
    return handoff.state == S.NEEDS_ATTENTION and handoff.failure_class in (
        FailureClass.UNCERTAIN,
        FailureClass.MALFORMED,
    )


def _settle_changes(handoff: Handoff, receiver_task_id: str) -> tuple[str, dict]:
    """The move a person's check at the receiver makes: the target state and the fields it sets."""
    from outbox.errors import ManualSettleNotAllowed

    unknown_outcome = _outcome_unknown(handoff)
    if unknown_outcome and receiver_task_id:
        return S.DELIVERED, {
            "destination_id": receiver_task_id,
            "delivered_at": timezone.now(),
            "failure_class": "",
            "reason_code": "",
            "last_error": "",
        }
    if unknown_outcome:
        # Nothing at the receiver: safe to send again with the same key, with a fresh allowance.
        return S.PENDING, {
            "next_attempt_at": db_now(),
            "failure_class": "",
            "reason_code": "",
            "attempts_in_run": 0,
            "run_started_at": db_now(),
        }
    if handoff.state == S.DELIVERED:
        # A repaired receiver (task re-created under the same key) or a repair that left it as it is.
        return S.DELIVERED, ({"destination_id": receiver_task_id} if receiver_task_id else {})
    raise ManualSettleNotAllowed(
        f"{handoff.action_key} is {handoff.state}"
        + (f" ({handoff.failure_class})" if handoff.failure_class else "")
        + ": a manual settle applies to a delivered handoff or to one whose outcome is unknown"
    )


def handoff_settle_manually(
    *, handoff_id: int, actor, receiver_task_id: str, reason: str
) -> Handoff:
    """Record what a person found at the receiver by hand, where no automatic path can ask it.

    Outcome unknown (no lookup, no idempotency): "the receiver has task X" -> delivered with X;
    "the receiver has nothing" -> pending again with the same key. Delivered: the task id the receiver
    holds now (re-created under the same key), or nothing changed. The state is checked under the lock.
    """
    receiver_task_id = receiver_task_id.strip()
    if not reason.strip():
        raise ReasonRequired("say what was checked or done at the receiver")
    with transaction.atomic(using=DB):
        handoff = handoff_lock(handoff_id)
        to_state, changes = _settle_changes(handoff, receiver_task_id)
        handoff_transition(
            handoff, to_state, actor=actor, action="manual_repair", reason=reason, **changes
        )
        if to_state == S.PENDING:
            wake_dispatcher_on_commit()
    return handoff


def handoff_note_check(
    *, handoff_id: int, actor, reason: str, action: str = "reconcile_now"
) -> HandoffEvent:
    """Write an operator's check or repair of a handoff into its history without changing its state."""
    with transaction.atomic(using=DB):
        handoff = handoff_lock(handoff_id)
        return handoff_transition(handoff, handoff.state, actor=actor, action=action, reason=reason)


# --- Bulk actions ---------------------------------------------------------------------------------

BULK_ACTIONS = ("retry", "reconcile", "assign", "cancel", "acknowledge")
# More matches than this run as a background job (BulkJob) with visible progress, not in the web request.
BULK_INLINE_LIMIT = 1000
BULK_JOB_CHUNK = 100


@dataclass
class BulkResult:
    """What a bulk action did: how many it applied to, and why the others were skipped (reason: count)."""

    action: str
    total: int
    done: int = 0
    skipped: dict[str, int] = field(default_factory=dict)

    def skip(self, reason: str) -> None:
        self.skipped[reason] = self.skipped.get(reason, 0) + 1


def _bulk_one(action: str, pk: int, *, actor, owner, reason: str) -> None:
    if action == "retry":
        handoff_retry(handoff_id=pk, actor=actor, reason=reason or "bulk retry")
    elif action == "reconcile":
        handoff_settle(handoff_id=pk, actor=actor)
    elif action == "cancel":
        handoff_cancel(handoff_id=pk, actor=actor, reason=reason)
    elif action == "acknowledge":
        handoff_acknowledge(handoff_id=pk, actor=actor, reason=reason or "bulk acknowledge")
    else:
        handoff_assign(handoff_id=pk, actor=actor, owner=owner, reason=reason)


def _check_bulk(action: str, reason: str) -> None:
    if action not in BULK_ACTIONS:
        raise InvalidActionInput(f"unknown bulk action {action!r}")
    if action == "cancel" and not reason.strip():
        raise ReasonRequired("a reason is required to cancel handoffs")


def bulk_job_start(
    *, action: str, handoff_ids: list[int], actor, owner=None, reason: str = ""
) -> BulkJob:
    """Queue a bulk action over many handoffs for the workers; the operator watches its progress."""
    _check_bulk(action, reason)
    with transaction.atomic(using=DB):
        job = BulkJob.objects.using(DB).create(
            action=action, actor=actor, owner=owner, reason=reason, handoff_ids=list(handoff_ids)
        )
        transaction.on_commit(lambda: _enqueue_bulk_job_not_rollback_safe(job.pk), using=DB)
    return job


def _enqueue_bulk_job_not_rollback_safe(job_id: int) -> None:
    if not settings.HANDOFF_WAKE_ON_COMMIT:
        return  # no cluster to wake (tests run the job themselves)
    from django_q.tasks import async_task

    async_task("outbox.tasks.bulk_job_run", job_id, q_options={"task_name": f"bulk-job-{job_id}"})


def bulk_job_run(*, job_id: int, chunk: int = BULK_JOB_CHUNK) -> BulkJob:
    """Work through a bulk job from where it stopped, a chunk at a time, writing its progress after each."""
    claimed = (
        BulkJob.objects.using(DB)
        .filter(pk=job_id)
        .exclude(state=BulkJobState.DONE)
        .update(state=BulkJobState.RUNNING)
    )
    job = BulkJob.objects.using(DB).get(pk=job_id)
    while claimed and job.position < job.total:
        ids = job.handoff_ids[job.position : job.position + chunk]
        result = handoffs_bulk_apply(
            action=job.action, handoff_ids=ids, actor=job.actor, owner=job.owner, reason=job.reason
        )
        job.position += len(ids)
        job.done += result.done
        for why, count in result.skipped.items():
            job.skipped[why] = job.skipped.get(why, 0) + count
        job.save(using=DB, update_fields=["position", "done", "skipped", "updated_at"])
    if claimed:
        job.state, job.finished_at = BulkJobState.DONE, timezone.now()
        job.save(using=DB, update_fields=["state", "finished_at"])
    return job


BULK_JOB_STALLED_SECONDS = 120


def bulk_jobs_resume() -> int:
    """Run the bulk jobs whose wake-up was lost or whose worker died (not moved for a while); returns how
    many. Their position makes each continue where it stopped."""
    stalled = (
        BulkJob.objects.using(DB)
        .exclude(state=BulkJobState.DONE)
        .filter(updated_at__lt=timezone.now() - timedelta(seconds=BULK_JOB_STALLED_SECONDS))
        .values_list("pk", flat=True)
    )
    resumed = 0
    for pk in list(stalled):
        # Touch it first (a conditional update): of two sweeps, one resumes it.
        if (
            BulkJob.objects.using(DB)
            .filter(
                pk=pk, updated_at__lt=timezone.now() - timedelta(seconds=BULK_JOB_STALLED_SECONDS)
            )
            .update(updated_at=timezone.now())
        ):
            bulk_job_run(job_id=pk)
            resumed += 1
    return resumed


def handoffs_bulk_apply(
    *, action: str, handoff_ids: list[int], actor, owner=None, reason: str = ""
) -> BulkResult:
    """Apply one action to each handoff, each in its own transaction through the same service as the single
    action; a handoff the action does not fit is skipped with the reason, never half done."""
    _check_bulk(action, reason)
    result = BulkResult(action=action, total=len(handoff_ids))
    for pk in handoff_ids:
        try:
            _bulk_one(action, pk, actor=actor, owner=owner, reason=reason)
        except RiskNotConfirmed:
            result.skip("outcome unknown: reconcile these first")
        except OutboxError as exc:
            result.skip(str(exc).split(": ", 1)[-1] if str(exc) else type(exc).__name__)
        else:
            result.done += 1
    return result


# --- The business outcome -------------------------------------------------------------------------

WORK_STATUSES = ("open", "in_progress", "done", "failed")


def handoffs_record_work_status(*, statuses: dict[str, str]) -> int:
    """Store the work status the receiver reported for delivered handoffs ({action_key: status}); returns
    how many changed. Not a state transition: the handoff stays delivered, its work moves on."""
    changed = 0
    for status in set(statuses.values()) & set(WORK_STATUSES):
        keys = [key for key, value in statuses.items() if value == status]
        changed += (
            Handoff.objects.using(DB)
            .filter(action_key__in=keys, state=S.DELIVERED)
            .exclude(work_status=status)
            .update(work_status=status, work_checked_at=timezone.now())
        )
    return changed


# --- Compensation -------------------------------------------------------------------------------------


def _instance_locked(instance_key: str) -> list[Handoff]:
    # Locked in id order, as every multi-row lock here.
    return list(
        Handoff.objects.using(DB)
        .select_for_update(no_key=True)
        .filter(instance_key=instance_key)
        .order_by("pk")
    )


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
        plan = compensation_plan(handoffs)
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
            _mark_compensation(
                step.pk,
                CompensationState.RESIDUAL,
                actor=actor,
                reason=f"no compensating operation; a person repairs it ({reason})",
            )
        for step in plan.reverse:
            _mark_compensation(step.pk, CompensationState.PLANNED, actor=actor, reason=reason)
        if plan.reverse:
            _record_first_compensation(plan, actor=actor)
    return plan


def _record_first_compensation(plan: CompensationPlan, *, actor) -> None:
    latest = plan.reverse[0]
    [first, *rest] = plan_compensations(plan.reverse)
    _record_planned(latest, first, rest, actor=actor, reason=f"compensation of {latest.action_key}")


def handoff_residual_repaired(*, handoff_id: int, actor, reason: str) -> Handoff:
    """A person undid by hand what a step without a compensating operation did (manual-repair record)."""
    with transaction.atomic(using=DB):
        _mark_compensation(handoff_id, CompensationState.REPAIRED, actor=actor, reason=reason)
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
