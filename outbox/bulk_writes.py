"""Statements for many rows at once on PostgreSQL: `VALUES` lists, `UPDATE … FROM (VALUES …)`, and
`unnest` of one array per column.

Django's bulk_update builds a CASE expression per field and row, which costs more Python time than
the dispatcher's whole HTTP call per batch; the VALUES form is a single flat statement. Other
backends use bulk_update.

A VALUES list's text grows with its rows, so psycopg converts it anew on every execution (it caches the
conversion of statements up to 4 kB and 50 parameters) and PostgreSQL parses one cast per cell. `unnest`
takes one array parameter per column: the statement's text is the same for any number of rows, and is
converted once per process. The hot path (a batch of deliveries, `outbox/delivered.py`) uses it.
"""

from django.db import connections
from django.db.models import Field, Model

from lib.databases import DB
from outbox.clock import POSTGRES_NOW_PLUS, DbNow


def values_sql(connection, columns: list[Field], rows: list[list]) -> tuple[str, list]:
    """`(…), (…)` for a VALUES list: one row per entry of `rows`, each value cast to its field's column type
    (read once per column, not per cell) and sent as a parameter. A `DbNow` is a time on the database clock,
    computed by the statement, not sent from Python."""
    types = [field.db_type(connection) for field in columns]
    cells, params = [], []
    for row in rows:
        parts = []
        for field, db_type, value in zip(columns, types, row, strict=True):
            if isinstance(value, DbNow):
                parts.append(f"{POSTGRES_NOW_PLUS}::{db_type}")
                params.append(value.seconds)
            else:
                parts.append(f"%s::{db_type}")
                params.append(field.get_db_prep_save(value, connection))
        cells.append("(" + ", ".join(parts) + ")")
    return ", ".join(cells), params


def unnest_sql(connection, columns: list[Field], rows: list[list]) -> tuple[str, list]:
    """`unnest(%s::type[], …)`: one array parameter per column of `rows`, each value prepared by its field. A time
    on the database clock (`DbNow`) cannot travel in an array: use `values_sql` for those."""
    arrays: list[list] = [[] for _ in columns]
    for row in rows:
        for field, array, value in zip(columns, arrays, row, strict=True):
            if isinstance(value, DbNow):
                raise TypeError(
                    f"{field.name}: a time on the database clock cannot be sent in an array"
                )
            array.append(field.get_db_prep_save(value, connection))
    return "unnest(" + ", ".join(
        f"%s::{field.db_type(connection)}[]" for field in columns
    ) + ")", arrays


def update_many(objs: list[Model], fields: list[str], *, using: str = DB) -> None:
    if not objs:
        return
    model = type(objs[0])
    connection = connections[using]
    if connection.vendor != "postgresql":
        model.objects.using(using).bulk_update(objs, fields)
        return
    qn = connection.ops.quote_name
    meta = model._meta
    columns = [meta.get_field(name) for name in fields]
    pk = meta.pk
    names = ", ".join(qn(f.column) for f in [pk, *columns])
    assignments = ", ".join(f"{qn(f.column)} = v.{qn(f.column)}" for f in columns)
    rows, params = values_sql(
        connection,
        [pk, *columns],
        [[obj.pk, *(getattr(obj, field.attname) for field in columns)] for obj in objs],
    )
    # Identifiers come from the model and are quoted by the backend; every value is a parameter.
    sql = (
        f"UPDATE {qn(meta.db_table)} AS t SET {assignments} "  # noqa: S608
        f"FROM (VALUES {rows}) AS v({names}) "
        f"WHERE t.{qn(pk.column)} = v.{qn(pk.column)}"
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
