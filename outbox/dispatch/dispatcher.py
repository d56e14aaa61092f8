"""The dispatcher orchestrates; every write it makes is a service of `outbox/services/`.

One handoff's way through `dispatch_batch`, in the order of this file: admit (the destination's breaker,
`outbox/services/breaker.py`), take a permit (its limits, `outbox/services/limits.py`), claim
(`outbox/dispatch/claims.py`), call the destination outside any transaction (`outbox/destinations/`, which
reads its answer with `outbox/failures.py`; `outbox/dispatch/lease_keeper.py` checks the lease before each call),
give the permit back, record the outcome (`outbox/dispatch/recorded.py` → `outbox/services/outcomes.py`: planned by
`outbox/outcomes.py`, written there or by `outbox/delivered.py`), count it against the breaker. The periodic
passes (`drain`, `maintain`, `sweep`) are at the end.
"""

import logging
import os
import socket
import threading
import time
from typing import NamedTuple

from django.conf import settings

from lib.databases import DB
from lib.telemetry import each_in_trace
from outbox.breaker_rules import Admission, would_pause
from outbox.clock import calls_on_db_clock
from outbox.destinations import (
    BatchRefused,
    Destination,
    destination_named,
    enabled_destinations,
    get_destination,
)
from outbox.dispatch.claims import Claim, claim_resend_blocked, handoff_claim_due
from outbox.dispatch.lease_keeper import LeaseKeeper
from outbox.dispatch.leases import (
    attempt_mark_calling,
    handoff_expire_leases,
    handoff_release_claims,
    lease_began,
)
from outbox.dispatch.recorded import record_and_count, write_and_count
from outbox.dispatch.run_stats import RunStats
from outbox.dispatch.withdrawals import handoff_withdraw, send_withheld
from outbox.failures import DeliveryResult
from outbox.limit_rules import DestinationLimited, Limits, Permit
from outbox.models import DestinationState, Handoff
from outbox.services.breaker import (
    destination_admit,
    destination_settlement_admission,
)
from outbox.services.case_holds import case_holds_expire
from outbox.services.deadlines import handoffs_past_deadline
from outbox.services.limits import destination_acquire, destination_release
from outbox.services.lookup_limits import lookups_under_limits
from outbox.services.outcomes import handoffs_probe_not_counted
from outbox.settlement.passes import SettlementPass, settle_pass

log = logging.getLogger(__name__)


def default_worker_name() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


class Claimed(NamedTuple):
    """Claims the caller made before the batch's permit, in the statement that read the destination's limits,
    holds and breaker and found that none needs a statement of its own (`outbox/dispatch/runner.py`
    `_claim_turn`), and when (this process's monotonic clock) their lease began."""

    claims: list[Claim]
    leased_at: float
    # The breaker's admission they were claimed under (a probe's claim is one handoff).
    admission: Admission = Admission.OPEN


def dispatch_batch(
    *,
    destination: Destination | None = None,
    worker: str | None = None,
    limit: int | None = None,
    handoff_id: int | None = None,
    stop: threading.Event | None = None,
    limits: Limits | None = None,
    claimed: Claimed | None = None,
) -> RunStats:
    """Claim what is due for the destination and deliver it: nothing while it is paused (one handoff as its
    probe), nothing while its `limits` (the caller's read, else the permit's) or a Retry-After hold refuse a
    permit (`stats.limited`, and how long to wait), and no more requests than the permit allows (a batch call
    is one request). Once `stop` is set no further call starts: the claims not sent yet are given back.
    `claimed`: the caller's claims (read with `limits`), delivered under the permit and admission taken here;
    given back unsent should either refuse."""
    destination = destination or get_destination()
    worker, stats = worker or default_worker_name(), RunStats()
    if claimed is not None and not claimed.claims:
        return stats  # the caller's claim found nothing due
    limit = limit or settings.HANDOFF_CLAIM_BATCH
    lease_seconds, leased_at = settings.HANDOFF_LEASE_SECONDS, time.monotonic()
    batching = destination.batching()
    # The limits first: a probe of a paused destination is spent only on a call that can be made.
    permit = _permit(destination, batching, worker, limit, lease_seconds, stats, limits)
    if permit is None:
        _give_back_claimed(claimed, stats, f"not sent: destination {destination.name} limited")
        return stats
    try:
        claimed = _admitted(
            claimed,
            destination,
            permit,
            stats,
            worker=worker,
            limit=limit if batching else min(limit, permit.requests),
            handoff_id=handoff_id,
            leased_at=leased_at,
        )
        if claimed is not None:
            _deliver_claimed(claimed, destination, permit, batching, stats, stop)
    finally:
        # Given back right after the calls already; this covers no claims, a pause, and an error before the calls.
        destination_release(permit=permit)
    return stats


def _admitted(
    claimed: Claimed | None,
    destination: Destination,
    permit: Permit,
    stats: RunStats,
    **claim,
) -> Claimed | None:
    """The batch's claims under the breaker's admission: the caller's while it admits them (given back
    otherwise), else claimed now (`_claim_admitted`); None: nothing to send."""
    if claimed is None:
        return _claim_admitted(destination, permit, stats, **claim)
    if destination_admit(name=destination.name, seen=permit.breaker) is Admission.OPEN:
        return claimed
    _give_back_claimed(claimed, stats, f"not sent: destination {destination.name} paused")
    stats.paused = True
    return None


def _deliver_claimed(
    claimed: Claimed,
    destination: Destination,
    permit: Permit,
    batching: bool,
    stats: RunStats,
    stop: threading.Event | None,
) -> None:
    claims, leased_at, admission = claimed
    lease_seconds = settings.HANDOFF_LEASE_SECONDS
    keeper = LeaseKeeper(
        claims,
        lease_seconds=lease_seconds,
        permit=permit,
        call_seconds=destination.call_seconds,
        leased_at=leased_at,
    )
    with _on_claims_clock(claims, lease_seconds):
        _deliver(claims, destination, batching, stats, keeper, stop)
        _probe_not_counted(admission, claims, keeper, destination.name)


def _claim_admitted(
    destination: Destination,
    permit: Permit,
    stats: RunStats,
    *,
    worker: str,
    limit: int,
    handoff_id: int | None,
    leased_at: float,
) -> Claimed | None:
    """The batch's claims once the breaker admits it (one handoff as a paused destination's probe); None while
    it is paused."""
    admission = destination_admit(name=destination.name, seen=permit.breaker)
    if admission is Admission.PAUSED:
        stats.paused = True
        return None
    claims = handoff_claim_due(
        worker=worker,
        limit=1 if admission is Admission.PROBE else limit,
        handoff_id=handoff_id,
        lease_seconds=settings.HANDOFF_LEASE_SECONDS,
        destination_name=destination.name,
        mark_not_called=not destination.supports_idempotency,
    )
    return Claimed(claims, leased_at, admission)


def _give_back_claimed(claimed: Claimed | None, stats: RunStats, reason: str) -> None:
    """The caller's claims, refused a permit or admission after all (a hold or pause that began between the
    claim's read and this): pending again, unsent."""
    if claimed is not None and claimed.claims:
        stats.released += handoff_release_claims(claims=claimed.claims, reason=reason)


def _on_claims_clock(claims: list[Claim], lease_seconds: float):
    """The batch's calls state the database's time as its claim read it, not this host's (`outbox/clock.py`):
    a receiver refuses a signature 5 minutes off its own clock, and no extra query is made for it."""
    return calls_on_db_clock(lease_began(claims[0].leased_until, lease_seconds) if claims else None)


def _probe_not_counted(
    admission: Admission, claims: list[Claim], keeper: LeaseKeeper, name: str
) -> None:
    """A probe's call that found the destination still down is the destination's, not the handoff's."""
    if admission is Admission.PROBE:
        sent = [claim for claim in claims if claim.handoff_id in keeper.sent]
        handoffs_probe_not_counted(claims=sent, destination=name)


def _permit(
    destination: Destination,
    batching: bool,
    worker: str,
    limit: int,
    lease_seconds: float,
    stats: RunStats,
    limits: Limits | None = None,
) -> Permit | None:
    """The destination's limits for this batch (a batch call is one request, single calls one each), or None
    when they refuse: `stats` then say how long to wait."""
    try:
        return destination_acquire(
            name=destination.name,
            worker=worker,
            lease_seconds=lease_seconds,
            requests=1 if batching else limit,
            limits=limits,
        )
    except DestinationLimited as refused:
        stats.limited, stats.wait_seconds = True, refused.wait_seconds
        return None


def _deliver(
    claims: list[Claim],
    destination: Destination,
    batching: bool,
    stats: RunStats,
    keeper: LeaseKeeper,
    stop: threading.Event | None,
) -> None:
    stats.claimed = len(claims)
    if batching and len(claims) > 1:
        deliver_claims_batched(claims, destination, stats, keeper)
    else:
        deliver_claims_one_by_one(claims, destination, stats, keeper, stop)
    stats.released += keeper.released


def deliver_claims_one_by_one(
    claims: list[Claim],
    destination: Destination,
    stats: RunStats,
    keeper: LeaseKeeper,
    stop: threading.Event | None = None,
) -> None:
    """One call per claim, the batch's outcomes written in one commit afterwards (the claims stay leased,
    and renewed, until then). At a destination without idempotency each call is marked "sending now" just
    before it and its outcome written right after it (`_send_one`): a crash leaves one call unknown, and
    the claims it never sent go again. When an answer shows the destination down or refusing our
    credentials, or asks it to be left alone for a while (429/503 with Retry-After: the whole destination is
    held), the rest are given back unsent: such a receiver is not called once per handoff. So are they when
    the dispatcher is stopping: the calls made are recorded, the others are pending again at once."""
    outcomes, rest = [], []
    marked = not destination.supports_idempotency
    for index, claim in enumerate(each_in_trace(claims)):
        if stop is not None and stop.is_set():
            rest = claims[index:]
            break
        result = _send_one(claim, destination, keeper, stats, marked=marked)
        if result is None:
            continue
        outcomes.append((claim, result))
        if _stop_sending(keeper.permit, outcomes):
            rest = claims[index + 1 :]
            break
    destination_release(permit=keeper.permit)
    state = ""
    if outcomes:
        state = record_and_count(outcomes, destination, stats, written=marked)
    if rest:
        keeper.give_back(rest, _why_not_sent(destination, state, keeper.permit, stop))
        stats.paused = state == DestinationState.PAUSED


def _not_sent_lease_lost(claim: Claim, stats: RunStats) -> None:
    stats.lease_lost += 1
    log.warning("%s not sent: its lease was taken over before the call", claim.action_key)


def _send_one(
    claim: Claim, destination: Destination, keeper: LeaseKeeper, stats: RunStats, *, marked: bool
) -> DeliveryResult | None:
    """The claim's answer: its call's, or the one standing in for a call that may not be made; None when
    nothing was sent (its lease was lost). `marked`: the call is marked "sending now" first, and its outcome
    written before the next call starts (a destination without idempotency)."""
    if not keeper.still_held(claim):
        if keeper.lost(claim):
            _not_sent_lease_lost(claim, stats)
        return None
    result = claim_resend_blocked(claim, destination)
    if result is None and (reason := send_withheld(claim.action_key)):
        # Its reason to go ended (a page whose cause is over): withdrawn, never sent.
        handoff_withdraw(claim=claim, reason=reason)
        keeper.forget([claim])  # cancelled, or taken over by another lease: nothing left to release
        return None
    if result is None and marked and not attempt_mark_calling(claim=claim):
        _not_sent_lease_lost(claim, stats)
        return None
    if result is None:
        result = destination.deliver(claim.outgoing)
        keeper.permit.made([result])
    if marked:
        write_and_count([(claim, result)], destination, stats)
    return result


def _why_not_sent(
    destination: Destination, state: str, permit: Permit, stop: threading.Event | None
) -> str:
    if stop is not None and stop.is_set():
        return "not sent: the dispatcher was stopping"
    if state == DestinationState.PAUSED:
        return f"not sent: destination {destination.name} was paused"
    if permit.retry_after is not None:
        return f"not sent: destination {destination.name} asked to wait (Retry-After)"
    return f"not sent: destination {destination.name} failing"


def _stop_sending(permit: Permit, outcomes: list[tuple[Claim, DeliveryResult]]) -> bool:
    """The answers so far ask for no more calls: the destination is held (Retry-After) or would be paused. Only
    a failure can make the streak long enough to pause, so after a delivery the answers are not counted again."""
    if permit.retry_after is not None:
        return True
    return not outcomes[-1][1].delivered and would_pause([answer for _claim, answer in outcomes])


def _held(claims: list[Claim], keeper: LeaseKeeper, stats: RunStats) -> list[Claim]:
    kept = [claim for claim in claims if keeper.still_held(claim)]
    if keeper.stopped and kept:
        # One call carries them all: none goes once the slot is lost or a hold began.
        keeper.give_back(kept, keeper.stopped)
        kept = []
    stats.lease_lost += sum(1 for claim in claims if claim not in kept and keeper.lost(claim))
    return kept


def deliver_claims_batched(
    claims: list[Claim], destination: Destination, stats: RunStats, keeper: LeaseKeeper
) -> None:
    """One batch call for every claim the destination may take in a batch, one commit for the outcomes."""
    outcomes, sendable = [], []
    for claim in _held(claims, keeper, stats):
        blocked = claim_resend_blocked(claim, destination)
        if blocked is None:
            sendable.append(claim)
        else:
            outcomes.append((claim, blocked))
    if sendable:
        try:
            results = destination.deliver_batch([c.outgoing for c in sendable])
        except BatchRefused as refused:
            # Nothing was read: the claims go back unsent, and the next batches are one call per handoff.
            keeper.permit.made([])
            log.warning(
                "%s refused a batch of %d as too large: one call per handoff for a while",
                destination.name,
                len(sendable),
            )
            keeper.give_back(
                sendable, f"not sent: {destination.name} refused the batch as too large ({refused})"
            )
        else:
            keeper.permit.made(results)
            outcomes += zip(sendable, results, strict=True)
    destination_release(permit=keeper.permit)
    if outcomes:
        record_and_count(outcomes, destination, stats)


def handoff_deliver(
    *, handoff_id: int, destination: Destination | None = None, worker: str | None = None
) -> str:
    """Deliver one handoff now if it is due (to its own destination unless one is given); return its state
    afterwards."""
    if destination is None:
        name = Handoff.objects.using(DB).values_list("destination", flat=True).get(pk=handoff_id)
        destination = destination_named(name)
    dispatch_batch(destination=destination, worker=worker, limit=1, handoff_id=handoff_id)
    return Handoff.objects.using(DB).values_list("state", flat=True).get(pk=handoff_id)


def _each(destination: Destination | None) -> list[Destination]:
    """The destination given, or every enabled one (django-q2's tasks and `dispatch --once` serve them all)."""
    return [destination] if destination is not None else enabled_destinations()


def drain(
    *, destination: Destination | None = None, worker: str | None = None, max_batches: int = 1000
) -> RunStats:
    """Dispatch batches until nothing is due (or `max_batches` each), for the destination or every enabled
    one: again while a round claimed anything, since a step delivered at one records the next at another."""
    stats = RunStats()
    destinations = _each(destination)
    for _ in range(max_batches):
        claimed = stats.claimed
        for each in destinations:
            stats.add(_drain_one(each, worker, max_batches))
        if stats.claimed == claimed or len(destinations) == 1:
            break
    return stats


def _drain_one(destination: Destination, worker: str | None, max_batches: int) -> RunStats:
    stats = RunStats()
    for _ in range(max_batches):
        batch = dispatch_batch(destination=destination, worker=worker)
        stats.add(batch)
        if batch.claimed == 0:
            break
    return stats


# How long settlement waits for a permit before it ends its pass: long enough to get a slot between the
# dispatchers' claim batches while a backlog holds the destination at its limits.
SETTLEMENT_WAIT_SECONDS = 1.0
# How long a sweep (django-q2's schedule) goes on settling a backlog, pass after pass, before it ends.
SWEEP_SETTLEMENT_SECONDS = 20.0


def settle_uncertain(
    *, destination: Destination | None = None, limit: int = 200, worker: str | None = None
) -> dict[str, int]:
    """`settle_uncertain_pass`'s outcomes: the states its claims ended in, counted."""
    return settle_uncertain_pass(destination=destination, limit=limit, worker=worker).outcomes


def settle_uncertain_pass(
    *, destination: Destination | None = None, limit: int = 200, worker: str | None = None
) -> SettlementPass:
    """Claim up to `limit` of the destination's (the default one's) uncertain outcomes, oldest first, and settle
    them (`outbox/settlement/passes.py`), each request under its limits waiting at most SETTLEMENT_WAIT_SECONDS."""
    worker = worker or default_worker_name()
    asked = lookups_under_limits(destination, worker=worker, wait_seconds=SETTLEMENT_WAIT_SECONDS)
    return settle_pass(destination=asked, worker=worker, limit=limit)


class Lapsed(NamedTuple):
    """What `lapsed_expire` ended: leases that ran out, handoffs resumed as their case's hold ended, and steps
    handed to a person as their must-finish-by passed."""

    leases: int
    resumed: int
    past_deadline: int


def lapsed_expire() -> Lapsed:
    """End what ran out (every destination's, database clock): the leases of workers that stopped reporting,
    the operators' holds of one case whose end passed, then the steps past their must-finish-by, whatever
    their destination's state (paused, held, disabled, served by no dispatcher: a deadline is the business's).
    Maintenance, the sweep and the runner's supervision each begin with it."""
    return Lapsed(
        leases=handoff_expire_leases(),
        resumed=case_holds_expire(),
        past_deadline=handoffs_past_deadline(),
    )


def maintain(
    *, destination: Destination | None = None, settle_limit: int = 50, expire_leases: bool = True
) -> RunStats:
    """Expire leases that ran out (every destination's: one statement, no call) and settle the uncertain
    outcomes of the destination (of every enabled one without). Runs on its own cadence, never behind a
    drain: a dead worker's rows are noticed within a lease, whatever the backlog. A pass is short (at most
    `settle_limit` keys; `settle_backlog`: it took that many, more wait), so that it completes between
    connection losses. A destination paused by its breaker is asked only when its probe is due, once: that
    lookup is the probe, and its answer resumes the destination, after which the rest are asked in the same
    pass (`destination_settlement_admission`). One in an operator's pause or window is not asked; one that
    asked to be left alone (a Retry-After hold) refuses settlement's permit, like any other call's."""
    stats = RunStats(expired_leases=lapsed_expire().leases if expire_leases else 0)
    for each in _each(destination):
        stats.add(_settle_as_admitted(each, settle_limit))
    return stats


def _settle_as_admitted(destination: Destination, limit: int) -> RunStats:
    admission = destination_settlement_admission(name=destination.name)
    if admission is Admission.PAUSED:
        return RunStats()
    if admission is Admission.OPEN:
        return settle_uncertain_pass(destination=destination, limit=limit).stats()
    stats = RunStats(settled=settle_uncertain(destination=destination, limit=1))
    if destination_settlement_admission(name=destination.name) is Admission.OPEN:
        stats.add(settle_uncertain_pass(destination=destination, limit=limit).stats())
    return stats


def _settle_backlog(destination: Destination) -> RunStats:
    """Settlement passes while each claims a whole batch, for at most SWEEP_SETTLEMENT_SECONDS."""
    stats, deadline = RunStats(), time.monotonic() + SWEEP_SETTLEMENT_SECONDS
    while True:
        settled = _settle_as_admitted(destination, 200)
        stats.add(settled)  # its own `settle_backlog` decides: `add` keeps any pass's
        if not settled.settle_backlog or time.monotonic() > deadline:
            return stats


def sweep(*, destination: Destination | None = None, worker: str | None = None) -> RunStats:
    """One pass of everything periodic (django-q2's schedule, `dispatch --once`), for the destination or every
    enabled one: maintenance, then the due rows, then settlement of what this pass itself left uncertain (a
    lost answer costs one pass) and of a backlog, pass after pass while each claims a whole batch (bounded)."""
    destinations = _each(destination)
    stats = RunStats(expired_leases=lapsed_expire().leases)
    for each in destinations:
        stats.add(maintain(destination=each, expire_leases=False))
        stats.add(drain(destination=each, worker=worker))
        stats.add(_settle_backlog(each))
    return stats
