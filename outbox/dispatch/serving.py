"""Which destination a dispatcher's workers serve next (`outbox/dispatch/runner.py` runs the workers).

A fixed pool of worker threads serves every enabled destination, and at most `lanes` workers serve a destination
at a time (HANDOFF_DISPATCH_LANES, 2): a slow or dead destination holds up that many workers and never the others,
and the process holds one database connection per worker however many destinations are configured. A second
lane opens only for a wake-up that comes while a turn is under way: a handoff committed during a batch's call is
claimed at once by another worker instead of waiting for that call and its outcome commit (most of the time a
handoff waited to be claimed). A backlog is served one turn after another, as before. Each destination has the
time of its next turn:

- after a batch that claimed a whole batch (`full_batch`), or during which a wake-up came: now, behind the
  destinations already waiting (served in turn);
- after a batch that claimed fewer, with no wake-up since it began: idle (below), once this process has heard a
  wake-up (its LISTEN works). Its claim found nothing more due, and a handoff committed after it wakes the
  destination (its NOTIFY comes during the turn or after it): a claim at once would find nothing (about 0.45 ms
  of PostgreSQL and 0.2 ms of the dispatcher's a handoff at low rates, and a lane busy when the next wake-up
  comes). A process that has heard none (SQLite, a transaction pooler without HANDOFF_LISTEN_DATABASE_URL)
  follows every batch that claimed something at once, as before;
- after a batch refused by its limits or a Retry-After hold: when its next slot is likely free;
- idle (its last batch claimed nothing): at a wake-up naming it (or naming none), else `idle_sleep` later,
  and that turn first asks whether anything is due (one probe of the claim index) before trying a batch;
- its maintenance (settling its uncertain outcomes) every `maintain_every` seconds, as a turn of its own; again
  at once (behind the destinations already waiting) while each claims a whole batch of uncertain outcomes, so a
  backlog settles at the receiver's speed, each dispatcher's turn claiming a batch of its own; and at once when
  the supervision expired leases (`settle_now`): a dead worker's rows are asked about as soon as they are
  uncertain, not a maintenance interval later. It takes a free lane beside a delivery under way when it falls
  due, never two maintenance turns at once.

Times are this process's monotonic clock: they only order this process's own turns. Every time of record
(due, lease, delivered) is the database's. A monotonic clock stepped back (libfaketime steps it with the wall
clock) moves the turns' times back with it, so no turn waits as long as the step.
"""

import threading
import time
from dataclasses import dataclass
from enum import Enum

from django.conf import settings


class Turn(Enum):
    DELIVER = "deliver"  # claim and deliver what is due
    POLL = "poll"  # idle: deliver only if something is due
    MAINTAIN = "maintain"  # settle its uncertain outcomes


@dataclass
class _Slot:
    next_at: float
    maintain_at: float
    idle: bool = False
    # The turns under way (at most the schedule's `lanes`).
    busy: int = 0
    # When a wake-up came while a worker was on it: a free lane takes a delivery turn at once, and the next
    # turn after this one comes at once, whatever the batch claimed.
    woken_at: float | None = None
    # A maintenance turn is under way (never two at once).
    maintaining: bool = False
    # Leases expired while it was under way (`settle_now`): the next one comes at once after it.
    settle_again: bool = False
    served: bool = True

    def due_at(self) -> float:
        return min(self.next_at, self.maintain_at)

    def shift(self, seconds: float) -> None:
        """Its times moved by `seconds` (the clock they are on was stepped)."""
        self.next_at += seconds
        self.maintain_at += seconds
        if self.woken_at is not None:
            self.woken_at += seconds

    def ready_at(self, lanes: int) -> float | None:
        """When a worker may take a turn of it: its due time when no turn is under way, the wake-up's time
        when one is and a lane is free; None: not now."""
        if not self.served:
            return None
        if not self.busy:
            return self.due_at()
        if self.busy >= lanes:
            return None
        # A free lane: for a wake-up, or for maintenance that falls due while deliveries follow one another
        # (under a steady stream of wake-ups no moment finds every lane free).
        ready = [self.woken_at] if self.woken_at is not None else []
        if not self.maintaining:
            ready.append(self.maintain_at)
        return min(ready) if ready else None


class Schedule:
    """The destinations of one dispatcher process and their next turns; shared by its workers."""

    def __init__(
        self,
        *,
        idle_sleep: float,
        maintain_every: float,
        stop: threading.Event,
        lanes: int = 1,
        full_batch: int | None = None,
    ):
        self.idle_sleep, self.maintain_every, self.stop = idle_sleep, maintain_every, stop
        self.lanes = max(1, lanes)
        # A delivery turn's claim (HANDOFF_CLAIM_BATCH): one that took fewer found nothing more due.
        self.full_batch = full_batch or settings.HANDOFF_CLAIM_BATCH
        # A wake-up came: this process's LISTEN works, a handoff committed after a claim wakes it.
        self.heard = False
        self._slots: dict[str, _Slot] = {}
        self._changed = threading.Condition()
        self._last_now = time.monotonic()

    def _now(self) -> float:
        """This process's monotonic time, read under the schedule's lock. A clock stepped back (libfaketime
        steps the monotonic clock with the wall clock; a real host's never goes back) moves every slot's times
        back with it: a turn that was due before the step is due after it, not as long later as the step."""
        now = time.monotonic()
        if now < self._last_now:
            for slot in self._slots.values():
                slot.shift(now - self._last_now)
        self._last_now = now
        return now

    def serve(self, names: list[str]) -> list[str]:
        """Serve exactly these destinations from now on; returns the ones new to this schedule."""
        added = []
        with self._changed:
            now = self._now()
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
        """The destinations a free worker would take a turn of now."""
        with self._changed:
            now = self._now()
            return sorted(
                name
                for name, slot in self._slots.items()
                if (ready := slot.ready_at(self.lanes)) is not None and ready <= now
            )

    def drop(self, name: str) -> None:
        """No longer served (disabled or removed meanwhile); `serve` takes it back when it is enabled again."""
        with self._changed:
            slot = self._slots.get(name)
            if slot is not None:
                slot.served = False
                if not slot.busy:
                    del self._slots[name]

    def settle_now(self) -> None:
        """Uncertain outcomes are waiting (leases just expired): every destination's maintenance is due now, or
        again as soon as the one under way ends (it may have claimed before the expiry ended)."""
        with self._changed:
            now = self._now()
            for slot in self._slots.values():
                slot.maintain_at = min(slot.maintain_at, now)
                slot.settle_again = slot.maintaining
            self._changed.notify_all()

    def wake(self, names: set[str] | None = None) -> None:
        """Something new is due for these destinations (None or "" among them: for any of them)."""
        everyone = names is None or "" in names
        with self._changed:
            now = self._now()
            self.heard = True
            for name, slot in self._slots.items():
                if everyone or name in names:
                    if slot.busy:
                        slot.woken_at = now if slot.woken_at is None else slot.woken_at
                    elif slot.idle:
                        slot.next_at, slot.idle = now, False
            self._changed.notify_all()

    def take(self) -> tuple[str, Turn] | None:
        """The next turn (the destination ready longest): waits for one; None at the stop."""
        with self._changed:
            while not self.stop.is_set():
                now = self._now()
                waiting = [
                    (ready, n)
                    for n, s in self._slots.items()
                    if (ready := s.ready_at(self.lanes)) is not None
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
        slot.busy += 1
        maintenance_due = not slot.maintaining and slot.maintain_at <= now
        if maintenance_due and (slot.busy > 1 or slot.maintain_at <= slot.next_at):
            slot.maintaining = True
            return Turn.MAINTAIN
        slot.woken_at = None
        if slot.busy > 1:
            return Turn.DELIVER  # another lane, for what was committed during the turn under way
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
        with self._changed:
            now = self._now()
            slot = self._slots[name]
            slot.busy -= 1
            if not slot.served:
                if not slot.busy:
                    del self._slots[name]
            elif turn is Turn.MAINTAIN:
                slot.maintaining = False
                again = backlog or slot.settle_again
                slot.maintain_at = now if again else now + self.maintain_every
                slot.settle_again = False
            elif wait_seconds is not None:
                slot.next_at, slot.idle = now + wait_seconds, False
            elif slot.woken_at is not None or self._more_may_be_due(claimed):
                slot.next_at, slot.idle = now, False
            else:
                slot.next_at, slot.idle = now + self.idle_sleep, True
            if not slot.busy:
                slot.woken_at = None  # its next turn comes at once (above); no lane is under way
            self._changed.notify_all()

    def _more_may_be_due(self, claimed: int) -> bool:
        """After a delivery turn that claimed `claimed` with no wake-up since it began: whether to claim again at
        once. A whole batch, yes; fewer, only while no wake-up has been heard (nothing else would tell of a
        handoff committed after the claim). A paused destination's probe claims one: after a probe that found it
        back, the rest go at the next wake-up or poll."""
        return claimed >= self.full_batch or (claimed > 0 and not self.heard)

    def release_all(self) -> None:
        """Wake every worker waiting for a turn (at the stop)."""
        with self._changed:
            self._changed.notify_all()
