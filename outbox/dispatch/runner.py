"""The long-running dispatcher process (`manage.py dispatch`): loops that survive the database, serving every
enabled destination so that no destination holds up another.

- A fixed pool of worker threads (HANDOFF_DISPATCH_LANES per destination, at most HANDOFF_DISPATCH_WORKERS, one
  database connection each) takes turns from a schedule (`outbox/dispatch/serving.py`): one worker on a destination
  at a time (a second only for a wake-up that comes during a turn), the destination due longest first. A turn
  claims and delivers that destination's due handoffs, or settles its uncertain outcomes (every `maintain_every`
  seconds). An idle destination's next turn comes at a wake-up naming it (PostgreSQL NOTIFY with the destination
  as payload, one listening connection for the whole process) or `idle_sleep` seconds later, and first asks
  whether anything is due. Refused by its limits (`outbox/services/limits.py`) a destination waits until the next
  slot is likely free. A slow or dead destination's calls and leases hold up its lanes, never the others' turns
  while workers remain.
- The calling thread supervises: every `maintain_every` seconds it expires the leases that ran out (every
  destination's, one statement, no call: a dead worker's rows are noticed within a lease, whatever the
  backlog, and asked about at once: `Schedule.settle_now` brings maintenance forward), serves the
  destinations enabled now (one disabled or removed meanwhile gets no more turns) and starts the workers they
  need. A changed configuration is picked up by the next turn.
- A destination's problem stays its own: one this process cannot serve (`destination_problems`: it cannot
  be built, a secret is missing, a call may outlive a lease) is held with its reason
  (`outbox/dispatch/held_destinations.py`), one
  incident, its handoffs pending, while the others are served; asked again at each supervision, it is
  released and served once its problem is gone.
- At the stop (SIGTERM) no new call starts: the call under way finishes, the outcomes are recorded, the
  claims not sent yet are given back (pending again, no attempt spent), and the process exits within a lease.

Given one `destination`, the process serves that one only, its delivery loop in the calling thread (the
benchmarks' special destinations).

A lost database connection (server restart, `pg_terminate_backend`, failover) is logged; the worker drops
its connections, backs off and goes on. Nothing is lost meanwhile: a row claimed when the connection
went is in flight under a lease, and the leases expire once they have run out.
"""

import contextlib
import logging
import threading
import time
from collections.abc import Callable
from typing import TypeVar

from django.conf import settings
from django.db import Error as DatabaseError
from django.db import connections

from lib.databases import DB, compiled_once, prepared_cursor
from outbox.destinations import Destination, DestinationUnavailable, destination_named
from outbox.destinations.registry import (
    destination_from_row,
    destination_problems,
    enabled_destination_names,
)
from outbox.dispatch import heartbeat
from outbox.dispatch.claims import constants_in_text, handoff_claim_turn, turn_reads_statement
from outbox.dispatch.dispatcher import (
    Claimed,
    RunStats,
    default_worker_name,
    dispatch_batch,
    lapsed_expire,
    maintain,
)
from outbox.dispatch.held_destinations import Holds, servable_names
from outbox.dispatch.leases import handoff_release_claims
from outbox.dispatch.serving import Schedule, Turn
from outbox.dispatch.wakeups import WakeListener
from outbox.limit_rules import Limits
from outbox.models import Handoff
from outbox.retry import backoff_ceiling
from outbox.services.limits import LIMITS_COLUMNS, limits_from_row

T = TypeVar("T")
log = logging.getLogger(__name__)


class Backoff:
    """Capped exponential delay after consecutive failures; reset by a success."""

    def __init__(self, *, first: float = 0.5, cap: float = 10.0):
        self.first, self.cap, self.failures = first, cap, 0

    def failed(self) -> float:
        self.failures += 1
        return backoff_ceiling(self.failures, base=self.first, cap=self.cap)

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


LISTEN_STOP_CHECK_SECONDS = 1.0


def listen_for_wakeups(
    wake: Callable[[set[str]], None], idle_sleep: float, stop: threading.Event
) -> None:
    """The listening thread's loop: one LISTEN connection for the whole process, each notification handed on
    with the destinations it names (PostgreSQL only; elsewhere the loops just poll). A notification ends its
    wait at once; the wait's bound only decides how soon the thread sees the stop, so it is `idle_sleep` or
    `LISTEN_STOP_CHECK_SECONDS`, whichever is shorter: a long idle sleep no longer holds up the process's exit
    (it was joined for up to 30 s)."""
    if connections[DB].vendor != "postgresql":
        return
    listener = WakeListener()
    bound = min(idle_sleep, LISTEN_STOP_CHECK_SECONDS)
    try:
        while not stop.is_set():
            if (names := listener.wait_names(bound)) is not None:
                wake(names)
    finally:
        listener.close()
        connections.close_all()


class Wakeups:
    """The wake-ups of a process serving one destination: a loop remembers the last wake-up it saw, so one
    that came during its batch is not missed."""

    def __init__(self, stop: threading.Event):
        self._stop = stop
        self._changed = threading.Condition()
        self.seen = 0

    def listen(self, idle_sleep: float) -> None:
        listen_for_wakeups(lambda _names: self.wake(), idle_sleep, self._stop)

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
            lambda: dispatch_batch(destination=resolve(), worker=worker, stop=stop),
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
            if stats is not None and stats.settle_backlog:
                continue  # more uncertain outcomes are waiting: the next pass at once
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


def handoffs_due(name: str) -> bool:
    """Whether anything is due for the destination now (one probe of the claim index). Compiled once per
    destination (`compiled_once`): the ORM's compile was half of a probe's CPU (1.6 of 3.0 ms), and an idle
    dispatcher probes every `idle_sleep`. Prepared, with its states in its text as the claim's
    (`constants_in_text`): PostgreSQL planned the probe afresh at every poll, 0.39 of its 0.40 ms of
    database CPU on an empty outbox."""
    sql, params = compiled_once(("due probe", name), lambda: _due_probe(name))
    with prepared_cursor() as cursor:
        cursor.execute(sql, params)
        return cursor.fetchone() is not None


def _due_probe(name: str) -> tuple[str, tuple]:
    """The probe's statement. Its constants go into its text on PostgreSQL only, where it is prepared: SQLite's
    `now()` is written with escaped `%`s, which `constants_in_text` refuses (every idle poll there failed)."""
    sql, params = (
        Handoff.objects.using(DB)
        .due()
        .filter(destination=name)
        .values_list("pk")[:1]
        .query.get_compiler(using=DB)
        .as_sql()
    )
    if connections[DB].vendor != "postgresql":
        return sql, params
    return constants_in_text(sql, params)


def _serve_turn(name: str, turn: Turn, worker: str, stop: threading.Event) -> RunStats:
    # An idle turn probes before it reads the destination's row: most find nothing due, and the row's read was
    # as costly as the probe. A destination disabled meanwhile is dropped by the supervision's next turn, or by
    # this one when something is due.
    if turn is Turn.POLL and not handoffs_due(name):
        return RunStats()
    if turn is Turn.MAINTAIN:
        stats = maintain(destination=destination_named(name), expire_leases=False)
        if stats.settled:
            log.info("maintenance of %s: settled %s", name, stats.settled)
        return RunStats(settled=stats.settled, settle_backlog=stats.settle_backlog)
    if not connections[DB].features.has_select_for_update_skip_locked:
        destination, limits = _turn_reads(name)
        return dispatch_batch(destination=destination, worker=worker, stop=stop, limits=limits)
    return _claim_turn(name, worker, stop)


# Per destination, the fingerprint of the row its last turn built it from and the claim's `call_started` for that
# build: the next turn's statement claims only while the row is still that one (`handoff_claim_turn`).
_built_from: dict[str, tuple[str, bool | None]] = {}


def _claim_turn(name: str, worker: str, stop: threading.Event) -> RunStats:
    """A delivery turn on PostgreSQL: its reads and its claim in one statement (`handoff_claim_turn`), then the
    calls; the usual path (`dispatch_batch`, its permit and breaker) with the same reads when the claim could
    not go ahead (a hold, a pause, a limit, a changed row, the destination's first turn in this process)."""
    fingerprint, call_started = _built_from.get(name, ("", None))
    leased_at = time.monotonic()
    turn = handoff_claim_turn(
        name=name,
        worker=worker,
        limit=settings.HANDOFF_CLAIM_BATCH,
        lease_seconds=settings.HANDOFF_LEASE_SECONDS,
        fingerprint=fingerprint,
        call_started=call_started,
    )
    try:
        destination = destination_from_row(name, turn.reads[LIMITS_COLUMNS:])
    except DestinationUnavailable:
        _built_from.pop(name, None)
        # Claimed only on the row the last turn built it from: a build that fails on it gives them back unsent.
        if turn.claims:
            handoff_release_claims(
                claims=turn.claims, reason=f"not sent: destination {name} unavailable"
            )
        raise
    _built_from[name] = (turn.fingerprint, None if destination.supports_idempotency else False)
    return dispatch_batch(
        destination=destination,
        worker=worker,
        stop=stop,
        limits=limits_from_row(turn.reads[:LIMITS_COLUMNS]),
        # None when the claim could not go ahead: `dispatch_batch` takes its permit and claims itself.
        claimed=Claimed(turn.claims, leased_at) if turn.went else None,
    )


def _turn_reads(name: str) -> tuple[Destination, Limits]:
    """A delivery turn's destination (its row, so that a change is served by this turn) and its limits, holds
    and breaker, in one statement: each is one row, joined (SQLite; PostgreSQL's turn claims in the same
    statement, `_claim_turn`). Read one after the other they were two round trips between a wake-up and its
    claim, each a wait for the cores on a busy machine (bench/e2e.py `latency_pairs`: waiting to be claimed
    5.6-9.0 ms against a minimal dispatcher's 1.4-1.7 ms at a load of 17-20, 2026-12-07)."""
    sql, params = compiled_once(("turn reads", name), lambda: turn_reads_statement(name))
    with prepared_cursor() as cursor:
        cursor.execute(sql, params)
        row = cursor.fetchone()
    limits = limits_from_row(row[:LIMITS_COLUMNS])
    return destination_from_row(name, row[LIMITS_COLUMNS:]), limits


class Pool:
    """The worker threads of a process serving every enabled destination (`outbox/dispatch/serving.py`): a lane of
    each destination each, at most HANDOFF_DISPATCH_WORKERS."""

    def __init__(self, schedule: Schedule, worker: str, stop: threading.Event):
        self.schedule, self.worker, self.stop = schedule, worker, stop
        self.beats = heartbeat.Beats(worker)
        self.threads: list[threading.Thread] = []
        self.total = RunStats()
        self._total_lock = threading.Lock()

    def grow(self) -> None:
        lanes = len(self.schedule.names()) * self.schedule.lanes
        wanted = min(settings.HANDOFF_DISPATCH_WORKERS, lanes)
        while len(self.threads) < wanted:
            thread = threading.Thread(
                target=self._work, name=f"deliver:{len(self.threads) + 1}", daemon=True
            )
            self.threads.append(thread)
            thread.start()

    def _work(self) -> None:
        """Take a turn, serve it, say how it went; until the stop."""
        backoff = Backoff()
        try:
            while (taken := self.schedule.take()) is not None:
                name, turn = taken
                self._serve(name, turn, backoff)
        finally:
            connections.close_all()

    def _serve(self, name: str, turn: Turn, backoff: Backoff) -> None:
        try:
            stats = _guarded(
                lambda: _serve_turn(name, turn, self.worker, self.stop),
                what=f"{turn.value} {name}",
                backoff=backoff,
                stop=self.stop,
            )
        except DestinationUnavailable as exc:
            log.warning("destination %s no longer served: %s", name, exc)
            self.schedule.drop(name)
            stats = None
        if stats is None:
            self.schedule.done(name, turn)
            return
        with self._total_lock:
            self.total.add(stats)
        wait = stats.wait_seconds if stats.limited else None
        self.schedule.done(
            name, turn, claimed=stats.claimed, wait_seconds=wait, backlog=stats.settle_backlog
        )

    def join(self, timeout: float) -> None:
        self.schedule.release_all()
        for thread in self.threads:
            thread.join(timeout=timeout)


def until_database_answers(stop: threading.Event, start: Callable[[], T]) -> T | None:
    """`start` (a dispatcher's whole start: its destinations' problems, the seed variables' check, the holds
    it writes), run again from the beginning while the database is unavailable: a dispatcher started during
    an outage, or whose connection is cut at any query of its start, waits for the database instead of
    exiting. None when stopped before the database answered."""
    backoff = Backoff()
    while not stop.is_set():
        try:
            return start()
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
    holds: Holds | None = None,
) -> RunStats:
    """Deliver and maintain until `stop` is set (SIGTERM or Ctrl-C in `manage.py dispatch`): every enabled
    destination it can serve (`holds`: those it cannot, held), or the one given."""
    worker = worker or default_worker_name()
    stop = stop or threading.Event()
    if destination is not None:
        return _serve_one(destination, worker, idle_sleep, maintain_every, stop)
    holds = holds or Holds()
    schedule = Schedule(
        idle_sleep=idle_sleep,
        maintain_every=maintain_every,
        stop=stop,
        lanes=settings.HANDOFF_DISPATCH_LANES,
    )
    listening = threading.Thread(
        target=listen_for_wakeups,
        args=(schedule.wake, idle_sleep, stop),
        name="wakeups",
        daemon=True,
    )
    listening.start()
    pool = Pool(schedule, worker, stop)
    backoff = Backoff()
    try:
        while not stop.is_set():
            _guarded(
                lambda: _supervise(pool, holds), what="supervision", backoff=backoff, stop=stop
            )
            stop.wait(maintain_every)
    finally:
        stop.set()
        # A turn under way finishes its call under way; the claims not sent yet are given back.
        pool.join(timeout=settings.HANDOFF_LEASE_SECONDS)
        listening.join(timeout=30)
        connections.close_all()
    return pool.total


def _supervise(pool: Pool, holds: Holds) -> None:
    """Expire the leases and case holds that ran out (every destination's: `lapsed_expire`), serve the
    destinations enabled now that can be served (holding the others), and start the workers they need."""
    lapsed = lapsed_expire()
    if lapsed.leases:
        log.info("maintenance: expired %d leases", lapsed.leases)
        pool.schedule.settle_now()
    if lapsed.resumed:
        log.info("maintenance: %d handoffs resumed, their case's hold ended", lapsed.resumed)
    # Read once a turn, for its problems and for what is served (twice, it was a quarter of the turn).
    names = enabled_destination_names()
    problems = destination_problems(names)
    holds.update(problems)
    for name in pool.schedule.serve(servable_names(problems, names)):
        log.info("serving destination %s", name)
    pool.grow()
    # Readiness (`manage.py dispatcher_ready`): the supervision turned, the database answering it.
    pool.beats.beat()
