"""What a dispatcher's batch or run did, counted (`outbox/dispatch/dispatcher.py`, `outbox/dispatch/runner.py`)."""

from dataclasses import dataclass, field


@dataclass
class RunStats:
    claimed: int = 0
    delivered: int = 0
    duplicates: int = 0
    retrying: int = 0
    uncertain: int = 0
    needs_attention: int = 0
    lease_lost: int = 0
    expired_leases: int = 0
    released: int = 0
    paused: bool = False
    # Refused by the destination's limits or its Retry-After hold: nothing claimed; ask again after wait_seconds.
    limited: bool = False
    wait_seconds: float = 0.0
    settled: dict = field(default_factory=dict)
    # A settlement pass claimed a whole batch: more uncertain outcomes are likely waiting (the next pass at once).
    settle_backlog: bool = False

    def add(self, other: "RunStats") -> None:
        for name in (
            "claimed",
            "delivered",
            "duplicates",
            "retrying",
            "uncertain",
            "needs_attention",
            "lease_lost",
            "expired_leases",
        ):
            setattr(self, name, getattr(self, name) + getattr(other, name))
        for key, value in other.settled.items():
            self.settled[key] = self.settled.get(key, 0) + value
        self.settle_backlog = self.settle_backlog or other.settle_backlog
        # Whether the last batch was refused by the destination's limits, and how long it asked to wait.
        self.limited, self.wait_seconds = other.limited, other.wait_seconds
