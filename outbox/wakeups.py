"""Wake-ups for the dispatcher: hints that may be lost or doubled. The outbox row is the truth;
the periodic sweep finds whatever a lost wake-up missed.

Two kinds: on PostgreSQL a NOTIFY sent inside the recording transaction (PostgreSQL delivers it at
commit and drops it on rollback) wakes `manage.py dispatch` loops that LISTEN; and a django-q2 task
queued after commit wakes the django-q2 cluster (HANDOFF_WAKE_ON_COMMIT).
"""

import logging
import time

from django.conf import settings
from django.db import connections, transaction

log = logging.getLogger(__name__)
CHANNEL = "handoff_due"


def _enqueue_dispatch_not_rollback_safe() -> None:
    from django_q.tasks import async_task

    try:
        async_task("outbox.tasks.dispatch_due", q_options={"task_name": "dispatch_due"})
    except Exception:  # noqa: BLE001 - a lost hint is harmless; the sweep delivers the row anyway.
        log.warning("dispatcher wake-up could not be queued; the sweep will pick the handoff up", exc_info=True)


def wake_dispatcher_on_commit(using: str = "default") -> None:
    connection = connections[using]
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_notify(%s, '')", [CHANNEL])
    if settings.HANDOFF_WAKE_ON_COMMIT:
        transaction.on_commit(_enqueue_dispatch_not_rollback_safe, using=using)


class WakeListener:
    """Waits for a NOTIFY on PostgreSQL (or simply sleeps elsewhere), at most `timeout` seconds."""

    def __init__(self, using: str = "default"):
        self._conn = None
        connection = connections[using]
        if connection.vendor != "postgresql":
            return
        import psycopg

        params = connection.get_connection_params()
        keep = {"dbname", "host", "port", "user", "password", "sslmode", "options"}
        try:
            self._conn = psycopg.connect(**{k: v for k, v in params.items() if k in keep}, autocommit=True)
            self._conn.execute(f"LISTEN {CHANNEL}")
        except psycopg.Error:
            log.warning("cannot LISTEN for wake-ups; falling back to polling", exc_info=True)
            self._conn = None

    def wait(self, timeout: float) -> bool:
        """True when woken by a notification, False after the timeout."""
        if self._conn is None:
            time.sleep(timeout)
            return False
        import psycopg

        try:
            woken = any(True for _ in self._conn.notifies(timeout=timeout, stop_after=1))
            # Several commits may have notified: drain them so one wake-up serves them all.
            while any(True for _ in self._conn.notifies(timeout=0, stop_after=1)):
                pass
            return woken
        except psycopg.Error:
            log.warning("wake-up connection lost; polling until the next start", exc_info=True)
            self._conn = None
            time.sleep(timeout)
            return False

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None
