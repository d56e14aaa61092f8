"""Fault injection at the receiver, for tests and demos. Off unless RECEIVER_FAULTS is set.

RECEIVER_FAULTS is JSON:
    {"keys": {"onboarding:7:42:1": "drop_after_commit"},   # a fault for chosen action keys
     "fraction": 0.1, "kinds": ["http_503", "slow"],        # and/or for a share of all keys
     "seed": 1, "slow_seconds": 10, "retry_after": 2}

Each fault fires once per action key in a receiver process, so the handoff can then recover.
Kinds that act before the task is created: http_401, http_429, http_500, http_503.
Kinds that act after it is committed (the sender cannot know it exists): drop_after_commit
(connection closed without an answer), slow (answer later than the client waits), malformed
(a 200 whose body is not a valid receipt).
"""

import hashlib
import threading
from dataclasses import dataclass

from django.conf import settings

BEFORE_COMMIT = frozenset({"http_401", "http_429", "http_500", "http_503"})
AFTER_COMMIT = frozenset({"drop_after_commit", "slow", "malformed"})
KINDS = BEFORE_COMMIT | AFTER_COMMIT

_fired: set[str] = set()
_lock = threading.Lock()


@dataclass(frozen=True)
class Fault:
    kind: str
    slow_seconds: float = 10.0
    retry_after: int = 1

    @property
    def before_commit(self) -> bool:
        return self.kind in BEFORE_COMMIT


def _share(seed: object, key: str) -> float:
    digest = hashlib.sha256(f"{seed}:{key}".encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64


def fault_for(action_key: str) -> Fault | None:
    """The fault to inject for this call, consuming it, or None."""
    config = settings.RECEIVER_FAULTS
    if not config or not isinstance(action_key, str):
        return None
    kind = (config.get("keys") or {}).get(action_key)
    if kind is None and config.get("fraction"):
        seed = config.get("seed", 0)
        if _share(seed, action_key) < float(config["fraction"]):
            kinds = sorted(config.get("kinds") or KINDS)
            kind = kinds[int(_share(f"{seed}:kind", action_key) * len(kinds))]
    if kind is None:
        return None
    if kind not in KINDS:
        raise ValueError(f"unknown fault kind {kind!r}; expected one of {sorted(KINDS)}")
    with _lock:
        if action_key in _fired:
            return None
        _fired.add(action_key)
    return Fault(
        kind=kind,
        slow_seconds=float(config.get("slow_seconds", 10)),
        retry_after=int(config.get("retry_after", 1)),
    )


def reset() -> None:
    with _lock:
        _fired.clear()
