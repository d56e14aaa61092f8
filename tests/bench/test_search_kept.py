"""bench/search_bench.py --keep: `make bench` measures the search at 10,000,000 handoffs on databases kept
between runs; they are reused only while made as a fresh fill would make them (the fill, the packages, every
migration file applied to them; a file added since is migrated forward) and every index of theirs is valid."""

import os

import psycopg
import pytest

from bench import search_bench
from bench.harness import Bench

pytestmark = pytest.mark.postgres

ADMIN = f"dbname=postgres host={os.environ.get('PGHOST', '/var/run/postgresql')}"


@pytest.fixture
def kept():
    """A Bench on databases of this test alone (the process id apart), dropped after."""
    prefix = f"search_kept_test_{os.getpid()}"
    bench = Bench(source=f"{prefix}_source", delivery=f"{prefix}_delivery")
    with psycopg.connect(ADMIN, autocommit=True) as conn:
        for name in (bench.source, bench.delivery):
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
            conn.execute(f'CREATE DATABASE "{name}"')
    yield bench
    with psycopg.connect(ADMIN, autocommit=True) as conn:
        for name in (bench.source, bench.delivery):
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def test_kept_databases_are_reused_only_while_made_as_a_fresh_fill_would(kept):
    wanted = search_bench.kept_mark(1000)
    assert search_bench.kept_state(kept) is None
    assert not search_bench.reusable(None, wanted, kept)

    search_bench.write_mark(kept, {**wanted, "built_at": "then", "built": {}})
    state = search_bench.kept_state(kept)
    assert state["built_at"] == "then"
    assert search_bench.reusable(state, wanted, kept)
    # A migration added since: migrated forward, not refilled.
    added = {**wanted, "migrations": {**wanted["migrations"], "outbox/migrations/9999_new.py": "x"}}
    assert search_bench.reusable(state, added, kept)
    # A migration applied to them changed, or another fill, or another size: refilled.
    applied = next(iter(wanted["migrations"]))
    changed = {**wanted, "migrations": {**wanted["migrations"], applied: "edited"}}
    assert not search_bench.reusable(state, changed, kept)
    assert not search_bench.reusable(state, search_bench.kept_mark(2000), kept)
    assert not search_bench.reusable(state, {**wanted, "packages": "another"}, kept)

    # An index left invalid (a build CONCURRENTLY interrupted): refilled.
    with psycopg.connect(ADMIN.replace("postgres", kept.source, 1), autocommit=True) as conn:
        conn.execute("CREATE TABLE t (n int)")
        conn.execute("INSERT INTO t VALUES (1), (1)")
        with pytest.raises(psycopg.errors.UniqueViolation):
            conn.execute("CREATE UNIQUE INDEX CONCURRENTLY t_n ON t (n)")
    assert not search_bench.reusable(state, wanted, kept)


def test_kept_databases_are_refilled_when_one_of_them_is_gone(kept):
    wanted = search_bench.kept_mark(1000)
    search_bench.write_mark(kept, {**wanted, "built_at": "then", "built": {}})
    assert search_bench.reusable(search_bench.kept_state(kept), wanted, kept)
    with psycopg.connect(ADMIN, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE "{kept.delivery}" WITH (FORCE)')
    # Migrating forward would fail on the missing delivery database: both are filled afresh instead.
    assert not search_bench.reusable(search_bench.kept_state(kept), wanted, kept)
