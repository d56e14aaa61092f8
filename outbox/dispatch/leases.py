"""The dispatcher's leases: renewed while a claim's calls go on, given back when a claim is not sent after
all, and expired when a worker stopped reporting: the outcome is then unknown, unless the claim's attempt
was opened "not called yet" (a destination without idempotency: `handoff_claim_due`'s `mark_not_called`) and
its call had not started (`attempt_mark_calling`, "sending now")."""

from datetime import datetime, timedelta
from typing import NamedTuple

from django.db import transaction
from django.db.models import Exists, OuterRef, Q

from lib.databases import DB, rows_compiled_once
from outbox.clock import db_now, db_now_plus
from outbox.dispatch.claims import Claim
from outbox.models import Attempt, AttemptOutcome, FailureClass, Handoff, HandoffState
from outbox.services.transitions import handoff_transition

S = HandoffState
# No call starts unless it ends this long before the leases it is made under (this host's monotonic clock).
LEASE_MARGIN_SECONDS = 1.0


class Renewed(NamedTuple):
    """The leases still this worker's after a renewal, and their new end on the database clock (None when
    none was)."""

    kept: set[int]
    leased_until: datetime | None


def lease_began(leased_until: datetime | None, lease_seconds: float) -> datetime | None:
    """When a lease of `lease_seconds` that ends at `leased_until` (set by a claim or a renewal) began: the
    database's time as that statement read it, which the calls made under it state (`outbox/clock.py`)."""
    return None if leased_until is None else leased_until - timedelta(seconds=lease_seconds)


def lease_renewal_due(*, since: float, call_seconds: float, lease_seconds: float) -> bool:
    """Whether leases renewed `since` seconds ago (this host's monotonic clock) are renewed before a call
    that may take `call_seconds`, for deliveries and settlement alike: the call could outlive them, or the
    clock went back since they were renewed (a stepped clock under libfaketime; `since` is then negative)
    and how long they have left is unknown."""
    return since < 0 or since + call_seconds + LEASE_MARGIN_SECONDS > lease_seconds


def handoff_renew_leases(*, claims: list[Claim], lease_seconds: float) -> Renewed:
    """Extend the leases this worker still holds (same owner, same fencing epoch, still in flight): their
    ids and the leases' new end."""
    if not claims:
        return Renewed(set(), None)
    mine = Q()
    for claim in claims:
        mine |= Q(pk=claim.handoff_id, fencing_epoch=claim.epoch)
    held = Handoff.objects.using(DB).filter(mine, state=S.IN_FLIGHT, lease_owner=claims[0].worker)
    with transaction.atomic(using=DB):
        held.update(lease_expires_at=db_now_plus(lease_seconds))
        rows = list(held.values_list("pk", "lease_expires_at"))
    return Renewed({pk for pk, _until in rows}, max((until for _pk, until in rows), default=None))


def handoff_release_claims(*, claims: list[Claim], reason: str) -> int:
    """Give back claims that were never sent (their destination was paused meanwhile): pending again, due
    at once, the attempt marked not sent and not counted against the handoff's run."""
    released = 0
    for claim in sorted(claims, key=lambda c: c.handoff_id):
        with transaction.atomic(using=DB):
            if claim_release_locked(claim, reason, reason=reason, next_attempt_at=db_now()):
                released += 1
    return released


def claim_release_locked(claim: Claim, detail: str, **transition) -> Handoff | None:
    """Inside the caller's transaction: the claim's handoff, locked while the claim still holds its lease
    (same owner and fencing epoch), its attempt marked not sent (`detail`) and moved back to pending with
    that attempt not counted (`transition`: the move's reason and fields); None when the lease was lost."""
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
        return None
    Attempt.objects.using(DB).filter(handoff_id=handoff.pk, number=claim.attempt_number).update(
        outcome=AttemptOutcome.SKIPPED, finished_at=db_now(), detail=detail
    )
    handoff_transition(
        handoff,
        S.PENDING,
        actor_label=claim.worker,
        attempts_in_run=max(handoff.attempts_in_run - 1, 0),
        attempts_not_counted=handoff.attempts_not_counted + 1,
        **transition,
    )
    return handoff


def _attempts_held(claims: list[Claim]):
    """The claims' open attempts while the claims still hold their leases (same owner and fencing epoch)."""
    mine = Q()
    for claim in claims:
        mine |= Q(
            handoff_id=claim.handoff_id, number=claim.attempt_number, fencing_epoch=claim.epoch
        )
    held = Handoff.objects.using(DB).filter(
        pk=OuterRef("handoff_id"), state=S.IN_FLIGHT, lease_owner=claims[0].worker
    )
    return (
        Attempt.objects.using(DB)
        .filter(mine, outcome=AttemptOutcome.IN_PROGRESS)
        .filter(Exists(held.filter(fencing_epoch=OuterRef("fencing_epoch"))))
    )


def attempt_mark_calling(*, claim: Claim) -> bool:
    """Mark the claim's attempt "sending now", in a transaction of its own, just before its call: True when
    marked (the call may go), False when the claim no longer holds its lease (send nothing). The attempt's
    row decides a race with `handoff_expire_leases`: whichever writes it first, the other's condition fails."""
    return bool(_attempts_held([claim]).filter(call_started=False).update(call_started=True))


def handoff_expire_leases(*, actor_label: str = "sweep") -> int:
    """In-flight handoffs whose lease ran out become uncertain (the call may have reached the receiver), or
    pending again, due at once, when their attempt was opened "not called yet" (`handoff_claim_due`'s
    `mark_not_called`)."""
    # Compiled once: supervision asks at every turn, and the ORM's compile cost four times the read.
    expired = rows_compiled_once(
        ("lapsed leases",),
        lambda: Handoff.objects.using(DB).lease_expired().values_list("id", "fencing_epoch")[:500],
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
            if _never_called(handoff, actor_label):
                count += 1
                continue
            Attempt.objects.using(DB).filter(
                handoff_id=pk, fencing_epoch=epoch, outcome=AttemptOutcome.IN_PROGRESS
            ).update(
                outcome=AttemptOutcome.ABANDONED,
                finished_at=db_now(),
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


def _never_called(handoff: Handoff, actor_label: str) -> bool:
    """A lease that ran out on an attempt marked "not called yet": the attempt is skipped (the conditional
    update wins or loses the race with `attempt_mark_calling` on the attempt's row) and the handoff is
    pending again with the same key, not counted against its run, as a claim given back is."""
    owner = handoff.lease_owner
    skipped = (
        Attempt.objects.using(DB)
        .filter(
            handoff_id=handoff.pk,
            fencing_epoch=handoff.fencing_epoch,
            outcome=AttemptOutcome.IN_PROGRESS,
            call_started=False,
        )
        .update(
            outcome=AttemptOutcome.SKIPPED,
            finished_at=db_now(),
            reason_code="lease_expired_not_sent",
            detail=f"never sent: worker {owner} stopped before this call started",
        )
    )
    if not skipped:
        return False
    handoff_transition(
        handoff,
        S.PENDING,
        actor_label=actor_label,
        reason=f"lease of {owner} expired before the call started: never sent, due again",
        next_attempt_at=db_now(),
        attempts_in_run=max(handoff.attempts_in_run - 1, 0),
        attempts_not_counted=handoff.attempts_not_counted + 1,
        last_error=f"worker {owner} stopped before sending it; it was never sent and goes again",
    )
    return True
