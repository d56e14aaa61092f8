"""Helpers for tests that run a real lock race on PostgreSQL: one session holds a row or a key, another waits."""

import contextlib
import threading
import time

from django.db import connections, transaction


def release_once_another_waits(alias: str, release: threading.Event, seen: dict) -> None:
    """Let the holder commit once another session of the `alias` database waits on a lock, or after 30 s: a
    release after a fixed time could come before the waiting session got there. `seen["waiting"]` says
    whether the wait was seen, so that a test can assert the race was really run."""
    try:
        deadline = time.monotonic() + 30
        with connections[alias].cursor() as cursor:
            while time.monotonic() < deadline:
                cursor.execute(
                    "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()"
                    " AND wait_event_type = 'Lock' AND pid <> pg_backend_pid()"
                )
                if cursor.fetchone()[0]:
                    seen["waiting"] = True
                    return
                time.sleep(0.01)
    finally:
        release.set()
        connections[alias].close()


def write_and_hold(alias: str, write, held: threading.Event, release: threading.Event) -> None:
    """In a transaction on `alias`: run `write()`, say so (`held`), and keep its locks until `release` (at
    most 30 s); then commit and close this thread's connection."""
    try:
        with transaction.atomic(using=alias):
            write()
            held.set()
            release.wait(30)
    finally:
        connections[alias].close()


@contextlib.contextmanager
def held_by_another_session(alias: str, write):
    """Run `write()` in another session of `alias` and hold its locks while the body runs; they are released
    (committed) once the body's session waits on a lock. Yields a dict whose "waiting" says whether that wait
    was seen, so that the test can assert the race really ran."""
    held, release, seen = threading.Event(), threading.Event(), {}
    holder = threading.Thread(target=write_and_hold, args=(alias, write, held, release))
    holder.start()
    assert held.wait(30), "the other session did not get its locks"
    releaser = threading.Thread(target=release_once_another_waits, args=(alias, release, seen))
    releaser.start()
    try:
        yield seen
    finally:
        release.set()
        holder.join(30)
        releaser.join(30)
