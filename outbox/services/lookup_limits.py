"""Lookups and key listings under the destination's limits: each is one request to the receiver, like a
delivery call, so each takes a permit (`outbox/services/limits.py`) and gives it back after the answer. One-key
lookups made one after another (settlement's `lookup_each`) share one permit with a rate slot per request, as a
claim batch's calls do.

The rule: every lookup and key listing the product makes (settlement, reconciliation runs, a person's
reconcile or check) asks through `lookups_under_limits`, whether or not its caller passed a destination.
Deliveries are not asked here: the dispatcher takes a permit per claim batch.

A caller waits for a permit up to its `wait_seconds`, unless a hold refuses it that will still be live when the
wait ends (an operator's pause, a longer Retry-After): then it is refused at once (DestinationBusy, naming the
hold), not after sleeping the wait out.

A lookup answered 429 or 503 with Retry-After (or its token endpoint's) holds the whole destination, as a
delivery's answer does: the permit carries the wait and `destination_release` writes the hold.

An answer is also evidence that the destination is back: one paused by its breaker (as read with the
permit) resumes at once (`outbox/services/breaker.py` `destination_answered`), not at its next probe.
"""

import threading
import time
from collections.abc import Callable
from typing import NamedTuple, TypeVar

from django.conf import settings

from outbox.destinations import Destination, LookupFailed, Lookups, RemoteTask, get_destination
from outbox.destinations.base import WorkAnswer
from outbox.limit_rules import (
    HOLD_CHECK_SECONDS,
    NOT_ASKED,
    DestinationHeld,
    DestinationLimited,
    Permit,
)
from outbox.services.breaker import destination_answered
from outbox.services.limits import (
    HoldWatch,
    destination_acquire,
    destination_held_past,
    destination_release,
)

T = TypeVar("T")


class DestinationBusy(LookupFailed):
    """No permit in time: the destination is held (Retry-After) or at its limits. Nothing was asked: the
    receiver was not asked (`asked` False, whatever the words), and `refused` says what refused it. Its
    words are the refusal's, led by NOT_ASKED."""

    def __init__(self, refused: str):
        super().__init__(f"{NOT_ASKED}{refused}", asked=False)
        self.refused = refused

    @property
    def why(self) -> str:
        return self.refused


class EachAnswered(NamedTuple):
    """What `lookup_each` learnt: the keys asked, each with its task or None, and the key whose lookup failed
    with why (asking stopped there). A key in neither was not asked."""

    found: dict[str, RemoteTask | None]
    failed: tuple[str, str] | None = None


class LimitedLookups(Lookups):
    """A destination's lookups, each one request under its limits: a permit for one request (waiting at most
    `wait_seconds` for it; refused: DestinationBusy, and `refused` says why), given back after the answer.
    What the answers are worth (idempotency, whether the destination can be asked) is the destination's.
    One object may be shared by threads (a replay preview asks a few lookups at once through it): `refused`
    is each thread's own, so one thread's permit never blanks another's refusal, nor the reverse."""

    HOLD_CHECK_SECONDS = HOLD_CHECK_SECONDS

    def __init__(self, destination: Destination, *, worker: str, wait_seconds: float = 0.0):
        self.destination = destination
        self.worker = worker
        self.wait_seconds = wait_seconds
        self._refusals = threading.local()

    @property
    def refused(self) -> str:
        """Why this thread's last permit was refused, or a run of its lookups stopped ("" when given)."""
        return getattr(self._refusals, "why", "")

    @refused.setter
    def refused(self, why: str) -> None:
        self._refusals.why = why

    @property
    def name(self) -> str:
        return self.destination.name

    @property
    def supports_idempotency(self) -> bool:
        return self.destination.supports_idempotency

    @property
    def supports_lookup(self) -> bool:
        return self.destination.supports_lookup

    @property
    def replays_same_key(self) -> bool:
        return self.destination.replays_same_key

    @property
    def lookup_batch_size(self) -> int:
        return self.destination.lookup_batch_size

    def describe(self) -> str:
        return self.destination.describe()

    def lookup(self, action_key: str) -> RemoteTask | None:
        return self._asked(lambda: self.destination.lookup(action_key), "a lookup")

    def lookup_many(self, action_keys: list[str]) -> dict[str, RemoteTask | None]:
        """One permit for one request: callers split the keys into requests of `lookup_batch_size` (a
        destination without a batch lookup is asked one `lookup` per key, each with its own permit)."""
        if self.destination.lookup_batch_size < 2:
            return {action_key: self.lookup(action_key) for action_key in action_keys}
        return self._asked(lambda: self.destination.lookup_many(action_keys), "a batch lookup")

    def lookup_each(self, action_keys: list[str], *, until: float) -> EachAnswered:
        """One key a request, one request after another, under one permit for them all, as the dispatcher takes
        one per claim batch: one call in flight, a rate slot per request (fewer keys are asked when the rate
        limit gives fewer slots), given back after the last answer. Stops at the first lookup that fails, when
        a hold or an operator's pause begins meanwhile (`HoldWatch`, as a claim batch's calls; `refused` then
        says so), and asks no key after `until` (`time.monotonic()`) but the first: the caller's leases end
        after it. DestinationBusy when no permit came in time: nothing asked. A lookup refused before asking
        (`LookupFailed.asked` False: its token endpoint's) is raised when it is the first, as a refused permit;
        after answers it stops the run there, the rest not asked (`refused` says why)."""
        since = time.monotonic()
        permit = self._permit(requests=len(action_keys))
        found: dict[str, RemoteTask | None] = {}
        failed = None
        hold = HoldWatch(self.destination.name, since=since, every=self.HOLD_CHECK_SECONDS)
        try:
            for action_key in action_keys[: permit.requests]:
                if found and time.monotonic() > until:
                    break
                if found and hold.held_now():
                    self.refused = f"destination {self.name} is held or paused"
                    break
                permit.made([])
                try:
                    found[action_key] = self.destination.lookup(action_key)
                except LookupFailed as exc:
                    _wait_asked(permit, exc)
                    failed = self._failed_at(action_key, exc, asked_before=bool(found))
                    break
        finally:
            destination_release(permit=permit)
        if found and permit.breaker is not None and permit.breaker.paused:
            destination_answered(name=self.destination.name, what=f"a lookup ({self.worker})")
        return EachAnswered(found, failed)

    def _failed_at(
        self, action_key: str, exc: LookupFailed, *, asked_before: bool
    ) -> tuple[str, str] | None:
        """A run's failed lookup: asked, the key with why; refused before asking (its token endpoint), raised
        as a refused permit is when no key was asked yet, else the run stops there, the rest not asked."""
        if exc.asked:
            return action_key, str(exc)
        if not asked_before:
            raise exc
        self.refused = exc.why
        return None

    def read_work(self, *, receipt_id: str, action_key: str) -> WorkAnswer:
        """A pulled work status read (`work_pull.py`): one request, like a lookup."""
        return self._asked(
            lambda: self.destination.read_work(receipt_id=receipt_id, action_key=action_key),
            "a work status read",
        )

    def list_keys(self, *, after: str = "", limit: int = 500) -> list[RemoteTask]:
        return self._asked(
            lambda: self.destination.list_keys(after=after, limit=limit), "a key listing"
        )

    def _asked(self, call: Callable[[], T], what: str) -> T:
        permit = self._permit()
        try:
            answer = call()  # LookupFailed when the destination did not answer: no evidence
        except LookupFailed as exc:
            _wait_asked(permit, exc)
            raise
        finally:
            permit.made([])
            destination_release(permit=permit)
        if permit.breaker is not None and permit.breaker.paused:
            destination_answered(name=self.destination.name, what=f"{what} ({self.worker})")
        return answer

    def _permit(self, requests: int = 1) -> Permit:
        deadline = time.monotonic() + self.wait_seconds
        while True:
            try:
                permit = destination_acquire(
                    name=self.destination.name,
                    worker=self.worker,
                    requests=requests,
                    lease_seconds=settings.HANDOFF_LEASE_SECONDS,
                )
            except DestinationLimited as refused:
                if time.monotonic() + refused.wait_seconds > deadline or _held_past_wait(
                    self.destination.name, refused, deadline
                ):
                    self.refused = refused.reason
                    raise DestinationBusy(refused.reason) from refused
                time.sleep(refused.wait_seconds)
            else:
                self.refused = ""
                return permit


def _held_past_wait(name: str, refused: DestinationLimited, deadline: float) -> bool:
    """Refused for a hold that is still live after the caller's wait (an operator's pause, a Retry-After
    ending later): waiting it out in steps of a second would only delay the same refusal (a person's
    reconcile by its 5 s, a reconciliation run or a replay preview by 30 s a request)."""
    left = deadline - time.monotonic()
    return isinstance(refused, DestinationHeld) and destination_held_past(name=name, seconds=left)


def _wait_asked(permit: Permit, failed: LookupFailed) -> None:
    """A lookup refused with a Retry-After (its own 429 or 503, or its token endpoint's) holds the destination
    as a delivery's does: the same cap, the same reason, written when the permit is given back; no permit is
    given for any call, lookup or delivery, until it ends."""
    permit.asked_to_wait(
        status_code=failed.status_code,
        reason_code=failed.reason_code,
        retry_after=failed.retry_after,
    )


def lookups_under_limits(
    destination: Destination | LimitedLookups | None, *, worker: str, wait_seconds: float
) -> LimitedLookups:
    """The destination (the configured one when None) asked under its limits. Already under them, it is
    returned as it is: a caller that asks many times (settlement's pass) keeps its own wait and `refused`."""
    if isinstance(destination, LimitedLookups):
        return destination
    return LimitedLookups(
        destination or get_destination(), worker=worker, wait_seconds=wait_seconds
    )
