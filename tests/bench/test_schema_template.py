"""bench/schema_template.py: a section's databases are copies of migrated templates, migrated once while the
migrations stay the same and afresh when they change, so no section meets a stale schema."""

import os

import psycopg
import pytest

from bench import schema_template

pytestmark = pytest.mark.postgres

ADMIN = f"dbname=postgres host={os.environ.get('PGHOST', '/var/run/postgresql')}"


@pytest.fixture
def names():
    """Database names of this test alone (the process id apart), dropped after."""
    prefix = f"schema_template_test_{os.getpid()}"
    names = {f"{prefix}_template": f"{prefix}_copy"}
    yield names
    with psycopg.connect(ADMIN, autocommit=True) as conn:
        for name in [*names, *names.values()]:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def test_copies_are_migrated_once_and_again_when_the_migrations_change(names, monkeypatch):
    (template, copy) = next(iter(names.items()))
    runs = []

    def migrate(databases: list[str]) -> None:
        runs.append(databases)
        with psycopg.connect(f"{ADMIN.replace('postgres', databases[0], 1)}", autocommit=True) as c:
            c.execute(f"CREATE TABLE migrated_{len(runs)} (id int)")

    def tables() -> list[str]:
        with psycopg.connect(ADMIN.replace("postgres", copy, 1)) as conn:
            rows = conn.execute(
                "SELECT tablename FROM pg_tables WHERE tablename LIKE 'migrated_%' ORDER BY 1"
            )
            return [name for (name,) in rows]

    assert schema_template.copy_migrated(ADMIN, names, migrate) is True
    with psycopg.connect(ADMIN.replace("postgres", copy, 1), autocommit=True) as conn:
        conn.execute("CREATE TABLE left_by_a_section (id int)")
    assert schema_template.copy_migrated(ADMIN, names, migrate) is False
    assert runs == [[template]]
    # The copy is afresh: the template's schema, nothing the last section wrote.
    assert tables() == ["migrated_1"]
    with psycopg.connect(ADMIN.replace("postgres", copy, 1)) as conn:
        assert conn.execute("SELECT to_regclass('left_by_a_section')").fetchone() == (None,)

    monkeypatch.setattr(schema_template, "fingerprint", lambda: "a migration changed")
    assert schema_template.copy_migrated(ADMIN, names, migrate) is True
    assert runs == [[template], [template]]
    assert tables() == ["migrated_2"]
