"""The migrated schema every bench section starts from, made once a `make bench` and copied after.

`Bench.setup` used to run `manage.py migrate` on both of its databases: about 22 s of CPU (two Django start-ups
and every migration of every app; 64 s at a load of 8), once per section, a dozen times a run. Now the first
section migrates a pair of template databases (`<BENCH_DB_PREFIX>_template_source` and `_delivery`) and every
section's databases are copies of them (`CREATE DATABASE … TEMPLATE`, a copy of the files: well under a second).
A template is used only while its fingerprint (every migration file of the repository and every installed
package's version, kept as the database's comment) is the current one; otherwise it is migrated afresh, so a
changed migration never meets a stale schema. No migration reads the environment (the bench's settings differ
from section to section): the schema and its seeded rows are the same whoever migrates them."""

import hashlib
import importlib.metadata
from collections.abc import Callable
from pathlib import Path

import psycopg

ROOT = Path(__file__).resolve().parents[1]


def fingerprint() -> str:
    """What the migrated schema depends on: the repository's migration files and the installed packages
    (Django's own apps and the third-party ones carry migrations too)."""
    digest = hashlib.sha256()
    for path in sorted(ROOT.glob("*/migrations/*.py")):
        digest.update(str(path.relative_to(ROOT)).encode())
        digest.update(path.read_bytes())
    packages = sorted(
        f"{dist.metadata['Name']}=={dist.version}" for dist in importlib.metadata.distributions()
    )
    digest.update("\n".join(packages).encode())
    return digest.hexdigest()[:32]


def copy_migrated(
    admin_dsn: str,
    copies: dict[str, str],
    migrate: Callable[[list[str]], None],
) -> bool:
    """Each database of `copies` (template name → the section's database name) dropped and created afresh as a
    copy of its template, after migrating the templates (`migrate(templates)`, their names in `copies`' order)
    when one is missing or its fingerprint is not the current one. Returns whether they were migrated now."""
    wanted = fingerprint()
    # Held while the templates are checked, migrated and copied: two bench runs of one prefix on a cluster wait
    # for each other rather than copy a template half migrated (runs of other prefixes have templates of their
    # own and take another lock).
    lock = ("SELECT pg_advisory_lock(hashtext(%s))", "SELECT pg_advisory_unlock(hashtext(%s))")
    key = (" ".join(copies),)
    with psycopg.connect(admin_dsn, autocommit=True) as conn:
        conn.execute(lock[0], key)
        try:
            current = [_comment(conn, template) for template in copies]
            migrated = current != [wanted] * len(copies)
            if migrated:
                for template in copies:
                    _recreate(conn, template)
                migrate(list(copies))
                for template in copies:
                    conn.execute(f"COMMENT ON DATABASE \"{template}\" IS '{wanted}'")
            for template, name in copies.items():
                conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
                conn.execute(f'CREATE DATABASE "{name}" TEMPLATE "{template}"')
        finally:
            conn.execute(lock[1], key)
    return migrated


def _comment(conn: psycopg.Connection, name: str) -> str | None:
    row = conn.execute(
        "SELECT shobj_description(oid, 'pg_database') FROM pg_database WHERE datname = %s", (name,)
    ).fetchone()
    return row[0] if row else None


def _recreate(conn: psycopg.Connection, name: str) -> None:
    conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    conn.execute(f'CREATE DATABASE "{name}"')
