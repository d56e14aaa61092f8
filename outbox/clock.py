"""The one clock of the outbox: the database's.

Every time that is compared to decide what is due or whose lease ran out (`next_attempt_at`,
`lease_expires_at`) is both written and compared on the database clock, never one side from Python
and the other from SQL. Two clocks disagree across machines, and even on one machine SQLite's clock
has milliseconds while Python writes microseconds, so a row written "now" from Python was not due
within the millisecond it was created.

On SQLite datetimes are text compared as strings, so the database's time is written in the format Django
writes from Python (`YYYY-MM-DD HH:MM:SS.ffffff`, the fraction left out when it is zero; SQLite's clock has
milliseconds, so the last three digits are zeros): a stored time then equals the same time read back and
sent as a parameter (a keyset cursor), and compares in time order with times Django wrote. Rows written
earlier as `YYYY-MM-DD HH:MM:SS.SSS` still compare in order to the millisecond (a prefix sorts first).

The same holds for every time of record (an event's or an attempt's time, `updated_at`, `delivered_at`,
`attention_since`, an SLA due time): a host whose clock is wrong must not store an event pair out of time
order, nor move settlement's "oldest first". So they are written by the statement itself (`DbNow` as a
value, or `DbClockDateTimeField` in place of `auto_now`/`auto_now_add`), and the times they are compared
with are read from the database too (`db_time`, once per pass).

A time the product states to another system that checks it against its own clock (a signature's timestamp,
which a receiver refuses 5 minutes off) is the database's too: `calls_now`, the time read by the batch's own
statements (its claim, a lease renewed: `calls_on_db_clock`) plus the monotonic time since, no extra query.
"""

import time
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from django.db import connection, connections
from django.db.models import DateTimeField, Func, Value
from django.utils import timezone
from django.utils.dateparse import parse_datetime
from django.utils.functional import cached_property

from lib.databases import DB

SQLITE_FORMAT = "%%Y-%%m-%%d %%H:%%M:%%f"
POSTGRES_NOW = "STATEMENT_TIMESTAMP()"
# Statement time plus a number of seconds given as the one parameter.
POSTGRES_NOW_PLUS = "(STATEMENT_TIMESTAMP() + make_interval(secs => (%s)::float8))"


class DbNow(Func):
    """The database's current time, in the format this backend stores datetimes the outbox compares."""

    output_field = DateTimeField()
    template = "CURRENT_TIMESTAMP"

    def __init__(self, seconds: float = 0.0):
        self.seconds = float(seconds)
        # Now itself is the statement's time, with no offset to send: no parameter, a shorter text.
        super().__init__(*([Value(self.seconds)] if self.seconds else []))

    @cached_property
    def identity(self):
        """Django's identity of it, without Django's way there (binding the constructor's signature): an
        outcome statement compares the times of its rows to send a shared one once (`outbox/bulk_writes.py`),
        and that binding was a third of its Python time."""
        return (type(self), ("seconds", self.seconds))

    def as_sqlite(self, compiler, connection, **extra_context):
        if not self.seconds:
            return f"REPLACE(STRFTIME('{SQLITE_FORMAT}', 'now') || '000', '.000000', '')", []
        sql, params = compiler.compile(self.source_expressions[0])
        # Written as Django writes a datetime (`str(value)`: six digits of fraction, none when it is zero), so
        # that a stored time equals the same time sent back as a parameter (a keyset cursor, a boundary).
        now = f"STRFTIME('{SQLITE_FORMAT}', 'now', printf('%%+.3f seconds', {sql}))"
        return f"REPLACE({now} || '000', '.000000', '')", params

    def as_postgresql(self, compiler, connection, **extra_context):
        return self.postgresql()

    def postgresql(self) -> tuple[str, list]:
        """Its PostgreSQL text and parameters: the statement's time, plus its offset when it has one (the one
        parameter). Also written into statements built without the ORM (`outbox/bulk_writes.py`)."""
        if not self.seconds:
            return POSTGRES_NOW, []
        return POSTGRES_NOW_PLUS, [self.seconds]


def db_now() -> DbNow:
    return DbNow()


def db_now_plus(seconds: float) -> DbNow:
    """Now on the database clock plus `seconds` (a backoff, a lease)."""
    return DbNow(seconds)


def db_time(using: str = DB) -> datetime:
    """The database's current time, read once (one query): for a pass that compares many stored times of
    record with "now" (a deadline, an age), so that both sides of the comparison are the database's clock."""
    db = connections[using]
    with db.cursor() as cursor:
        if db.vendor == "sqlite":
            cursor.execute(f"SELECT STRFTIME('{SQLITE_FORMAT.replace('%%', '%')}', 'now')")
            return parse_datetime(cursor.fetchone()[0]).replace(tzinfo=UTC)
        cursor.execute("SELECT STATEMENT_TIMESTAMP()")
        return cursor.fetchone()[0]


@dataclass(frozen=True)
class DbClockReading:
    """The database's time as a statement of a batch read it, and this host's monotonic clock then."""

    at: datetime
    taken: float

    def now(self) -> datetime:
        # Never before the reading: libfaketime steps the monotonic clock back with the wall clock (a real
        # host's monotonic clock never goes back), and the batch reads again at its next lease renewal.
        return self.at + timedelta(seconds=max(time.monotonic() - self.taken, 0.0))


# The reading of the batch this thread is serving (None outside one): a context variable, so that it is the
# thread's own, and reset when the batch ends, so that it never leaks into another batch, destination or test.
_calls_clock: ContextVar[DbClockReading | None] = ContextVar("calls_clock", default=None)


@contextmanager
def calls_on_db_clock(at: datetime | None) -> Iterator[None]:
    """Within the block, calls state the database's time `at` (read by the batch's claim) plus the monotonic
    time since; `at` None (nothing claimed): this host's time, as outside a batch."""
    token = _calls_clock.set(None if at is None else DbClockReading(at, time.monotonic()))
    try:
        yield
    finally:
        _calls_clock.reset(token)


def calls_clock_read_again(at: datetime) -> None:
    """A later reading of the database's time by the batch under way (a lease renewed)."""
    if _calls_clock.get() is not None:
        _calls_clock.set(DbClockReading(at, time.monotonic()))


def calls_now() -> datetime:
    """The time a call states: the database's within a batch (`calls_on_db_clock`), this host's outside one."""
    reading = _calls_clock.get()
    return timezone.now() if reading is None else reading.now()


class DbClockDateTimeField(DateTimeField):
    """`DateTimeField(auto_now=True)` or `(auto_now_add=True)` on the database clock: the INSERT or UPDATE
    writes `DbNow` instead of Python's `timezone.now()` (which `auto_now` sets in `pre_save`, on whatever clock
    the host has). An insert reads the stored value back in the same statement (RETURNING), so the instance
    holds the database's time; after an UPDATE by `save()` the attribute holds the `DbNow` expression until the
    row is read again, as for any expression assigned to a field.

    The column is the same as `DateTimeField`'s, so it deconstructs as one: no migration, and the historical
    models of migrations keep the plain field."""

    @property
    def db_returning(self):
        return connection.features.can_return_columns_from_insert

    def pre_save(self, model_instance, add):
        if self.auto_now or (self.auto_now_add and add):
            value = db_now()
            setattr(model_instance, self.attname, value)
            return value
        return super().pre_save(model_instance, add)

    def deconstruct(self):
        name, _path, args, kwargs = super().deconstruct()
        return name, "django.db.models.DateTimeField", args, kwargs


__all__ = [
    "DbClockDateTimeField",
    "DbNow",
    "calls_clock_read_again",
    "calls_now",
    "calls_on_db_clock",
    "db_now",
    "db_now_plus",
    "db_time",
]
