"""The long-running dispatcher process (`manage.py dispatch`): two loops that survive the database.

- The delivery loop claims and delivers due handoffs, and when idle waits for a wake-up (PostgreSQL
  NOTIFY) or `idle_sleep` seconds. Refused by the destination's limits (`outbox/services/limits.py`) it waits until
  the next slot is likely free, at most a second, instead of spinning.
- The maintenance loop, in its own thread with its own database connection, expires leases and settles
  uncertain outcomes every `maintain_every` seconds. It never waits behind a drain or a slow call: a
  dead worker's rows are noticed within a lease, whatever the backlog.

A lost database connection (server restart, `pg_terminate_backend`, failover) is logged; the loop drops
its connections, backs off and goes on. Nothing is lost meanwhile: a row claimed when the connection
went is in flight under a lease, and the maintenance loop settles it once the lease has run out.
"""

import contextlib
import logging
import threading

from django.db import Error as DatabaseError
from django.db import connections

from outbox.destinations import Destination, get_destination
from outbox.dispatcher import RunStats, default_worker_name, dispatch_batch, maintain
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
    except Exception:  # noqa: BLE001 - a worker that dies stops delivery; log loudly and go on.
        delay = backoff.failed()
        log.exception("%s failed (failure %d); going on in %.1fs", what, backoff.failures, delay)
    else:
        if backoff.failures:
            log.info("%s: recovered after %d failures", what, backoff.failures)
        backoff.succeeded()
        return result
    # A broken connection stays broken: close it so that the next query opens a fresh one.
    for connection in connections.all(initialized_only=True):
        with contextlib.suppress(DatabaseError):
            connection.close()
    stop.wait(delay)
    return None


def _maintenance_loop(destination: Destination, every: float, stop: threading.Event) -> None:
    backoff = Backoff()
    try:
        while not stop.is_set():
            stats = _guarded(
                lambda: maintain(destination=destination),
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
            stop.wait(every)
    finally:
        connections.close_all()


def run_forever(
    *,
    destination: Destination | None = None,
    worker: str | None = None,
    idle_sleep: float = 0.5,
    maintain_every: float = 5.0,
    stop: threading.Event | None = None,
) -> RunStats:
    """Deliver and maintain until `stop` is set (SIGTERM or Ctrl-C in `manage.py dispatch`)."""

    destination = destination or get_destination()
    worker = worker or default_worker_name()
    stop = stop or threading.Event()
    maintenance = threading.Thread(
        target=_maintenance_loop,
        args=(destination, maintain_every, stop),
        name="maintenance",
        daemon=True,
    )
    maintenance.start()
    listener = WakeListener()
    total = RunStats()
    backoff = Backoff()
    try:
        while not stop.is_set():
            batch = _guarded(
                lambda: dispatch_batch(destination=destination, worker=worker),
                what="delivery",
                backoff=backoff,
                stop=stop,
            )
            if batch is None:
                listener.reconnect()
                continue
            total.add(batch)
            if batch.limited:
                # The destination's limits or its Retry-After hold: wait for the next slot (bounded), not a wake-up.
                stop.wait(batch.wait_seconds)
            elif batch.claimed == 0:
                listener.wait(idle_sleep)
    finally:
        stop.set()
        listener.close()
        maintenance.join(timeout=30)
    return total
