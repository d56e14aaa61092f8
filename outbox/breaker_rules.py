"""What a destination's answers say about it, for its circuit breaker: which failures are the destination's
(unreachable, its token endpoint unavailable, credentials refused), how many in a row pause it, how long a
paused one waits between probes (shorter when the failure says the receiver is there and only waits for
something it needs, such as its database). Pure: the breaker's writes are `outbox/services/breaker.py`."""

from dataclasses import dataclass
from enum import Enum
from typing import NamedTuple

from django.conf import settings

from outbox.failures import (
    TOKEN_ENDPOINT_PREFIX,
    TOKEN_ENDPOINT_UNAVAILABLE_REASONS,
    UNREACHABLE_REASONS,
    DeliveryResult,
)
from outbox.models import FailureClass, PauseReason


class BreakerSeen(NamedTuple):
    """A destination's breaker as a worker read it (with its limits, or on its own): paused (a live hold of
    the breaker's), and the probes made since it was paused."""

    paused: bool
    probes: int


class Admission(Enum):
    OPEN = "open"  # claim as usual
    PROBE = "probe"  # paused: this worker makes the one probe call
    PAUSED = "paused"  # paused: claim nothing


def destination_failure(result: DeliveryResult) -> str:
    """The pause reason this result stands for, or "" when it says nothing about the destination: its token
    endpoint's outage is named apart from the API's (either counts towards the same pause)."""
    if result.delivered:
        return ""
    if result.failure_class == FailureClass.CREDENTIAL:
        return PauseReason.CREDENTIAL
    if result.reason_code in TOKEN_ENDPOINT_UNAVAILABLE_REASONS:
        return PauseReason.TOKEN_ENDPOINT
    if result.reason_code in UNREACHABLE_REASONS:
        return PauseReason.UNREACHABLE
    return ""


# Failures of a receiver that is there but cannot serve for a moment: its process refused the connection (it is
# restarting: nothing listens on the port for the seconds a deploy or a crash restart takes), or it answered
# 500/502/503 at once (its web process is up; what it needs behind it, usually its database, is not). Such a
# receiver comes back by itself within seconds, so its probes are spaced at most
# HANDOFF_BREAKER_QUICK_PROBE_CAP apart. A connect timeout or a 504 (nothing answers: a host, a network or a
# whole site is gone) and a refused credential (a person fixes it, then asks for a probe) keep the slower
# schedule up to HANDOFF_BREAKER_PROBE_CAP.
# The same of its OAuth2 token endpoint (a provider's authorization server restarts as quickly).
_QUICK = frozenset({"connect_failed", "http_500", "http_502", "http_503"})
QUICK_RECOVERY_REASONS = _QUICK | {f"{TOKEN_ENDPOINT_PREFIX}{code}" for code in _QUICK}
# What a pause for its token endpoint's outage says first (its hold, its event, every screen that lists holds,
# the incident's title): the API itself was not called and may well be up.
TOKEN_ENDPOINT_DOWN = "token endpoint unavailable (the API was not called)"  # noqa: S105 (words)


def pause_words(reason_code: str, why: str) -> str:
    """The words of a pause for an outage whose latest failure was `reason_code`: `why`, led by which part of
    the destination is down when it is its token endpoint."""
    if reason_code in TOKEN_ENDPOINT_UNAVAILABLE_REASONS:
        return f"{TOKEN_ENDPOINT_DOWN}: {why}"
    return why


def probe_delay(probes_made: int, reason_code: str = "") -> float:
    """Seconds to the next probe after `probes_made` probes, for a pause whose latest failure was
    `reason_code` (its cap is the quick one for QUICK_RECOVERY_REASONS)."""
    cap = settings.HANDOFF_BREAKER_PROBE_CAP
    if reason_code in QUICK_RECOVERY_REASONS:
        cap = min(cap, settings.HANDOFF_BREAKER_QUICK_PROBE_CAP)
    return min(cap, settings.HANDOFF_BREAKER_PROBE_BASE * 2 ** min(probes_made, 20))


@dataclass(frozen=True)
class Verdict:
    """What a run of results says about the destination."""

    succeeded: bool
    failures: int
    reason: str
    detail: str
    # The reason code of the latest failure counted: it sets how soon a paused destination is probed.
    reason_code: str = ""
    # Refused credentials among all the answers, a success after them or not: they count towards the share
    # of refused calls (`outbox/services/credential_share.py`), with the latest refusal's words.
    refused: int = 0
    refused_detail: str = ""


def verdict_of(results: list[DeliveryResult]) -> Verdict:
    # Only the failures after the last success count: the streak is of consecutive failures.
    failures, reason, detail, succeeded, code = 0, "", "", False, ""
    refused, refused_detail = 0, ""
    for result in results:
        kind = destination_failure(result)
        if kind == PauseReason.CREDENTIAL:
            refused += 1
            refused_detail = f"{result.reason_code}: {result.detail}"[:500]
        if result.delivered or (not kind and result.status_code is not None):
            # Any answer about the handoff itself proves the destination is up and takes our credentials.
            succeeded, failures, reason, detail, code = True, 0, "", "", ""
        elif kind:
            failures += 1
            reason = PauseReason.CREDENTIAL if PauseReason.CREDENTIAL in (kind, reason) else kind
            detail = f"{result.reason_code}: {result.detail}"[:500]
            code = result.reason_code
    return Verdict(succeeded, failures, reason, detail, code, refused, refused_detail)


def pause_threshold(reason: str) -> int:
    """Consecutive failures that pause a destination: the configured count of refused credentials (refusals
    that persist, not a stray one), or of outage failures."""
    if reason == PauseReason.CREDENTIAL:
        return settings.HANDOFF_BREAKER_CREDENTIAL_THRESHOLD
    return settings.HANDOFF_BREAKER_THRESHOLD


def would_pause(results: list[DeliveryResult]) -> bool:
    """Whether these answers, in order, show a destination the breaker pauses (counted from a healthy one)."""
    verdict = verdict_of(results)
    return verdict.failures > 0 and verdict.failures >= pause_threshold(verdict.reason)
