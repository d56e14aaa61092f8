"""A settlement pass: claim a batch of one destination's uncertain outcomes, ask the receiver about their keys
outside any transaction, record each answer under its claim's fencing token.

- Claimed like deliveries (`outbox/settlement/claims.py`: PostgreSQL `FOR NO KEY UPDATE SKIP LOCKED`
  with a lease; SQLite conditional updates): each dispatcher's pass takes its own batch, so settling scales
  with the dispatchers and no key is asked about by two of them at once.
- Asked at the receiver's speed: in requests of the destination's `lookup_batch_size` keys where it answers
  for many keys at once (`Destination.lookup_many`), one key a request otherwise; every request under the
  destination's limits (`outbox/services/lookup_limits.py`). Refused by them, the pass ends and gives the
  claims not asked about back for the next pass (or another dispatcher).
- Recorded after each request of many keys, in one statement for the keys found as delivered
  (`outbox/settlement/found.py`); requests of one key each are made RECORD_AT_ONCE one after another
  under one permit (`LimitedLookups.lookup_each`) and recorded together, not one permit and one transaction
  per key. Before a request that could outlast the leases (or after this host's clock stepped back: the
  dispatcher's rule, `outbox/dispatch/leases.py` `lease_renewal_due`), the answers waiting are recorded and
  the leases renewed, and a claim lost meanwhile is not asked about.

A destination that cannot be asked at all takes no request: its uncertain outcomes go to a person.
"""

import time
from dataclasses import dataclass, field
from time import time_ns

from django.conf import settings

from lib.telemetry import past_spans
from outbox.clock import calls_clock_read_again, calls_on_db_clock
from outbox.destinations import LookupFailed
from outbox.dispatch.leases import LEASE_MARGIN_SECONDS, lease_began, lease_renewal_due
from outbox.dispatch.run_stats import RunStats
from outbox.services.lookup_limits import EachAnswered, LimitedLookups
from outbox.settlement.claims import (
    SettlementAnswer,
    SettlementClaim,
    handoff_claim_uncertain,
    handoff_release_settlement_claims,
    handoff_renew_settlement_claims,
    handoffs_record_settlements,
)

NOT_ASKABLE = "the destination cannot be asked about a key; check at the receiver by hand"
# Answers of one-key requests recorded together: one write for this many keys instead of one per key. A settler
# that stops before recording them leaves its claims to run out; they are asked about again (a lookup is a read).
RECORD_AT_ONCE = 25
# Requests of many keys a pass makes at least (when that many keys wait): the dispatcher's turn around a pass
# (the destination's configuration, its deadlines, its admission) cost it as much CPU as a request's keys
# (docs/benchmarks.md, the settlement section), so a pass of one request paid it for every 100 keys. Four, not
# two: the turn's statements and the claim's walk of the uncertain index (past the rows other settlers hold
# and the entries of rows just settled) are paid per 400 keys, and a key cost the bench's 4 dispatchers, their
# database and the receiver 0.27-0.29 ms of CPU instead of 0.32 (2026-12-07). A pass is still a fraction of a
# second, so the dispatchers finish a backlog within a pass of one another.
REQUESTS_A_PASS = 4


@dataclass
class SettlementPass:
    """What one pass did: the states its claims ended in (`outcomes`), how many it claimed, and whether it
    claimed a whole batch (`backlog`: more are likely waiting, so the next pass should come at once)."""

    outcomes: dict[str, int] = field(default_factory=dict)
    claimed: int = 0
    backlog: bool = False
    lost: int = 0

    def stats(self) -> RunStats:
        return RunStats(settled=self.outcomes, settle_backlog=self.backlog)

    def count(self, states: list[str | None]) -> None:
        for state in states:
            if state is None:
                self.lost += 1
            else:
                self.outcomes[state] = self.outcomes.get(state, 0) + 1


def settlement_batch_size(destination: LimitedLookups, limit: int) -> int:
    """How many a pass claims: `limit` where the destination answers one key a request; where it answers for
    many, `limit` rounded up to whole requests, and at least REQUESTS_A_PASS of them."""
    per_request = max(destination.lookup_batch_size, 1)
    if per_request == 1:
        return max(limit, 1)
    return max(-(-max(limit, 1) // per_request), REQUESTS_A_PASS) * per_request


def settle_pass(*, destination: LimitedLookups, worker: str, limit: int) -> SettlementPass:
    """Claim up to `limit` (whole requests) of the destination's uncertain handoffs for `worker` and settle
    them. The destination is asked under its limits (`LimitedLookups`, with its own wait)."""
    size = settlement_batch_size(destination, limit)
    lease_seconds = float(settings.HANDOFF_LEASE_SECONDS)
    claims = handoff_claim_uncertain(
        destination_name=destination.name, worker=worker, limit=size, lease_seconds=lease_seconds
    )
    result = SettlementPass(claimed=len(claims), backlog=len(claims) == size)
    if claims:
        # Its lookups state the database's time as the claim read it, not this host's (`outbox/clock.py`).
        with calls_on_db_clock(lease_began(claims[0].leased_until, lease_seconds)):
            _Settler(destination, claims, lease_seconds=lease_seconds).run(result)
    return result


class _Settler:
    """One pass's claims, asked about request by request, their leases kept while the pass goes on."""

    def __init__(
        self, destination: LimitedLookups, claims: list[SettlementClaim], *, lease_seconds: float
    ):
        self.destination = destination
        self.lease_seconds = lease_seconds
        # The longest one request can take: its wait for a permit and the call itself.
        self.request_seconds = destination.wait_seconds + destination.destination.call_seconds
        # Taken after the claim: its lease began earlier, never later.
        self.renewed_at = time.monotonic()
        self.held = claims
        self.answered: list[SettlementAnswer] = []  # asked about, not recorded yet

    def run(self, result: SettlementPass) -> None:
        per_request = max(self.destination.lookup_batch_size, 1)
        if not self.destination.supports_lookup:
            # Nothing to ask: each outcome goes to a person with the reason.
            self._record([SettlementAnswer(c, None, NOT_ASKABLE) for c in self.held], result)
            return
        while self.held:
            chunk = self._next_request(per_request if per_request > 1 else RECORD_AT_ONCE, result)
            if not chunk:
                break
            answers = self._ask(chunk) if per_request > 1 else self._ask_each(chunk)
            if (
                answers is None
            ):  # refused by the destination's limits: the rest waits for the next pass
                break
            self.answered += answers
            if len(self.answered) >= max(per_request, RECORD_AT_ONCE):
                self._flush(result)
        self._flush(result)
        handoff_release_settlement_claims(claims=self.held)

    def _flush(self, result: SettlementPass) -> None:
        if self.answered:
            self._record(self.answered, result)
            self.answered = []

    def _next_request(self, per_request: int, result: SettlementPass) -> list[SettlementClaim]:
        """The next request's claims. If the request could outlast the leases, the answers waiting are recorded
        first (their leases hold until now) and the other claims' leases renewed."""
        now = time.monotonic()
        if lease_renewal_due(
            since=now - self.renewed_at,
            call_seconds=self.request_seconds,
            lease_seconds=self.lease_seconds,
        ):
            self._flush(result)
            self.renewed_at = now
            renewed = handoff_renew_settlement_claims(
                claims=self.held, lease_seconds=self.lease_seconds
            )
            self.held = [claim for claim in self.held if claim.handoff_id in renewed.kept]
            if renewed.leased_until is not None:
                # The lookups that follow state the database's time as this renewal read it.
                calls_clock_read_again(lease_began(renewed.leased_until, self.lease_seconds))
        chunk, self.held = self.held[:per_request], self.held[per_request:]
        return chunk

    def _ask(self, chunk: list[SettlementClaim]) -> list[SettlementAnswer] | None:
        """One request about the chunk's keys."""
        keys = [claim.action_key for claim in chunk]
        try:
            if len(chunk) == 1:
                found = {keys[0]: self.destination.lookup(keys[0])}
            else:
                found = self.destination.lookup_many(keys)
        except LookupFailed as exc:
            if not exc.asked:  # refused before asking (limits, a hold, its token endpoint)
                self.held = chunk + self.held
                return None
            return [SettlementAnswer(claim, None, str(exc)) for claim in chunk]
        return [SettlementAnswer(claim, found.get(claim.action_key)) for claim in chunk]

    def _ask_each(self, chunk: list[SettlementClaim]) -> list[SettlementAnswer] | None:
        """One request a key, under one permit for the chunk (`LimitedLookups.lookup_each`): a permit per key cost
        a dispatcher more than the lookup itself. No request starts unless it can end within the leases; the
        keys not asked (the rate limit gave fewer slots, a lookup failed, time ran out) go back for the next
        request or pass."""
        until = self.renewed_at + self.lease_seconds - LEASE_MARGIN_SECONDS - self.request_seconds
        try:
            asked = self.destination.lookup_each([c.action_key for c in chunk], until=until)
        except LookupFailed as exc:
            if exc.asked:
                raise
            self.held = chunk + self.held
            return None
        answers, unasked = _answers_of(chunk, asked)
        self.held = unasked + self.held
        return answers

    def _record(self, answers: list[SettlementAnswer], result: SettlementPass) -> None:
        started = time_ns()
        states = handoffs_record_settlements(answers=answers, destination=self.destination)
        result.count(states)
        past_spans(
            "handoff.settle",
            started,
            (
                (a.claim.action_key, {"handoff.state": s or ""})
                for a, s in zip(answers, states, strict=True)
            ),
        )


def _answers_of(
    chunk: list[SettlementClaim], asked: EachAnswered
) -> tuple[list[SettlementAnswer], list[SettlementClaim]]:
    """The chunk's answers (a failed lookup's with its error), and the claims whose keys were not asked."""
    failed_key, error = asked.failed or ("", "")
    answers, unasked = [], []
    for claim in chunk:
        if claim.action_key in asked.found:
            answers.append(SettlementAnswer(claim, asked.found[claim.action_key]))
        elif claim.action_key == failed_key:
            answers.append(SettlementAnswer(claim, None, error))
        else:
            unasked.append(claim)
    return answers, unasked
