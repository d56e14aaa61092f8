"""The database alias of the source application's rows (approvals, the outbox, reconciliation).

Named once: every service passes it to `transaction.atomic(using=DB)` and `.using(DB)`, so that a write
never lands on the receiver's database by the router's guess. The receiver (`delivery/`) names its own.
`compiled_once` keeps the hot paths' statements compiled for it, `prepared_cursor` planned once by PostgreSQL.
"""

from collections.abc import Callable, Hashable
from typing import NamedTuple, TypeVar

import psycopg
from django.conf import settings
from django.db import connections
from django.db.models import Expression, QuerySet

DB = "default"

Compiled = TypeVar("Compiled")

# Statements compiled once, by the database's vendor and their caller's key. Bounded: keys hold names
# (destinations), and past the bound a statement is compiled again at each use instead of kept.
_compiled: dict[tuple[Hashable, ...], object] = {}
_COMPILED_KEPT = 20_000


def compiled_once(key: tuple[Hashable, ...], build: Callable[[], Compiled]) -> Compiled:
    """What `build` compiles for `key` on the source database, built at the key's first use only: for a
    statement whose text and parameters depend on nothing but the key ("now" is the statement's own time),
    where compiling it through the ORM at every use would cost more CPU than the statement itself."""
    kept = (connections[DB].vendor, *key)
    if (compiled := _compiled.get(kept)) is None:
        compiled = build()
        if len(_compiled) < _COMPILED_KEPT:
            _compiled[kept] = compiled
    return compiled


def rows_compiled_once(key: tuple[Hashable, ...], queryset: Callable[[], QuerySet]) -> list[tuple]:
    """The rows, as tuples, of the query `queryset` builds, compiled once for `key` (`compiled_once`, the same
    conditions): for a read of plain columns (no conversion from the database) that a loop repeats."""
    sql, params = compiled_once(key, lambda: queryset().query.get_compiler(using=DB).as_sql())
    with connections[DB].cursor() as cursor:
        cursor.execute(sql, params)
        return cursor.fetchall()


# psycopg prepares a statement run this many times on a server-side binding cursor (ours ask at once).
_PREPARE_WHEN_ASKED = 2**31 - 1


class _Prepared(psycopg.Cursor):
    """Server-side binding, every statement prepared on the connection (psycopg keeps them by text and
    parameter types, and prepares again on a new connection)."""

    def execute(self, query, params=None, **options):
        try:
            return super().execute(query, params, **{**options, "prepare": True})
        except psycopg.errors.FeatureNotSupported:
            self._forget_prepared()
            raise

    def _forget_prepared(self) -> None:
        """After "cached plan must not change result type" (a migration changed a column a prepared statement
        returns, while this process ran): out of a transaction nothing rolls back, which is when psycopg
        forgets its prepared statements, so every later execution on this connection failed the same way (the
        claim runs in autocommit). `DEALLOCATE ALL` drops them on the server and psycopg forgets them with it;
        the statement failed before doing anything, and the caller's next turn prepares it afresh. In a
        transaction the error aborted it, and its rollback does the same."""
        if self.connection.info.transaction_status == psycopg.pq.TransactionStatus.IDLE:
            super().execute("DEALLOCATE ALL")


class _Shown(NamedTuple):
    query: bytes


class _PreparedShown(_Prepared):
    """Under Django's debug cursor (DEBUG, the tests' captured queries): each statement as Django shows one, its
    values written in (psycopg keeps no text of a prepared execution, where Django reads it)."""

    def execute(self, query, params=None, **options):
        result = super().execute(query, params, **options)
        with psycopg.ClientCursor(self.connection) as shown:
            self._query = _Shown(shown.mogrify(query, params).encode())
        return result


def prepared_cursor(using: str = DB):
    """A cursor whose statements PostgreSQL prepares once per connection, for a hot statement whose planning
    costs more than running it: once a generic plan is chosen (after five executions, when it costs no more
    than a custom one: the constants a partial index's condition needs are in the text), it is not planned
    again. Django's own cursors bind on the client and prepare nothing. The usual cursor on other backends
    and without DATABASE_PREPARED_STATEMENTS (behind a transaction-mode pooler a prepared statement would not
    outlive the transaction's server session). Errors are Django's, statements counted and logged as usual."""
    connection = connections[using]
    if connection.vendor != "postgresql" or not settings.DATABASE_PREPARED_STATEMENTS:
        return connection.cursor()
    connection.ensure_connection()
    connection.validate_thread_sharing()
    if connection.connection.prepare_threshold is None:
        # Django opens connections with psycopg's counting off (None), which also refuses `prepare=True`. Its
        # own cursors bind on the client and prepare nothing whatever the count, so only ours are prepared.
        connection.connection.prepare_threshold = _PREPARE_WHEN_ASKED
    with connection.wrap_database_errors:
        if connection.queries_logged:
            return connection.make_debug_cursor(_PreparedShown(connection.connection))
        return connection.make_cursor(_Prepared(connection.connection))


class ValuesIn(Expression):
    """The right side of an `__in` filter over many values (`filter(pk__in=ValuesIn(ids, "bigint"))`): on
    PostgreSQL one array parameter, `IN (SELECT unnest(%s::bigint[]))`; elsewhere a placeholder a value. A
    list of a thousand values costs the ORM a prepared value each and psycopg a placeholder each to split,
    more CPU than the statement (retention's batches: docs/benchmarks.md, "Retention beside delivery")."""

    def __init__(self, values: list, array_type: str) -> None:
        super().__init__()
        self.values, self.array_type = list(values), array_type

    def as_sql(self, compiler, connection):
        return "(" + ", ".join(["%s"] * len(self.values)) + ")", self.values

    def as_postgresql(self, compiler, connection):
        return f"(SELECT unnest(%s::{self.array_type}[]))", [self.values]
