"""tests/sqlite_template.py: a SQLite test database loaded from the template is the migrated one."""

import sqlite3

import pytest
from django.conf import settings
from django.db import connections

from tests.sqlite_template import load_template, write_template

pytestmark = [
    pytest.mark.skipif(
        settings.DATABASES["default"]["ENGINE"] != "django.db.backends.sqlite3",
        reason="the template is the SQLite streams' (the PostgreSQL streams copy theirs in the server)",
    ),
    # Outside a test transaction: an online backup waits for the write lock that a test transaction holds.
    pytest.mark.django_db(databases=["default", "delivery"], transaction=True),
]


def _contents(conn: sqlite3.Connection) -> dict[str, list[tuple]]:
    """The schema (every table, index and trigger as its SQL) and every table's rows, in a fixed order."""
    schema = conn.execute(
        "SELECT type, name, tbl_name, sql FROM sqlite_master ORDER BY type, name"
    ).fetchall()
    tables = [name for kind, name, _, _ in schema if kind == "table" and name != "sqlite_sequence"]
    contents = {"(schema)": schema}
    for table in tables:
        contents[table] = sorted(
            conn.execute(f'SELECT * FROM "{table}"').fetchall(),  # noqa: S608 (sqlite_master's names)
            key=repr,
        )
    return contents


@pytest.mark.parametrize("alias", ["default", "delivery"])
def test_a_database_loaded_from_the_template_is_the_migrated_one(alias, tmp_path):
    connections[alias].ensure_connection()
    migrated = connections[alias].connection
    template = tmp_path / f"{alias}.sqlite3"
    write_template(migrated, template)
    # Read as Django reads it (its converters turn declared types into Python values), as `migrated` is.
    loaded = sqlite3.connect(
        ":memory:", detect_types=sqlite3.PARSE_DECLTYPES | sqlite3.PARSE_COLNAMES
    )
    load_template(template, loaded)

    expected, got = _contents(migrated), _contents(loaded)
    assert got == expected
    assert got["django_migrations"], "no migration recorded as applied"
    assert len(got["(schema)"]) > 10
