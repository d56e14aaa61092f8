"""Retry policy: a time window, capped exponential backoff with full jitter, Retry-After honoured.

`backoff_ceiling` is the one backoff schedule of the product: a handoff's retries (jittered below it), the
dispatcher's loops after a failure (`outbox/dispatch/runner.py`) and a notification's resends
(`incidents/channels/delivery.py`, riding the outbox's engine) all follow it.

The budget of a handoff is a window of time since its run started (recorded, or retried by an operator),
not a handful of quick attempts: an outage of the destination is handled by its circuit breaker, and a
handoff goes to a person only for reasons of its own. `max_attempts` is an optional extra cap.
"""

import random
from dataclasses import dataclass


def backoff_ceiling(attempts: int, *, base: float, cap: float) -> float:
    """Seconds after `attempts` consecutive failures (>= 1): `base`, doubling each time, never above `cap`.
    The exponent is bounded so that a failure counted for hours cannot overflow a float."""
    return float(min(cap, base * 2 ** min(max(attempts - 1, 0), 62)))


@dataclass(frozen=True)
class RetryPolicy:
    window_seconds: float = 24 * 3600.0
    max_attempts: int | None = None
    base_delay: float = 2.0
    max_delay: float = 300.0
    max_retry_after: float = 3600.0

    @classmethod
    def from_config(cls, config: dict | None) -> "RetryPolicy":
        return cls(**(config or {}))

    def exhausted(self, attempts_made: int, *, past_window: bool = False) -> bool:
        return past_window or (self.max_attempts is not None and attempts_made >= self.max_attempts)

    def delay(
        self, attempts_made: int, retry_after: float | None = None, rng: random.Random | None = None
    ) -> float:
        """Seconds to wait before the next attempt, after `attempts_made` attempts (>= 1)."""
        ceiling = backoff_ceiling(attempts_made, base=self.base_delay, cap=self.max_delay)
        delay = (rng or random).uniform(0, ceiling)
        if retry_after is not None:
            # The receiver said when it can take more: never earlier, within a sane bound.
            delay = max(delay, min(retry_after, self.max_retry_after))
        return delay
