"""The dispatcher's outcomes written (`outbox/services/outcomes.py`, through a lost connection) and counted:
into the run's stats, in the log, and against the destination's breaker (`outbox/services/breaker.py`)."""

import logging

from lib.log_context import log_recorded
from outbox.destinations import Destination
from outbox.dispatch.claims import Claim
from outbox.dispatch.run_stats import RunStats
from outbox.failures import DeliveryResult
from outbox.models import HandoffState
from outbox.reconnect import retried_after_lost_connection
from outbox.redaction import secrets_read_once_within
from outbox.services.breaker import destination_record_results
from outbox.services.outcomes import handoff_record_outcomes

log = logging.getLogger("outbox.dispatch.dispatcher")
S = HandoffState


def record_and_count(
    outcomes: list[tuple[Claim, DeliveryResult]],
    destination: Destination,
    stats: RunStats,
    *,
    written: bool = False,
) -> str:
    """Write the outcomes (unless each was `written` after its call), count them against the destination;
    returns the destination's state after."""
    healthy = None if written else write_and_count(outcomes, destination, stats)
    return destination_record_results(
        name=destination.name,
        results=[result for _claim, result in outcomes],
        seen_healthy=healthy,
    )


def write_and_count(
    outcomes: list[tuple[Claim, DeliveryResult]], destination: Destination, stats: RunStats
) -> bool | None:
    """Write the outcomes and count them; whether the destination's breaker has nothing to reset, if seen."""
    recorded = retried_after_lost_connection(
        lambda: handoff_record_outcomes(outcomes=outcomes, destination=destination),
        what=f"outcomes of {len(outcomes)} calls to {destination.name}",
    )
    # The batch's lines redact with the secrets read once (a read was a third of a plain line's CPU).
    with secrets_read_once_within():
        for (claim, result), state in zip(outcomes, recorded.states, strict=True):
            log_recorded(log, claim, destination.name, state)
            if state is None:
                stats.lease_lost += 1
                log.warning(
                    "outcome of %s refused: lease taken over (result was %s)",
                    claim.action_key,
                    result.reason_code or "delivered",
                )
            else:
                _tally(stats, state, result)
    return recorded.destination_healthy


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
