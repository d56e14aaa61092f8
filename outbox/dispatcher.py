"""The dispatcher: claim due handoffs, call the destination outside any transaction, record the outcome.

Claim and outcome are two short transactions with the network call between them. A claim carries
a fencing token (lease owner + epoch); an outcome whose token no longer matches is refused.
"""

import logging
import os
import socket
import time
from dataclasses import dataclass, field

from django.conf import settings
from django.db import connections, transaction
from django.db.models import BooleanField, ExpressionWrapper, F, Q
from django.db.models.functions import Coalesce
from django.utils import timezone

from outbox.breaker import Admission, destination_admit, destination_record_results
from outbox.bulk_writes import update_many
from outbox.clock import POSTGRES_NOW_PLUS, db_now, db_now_plus
from outbox.destinations import Destination, LookupFailed, RemoteTask, get_destination
from outbox.errors import LeaseLost
from outbox.failures import DeliveryResult, Outgoing
from outbox.models import Attempt, AttemptOutcome, FailureClass, Handoff, HandoffEvent, HandoffState
from outbox.redaction import redact_text
from outbox.services import handoff_retry, handoff_transition, transition_changes

log = logging.getLogger(__name__)
DB = "default"
S = HandoffState


def default_worker_name() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


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

    @property
    def outgoing(self) -> Outgoing:
        return Outgoing(action_key=self.action_key, payload=self.payload, payload_hash=self.payload_hash)


@dataclass
class RunStats:
    claimed: int = 0
    delivered: int = 0
    duplicates: int = 0
    retrying: int = 0
    uncertain: int = 0
    needs_attention: int = 0
    lease_lost: int = 0
    expired_leases: int = 0
    paused: bool = False
    settled: dict = field(default_factory=dict)

    def add(self, other: "RunStats") -> None:
        for name in ("claimed", "delivered", "duplicates", "retrying", "uncertain", "needs_attention",
                     "lease_lost", "expired_leases"):
            setattr(self, name, getattr(self, name) + getattr(other, name))
        for key, value in other.settled.items():
            self.settled[key] = self.settled.get(key, 0) + value


def _due():
    return Handoff.objects.using(DB).due()


def _claim_skip_locked(due, *, worker: str, limit: int, lease_seconds: int) -> list[tuple]:
    """PostgreSQL: lock due rows (skipping those another worker holds), lease them and read them back,
    in one statement: `WITH due AS (SELECT … FOR NO KEY UPDATE SKIP LOCKED) UPDATE … RETURNING`."""
    connection = connections[DB]
    select_sql, select_params = (
        due.select_for_update(skip_locked=True, no_key=True).order_by("next_attempt_at", "id")
        .values("id")[:limit].query.sql_with_params()
    )
    table = connection.ops.quote_name(Handoff._meta.db_table)
    sql = (
        f"WITH due AS ({select_sql}) "  # noqa: S608 - the inner query is Django's, every value a parameter
        f"UPDATE {table} AS h SET state = %s, lease_owner = %s, "
        f"lease_expires_at = {POSTGRES_NOW_PLUS}, fencing_epoch = h.fencing_epoch + 1, "
        "attempts = h.attempts + 1, attempts_in_run = h.attempts_in_run + 1, updated_at = now() "
        "FROM due WHERE h.id = due.id "
        "RETURNING h.id, h.action_key, h.payload, h.payload_hash, h.attempts, h.fencing_epoch, h.attempts_in_run"
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, [*select_params, S.IN_FLIGHT, worker, lease_seconds])
        fetched = cursor.fetchall()
    payload_field = Handoff._meta.get_field("payload")
    return [
        (pk, key, payload_field.from_db_value(payload, None, connection), digest, attempts, epoch, in_run)
        for pk, key, payload, digest, attempts, epoch, in_run in fetched
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
        .values_list("id", "action_key", "payload", "payload_hash", "attempts", "fencing_epoch", "attempts_in_run")
    )


def handoff_claim_due(
    *, worker: str, limit: int = 20, lease_seconds: int | None = None, handoff_id: int | None = None,
    destination_name: str | None = None,
) -> list[Claim]:
    """Claim up to `limit` due handoffs for `worker` and open an attempt for each."""
    lease_seconds = lease_seconds or settings.HANDOFF_LEASE_SECONDS
    due = _due()
    if destination_name is not None:
        due = due.filter(destination=destination_name)
    if handoff_id is not None:
        due = due.filter(pk=handoff_id)
    claim = _claim_skip_locked if connections[DB].features.has_select_for_update_skip_locked else _claim_row_count
    with transaction.atomic(using=DB):
        rows = claim(due, worker=worker, limit=limit, lease_seconds=lease_seconds)
        if not rows:
            return []
        now = timezone.now()
        attempts = Attempt.objects.using(DB).bulk_create(
            Attempt(handoff_id=pk, number=attempts, fencing_epoch=epoch, worker=worker, started_at=now)
            for pk, _key, _payload, _hash, attempts, epoch, _in_run in rows
        )
        HandoffEvent.objects.using(DB).bulk_create(
            HandoffEvent(
                handoff_id=pk, from_state=S.PENDING, to_state=S.IN_FLIGHT, actor_label=worker,
                reason=f"claimed for attempt {attempts}",
            )
            for pk, _key, _payload, _hash, attempts, _epoch, _in_run in rows
        )
    attempt_ids = {attempt.handoff_id: attempt.pk for attempt in attempts}
    return [
        Claim(handoff_id=pk, action_key=key, payload=payload, payload_hash=digest, attempt_number=number,
              worker=worker, epoch=epoch, attempt_id=attempt_ids.get(pk), run_attempt=in_run)
        for pk, key, payload, digest, number, epoch, in_run in rows
    ]


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


@dataclass(frozen=True)
class Plan:
    """What one outcome does to its handoff: decided first, then written with the others in bulk."""

    to_state: str
    changes: dict
    reason: str
    attempt_outcome: str


def _delivered_plan(result: DeliveryResult) -> Plan:
    return Plan(
        S.DELIVERED,
        {"destination_id": result.task_id, "delivered_at": timezone.now(), "failure_class": "",
         "reason_code": "", "last_error": ""},
        "receipt validated: task created" if result.created
        else "receipt validated: receiver returned the existing task (duplicate prevented)",
        AttemptOutcome.CREATED if result.created else AttemptOutcome.DUPLICATE,
    )


def _unknown_outcome_plan(handoff: Handoff, result: DeliveryResult, destination: Destination, common: dict) -> Plan:
    if destination.supports_idempotency:
        return Plan(S.UNCERTAIN, common, f"outcome unknown ({result.reason_code}); to be settled by looking the key up",
                    AttemptOutcome.UNCERTAIN)
    # Nothing may be sent twice to a receiver that ignores the key: a person checks there and records it.
    evidence = (f"attempt {handoff.attempts} sent key {handoff.action_key} (payload hash {handoff.payload_hash[:12]}) "
                f"and the outcome is unknown ({result.reason_code}: {common['last_error']}). The destination does not "
                "honour idempotency keys: check at the receiver whether the task exists, then settle by hand.")
    return Plan(S.NEEDS_ATTENTION, {**common, "reason_code": "uncertain_not_idempotent", "last_error": evidence[:2000]},
                f"outcome unknown ({result.reason_code}) at a destination without idempotency: a person checks",
                AttemptOutcome.UNCERTAIN)


def _plan(handoff: Handoff, result: DeliveryResult, destination: Destination, *, past_window: bool = False) -> Plan:
    if result.delivered:
        return _delivered_plan(result)
    detail = redact_text(result.detail)[:2000]
    common = {"failure_class": result.failure_class, "reason_code": result.reason_code, "last_error": detail}
    if result.failure_class in (FailureClass.UNCERTAIN, FailureClass.MALFORMED):
        return _unknown_outcome_plan(handoff, result, destination, common)
    if result.failure_class == FailureClass.CREDENTIAL:
        # A refused credential is the destination's problem: its breaker pauses it, the handoff waits.
        return Plan(S.PENDING, {**common, "next_attempt_at": db_now()},
                    "credential refused: the destination is paused until a probe succeeds", AttemptOutcome.FAILED)
    policy = destination.retry_policy
    if result.failure_class == FailureClass.TRANSIENT:
        if not policy.exhausted(handoff.attempts_in_run, past_window=past_window):
            delay = policy.delay(handoff.attempts_in_run, result.retry_after)
            return Plan(S.PENDING, {**common, "next_attempt_at": db_now_plus(delay)},
                        f"transient failure ({result.reason_code}); retry in {delay:.1f}s", AttemptOutcome.FAILED)
        common["reason_code"] = "retries_exhausted"
        spent = "retry window" if past_window else f"{handoff.attempts_in_run} attempts"
        common["last_error"] = f"{spent} exhausted; last: {result.reason_code}: {detail}"[:2000]
    return Plan(S.NEEDS_ATTENTION, common, f"{result.failure_class}: {common['reason_code']}", AttemptOutcome.FAILED)


def _locked_in_flight(ids: list[int], window_seconds: float) -> dict[int, Handoff]:
    """The in-flight rows, locked in id order (as every multi-row lock here, so two recorders cannot
    deadlock), each with `past_window` measured on the database clock."""
    past = ExpressionWrapper(Q(run_start__lt=db_now_plus(-window_seconds)), output_field=BooleanField())
    rows = (
        Handoff.objects.using(DB).select_for_update(no_key=True, of=("self",)).filter(pk__in=ids, state=S.IN_FLIGHT)
        .annotate(run_start=Coalesce("run_started_at", "created_at")).annotate(past_window=past).order_by("pk")
    )
    return {h.pk: h for h in rows}


def handoff_record_outcomes(
    *, outcomes: list[tuple[Claim, DeliveryResult]], destination: Destination
) -> list[str | None]:
    """Record several outcomes in one transaction, with one statement per table for the whole batch.
    A claim whose fencing token is stale (lease taken over) is refused: its entry is None and nothing
    is written for it."""
    ids = sorted(claim.handoff_id for claim, _ in outcomes)
    states: list[str | None] = []
    with transaction.atomic(using=DB):
        locked = _locked_in_flight(ids, destination.retry_policy.window_seconds)
        changed, fields, events, attempts = [], {"updated_at"}, [], []
        for claim, result in outcomes:
            handoff = locked.get(claim.handoff_id)
            if handoff is None or (handoff.lease_owner, handoff.fencing_epoch) != (claim.worker, claim.epoch):
                states.append(None)
                continue
            plan = _plan(handoff, result, destination, past_window=bool(handoff.past_window))
            changes = transition_changes(handoff, plan.to_state, plan.changes)
            for name, value in changes.items():
                setattr(handoff, name, value)
            changed.append(handoff)
            fields.update(changes)
            events.append(HandoffEvent(handoff_id=handoff.pk, from_state=S.IN_FLIGHT, to_state=plan.to_state,
                                       actor_label=claim.worker, reason=plan.reason))
            attempts.append((claim, plan.attempt_outcome, result))
            states.append(plan.to_state)
        if changed:
            now = timezone.now()
            for handoff in changed:
                handoff.updated_at = now
            update_many(changed, sorted(fields), using=DB)
            HandoffEvent.objects.using(DB).bulk_create(events)
            _finish_attempts(attempts)
    return states


def _finish_attempts(finished: list[tuple[Claim, str, DeliveryResult]]) -> None:
    unknown = [claim for claim, _outcome, _result in finished if claim.attempt_id is None]
    ids = {}
    for claim in unknown:
        ids[claim.handoff_id] = Attempt.objects.using(DB).values_list("id", flat=True).get(
            handoff_id=claim.handoff_id, number=claim.attempt_number)
    rows = [
        Attempt(pk=claim.attempt_id or ids[claim.handoff_id], **_attempt_fields(outcome, result))
        for claim, outcome, result in finished
    ]
    update_many(rows, ["finished_at", "outcome", "failure_class", "reason_code", "status_code", "latency_ms",
                       "detail"], using=DB)


def handoff_record_outcome(*, claim: Claim, result: DeliveryResult, destination: Destination) -> str:
    """Record one attempt's outcome. Refuses (LeaseLost) when the claim's fencing token is stale."""
    [state] = handoff_record_outcomes(outcomes=[(claim, result)], destination=destination)
    if state is None:
        raise LeaseLost(f"{claim.action_key}: lease of {claim.worker} epoch {claim.epoch} was taken over")
    return state


def _tally(stats: RunStats, state: str, result: DeliveryResult) -> None:
    if state == S.DELIVERED:
        stats.delivered += 1
        stats.duplicates += 0 if result.created else 1
    elif state == S.PENDING:
        stats.retrying += 1
    elif state == S.UNCERTAIN:
        stats.uncertain += 1
    else:
        stats.needs_attention += 1


def _resend_blocked(claim: Claim, destination: Destination) -> DeliveryResult | None:
    if destination.supports_idempotency:
        return None
    # Only this run's attempts: a person who checked the receiver and let it be sent again started a new run.
    earlier = Attempt.objects.using(DB).filter(handoff_id=claim.handoff_id, number__lt=claim.attempt_number,
                                               number__gt=claim.attempt_number - claim.run_attempt)
    if not earlier.exclude(outcome=AttemptOutcome.FAILED).exists():
        return None
    # Without idempotency, an earlier attempt that may have reached the receiver means a person must
    # check there first: nothing is sent twice automatically.
    return DeliveryResult.failed(
        FailureClass.UNCERTAIN, "not_idempotent_resend_blocked",
        "the destination does not honour idempotency keys and an earlier attempt may have reached it",
    )


def _record(outcomes: list[tuple[Claim, DeliveryResult]], destination: Destination, stats: RunStats) -> None:
    states = handoff_record_outcomes(outcomes=outcomes, destination=destination)
    for (claim, result), state in zip(outcomes, states, strict=True):
        if state is None:
            stats.lease_lost += 1
            log.warning("outcome of %s refused: lease taken over (result was %s)", claim.action_key,
                        result.reason_code or "delivered")
        else:
            _tally(stats, state, result)
    destination_record_results(name=destination.name, results=[result for _claim, result in outcomes])


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


class LeaseKeeper:
    """Makes sure no call leaves after its lease could have passed to another worker.

    Before each call it checks, on the local monotonic clock, whether the claims' leases (renewed on the
    database clock) certainly outlast one more call; if not, it renews them in one conditional UPDATE
    that also proves they are still this worker's. A claim whose lease was lost is dropped unsent.
    """

    MARGIN = 1.0

    def __init__(self, claims: list[Claim], *, lease_seconds: float, call_seconds: float):
        self.held = {claim.handoff_id: claim for claim in claims}
        self.lease_seconds, self.call_seconds = lease_seconds, call_seconds
        self.renewed_at = time.monotonic()

    def still_held(self, claim: Claim) -> bool:
        if time.monotonic() - self.renewed_at + self.call_seconds + self.MARGIN > self.lease_seconds:
            self.renewed_at = time.monotonic()
            kept = handoff_renew_leases(claims=list(self.held.values()), lease_seconds=self.lease_seconds)
            self.held = {pk: c for pk, c in self.held.items() if pk in kept}
        return claim.handoff_id in self.held

    def done(self, claim: Claim) -> None:
        self.held.pop(claim.handoff_id, None)


def deliver_claim(claim: Claim, destination: Destination, stats: RunStats, keeper: LeaseKeeper | None = None) -> None:
    """Call the destination for one claim (no transaction open) and record the outcome at once."""
    if keeper is not None and not keeper.still_held(claim):
        stats.lease_lost += 1
        log.warning("%s not sent: its lease was taken over before the call", claim.action_key)
        return
    result = _resend_blocked(claim, destination) or destination.deliver(claim.outgoing)
    _record([(claim, result)], destination, stats)
    if keeper is not None:
        keeper.done(claim)


def _held(claims: list[Claim], keeper: LeaseKeeper | None, stats: RunStats) -> list[Claim]:
    if keeper is None:
        return claims
    kept = [claim for claim in claims if keeper.still_held(claim)]
    stats.lease_lost += len(claims) - len(kept)
    return kept


def deliver_claims_batched(claims: list[Claim], destination: Destination, stats: RunStats,
                           keeper: LeaseKeeper | None = None) -> None:
    """One batch call for every claim the destination may take in a batch, one commit for the outcomes."""
    outcomes, sendable = [], []
    for claim in _held(claims, keeper, stats):
        blocked = _resend_blocked(claim, destination)
        if blocked is None:
            sendable.append(claim)
        else:
            outcomes.append((claim, blocked))
    if sendable:
        outcomes += zip(sendable, destination.deliver_batch([c.outgoing for c in sendable]), strict=True)
    if outcomes:
        _record(outcomes, destination, stats)


def dispatch_batch(*, destination: Destination | None = None, worker: str | None = None, limit: int | None = None,
                   handoff_id: int | None = None) -> RunStats:
    """Claim what is due for the destination (nothing while it is paused, one handoff as its probe) and
    deliver it."""
    destination = destination or get_destination()
    worker = worker or default_worker_name()
    stats = RunStats()
    admission = destination_admit(name=destination.name)
    if admission is Admission.PAUSED:
        stats.paused = True
        return stats
    limit = 1 if admission is Admission.PROBE else (limit or settings.HANDOFF_CLAIM_BATCH)
    lease_seconds = settings.HANDOFF_LEASE_SECONDS
    claims = handoff_claim_due(worker=worker, limit=limit, handoff_id=handoff_id, lease_seconds=lease_seconds,
                               destination_name=destination.name)
    stats.claimed = len(claims)
    keeper = LeaseKeeper(claims, lease_seconds=lease_seconds, call_seconds=destination.call_seconds)
    if destination.supports_batch and len(claims) > 1:
        deliver_claims_batched(claims, destination, stats, keeper)
    else:
        for claim in claims:
            deliver_claim(claim, destination, stats, keeper)
    return stats


def handoff_deliver(*, handoff_id: int, destination: Destination | None = None, worker: str | None = None) -> str:
    """Deliver one handoff now if it is due; return its state afterwards."""
    dispatch_batch(destination=destination, worker=worker, limit=1, handoff_id=handoff_id)
    return Handoff.objects.using(DB).values_list("state", flat=True).get(pk=handoff_id)


def handoff_retry_now(*, handoff_id: int, actor, reason: str = "", confirm_risk: bool = False,
                      destination: Destination | None = None) -> str:
    """An operator's retry (same action key), sent at once so that the operator sees the real result."""
    handoff_retry(handoff_id=handoff_id, actor=actor, reason=reason, confirm_risk=confirm_risk)
    return handoff_deliver(handoff_id=handoff_id, destination=destination)


def handoff_expire_leases(*, actor_label: str = "sweep") -> int:
    """In-flight handoffs whose lease ran out become uncertain: the call may have reached the receiver."""
    expired = list(
        Handoff.objects.using(DB)
        .lease_expired()
        .values_list("id", "fencing_epoch")[:500]
    )
    count = 0
    for pk, epoch in expired:
        with transaction.atomic(using=DB):
            handoff = (
                Handoff.objects.using(DB).select_for_update(no_key=True)
                .lease_expired().filter(pk=pk, fencing_epoch=epoch).first()
            )
            if handoff is None:
                continue
            Attempt.objects.using(DB).filter(
                handoff_id=pk, fencing_epoch=epoch, outcome=AttemptOutcome.IN_PROGRESS
            ).update(outcome=AttemptOutcome.ABANDONED, finished_at=timezone.now(),
                     failure_class=FailureClass.UNCERTAIN, reason_code="lease_expired",
                     detail=f"worker {handoff.lease_owner} did not report back before its lease ran out")
            handoff_transition(
                handoff, S.UNCERTAIN, actor_label=actor_label,
                reason=f"lease of {handoff.lease_owner} expired mid-call; outcome unknown",
                failure_class=FailureClass.UNCERTAIN, reason_code="lease_expired",
                last_error=f"worker {handoff.lease_owner} stopped reporting during the call",
            )
            count += 1
    return count


@dataclass(frozen=True)
class Settlement:
    """What the receiver's answer about a key means for the handoff: a move (or a note, when `to_state`
    is None: the state stays) with its reason and changes."""

    to_state: str | None
    reason: str
    changes: dict = field(default_factory=dict)


def _settlement_without_answer(handoff: Handoff, destination: Destination, lookup_error: str) -> Settlement:
    if handoff.state == S.UNCERTAIN and not destination.supports_lookup:
        return Settlement(S.NEEDS_ATTENTION, lookup_error,
                          {"failure_class": FailureClass.UNCERTAIN, "reason_code": "lookup_unsupported"})
    return Settlement(None, f"reconcile could not ask the receiver: {lookup_error}")


def _settlement(handoff: Handoff, remote: RemoteTask | None, destination: Destination) -> Settlement:
    """found, same payload hash -> delivered; found, other hash -> needs_attention (conflict);
    not found -> pending (same key, safe to send), or a person where the receiver ignores the key."""
    if remote is not None and remote.payload_hash == handoff.payload_hash:
        return Settlement(S.DELIVERED, f"receiver has task {remote.task_id} for this key with the same payload",
                          {"destination_id": remote.task_id, "delivered_at": timezone.now(), "failure_class": "",
                           "reason_code": "", "last_error": ""})
    if remote is not None:
        return Settlement(S.NEEDS_ATTENTION, f"receiver has task {remote.task_id} for this key with another payload",
                          {"failure_class": FailureClass.CONFLICT, "reason_code": "key_conflict",
                           "last_error": f"receiver payload hash {remote.payload_hash} differs from ours"})
    if handoff.state != S.UNCERTAIN:
        return Settlement(None, "receiver has no task for this key: retry is safe")
    if not destination.supports_idempotency:
        # Not there now does not prove the call will never land, and a receiver that ignores the key
        # would create a second task: a person decides.
        return Settlement(S.NEEDS_ATTENTION,
                          "receiver has no task for this key yet, and it does not honour idempotency keys",
                          {"failure_class": FailureClass.UNCERTAIN, "reason_code": "uncertain_not_idempotent"})
    return Settlement(S.PENDING, "receiver has no task for this key: safe to send again with the same key",
                      {"next_attempt_at": db_now()})


def _ask_receiver(destination: Destination, action_key: str) -> tuple[RemoteTask | None, str]:
    """The receiver's task for the key and "", or None and why nothing is known."""
    if not destination.supports_lookup:
        return None, "the destination cannot be asked about a key; check at the receiver by hand"
    try:
        return destination.lookup(action_key), ""
    except LookupFailed as exc:
        return None, str(exc)


def handoff_settle(*, handoff_id: int, destination: Destination | None = None, actor=None,
                   actor_label: str = "settlement", reason: str = "") -> str:
    """Settle an unknown outcome by asking the receiver about the action key, before any new attempt.
    Also serves an operator's `reconcile` on a handoff that needs attention. Returns the state after."""
    destination = destination or get_destination()
    handoff = Handoff.objects.using(DB).get(pk=handoff_id)
    if handoff.state not in (S.UNCERTAIN, S.NEEDS_ATTENTION):
        return handoff.state
    remote, lookup_error = _ask_receiver(destination, handoff.action_key)
    with transaction.atomic(using=DB):
        # Only if nothing moved the handoff while the receiver was asked (no lock was held meanwhile).
        locked = (
            Handoff.objects.using(DB).select_for_update(no_key=True)
            .filter(pk=handoff_id, state=handoff.state, fencing_epoch=handoff.fencing_epoch).first()
        )
        return _apply_settlement(locked, handoff_id, destination, remote, lookup_error, actor=actor,
                                 actor_label=actor_label, note=reason)


def _apply_settlement(locked: Handoff | None, handoff_id: int, destination: Destination, remote: RemoteTask | None,
                      lookup_error: str, *, actor, actor_label: str, note: str) -> str:
    if locked is None:
        return Handoff.objects.using(DB).values_list("state", flat=True).get(pk=handoff_id)
    settled = (_settlement_without_answer(locked, destination, lookup_error) if lookup_error
               else _settlement(locked, remote, destination))
    if settled.to_state is None and lookup_error and actor is None:
        return locked.state  # nothing learnt, nobody asked: no event
    handoff_transition(
        locked, settled.to_state or locked.state, actor=actor, actor_label=actor_label if actor is None else "",
        action="reconcile" if actor is not None else "",
        reason=f"{settled.reason} (note: {note})" if note else settled.reason, **settled.changes,
    )
    return locked.state


def settle_uncertain(*, destination: Destination | None = None, limit: int = 200) -> dict[str, int]:
    destination = destination or get_destination()
    outcomes: dict[str, int] = {}
    for pk in Handoff.objects.using(DB).filter(state=S.UNCERTAIN).order_by("updated_at").values_list(
        "id", flat=True
    )[:limit]:
        state = handoff_settle(handoff_id=pk, destination=destination)
        outcomes[state] = outcomes.get(state, 0) + 1
    return outcomes


def maintain(*, destination: Destination | None = None) -> RunStats:
    """Expire leases that ran out and settle uncertain outcomes. Runs on its own cadence, never behind a
    drain: a dead worker's rows are noticed within a lease, whatever the backlog."""
    destination = destination or get_destination()
    stats = RunStats(expired_leases=handoff_expire_leases())
    stats.settled = settle_uncertain(destination=destination)
    return stats


def sweep(*, destination: Destination | None = None, worker: str | None = None) -> RunStats:
    """One pass of everything periodic (django-q2's schedule, `dispatch --once`): maintenance, then the
    due rows, then settlement of what this pass itself left uncertain (a lost answer costs one pass)."""
    destination = destination or get_destination()
    stats = maintain(destination=destination)
    stats.add(drain(destination=destination, worker=worker))
    for state, count in settle_uncertain(destination=destination).items():
        stats.settled[state] = stats.settled.get(state, 0) + count
    return stats


def drain(*, destination: Destination | None = None, worker: str | None = None, max_batches: int = 1000) -> RunStats:
    """Dispatch batches until nothing is due (or `max_batches`)."""
    stats = RunStats()
    for _ in range(max_batches):
        batch = dispatch_batch(destination=destination, worker=worker)
        stats.add(batch)
        if batch.claimed == 0:
            break
    return stats
