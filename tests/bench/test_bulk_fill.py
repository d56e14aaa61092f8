"""bench/harness.py's `bulk_fill`: a fill's foreign keys are not checked row by row (its references are right
by construction; a million rows' deferred checks were two thirds of a history fill), and the key is kept and
enforced for every other session after it. The database here is the tests' own PostgreSQL one."""

import psycopg
import pytest
from django.db import connection

from bench.harness import bulk_fill, dsn

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(databases=["default"])]

PARENT, CHILD = "bench_fill_parent", "bench_fill_child"


@pytest.fixture
def tables():
    """A parent, and a child whose key references it as Django makes them (deferred to the commit), with a
    secondary index for the fill to drop and rebuild."""
    database = connection.settings_dict["NAME"]
    with psycopg.connect(dsn(database), autocommit=True) as conn:
        conn.execute(f"DROP TABLE IF EXISTS {CHILD}, {PARENT}")
        conn.execute(f"CREATE TABLE {PARENT} (id int PRIMARY KEY)")
        conn.execute(
            f"CREATE TABLE {CHILD} (id serial PRIMARY KEY, parent_id int NOT NULL "
            f"REFERENCES {PARENT} (id) DEFERRABLE INITIALLY DEFERRED)"
        )
        conn.execute(f"CREATE INDEX {CHILD}_parent ON {CHILD} (parent_id)")
        conn.execute(f"INSERT INTO {PARENT} SELECT generate_series(1, 10)")
    yield database
    with psycopg.connect(dsn(database), autocommit=True) as conn:
        conn.execute(f"DROP TABLE IF EXISTS {CHILD}, {PARENT}")


def test_a_fill_is_not_checked_row_by_row_and_the_key_still_holds_after_it(tables):
    # Rows 11..20 reference parents that do not exist: only a fill that checks no row lets them in.
    statement = f"INSERT INTO {CHILD} (parent_id) SELECT generate_series(1, 20)"  # noqa: S608 - our table

    bulk_fill(dsn(tables), CHILD, statement)

    with psycopg.connect(dsn(tables), autocommit=True) as conn:
        assert conn.execute(f"SELECT count(*) FROM {CHILD}").fetchone()[0] == 20  # noqa: S608
        indexes = conn.execute(
            "SELECT indexname FROM pg_indexes WHERE tablename = %s ORDER BY 1", (CHILD,)
        ).fetchall()
        assert indexes == [(f"{CHILD}_parent",), (f"{CHILD}_pkey",)]
        with pytest.raises(psycopg.errors.ForeignKeyViolation):
            conn.execute(f"INSERT INTO {CHILD} (parent_id) VALUES (99)")  # noqa: S608
