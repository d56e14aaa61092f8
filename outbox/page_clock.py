"""The "now" of what a page shows: the database clock, without a query per page or per row.

Every stored time of record is written on the database clock (`outbox/clock.py`), so an age ("3 minutes
ago"), a wait ("retry in 2 minutes") or a question such as `Handoff.in_backoff` must measure from the
database's "now" too: measured from the web host's clock, a host 30 s ahead shows a handoff made a moment ago
as half a minute old, and one 30 s behind shows a retry that is due as still waiting.

The offset between this host's clock and the database's is read once per database connection, when Django
opens it (`connection_created`: one `SELECT` of the database's time, the host's time taken around it), and
`page_now()` is the host's time plus that offset: no query on a page, none per row, and every row of a page
compared with nearly the same instant. A connection lives for DATABASE_CONN_MAX_AGE (60 s by default), so a
host clock stepped by NTP is followed within that. Before this process opened any connection nothing stored has
been read either, and `page_now()` is the host's time (an unsaved instance in a test).
"""

from datetime import datetime, timedelta

from django.db import connections
from django.db.backends.signals import connection_created
from django.utils import timezone

from lib.databases import DB
from outbox.clock import db_time

# Database time minus host time, by database alias, as measured when a connection of it was last opened.
_offsets: dict[str, timedelta] = {}


def page_now(using: str = DB) -> datetime:
    """Now on the database clock of `using`: the host's time corrected by the measured offset."""
    return timezone.now() + _offsets.get(using, timedelta(0))


def measure_offset(using: str = DB) -> timedelta:
    """Read the database's time once and keep how far the host's clock is from it (one query)."""
    before = timezone.now()
    database = db_time(using)
    after = timezone.now()
    _offsets[using] = database - (before + (after - before) / 2)
    return _offsets[using]


def _on_connection_created(sender, connection, **_kwargs) -> None:
    if connection.alias == DB and connections[DB] is connection:
        measure_offset(DB)


connection_created.connect(_on_connection_created, dispatch_uid="outbox.page_clock")

__all__ = ["measure_offset", "page_now"]
