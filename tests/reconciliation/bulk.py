"""Many matching handoffs and receiver tasks, inserted in bulk (test data, not product code)."""

import uuid

from django.db import connections
from django.db.models.expressions import DatabaseDefault

from delivery.models import ReceiverTask
from outbox.models import Handoff
from tests.factories import ONBOARDING_PAYLOAD

PAYLOAD_HASH = "0" * 64


def key(i: int) -> str:
    return f"onboarding:7:{i:09d}:1"


def task_id(i: int) -> uuid.UUID:
    return uuid.UUID(int=i + 1)


def bulk_matching_sqlite(n: int, *, chunk: int = 1000) -> None:
    """n delivered handoffs and their n receiver tasks, agreeing on key, hash and task id."""
    for start in range(0, n, chunk):
        ids = range(start, min(start + chunk, n))
        Handoff.objects.bulk_create(
            Handoff(
                action_key=key(i),
                workflow="onboarding",
                workspace_id=7,
                source_ref=f"request {i} revision 1",
                source_id=i + 1,
                payload=ONBOARDING_PAYLOAD,
                payload_hash=PAYLOAD_HASH,
                state="delivered",
                destination_id=str(task_id(i)),
            )
            for i in ids
        )
        ReceiverTask.objects.using("delivery").bulk_create(
            ReceiverTask(
                action_key=key(i),
                task_id=task_id(i),
                payload=ONBOARDING_PAYLOAD,
                payload_hash=PAYLOAD_HASH,
            )
            for i in ids
        )


def _insert_select(alias: str, model, n: int, overrides: dict[str, str]) -> None:
    """INSERT ... SELECT over generate_series(0, n-1) AS i: every column from a template instance,
    except the ones given as SQL expressions of i. Follows the model, so added columns need no change here."""
    template = model()
    columns, expressions, params = [], [], []
    connection = connections[alias]
    for f in model._meta.concrete_fields:
        if f.primary_key:
            continue
        if f.name in overrides:
            columns.append(connection.ops.quote_name(f.column))
            expressions.append(overrides[f.name])
            continue
        value = (
            f.pre_save(template, add=True)
            if hasattr(f, "pre_save")
            else getattr(template, f.attname)
        )
        if isinstance(value, DatabaseDefault):
            continue  # a column with a database default: left out, the database fills it
        if hasattr(value, "resolve_expression"):
            # A time of record (DbClockDateTimeField writes the database's now): the statement's time here.
            columns.append(connection.ops.quote_name(f.column))
            expressions.append("STATEMENT_TIMESTAMP()")
            continue
        columns.append(connection.ops.quote_name(f.column))
        expressions.append("%s")
        params.append(f.get_db_prep_save(value, connection))
    table = connection.ops.quote_name(model._meta.db_table)
    # Built from the model's own column names and fixed expressions, never from input.
    sql = f"INSERT INTO {table} ({', '.join(columns)}) SELECT {', '.join(expressions)} "  # noqa: S608
    sql += f"FROM generate_series(0, {int(n) - 1}) AS i"
    with connection.cursor() as cursor:
        cursor.execute(sql, params)


def bulk_matching_postgres(n: int) -> None:
    """The same data as bulk_matching_sqlite, generated inside PostgreSQL (200,000 rows in seconds)."""
    key_sql = "'onboarding:7:' || lpad(i::text, 9, '0') || ':1'"
    task_sql = "lpad(to_hex(i + 1), 32, '0')::uuid"
    _insert_select(
        "default",
        Handoff,
        n,
        {
            "action_key": key_sql,
            "workflow": "'onboarding'",
            "workspace_id": "7",
            "source_ref": "'request ' || i || ' revision 1'",
            "source_id": "i + 1",
            "payload": '\'{"client_name": "Northwind Traders"}\'::jsonb',
            "payload_hash": f"'{PAYLOAD_HASH}'",
            "state": "'delivered'",
            "destination_id": f"{task_sql}::text",
        },
    )
    _insert_select(
        "delivery",
        ReceiverTask,
        n,
        {
            "action_key": key_sql,
            "task_id": task_sql,
            "payload": '\'{"client_name": "Northwind Traders"}\'::jsonb',
            "payload_hash": f"'{PAYLOAD_HASH}'",
        },
    )
