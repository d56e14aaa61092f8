"""A write retried after the database connection was lost under it (a server restart, a failover,
`pg_terminate_backend`), so that what a destination answered is recorded at once instead of waiting for
its lease to run out and settlement to ask again.

Only for writes that are safe to repeat: the outcome write is fenced (it changes a row only while the
claim's lease owner and fencing epoch still hold it), so a retry after a write that did commit, its answer
lost with the connection, changes nothing and reports the rows as taken over.
"""

import contextlib
import logging
import time
from collections.abc import Callable
from typing import TypeVar

from django.db import DatabaseError, InterfaceError, OperationalError, connections

from lib.databases import DB

log = logging.getLogger(__name__)
T = TypeVar("T")
TRIES = 3
FIRST_DELAY = 0.2


def retried_after_lost_connection(write: Callable[[], T], *, what: str) -> T:
    """`write()`, tried again on a fresh connection (up to TRIES in all) when the connection fails under it;
    inside a transaction of the caller's the error goes up at once (the transaction is lost anyway)."""
    for attempt in range(1, TRIES + 1):
        try:
            return write()
        except (OperationalError, InterfaceError):
            connection = connections[DB]
            if connection.in_atomic_block or attempt == TRIES:
                raise
            log.warning(
                "%s: database connection lost (try %d of %d); reconnecting",
                what,
                attempt,
                TRIES,
                exc_info=True,
            )
            with contextlib.suppress(
                DatabaseError
            ):  # a broken connection may fail to close; it is gone
                connection.close()
            time.sleep(FIRST_DELAY * 2 ** (attempt - 1))
    raise AssertionError("unreachable")  # pragma: no cover
