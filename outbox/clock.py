"""The one clock of the outbox: the database's.

Every time that is compared to decide what is due or whose lease ran out (`next_attempt_at`,
`lease_expires_at`) is both written and compared on the database clock, never one side from Python
and the other from SQL. Two clocks disagree across machines, and even on one machine SQLite's clock
has milliseconds while Python writes microseconds, so a row written "now" from Python was not due
within the millisecond it was created.

On SQLite datetimes are text compared as strings, so writes use the same `STRFTIME` format as the
comparison (`YYYY-MM-DD HH:MM:SS.SSS`).
"""

from django.db.models import DateTimeField, Func, Value

SQLITE_FORMAT = "%%Y-%%m-%%d %%H:%%M:%%f"
# Statement time plus a number of seconds given as the one parameter.
POSTGRES_NOW_PLUS = "(STATEMENT_TIMESTAMP() + make_interval(secs => (%s)::float8))"


class DbNow(Func):
    """The database's current time, in the format this backend stores datetimes the outbox compares."""

    output_field = DateTimeField()
    template = "CURRENT_TIMESTAMP"

    def __init__(self, seconds: float = 0.0):
        self.seconds = float(seconds)
        super().__init__(Value(self.seconds))

    def as_sqlite(self, compiler, connection, **extra_context):
        sql, params = compiler.compile(self.source_expressions[0])
        return f"STRFTIME('{SQLITE_FORMAT}', 'now', printf('%%+.3f seconds', {sql}))", params

    def as_postgresql(self, compiler, connection, **extra_context):
        sql, params = compiler.compile(self.source_expressions[0])
        return POSTGRES_NOW_PLUS.replace("%s", sql), params


def db_now() -> DbNow:
    return DbNow()


def db_now_plus(seconds: float) -> DbNow:
    """Now on the database clock plus `seconds` (a backoff, a lease)."""
    return DbNow(seconds)


__all__ = ["DbNow", "db_now", "db_now_plus"]
