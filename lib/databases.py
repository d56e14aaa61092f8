"""The database alias of the source application's rows (approvals, the outbox, reconciliation).

Named once: every service passes it to `transaction.atomic(using=DB)` and `.using(DB)`, so that a write
never lands on the receiver's database by the router's guess. The receiver (`delivery/`) names its own.
`compiled_once` keeps the hot paths' statements compiled for it.
"""

from collections.abc import Callable, Hashable
from typing import TypeVar

from django.db import connections
from django.db.models import QuerySet

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
