"""What a destination's answers say about it, for its circuit breaker: which failures are the destination's
(unreachable, credentials refused), how many in a row pause it, how long a paused one waits between probes.
Pure: the breaker's writes are `outbox/services/breaker.py`."""

from dataclasses import dataclass
from enum import Enum
from typing import NamedTuple

from django.conf import settings

from outbox.failures import UNREACHABLE_REASONS, DeliveryResult
from outbox.models import FailureClass, PauseReason


class BreakerSeen(NamedTuple):
    """A destination's breaker as a worker read it (with its limits, or on its own): the state, and the probes
    made since it was paused."""

    state: str
    probes: int


class Admission(Enum):
    OPEN = "open"  # claim as usual
    PROBE = "probe"  # paused: this worker makes the one probe call
    PAUSED = "paused"  # paused: claim nothing


def destination_failure(result: DeliveryResult) -> str:
    """The pause reason this result stands for, or "" when it says nothing about the destination."""
    if result.delivered:
        return ""
    if result.failure_class == FailureClass.CREDENTIAL:
        return PauseReason.CREDENTIAL
    if result.reason_code in UNREACHABLE_REASONS:
        return PauseReason.UNREACHABLE
    return ""


def probe_delay(probes_made: int) -> float:
    return min(
        settings.HANDOFF_BREAKER_PROBE_CAP,
        settings.HANDOFF_BREAKER_PROBE_BASE * 2 ** min(probes_made, 20),
    )


@dataclass(frozen=True)
class Verdict:
    """What a run of results says about the destination."""

    succeeded: bool
    failures: int
    reason: str
    detail: str


def verdict_of(results: list[DeliveryResult]) -> Verdict:
    # Only the failures after the last success count: the streak is of consecutive failures.
    failures, reason, detail, succeeded = 0, "", "", False
    for result in results:
        kind = destination_failure(result)
        if result.delivered or (not kind and result.status_code is not None):
            # Any answer about the handoff itself proves the destination is up and takes our credentials.
            succeeded, failures, reason, detail = True, 0, "", ""
        elif kind:
            failures += 1
            reason = PauseReason.CREDENTIAL if PauseReason.CREDENTIAL in (kind, reason) else kind
            detail = f"{result.reason_code}: {result.detail}"[:500]
    return Verdict(succeeded, failures, reason, detail)


def pause_threshold(reason: str) -> int:
    """Consecutive failures that pause a destination: one refused credential, or the configured outage count."""
    return 1 if reason == PauseReason.CREDENTIAL else settings.HANDOFF_BREAKER_THRESHOLD


def would_pause(results: list[DeliveryResult]) -> bool:
    """Whether these answers, in order, show a destination the breaker pauses (counted from a healthy one)."""
    verdict = verdict_of(results)
    return verdict.failures > 0 and verdict.failures >= pause_threshold(verdict.reason)
