"""`lib.databases.prepared_cursor` after a migration changed a column a prepared statement returns, while the
process ran (a deploy beside running dispatchers): PostgreSQL refuses the statement once ("cached plan must not
change result type"), and the next execution on the same connection prepares it afresh. Out of a transaction,
as the claim runs, psycopg had kept the stale statement, and every later turn failed the same way."""

import psycopg
import pytest
from django.db import NotSupportedError, connection

from lib.databases import prepared_cursor

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]

PROBE = "SELECT a FROM prepared_probe WHERE b = %s"


def _another_session():
    """A migration's session: another connection to the same database."""
    params = connection.get_connection_params()
    keep = {"dbname", "host", "port", "user", "password"}
    return psycopg.connect(**{k: v for k, v in params.items() if k in keep and v}, autocommit=True)


def test_a_statement_prepared_before_a_column_type_change_works_again_on_the_next_turn(settings):
    settings.DATABASE_PREPARED_STATEMENTS = True
    with connection.cursor() as cursor:
        cursor.execute("CREATE TABLE prepared_probe (a integer, b text)")
        cursor.execute("INSERT INTO prepared_probe VALUES (1, 'x')")
    try:
        for _ in range(
            6
        ):  # past PostgreSQL's five custom plans: the statement is prepared and kept
            with prepared_cursor() as cursor:
                cursor.execute(PROBE, ["x"])
                assert cursor.fetchone() == (1,)
        with _another_session() as migration:
            migration.execute("ALTER TABLE prepared_probe ALTER COLUMN a TYPE bigint")
        # The turn under way when the migration ran: refused by PostgreSQL, nothing done.
        with (
            pytest.raises(NotSupportedError, match="cached plan must not change result type"),
            prepared_cursor() as cursor,
        ):
            cursor.execute(PROBE, ["x"])
        # The next turn, on the same connection.
        with prepared_cursor() as cursor:
            cursor.execute(PROBE, ["x"])
            assert cursor.fetchone() == (1,)
    finally:
        with connection.cursor() as cursor:
            cursor.execute("DROP TABLE IF EXISTS prepared_probe")
