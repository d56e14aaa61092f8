"""What an answer means for a handoff, decided before anything is written.

`plan_outcome` reads one delivery result (a receipt, or a failure with its class) and `attempt_fields` what
its attempt records; `settlement_for` reads the receiver's answer about a key (found with the same payload,
found with another, not found). They only decide; `outbox/services/outcomes.py` and
`outbox/settlement/asked.py` write the move, with its event, under the row lock.
"""

from dataclasses import dataclass, field
from typing import NamedTuple

from outbox.clock import DbNow, db_now, db_now_plus
from outbox.destinations import Destination, LookupFailed, Lookups, RemoteTask
from outbox.failures import UNREACHABLE_REASONS, DeliveryResult
from outbox.limit_rules import NOT_ASKED
from outbox.models import (
    UNKNOWN_OUTCOME_CLASSES,
    AttemptOutcome,
    FailureClass,
    Handoff,
    HandoffState,
)
from outbox.models.states import WORK_DONE, DeliveredCode
from outbox.redaction import redact_text

S = HandoffState


@dataclass(frozen=True)
class Plan:
    """What one outcome does to its handoff: decided first, then written with the others in bulk."""

    to_state: str
    changes: dict
    reason: str
    attempt_outcome: str


def delivered_plan(result: DeliveryResult, destination: Destination) -> Plan:
    """A validated receipt: delivered. Where the effect is the work (`work_status` "delivered", an e-mail
    sent), the work is done with it, in the same write; elsewhere the receipt's own status, if any."""
    changes = {
        "destination_id": result.task_id,
        "delivered_at": db_now(),
        "failure_class": "",
        "reason_code": (
            DeliveredCode.CREATED if result.created else DeliveredCode.DUPLICATE_PREVENTED
        ).value,
        "last_error": "",
        "receipt": result.receipt or {},
        "work_status": str((result.receipt or {}).get("status", "")),
    }
    reason = (
        "receipt validated: task created"
        if result.created
        else "receipt validated: receiver returned the existing task (duplicate prevented)"
    )
    if destination.work_status.done_at_delivery:
        changes.update(work_status=WORK_DONE, work_checked_at=changes["delivered_at"])
        reason += "; the work is done: delivering it was the work"
    return Plan(
        S.DELIVERED,
        changes,
        reason,
        AttemptOutcome.CREATED if result.created else AttemptOutcome.DUPLICATE,
    )


def _unknown_outcome_plan(
    handoff: Handoff, result: DeliveryResult, destination: Destination, common: dict
) -> Plan:
    if destination.supports_idempotency or destination.supports_lookup:
        # A destination without idempotency that can be searched for the key (an e-mail API's message
        # search) is asked too: found, it is settled; not found, a person decides (`settlement_for`).
        return Plan(
            S.UNCERTAIN,
            common,
            f"outcome unknown ({result.reason_code}); to be settled by looking the key up",
            AttemptOutcome.UNCERTAIN,
        )
    # Nothing may be sent twice to a receiver that ignores the key: a person checks there and records it.
    evidence = (
        f"attempt {handoff.attempts} sent key {handoff.action_key} (payload hash {handoff.payload_hash[:12]}) "
        f"and the outcome is unknown ({result.reason_code}: {common['last_error']}). The destination does not "
        "honour idempotency keys: check at the receiver whether the task exists, then settle by hand."
    )
    return Plan(
        S.NEEDS_ATTENTION,
        {**common, "reason_code": "uncertain_not_idempotent", "last_error": evidence[:2000]},
        f"outcome unknown ({result.reason_code}) at a destination without idempotency: a person checks",
        AttemptOutcome.UNCERTAIN,
    )


def plan_outcome(
    handoff: Handoff, result: DeliveryResult, destination: Destination, *, past_window: bool = False
) -> Plan:
    if result.delivered:
        return delivered_plan(result, destination)
    detail = redact_text(result.detail)[:2000]
    common = {
        "failure_class": result.failure_class,
        "reason_code": result.reason_code,
        "last_error": detail,
    }
    if result.failure_class in UNKNOWN_OUTCOME_CLASSES:
        return _unknown_outcome_plan(handoff, result, destination, common)
    if result.failure_class == FailureClass.CREDENTIAL:
        # A refused credential is the destination's problem: its breaker pauses it, the handoff waits.
        return Plan(
            S.PENDING,
            {
                **common,
                "next_attempt_at": db_now(),
                "attempts_in_run": max(handoff.attempts_in_run - 1, 0),
            },
            "credential refused: the destination is paused until a probe succeeds",
            AttemptOutcome.FAILED,
        )
    policy = destination.retry_policy
    if result.failure_class == FailureClass.TRANSIENT:
        if result.reason_code in UNREACHABLE_REASONS:
            # The destination's outage, not this handoff's problem: only the retry window limits it.
            common["attempts_in_run"] = max(handoff.attempts_in_run - 1, 0)
        if not policy.exhausted(
            common.get("attempts_in_run", handoff.attempts_in_run), past_window=past_window
        ):
            delay = policy.delay(handoff.attempts_in_run, result.retry_after)
            return Plan(
                S.PENDING,
                {**common, "next_attempt_at": db_now_plus(delay)},
                f"transient failure ({result.reason_code}); retry in {delay:.1f}s",
                AttemptOutcome.FAILED,
            )
        common["reason_code"] = "retries_exhausted"
        spent = "retry window" if past_window else f"{handoff.attempts_in_run} attempts"
        common["last_error"] = f"{spent} exhausted; last: {result.reason_code}: {detail}"[:2000]
    return Plan(
        S.NEEDS_ATTENTION,
        common,
        f"{result.failure_class}: {common['reason_code']}",
        AttemptOutcome.FAILED,
    )


def attempt_fields(outcome: str, result: DeliveryResult | None, detail: str = "") -> dict:
    """What the attempt row records of an answer: its outcome, failure class, status, latency and the
    detail, redacted and cut to what is kept."""
    return {
        "finished_at": db_now(),
        "outcome": outcome,
        "failure_class": result.failure_class if result else "",
        "reason_code": result.reason_code if result else "",
        "status_code": result.status_code if result else None,
        # Measured on this host's monotonic clock, which a stepped clock may move back (libfaketime steps it
        # too): a negative latency would fail the column's check and lose the batch's outcomes with it.
        "latency_ms": max(result.latency_ms, 0)
        if result and result.latency_ms is not None
        else None,
        "detail": redact_text(detail or (result.detail if result else ""))[:2000],
    }


@dataclass(frozen=True)
class Settlement:
    """What the receiver's answer about a key means for the handoff: a move (or a note, when `to_state`
    is None: the state stays) with its reason and changes."""

    to_state: str | None
    reason: str
    changes: dict = field(default_factory=dict)


class Unanswered(NamedTuple):
    """Why nothing is known about a key: `error`, and whether the receiver was asked. Not asked (`asked`
    False: its destination's limits, a hold or its token endpoint refused the lookup, `LookupFailed.asked`),
    `error` is what refused it; asked, why its lookup failed. The flag is carried from the refusal, never
    read from words."""

    error: str
    asked: bool = True

    @classmethod
    def of(cls, failed: LookupFailed) -> "Unanswered":
        """A failed lookup's, as every place that settles or previews reads it: by its flag."""
        return cls(failed.why, asked=failed.asked)

    @property
    def words(self) -> str:
        """The error as every screen shows it: a refusal's led by NOT_ASKED."""
        return self.error if self.asked else f"{NOT_ASKED}{self.error}"


def settlement_without_answer(
    handoff: Handoff, destination: Lookups, unanswered: Unanswered
) -> Settlement:
    lookup_error = unanswered.words
    if handoff.state == S.UNCERTAIN and destination.replays_same_key:
        # The contract: a repeat with the same key and body answers the original, never a second effect.
        unknown = (
            f"{destination.name} could not answer ({unanswered.error})"
            if unanswered.asked
            else f"{destination.name} was not asked ({unanswered.error})"
        )
        return Settlement(
            S.PENDING,
            f"{unknown}; it replays the original answer to a "
            "repeat with the same key and body: sent again with the same key",
            {"next_attempt_at": db_now()},
        )
    if handoff.state == S.UNCERTAIN and not destination.supports_lookup:
        return Settlement(
            S.NEEDS_ATTENTION,
            lookup_error,
            {"failure_class": FailureClass.UNCERTAIN, "reason_code": "lookup_unsupported"},
        )
    return Settlement(None, f"reconcile could not ask the receiver: {lookup_error}")


def _not_found_not_resent(handoff: Handoff, destination: Lookups) -> Settlement:
    """No task for the key, and nothing sent by settlement itself: a person's retry is safe, unless the
    handoff's personal data was erased on request (`outbox/services/erasure.py`): what it would send now is
    "[erased]", so it is never sent again; a person cancels it or settles it by hand."""
    if not handoff.erasure_id:
        return Settlement(None, f"{destination.name} has no task for this key: retry is safe")
    return Settlement(
        S.NEEDS_ATTENTION if handoff.state == S.UNCERTAIN else None,
        f"{destination.name} has no task for this key, and its personal data was erased: "
        "it cannot be sent again",
        {"failure_class": FailureClass.PERMANENT, "reason_code": "erased_not_sent"},
    )


def _found_same(remote: RemoteTask, destination: Lookups, now: DbNow) -> Settlement:
    """The receiver has the task with the same payload: delivered, with its receipt."""
    return Settlement(
        S.DELIVERED,
        f"{destination.name} has task {remote.task_id} for this key with the same payload",
        {
            "destination_id": remote.task_id,
            "delivered_at": now,
            "failure_class": "",
            "reason_code": DeliveredCode.SETTLED_BY_LOOKUP.value,
            "last_error": "",
            "work_status": remote.status,
            "receipt": {
                "task_id": remote.task_id,
                "action_key": remote.action_key,
                "payload_hash": remote.payload_hash,
                "status": remote.status,
                "found_by": "lookup",
            },
        },
    )


def settlement_for(
    handoff: Handoff, remote: RemoteTask | None, destination: Lookups, *, now: DbNow | None = None
) -> Settlement:
    """found, same payload (the same hash, or an echo holding every field sent) -> delivered; found, another
    value of a field sent -> needs_attention (conflict);
    not found -> pending (same key, safe to send), or a person where the receiver ignores the key. `now`: the
    time written (the statement's own, on the database clock), built once by a caller that settles many."""
    now = db_now() if now is None else now
    if remote is not None and remote.same_payload(handoff.sent_body, handoff.payload_hash):
        return _found_same(remote, destination, now)
    if remote is not None:
        return Settlement(
            S.NEEDS_ATTENTION,
            f"{destination.name} has task {remote.task_id} for this key with another payload",
            {
                "failure_class": FailureClass.CONFLICT,
                "reason_code": "key_conflict",
                "last_error": f"{destination.name} payload hash {remote.payload_hash} differs from ours",
            },
        )
    if handoff.erasure_id or handoff.state != S.UNCERTAIN:
        return _not_found_not_resent(handoff, destination)
    if not destination.supports_idempotency:
        # Not there now does not prove the call will never land, and a receiver that ignores the key
        # would create a second task: a person decides.
        return Settlement(
            S.NEEDS_ATTENTION,
            f"{destination.name} has no task for this key yet, and it does not honour idempotency keys",
            {"failure_class": FailureClass.UNCERTAIN, "reason_code": "uncertain_not_idempotent"},
        )
    return Settlement(
        S.PENDING,
        f"{destination.name} has no task for this key: safe to send again with the same key",
        {"next_attempt_at": now},
    )
