"""The long-running dispatcher process (`manage.py dispatch`): loops that survive the database, one set per
destination, so that no destination holds up another.

- Each enabled destination has a delivery loop of its own (a thread): it claims and delivers that
  destination's due handoffs, and when idle waits for a wake-up (PostgreSQL NOTIFY, one listening connection
  for the whole process) or `idle_sleep` seconds. Refused by the destination's limits
  (`outbox/services/limits.py`) it waits until the next slot is likely free, at most a second, instead of
  spinning. A slow or dead destination's calls and leases hold up only its own loop.
- Each destination has a maintenance loop too (a thread with its own database connection, closed after each
  pass): it settles that destination's uncertain outcomes every `maintain_every` seconds, never behind a
  drain or a slow call of any destination.
- The calling thread supervises: every `maintain_every` seconds it expires the leases that ran out (every
  destination's, one statement, no call: a dead worker's rows are noticed within a lease, whatever the
  backlog), and starts the loops of a destination enabled meanwhile. A loop whose destination is disabled
  or removed ends by itself; a changed configuration is picked up by the next batch.

Given one `destination`, the process serves that one only, its delivery loop in the calling thread (the
benchmarks' special destinations).

A lost database connection (server restart, `pg_terminate_backend`, failover) is logged; the loop drops
its connections, backs off and goes on. Nothing is lost meanwhile: a row claimed when the connection
went is in flight under a lease, and the leases expire once they have run out.
"""

import contextlib
import logging
import threading
from collections.abc import Callable

from django.db import Error as DatabaseError
from django.db import connections

from lib.databases import DB
from outbox.destinations import Destination, DestinationUnavailable, destination_named
from outbox.destinations.registry import destination_problems, enabled_destination_names
from outbox.dispatcher import RunStats, default_worker_name, dispatch_batch, maintain
from outbox.services.leases import handoff_expire_leases
from outbox.wakeups import WakeListener

log = logging.getLogger(__name__)


class Backoff:
    """Capped exponential delay after consecutive failures; reset by a success."""

    def __init__(self, *, first: float = 0.5, cap: float = 10.0):
        self.first, self.cap, self.failures = first, cap, 0

    def failed(self) -> float:
        self.failures += 1
        return min(self.cap, self.first * 2 ** (self.failures - 1))

    def succeeded(self) -> None:
        self.failures = 0


def _close_connections() -> None:
    """A broken connection stays broken: close this thread's so that the next query opens a fresh one."""
    for connection in connections.all(initialized_only=True):
        with contextlib.suppress(DatabaseError):
            connection.close()


def _guarded(step, *, what: str, backoff: Backoff, stop: threading.Event):
    """Run one step; on any error log it, drop this thread's connections and wait out the backoff."""
    try:
        result = step()
    except DatabaseError:
        delay = backoff.failed()
        log.warning(
            "%s: database unavailable (failure %d); reconnecting in %.1fs",
            what,
            backoff.failures,
            delay,
            exc_info=True,
        )
    except DestinationUnavailable:
        raise
    except Exception:  # noqa: BLE001 - a worker that dies stops delivery; log loudly and go on.
        delay = backoff.failed()
        log.exception("%s failed (failure %d); going on in %.1fs", what, backoff.failures, delay)
    else:
        if backoff.failures:
            log.info("%s: recovered after %d failures", what, backoff.failures)
        backoff.succeeded()
        return result
    _close_connections()
    stop.wait(delay)
    return None


class Wakeups:
    """One LISTEN connection for every delivery loop of the process: a notification wakes them all. A loop
    remembers the last wake-up it saw, so one that came during its batch is not missed."""

    def __init__(self, stop: threading.Event):
        self._stop = stop
        self._changed = threading.Condition()
        self.seen = 0
        self._listens = connections[DB].vendor == "postgresql"

    def listen(self, idle_sleep: float) -> None:
        """The listening thread's loop (PostgreSQL only; elsewhere the loops just poll)."""
        if not self._listens:
            return
        listener = WakeListener()
        try:
            while not self._stop.is_set():
                if listener.wait(idle_sleep):
                    self.wake()
        finally:
            listener.close()
            connections.close_all()

    def wake(self) -> None:
        with self._changed:
            self.seen += 1
            self._changed.notify_all()

    def wait(self, seen: int, timeout: float) -> None:
        """Until a wake-up after `seen`, the stop, or the timeout."""
        with self._changed:
            self._changed.wait_for(lambda: self.seen != seen or self._stop.is_set(), timeout)


def _delivery_loop(
    resolve: Callable[[], Destination],
    worker: str,
    idle_sleep: float,
    stop: threading.Event,
    wakeups: Wakeups,
) -> RunStats:
    """Deliver one destination's handoffs until the stop, or until it is disabled or removed."""
    total, backoff = RunStats(), Backoff()
    while not stop.is_set():
        seen = wakeups.seen
        batch = _guarded(
            lambda: dispatch_batch(destination=resolve(), worker=worker),
            what="delivery",
            backoff=backoff,
            stop=stop,
        )
        if batch is None:
            continue
        total.add(batch)
        if batch.limited:
            # The destination's limits or its Retry-After hold: wait for the next slot (bounded), not a wake-up.
            stop.wait(batch.wait_seconds)
        elif batch.claimed == 0:
            wakeups.wait(seen, idle_sleep)
    return total


def _maintenance_loop(
    resolve: Callable[[], Destination], every: float, stop: threading.Event, *, expire: bool
) -> None:
    backoff = Backoff()
    try:
        while not stop.is_set():
            stats = _guarded(
                lambda: maintain(destination=resolve(), expire_leases=expire),
                what="maintenance",
                backoff=backoff,
                stop=stop,
            )
            if stats is not None and (stats.expired_leases or stats.settled):
                log.info(
                    "maintenance: expired %d leases, settled %s",
                    stats.expired_leases,
                    stats.settled,
                )
            if not expire:
                # Idle between passes, it holds no connection: a process serving many destinations would
                # otherwise keep one open per destination for a pass every few seconds.
                connections.close_all()
            stop.wait(every)
    except DestinationUnavailable as exc:
        log.info("maintenance ends: %s", exc)
    finally:
        connections.close_all()


def _serve_one(
    destination: Destination,
    worker: str,
    idle_sleep: float,
    maintain_every: float,
    stop: threading.Event,
) -> RunStats:
    """The given destination only: its delivery loop in this thread, its maintenance (leases too) beside."""
    wakeups = Wakeups(stop)
    threads = [
        threading.Thread(
            target=_maintenance_loop,
            args=(lambda: destination, maintain_every, stop),
            kwargs={"expire": True},
            name="maintenance",
            daemon=True,
        ),
        threading.Thread(target=wakeups.listen, args=(idle_sleep,), name="wakeups", daemon=True),
    ]
    for thread in threads:
        thread.start()
    try:
        return _delivery_loop(lambda: destination, worker, idle_sleep, stop, wakeups)
    finally:
        stop.set()
        wakeups.wake()
        for thread in threads:
            thread.join(timeout=30)


class Served:
    """The loops of the destinations this process serves, by name: started when a destination is first
    enabled, ended by themselves when it is disabled or removed."""

    def __init__(
        self,
        worker: str,
        idle_sleep: float,
        maintain_every: float,
        stop: threading.Event,
        wakeups: Wakeups,
    ):
        self.worker, self.idle_sleep, self.maintain_every = worker, idle_sleep, maintain_every
        self.stop, self.wakeups = stop, wakeups
        self.threads: dict[str, list[threading.Thread]] = {}
        self.total = RunStats()
        self._total_lock = threading.Lock()

    def start_new(self) -> None:
        for name in enabled_destination_names():
            if any(thread.is_alive() for thread in self.threads.get(name, [])):
                continue
            self.threads[name] = [
                threading.Thread(
                    target=self._deliver, args=(name,), name=f"deliver:{name}", daemon=True
                ),
                threading.Thread(
                    target=_maintenance_loop,
                    args=(
                        lambda name=name: destination_named(name),
                        self.maintain_every,
                        self.stop,
                    ),
                    kwargs={"expire": False},
                    name=f"maintain:{name}",
                    daemon=True,
                ),
            ]
            for thread in self.threads[name]:
                thread.start()
            log.info("serving destination %s", name)

    def _deliver(self, name: str) -> None:
        try:
            stats = _delivery_loop(
                lambda: destination_named(name),
                self.worker,
                self.idle_sleep,
                self.stop,
                self.wakeups,
            )
        except DestinationUnavailable as exc:
            log.warning("delivery to %s ends: %s", name, exc)
            return
        finally:
            connections.close_all()
        with self._total_lock:
            self.total.add(stats)

    def join(self) -> None:
        for threads in self.threads.values():
            for thread in threads:
                thread.join(timeout=30)


def startup_problems(stop: threading.Event) -> dict[str, str] | None:
    """Why enabled destinations cannot be served (`destination_problems`), asked again while the database is
    unavailable: a dispatcher started during an outage, or whose first connection is cut, waits for the
    database instead of exiting. None when stopped before the database answered."""
    backoff = Backoff()
    while not stop.is_set():
        try:
            return destination_problems()
        except DatabaseError:
            delay = backoff.failed()
            log.warning(
                "start: database unavailable (failure %d); trying again in %.1fs",
                backoff.failures,
                delay,
                exc_info=True,
            )
            _close_connections()
            stop.wait(delay)
    return None


def run_forever(
    *,
    destination: Destination | None = None,
    worker: str | None = None,
    idle_sleep: float = 0.5,
    maintain_every: float = 5.0,
    stop: threading.Event | None = None,
) -> RunStats:
    """Deliver and maintain until `stop` is set (SIGTERM or Ctrl-C in `manage.py dispatch`): every enabled
    destination, or the one given."""
    worker = worker or default_worker_name()
    stop = stop or threading.Event()
    if destination is not None:
        return _serve_one(destination, worker, idle_sleep, maintain_every, stop)
    wakeups = Wakeups(stop)
    listening = threading.Thread(
        target=wakeups.listen, args=(idle_sleep,), name="wakeups", daemon=True
    )
    listening.start()
    served = Served(worker, idle_sleep, maintain_every, stop, wakeups)
    backoff = Backoff()
    try:
        while not stop.is_set():
            _guarded(lambda: _supervise(served), what="supervision", backoff=backoff, stop=stop)
            stop.wait(maintain_every)
    finally:
        stop.set()
        wakeups.wake()
        served.join()
        listening.join(timeout=30)
        connections.close_all()
    return served.total


def _supervise(served: Served) -> None:
    """Expire the leases that ran out (every destination's) and start the loops of newly enabled ones."""
    if expired := handoff_expire_leases():
        log.info("maintenance: expired %d leases", expired)
    served.start_new()
