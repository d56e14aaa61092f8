"""Which destination a dispatcher's workers serve next (`outbox/dispatch/runner.py` runs the workers).

A fixed pool of worker threads serves every enabled destination, and at most one worker serves a destination
at a time: a slow or dead destination holds up one worker and never the others, and the process holds one
database connection per worker however many destinations are configured. Each destination has the time of
its next turn:

- after a batch that claimed something: now, behind the destinations already waiting (served in turn);
- after a batch refused by its limits or a Retry-After hold: when its next slot is likely free;
- idle (its last batch claimed nothing): at a wake-up naming it (or naming none), else `idle_sleep` later,
  and that turn first asks whether anything is due (one probe of the claim index) before trying a batch;
- its maintenance (settling its uncertain outcomes) every `maintain_every` seconds, as a turn of its own; again
  at once (behind the destinations already waiting) while each claims a whole batch of uncertain outcomes, so a
  backlog settles at the receiver's speed, each dispatcher's turn claiming a batch of its own.

Times are this process's monotonic clock: they only order this process's own turns. Every time of record
(due, lease, delivered) is the database's.
"""

import threading
import time
from dataclasses import dataclass
from enum import Enum


class Turn(Enum):
    DELIVER = "deliver"  # claim and deliver what is due
    POLL = "poll"  # idle: deliver only if something is due
    MAINTAIN = "maintain"  # settle its uncertain outcomes


@dataclass
class _Slot:
    next_at: float
    maintain_at: float
    idle: bool = False
    busy: bool = False
    # A wake-up came while a worker was on it: its next turn comes at once, whatever the batch claimed.
    woken: bool = False
    served: bool = True

    def due_at(self) -> float:
        return min(self.next_at, self.maintain_at)


class Schedule:
    """The destinations of one dispatcher process and their next turns; shared by its workers."""

    def __init__(self, *, idle_sleep: float, maintain_every: float, stop: threading.Event):
        self.idle_sleep, self.maintain_every, self.stop = idle_sleep, maintain_every, stop
        self._slots: dict[str, _Slot] = {}
        self._changed = threading.Condition()

    def serve(self, names: list[str]) -> list[str]:
        """Serve exactly these destinations from now on; returns the ones new to this schedule."""
        now, added = time.monotonic(), []
        with self._changed:
            for name, slot in list(self._slots.items()):
                if name not in names:
                    slot.served = False
                    if not slot.busy:
                        del self._slots[name]
            for name in names:
                if name not in self._slots or not self._slots[name].served:
                    self._slots[name] = _Slot(next_at=now, maintain_at=now + self.maintain_every)
                    added.append(name)
            self._changed.notify_all()
        return added

    def names(self) -> list[str]:
        with self._changed:
            return sorted(name for name, slot in self._slots.items() if slot.served)

    def due_now(self) -> list[str]:
        """The destinations whose turn is due now and that no worker is serving."""
        now = time.monotonic()
        with self._changed:
            return sorted(
                name
                for name, slot in self._slots.items()
                if slot.served and not slot.busy and slot.due_at() <= now
            )

    def drop(self, name: str) -> None:
        """No longer served (disabled or removed meanwhile); `serve` takes it back when it is enabled again."""
        with self._changed:
            slot = self._slots.get(name)
            if slot is not None:
                slot.served = False
                if not slot.busy:
                    del self._slots[name]

    def wake(self, names: set[str] | None = None) -> None:
        """Something new is due for these destinations (None or "" among them: for any of them)."""
        now = time.monotonic()
        everyone = names is None or "" in names
        with self._changed:
            for name, slot in self._slots.items():
                if everyone or name in names:
                    if slot.busy:
                        slot.woken = True
                    elif slot.idle:
                        slot.next_at, slot.idle = now, False
            self._changed.notify_all()

    def take(self) -> tuple[str, Turn] | None:
        """The next turn (the destination due longest, not being served): waits for one; None at the stop."""
        with self._changed:
            while not self.stop.is_set():
                now = time.monotonic()
                waiting = [
                    (s.due_at(), n) for n, s in self._slots.items() if s.served and not s.busy
                ]
                if waiting:
                    due_at, name = min(waiting)
                    if due_at <= now:
                        return name, self._begin(self._slots[name], now)
                    timeout = due_at - now
                else:
                    timeout = None
                self._changed.wait(timeout)
            return None

    def _begin(self, slot: _Slot, now: float) -> Turn:
        slot.busy, slot.woken = True, False
        if slot.maintain_at <= now and slot.maintain_at <= slot.next_at:
            return Turn.MAINTAIN
        return Turn.POLL if slot.idle else Turn.DELIVER

    def done(
        self,
        name: str,
        turn: Turn,
        *,
        claimed: int = 0,
        wait_seconds: float | None = None,
        backlog: bool = False,
    ):
        """The turn is over: `claimed` handoffs, or `wait_seconds` asked by its limits (None: not limited);
        a maintenance turn whose settlement found a `backlog` comes again at once."""
        now = time.monotonic()
        with self._changed:
            slot = self._slots[name]
            slot.busy = False
            if not slot.served:
                del self._slots[name]
            elif turn is Turn.MAINTAIN:
                slot.maintain_at = now if backlog else now + self.maintain_every
            elif wait_seconds is not None:
                slot.next_at, slot.idle = now + wait_seconds, False
            elif claimed or slot.woken:
                slot.next_at, slot.idle = now, False
            else:
                slot.next_at, slot.idle = now + self.idle_sleep, True
            slot.woken = False
            self._changed.notify_all()

    def release_all(self) -> None:
        """Wake every worker waiting for a turn (at the stop)."""
        with self._changed:
            self._changed.notify_all()
