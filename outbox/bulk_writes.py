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

from collections.abc import Callable
from typing import NamedTuple

from django.db import connections, models
from django.db.models import Field, Model

from lib.databases import DB
from outbox.clock import DbNow

# Each field's column type and quoted column per backend vendor, read once per process: Django formats a type
# anew on every call (`Field.db_type`: the backend's types, a %-format), and a delivered batch's statement asks
# about twenty of each. Building that statement for one row took 108 µs of CPU, 64 µs with these read once.
_DB_TYPES: dict[tuple[Field, str], str] = {}


def db_type(connection, field: Field) -> str:
    """`field.db_type(connection)`, read once per field and vendor."""
    key = (field, connection.vendor)
    found = _DB_TYPES.get(key)
    if found is None:
        found = _DB_TYPES[key] = field.db_type(connection)
    return found


# The field classes whose preparation (`Field.get_db_prep_save`) of a value of one Python type is a plain conversion:
# none for an id or a str (`int` of an int, `str` of a str), and for another integer the backend's integer type (on
# PostgreSQL with psycopg 3, `Int2`/`Int4`/`Int8`, so a column's array is sent as the same type whatever its values);
# None stays None. A delivered batch's statement prepares about 120 cells (ids, fencing tokens, codes, latencies),
# each through Django's four calls; such a cell now gets its column's conversion, looked up once per column. Any
# other value (a datetime, a JSON document, an int subclass such as a bool) and any other field's goes through its
# field.
_IDS = (models.AutoField, models.BigAutoField, models.SmallAutoField)
_INTEGERS = (
    models.IntegerField,
    models.BigIntegerField,
    models.SmallIntegerField,
    models.PositiveIntegerField,
    models.PositiveBigIntegerField,
    models.PositiveSmallIntegerField,
)
_TEXTS = (models.CharField, models.TextField)


def _plain(connection, field: Field) -> tuple[type | None, Callable | None]:
    """The Python type whose values `field` prepares by a plain conversion, and that conversion (None: as is)."""
    kind = type(field)
    if kind in _IDS:
        return int, None
    if kind in _TEXTS:
        return str, None
    if kind in _INTEGERS:
        type_map = getattr(connection.ops, "integerfield_type_map", {})
        return int, type_map.get(field.get_internal_type())
    return None, None


def prepared(connection, field: Field, values: list) -> list:
    """`field.get_db_prep_save` of each of `values`, the field's conversion looked up once for the column (`_plain`).
    A time on the database clock (`DbNow`) cannot travel as a parameter of its own: the caller writes its SQL
    (`one_value`, `values_sql`)."""
    plain, convert = _plain(connection, field)
    out = []
    for value in values:
        if value is None and plain is not None:
            out.append(None)
        elif type(value) is plain:
            out.append(value if convert is None else convert(value))
        elif isinstance(value, DbNow):
            raise TypeError(
                f"{field.name}: a time on the database clock cannot be sent in an array"
            )
        else:
            out.append(field.get_db_prep_save(value, connection))
    return out


def values_sql(connection, columns: list[Field], rows: list[list]) -> tuple[str, list]:
    """`(…), (…)` for a VALUES list: one row per entry of `rows`, each value cast to its field's column type
    (read once per column, not per cell) and sent as a parameter, prepared as `prepared` does. A `DbNow` is a
    time on the database clock, computed by the statement, not sent from Python."""
    types = [db_type(connection, field) for field in columns]
    cells, params = [], []
    for row in rows:
        parts = []
        for field, column_type, value in zip(columns, types, row, strict=True):
            if isinstance(value, DbNow):
                sql, now_params = value.postgresql()
                parts.append(f"{sql}::{column_type}")
                params += now_params
            else:
                parts.append(f"%s::{column_type}")
                params += prepared(connection, field, [value])
        cells.append("(" + ", ".join(parts) + ")")
    return ", ".join(cells), params


def unnest_sql(connection, columns: list[Field], values: list[list]) -> tuple[str, list]:
    """`unnest(%s::type[], …)`: one array parameter per column, `values` holding each column's values (one per
    row), prepared by `prepared`. A time on the database clock (`DbNow`) cannot travel in an array: use
    `values_sql` for those."""
    arrays = [
        prepared(connection, field, column) for field, column in zip(columns, values, strict=True)
    ]
    return "unnest(" + ", ".join(
        f"%s::{db_type(connection, field)}[]" for field in columns
    ) + ")", arrays


class Column(NamedTuple):
    """One column of a many-row statement: its name in the `v` row set, the model field that types it, and its
    value in each of the caller's rows (read by the caller in one pass: a function called per row and column
    was a third of a delivered batch's statement building)."""

    name: str
    field: Field
    values: list


def one_value(connection, field: Field, value) -> tuple[str, list]:
    """The SQL of a value every row holds: one cast parameter, or for a time of record (a `DbNow`) the
    statement's own time, on the database clock."""
    if isinstance(value, DbNow):
        sql, params = value.postgresql()
        return f"{sql}::{db_type(connection, field)}", params
    return f"%s::{db_type(connection, field)}", prepared(connection, field, [value])


def unnest_with_constants(
    connection, arrays: list[Column], columns: list[Column]
) -> tuple[str, list, dict[str, tuple[str, list]]]:
    """`unnest(…) AS v (names)` of `arrays` (always one array each: ids, fencing tokens) and of each of
    `columns` whose value differs between rows, its parameters, and for every one of `columns` its SQL:
    `v.<name>`, or `one_value` when every row holds the same value (a batch clears the same failure fields
    in every row). The statement's text depends only on which columns differ, never on how many rows there
    are, so psycopg converts it once per process."""
    qn = connection.ops.quote_name
    arrays = list(arrays)
    written: dict[str, tuple[str, list]] = {}
    for column in columns:
        values = column.values
        first = values[0]
        # `count` compares each value with `==`, as a loop would, in one call.
        if values.count(first) == len(values):
            written[column.name] = one_value(connection, column.field, first)
        else:
            arrays.append(column)
            written[column.name] = (f"v.{qn(column.name)}", [])
    sql, params = unnest_sql(
        connection, [column.field for column in arrays], [column.values for column in arrays]
    )
    names = ", ".join(qn(column.name) for column in arrays)
    return f"{sql} AS v ({names})", params, written


def assignments(
    connection, written: dict[str, tuple[str, list]], prefix: str, model: type[Model]
) -> tuple[str, list]:
    """`column = sql, …` for the entries of `written` (from `unnest_with_constants`) named `<prefix><field>`,
    with their parameters in order."""
    parts, params = [], []
    for name, (sql, column_params) in written.items():
        if name.startswith(prefix):
            parts.append(f"{quoted_column(connection, model, name[len(prefix) :])} = {sql}")
            params += column_params
    return ", ".join(parts), params


_QUOTED_COLUMNS: dict[tuple[type[Model], str, str], str] = {}


def quoted_column(connection, model: type[Model], name: str) -> str:
    """The quoted column of `model`'s field `name`, read once per model, field and vendor."""
    key = (model, name, connection.vendor)
    found = _QUOTED_COLUMNS.get(key)
    if found is None:
        column = model._meta.get_field(name).column
        found = _QUOTED_COLUMNS[key] = connection.ops.quote_name(column)
    return found


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
