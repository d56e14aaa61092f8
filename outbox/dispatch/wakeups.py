"""Wake-ups for the dispatcher: hints that may be lost or doubled. The outbox row is the truth;
the periodic sweep finds whatever a lost wake-up missed.

Two kinds: on PostgreSQL a NOTIFY sent inside the recording transaction (PostgreSQL delivers it at
commit and drops it on rollback) wakes `manage.py dispatch` loops that LISTEN; and a django-q2 task
queued after commit wakes the django-q2 cluster (HANDOFF_WAKE_ON_COMMIT).

The work status pull is woken the same way, later: `wake_work_pull_in` asks the cluster to run it once
`every_seconds` after a step is delivered to a pulled destination (or after a read that left work open),
so that a destination's work is read at its own cadence, not only at the pull's minute schedule.
"""

import contextlib
import logging
import select
import time
from datetime import timedelta

import dj_database_url
from django.conf import settings
from django.db import DatabaseError, connections, transaction
from django.utils import timezone

from lib.databases import DB

log = logging.getLogger(__name__)
CHANNEL = "handoff_due"
WORK_PULL_SOON = "work-status-pull-soon"


def _enqueue_dispatch_not_rollback_safe() -> None:
    from django_q.tasks import async_task

    try:
        async_task("outbox.tasks.dispatch_due", q_options={"task_name": "dispatch_due"})
    except Exception:  # noqa: BLE001 - a lost hint is harmless; the sweep delivers the row anyway.
        log.warning(
            "dispatcher wake-up could not be queued; the sweep will pick the handoff up",
            exc_info=True,
        )


def wake_dispatcher_on_commit(using: str = DB, *, destination: str = "") -> None:
    """Wake the dispatchers at commit: the loop of `destination` (its name is the notification's payload), or
    every destination's when none is named."""
    connection = connections[using]
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_notify(%s, %s)", [CHANNEL, destination])
    if settings.HANDOFF_WAKE_ON_COMMIT:
        transaction.on_commit(_enqueue_dispatch_not_rollback_safe, using=using)


def wake_work_pull_in(seconds: float) -> None:
    """Run the work status pull once, `seconds` from now (or sooner when already asked for): a django-q2
    schedule run once, which the cluster's scheduler starts within about 30 s of its time. A hint: the
    minute's `work-status-pull` schedule reads whatever a lost one missed."""
    if not settings.HANDOFF_WAKE_ON_COMMIT:
        return
    from django_q.models import Schedule

    # django-q2's scheduler compares `next_run` with its own host's clock: so is this one.
    at = timezone.now() + timedelta(seconds=seconds)
    try:
        with transaction.atomic(using=settings.Q_CLUSTER["orm"]):
            soon = Schedule.objects.select_for_update().filter(name=WORK_PULL_SOON).first()
            if soon is None:
                Schedule.objects.create(
                    name=WORK_PULL_SOON,
                    func="outbox.tasks.work_status_pull",
                    schedule_type=Schedule.ONCE,
                    next_run=at,
                    repeats=-1,
                )
            elif soon.next_run > at:
                soon.next_run = at
                soon.save(update_fields=["next_run"])
    except DatabaseError:  # a lost hint is harmless: the minute's schedule reads the work anyway
        log.warning("the work status pull could not be woken; its schedule reads it", exc_info=True)


class WakeListener:
    """Waits for a NOTIFY on PostgreSQL (or simply sleeps elsewhere), at most `timeout` seconds.

    A lost listening connection costs nothing but latency: the loop polls every `timeout` seconds
    meanwhile, and the connection is opened again on the next wait."""

    RECONNECT_EVERY = 5.0

    def __init__(self, using: str = DB):
        self._conn = None
        self._using = using
        self._next_connect = 0.0
        self._listens = connections[using].vendor == "postgresql"
        self.reconnect()

    def reconnect(self) -> None:
        if not self._listens or self._conn is not None or time.monotonic() < self._next_connect:
            return
        import psycopg

        try:
            self._conn = self._connect(psycopg)
            self._conn.execute(f"LISTEN {CHANNEL}")
        except psycopg.Error as exc:
            # Not the message: libpq may quote the connection string, password included.
            log.warning("cannot LISTEN for wake-ups (%s); polling until it can", type(exc).__name__)
            self.close()
            self._next_connect = time.monotonic() + self.RECONNECT_EVERY

    def _connect(self, psycopg):
        """A session of its own: HANDOFF_LISTEN_DATABASE_URL (a route past a transaction-mode pooler) when
        set, else the database's own connection parameters. Every libpq parameter given is kept (its
        keepalives and `tcp_user_timeout` too: without them a session cut silently, by a partition or a
        failover, would wait for a notification that never comes, polling for ever); Django's own keys
        (`cursor_factory`, `context`, ...) are not libpq's and are left out."""
        keep = {option.keyword.decode() for option in psycopg.pq.Conninfo.get_defaults()}
        if settings.HANDOFF_LISTEN_DATABASE_URL:
            # Parsed like DATABASE_URL (any scheme dj-database-url takes), then passed as keywords.
            config = dj_database_url.parse(settings.HANDOFF_LISTEN_DATABASE_URL)
            params = {
                "dbname": config.get("NAME"),
                "host": config.get("HOST"),
                "port": config.get("PORT"),
                "user": config.get("USER"),
                "password": config.get("PASSWORD"),
                **config.get("OPTIONS", {}),
            }
        else:
            params = connections[self._using].get_connection_params()
        given = {k: v for k, v in params.items() if k in keep and v not in (None, "")}
        return psycopg.connect(**{"connect_timeout": 5, **given}, autocommit=True)

    def wait(self, timeout: float) -> bool:
        """True when woken by a notification, False after the timeout."""
        return self.wait_names(timeout) is not None

    def wait_names(self, timeout: float) -> set[str] | None:
        """The destinations named by the notifications that woke it ("" for any destination), or None after
        the timeout."""
        self.reconnect()
        if self._conn is None:
            time.sleep(timeout)
            return None
        import psycopg

        try:
            names = self._received()
            if not names:
                # The socket waited on here, then read without waiting: psycopg's own wait with a timeout
                # (`notifies(timeout=...)`) cost 0.7 ms of CPU a call whatever the timeout, this 0.02 ms, and
                # an idle dispatcher's listening thread waits every `idle_sleep`.
                select.select([self._conn.fileno()], [], [], timeout)
                names = self._received()
            if not names:
                return None
            # Several commits may have notified: drain them so one wake-up serves them all.
            while more := self._received():
                names |= more
            return names
        except psycopg.Error:
            log.warning("wake-up connection lost; polling until it is back", exc_info=True)
            self.close()
            self._next_connect = time.monotonic() + self.RECONNECT_EVERY
            return None

    def _received(self) -> set[str]:
        """The payloads of the notifications that have arrived, without waiting for any."""
        return {n.payload for n in self._conn.notifies(timeout=0, stop_after=1)}

    def close(self) -> None:
        if self._conn is not None:
            # Closing a broken connection may fail; it is gone either way.
            with contextlib.suppress(Exception):
                self._conn.close()
            self._conn = None
