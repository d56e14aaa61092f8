"""The dispatcher's leases: renewed while a claim's calls go on, given back when a claim is not sent after
all, and expired when a worker stopped reporting (the outcome is then unknown)."""

from django.db import transaction
from django.db.models import Q

from lib.databases import DB
from outbox.clock import db_now, db_now_plus
from outbox.models import Attempt, AttemptOutcome, FailureClass, Handoff, HandoffState
from outbox.services.claims import Claim
from outbox.services.transitions import handoff_transition

S = HandoffState


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
            ).update(outcome=AttemptOutcome.SKIPPED, finished_at=db_now(), detail=reason)
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
