"""What a destination's limits are and what a permit under them carries: the operator's numbers (checked
here), the waits, and which answers hold the whole destination. Pure: the slots and the hold are written by
`outbox/services/limits.py`."""

from dataclasses import dataclass, field

from lib.querystring import whole_number
from outbox.breaker_rules import BreakerSeen
from outbox.errors import InvalidActionInput, OutboxError
from outbox.failures import TOKEN_ENDPOINT_PREFIX, DeliveryResult

# A rate slot is free again this long after its request's answer came back: the limit is per second.
RATE_WINDOW_SECONDS = 1.0
# How long a refused dispatcher waits before asking again: at most this long (a hold or a rate slot may be
# free sooner than its computed time when another holder gives it back), and a concurrency slot is polled.
MAX_WAIT_SECONDS = 1.0
CONCURRENCY_POLL_SECONDS = 0.02
# A run of calls under one permit asks this often whether another worker's Retry-After answer, or an operator's
# pause or window, now holds the destination (the permit was given before it).
HOLD_CHECK_SECONDS = 1.0
# Answers whose Retry-After speaks for the whole destination.
HOLDING_STATUSES = frozenset({429, 503})
LIMIT_CEILING = 10_000
# Who may set limits (with an operator role in some workspace): the Meta permission of DestinationHealth.
SET_LIMITS_PERMISSION = "outbox.set_destination_limits"
# How the words of a lookup refused by the limits (nothing asked) begin, wherever its error is shown. Words
# only: whether a receiver was asked is carried by the refusal itself (`LookupFailed.asked`, settlement's
# `Unanswered.asked`), never read back from them.
NOT_ASKED = "not asked: "


class DestinationLimited(OutboxError):
    """No permit now: the destination is held (Retry-After) or at its limit. Nothing was claimed."""

    def __init__(self, reason: str, wait_seconds: float):
        super().__init__(reason)
        self.reason = reason
        self.wait_seconds = max(0.0, min(wait_seconds, MAX_WAIT_SECONDS))


class DestinationHeld(DestinationLimited):
    """No permit now because a hold no probe ends is live (an operator's pause or window, a Retry-After
    hold, an unservable hold), not because of the limits."""


class InvalidLimit(InvalidActionInput):
    pass


@dataclass
class Permit:
    """What one dispatcher may send now: `requests` requests, one call in flight at a time. Given back with
    `destination_release` right after the calls, with what they answered."""

    destination: str
    holder: str
    requests: int
    # The breaker as read with the limits; None for a destination without a row yet.
    breaker: BreakerSeen | None = None
    slot_ids: list[int] = field(default_factory=list)
    rate_ids: list[int] = field(default_factory=list)
    requests_made: int = 0
    retry_after: float | None = None
    hold_reason: str = ""
    released: bool = False

    def made(self, results: list[DeliveryResult]) -> None:
        """One request was made; these are the answers it carried (one per handoff of a batch call)."""
        self.requests_made += 1
        for result in results:
            self.asked_to_wait(
                status_code=result.status_code,
                reason_code=result.reason_code,
                retry_after=result.retry_after,
            )

    def asked_to_wait(
        self, *, status_code: int | None, reason_code: str, retry_after: float | None
    ) -> None:
        """An answer under this permit (a delivery's result, a failed lookup's) asked for a wait: the longest
        such wait holds the destination when the permit is given back (`destination_release`)."""
        asking = _asking_to_wait(status_code, reason_code, retry_after)
        if asking and (self.retry_after is None or retry_after > self.retry_after):
            self.retry_after = retry_after
            self.hold_reason = f"{asking} with Retry-After {retry_after:g} s"


def _asking_to_wait(status_code: int | None, reason_code: str, retry_after: float | None) -> str:
    """Who, in this answer, asked the whole destination to wait ("" for nobody): the API's 429 or 503 with
    Retry-After, or its OAuth2 token endpoint's (an answer without a status: the call never reached the API,
    `credentials/oauth2.py` keeps a Retry-After of a 429 or 503 alone)."""
    if retry_after is None:
        return ""
    if status_code in HOLDING_STATUSES:
        return f"HTTP {status_code}"
    if status_code is None:
        return (
            f"the token endpoint's HTTP {reason_code.removeprefix(TOKEN_ENDPOINT_PREFIX + 'http_')}"
        )
    return ""


@dataclass(frozen=True)
class Limits:
    max_concurrency: int | None
    max_requests_per_second: int | None
    # A hold no probe ends is live now (database clock): an operator's pause or window, a Retry-After hold,
    # an unservable hold. No permit.
    held: bool
    # The circuit breaker's state and probe count, read in the same query: the dispatcher asks the breaker
    # right after the permit (`destination_admit(seen=…)`), and one read per claim batch is a round trip less.
    breaker: BreakerSeen | None = None


def parse_limit(raw: object, label: str) -> int | None:
    """A limit as an operator typed it: a whole number up to LIMIT_CEILING, or None (empty) for no limit."""
    if raw is None or (isinstance(raw, str) and not raw.strip()):
        return None
    text = str(raw).strip()
    value = whole_number(text, high=LIMIT_CEILING)
    if value is None:
        raise InvalidLimit(
            f"{label} must be a whole number from 1 to {LIMIT_CEILING:,}, or empty for no limit; got {text[:20]!r}"
        )
    return value


def describe_limit(value: int | None) -> str:
    return "unlimited" if value is None else str(value)
