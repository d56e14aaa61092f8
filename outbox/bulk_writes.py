"""One UPDATE for many rows with different values: `UPDATE … FROM (VALUES …)` on PostgreSQL.

Django's bulk_update builds a CASE expression per field and row, which costs more Python time than
the dispatcher's whole HTTP call per batch; the VALUES form is a single flat statement. Other
backends use bulk_update.
"""

from django.db import connections
from django.db.models import Model

from outbox.clock import POSTGRES_NOW_PLUS, DbNow


def update_many(objs: list[Model], fields: list[str], *, using: str = "default") -> None:
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
    rows, params = [], []
    for obj in objs:
        cells = [f"%s::{pk.db_type(connection)}"]
        params.append(obj.pk)
        for field in columns:
            value = getattr(obj, field.attname)
            if isinstance(value, DbNow):
                # A time on the database clock (a due time): computed by the statement, not sent from Python.
                cells.append(f"{POSTGRES_NOW_PLUS}::{field.db_type(connection)}")
                params.append(value.seconds)
            else:
                cells.append(f"%s::{field.db_type(connection)}")
                params.append(field.get_db_prep_save(value, connection))
        rows.append("(" + ", ".join(cells) + ")")
    # Identifiers come from the model and are quoted by the backend; every value is a parameter.
    sql = (
        f"UPDATE {qn(meta.db_table)} AS t SET {assignments} "  # noqa: S608
        f"FROM (VALUES {', '.join(rows)}) AS v({names}) "
        f"WHERE t.{qn(pk.column)} = v.{qn(pk.column)}"
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
