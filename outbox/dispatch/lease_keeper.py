"""The dispatcher's guard before each call: no call leaves after its lease could have passed to another
worker, nor on a slot of the destination's limits that ran out, nor into a Retry-After hold."""

import logging
import time

from outbox.clock import calls_clock_read_again
from outbox.dispatch.claims import Claim
from outbox.dispatch.leases import (
    handoff_release_claims,
    handoff_renew_leases,
    lease_began,
    lease_renewal_due,
)
from outbox.limit_rules import HOLD_CHECK_SECONDS, Permit
from outbox.services.limits import HoldWatch, destination_renew

log = logging.getLogger(__name__)


class LeaseKeeper:
    """Makes sure no call leaves after its lease could have passed to another worker, nor into a hold.

    Before each call it checks, on the local monotonic clock, whether the claims' leases (renewed on the
    database clock) certainly outlast one more call; if not, it renews them in one conditional UPDATE
    that also proves they are still this worker's. A claim whose lease was lost is dropped unsent. The
    permit's slots (the destination's limits) are leased alike, from before the claim, and renewed first:
    no call leaves on a slot that could have passed to another worker. At most every `HOLD_CHECK_SECONDS`
    it also asks whether another worker's Retry-After answer put the destination on hold. A lost slot or a
    hold gives the claims not sent yet back (pending, due at once, no attempt counted): `given_back`.
    """

    HOLD_CHECK_SECONDS = HOLD_CHECK_SECONDS

    def __init__(
        self,
        claims: list[Claim],
        *,
        lease_seconds: float,
        call_seconds: float,
        permit: Permit,
        leased_at: float,
    ):
        self.held = {claim.handoff_id: claim for claim in claims}
        self.lease_seconds, self.call_seconds = lease_seconds, call_seconds
        self.permit = permit
        # Monotonic time taken before the permit's slots were leased: the earliest any lease began.
        self.renewed_at = leased_at
        self.hold_watch = HoldWatch(
            permit.destination, since=leased_at, every=self.HOLD_CHECK_SECONDS
        )
        self.given_back: set[int] = set()
        # Passed by `still_held`: sent (or about to be); kept to record outcomes.
        self.sent: set[int] = set()
        self.released = 0
        self.stopped = ""

    def _give_back(self, reason: str) -> None:
        self.give_back([claim for pk, claim in self.held.items() if pk not in self.sent], reason)
        self.stopped = reason

    def give_back(self, claims: list[Claim], reason: str) -> None:
        """Claims not sent after all: pending again, due at once, no attempt counted."""
        self.released += handoff_release_claims(claims=claims, reason=reason)
        self.forget(claims)

    def forget(self, claims: list[Claim]) -> None:
        """Claims settled without a call by someone else (a withdrawal): no longer the keeper's to renew."""
        for claim in claims:
            self.held.pop(claim.handoff_id, None)
            self.sent.discard(claim.handoff_id)
            self.given_back.add(claim.handoff_id)

    def still_held(self, claim: Claim) -> bool:
        now = time.monotonic()
        if self.held and self.hold_watch.held_now():
            self._give_back(
                f"not sent: destination {self.permit.destination} asked to wait (Retry-After)"
            )
        if self.held and self._renewal_due(now):
            self.renewed_at = now
            if not destination_renew(permit=self.permit, lease_seconds=self.lease_seconds):
                log.warning(
                    "the destination's slot was taken over: claims not sent yet are given back"
                )
                self._give_back(
                    f"not sent: the slot of destination {self.permit.destination} ran out"
                )
            renewed = handoff_renew_leases(
                claims=list(self.held.values()), lease_seconds=self.lease_seconds
            )
            self.held = {pk: c for pk, c in self.held.items() if pk in renewed.kept}
            if renewed.leased_until is not None:
                # The calls that follow state the database's time as this renewal read it.
                calls_clock_read_again(lease_began(renewed.leased_until, self.lease_seconds))
        if claim.handoff_id in self.held:
            self.sent.add(claim.handoff_id)
            return True
        return False

    def _renewal_due(self, now: float) -> bool:
        return lease_renewal_due(
            since=now - self.renewed_at,
            call_seconds=self.call_seconds,
            lease_seconds=self.lease_seconds,
        )

    def lost(self, claim: Claim) -> bool:
        """Not sent because its lease was taken over (not given back by this worker)."""
        return claim.handoff_id not in self.given_back
