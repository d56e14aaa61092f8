"""bench/search_bench.py --keep: `make bench` measures the search at 10,000,000 handoffs on databases kept
between runs; they are reused only while made as a fresh fill would make them (the fill, the packages, every
migration file applied to them; a file added since is migrated forward), every index of theirs is valid and
they hold the fill's handoffs (bench/kept.py, as the other kept sections)."""

import hashlib
import os

import psycopg
import pytest

from bench import kept as kept_pairs
from bench import search_bench
from bench.harness import Bench

pytestmark = pytest.mark.postgres

ADMIN = f"dbname=postgres host={os.environ.get('PGHOST', '/var/run/postgresql')}"
ROWS = 1000


def reusable(state: dict | None, wanted: dict, bench: Bench, rows: int = ROWS) -> bool:
    return kept_pairs.stale(state, wanted, bench, search_bench.kept_shape(rows)) == ""


@pytest.fixture
def kept():
    """A Bench on databases of this test alone (the process id apart) holding ROWS handoffs, dropped after."""
    prefix = f"search_kept_test_{os.getpid()}"
    bench = Bench(source=f"{prefix}_source", delivery=f"{prefix}_delivery")
    with psycopg.connect(ADMIN, autocommit=True) as conn:
        for name in (bench.source, bench.delivery):
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
            conn.execute(f'CREATE DATABASE "{name}"')
    with psycopg.connect(ADMIN.replace("postgres", bench.source, 1), autocommit=True) as conn:
        conn.execute("CREATE TABLE outbox_handoff (id int PRIMARY KEY)")
        conn.execute(f"INSERT INTO outbox_handoff SELECT generate_series(1, {ROWS})")
    yield bench
    with psycopg.connect(ADMIN, autocommit=True) as conn:
        for name in (bench.source, bench.delivery):
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def test_kept_databases_are_reused_only_while_made_as_a_fresh_fill_would(kept):
    wanted = search_bench.kept_mark(ROWS)
    assert kept_pairs.kept_state(kept) is None
    assert not reusable(None, wanted, kept)

    kept_pairs.write_mark(kept, {**wanted, "built_at": "then", "built": {}})
    state = kept_pairs.kept_state(kept)
    assert state["built_at"] == "then"
    assert reusable(state, wanted, kept)
    # A migration added since: migrated forward, not refilled.
    added = {**wanted, "migrations": {**wanted["migrations"], "outbox/migrations/9999_new.py": "x"}}
    assert reusable(state, added, kept)
    # A migration applied to them changed, or another fill, or another size: refilled.
    applied = next(iter(wanted["migrations"]))
    changed = {**wanted, "migrations": {**wanted["migrations"], applied: "edited"}}
    assert not reusable(state, changed, kept)
    assert not reusable(state, search_bench.kept_mark(2 * ROWS), kept)
    assert not reusable(state, {**wanted, "packages": "another"}, kept)

    # An index left invalid (a build CONCURRENTLY interrupted): refilled.
    with psycopg.connect(ADMIN.replace("postgres", kept.source, 1), autocommit=True) as conn:
        conn.execute("CREATE TABLE t (n int)")
        conn.execute("INSERT INTO t VALUES (1), (1)")
        with pytest.raises(psycopg.errors.UniqueViolation):
            conn.execute("CREATE UNIQUE INDEX CONCURRENTLY t_n ON t (n)")
    assert not reusable(state, wanted, kept)


def test_kept_databases_are_refilled_when_one_of_them_is_gone(kept):
    wanted = search_bench.kept_mark(ROWS)
    kept_pairs.write_mark(kept, {**wanted, "built_at": "then", "built": {}})
    assert reusable(kept_pairs.kept_state(kept), wanted, kept)
    with psycopg.connect(ADMIN, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE "{kept.delivery}" WITH (FORCE)')
    # Migrating forward would fail on the missing delivery database: both are filled afresh instead.
    assert not reusable(kept_pairs.kept_state(kept), wanted, kept)


def test_kept_databases_are_refilled_when_their_handoffs_are_not_the_fills(kept):
    wanted = search_bench.kept_mark(ROWS)
    # The kept 10,000,000-row databases (12 minutes to fill) were marked before bench/kept.py: the fill's
    # digest is of the same text, so their mark still holds.
    assert (
        wanted["fill"]
        == hashlib.sha256(
            f"{search_bench.FILL_SQL}{ROWS}{search_bench.SEED_VERSION}".encode()
        ).hexdigest()[:16]
    )
    kept_pairs.write_mark(kept, {**wanted, "built_at": "then", "built": {}})
    state = kept_pairs.kept_state(kept)
    assert reusable(state, wanted, kept)
    with psycopg.connect(ADMIN.replace("postgres", kept.source, 1), autocommit=True) as conn:
        conn.execute("DELETE FROM outbox_handoff WHERE id = 1")
    assert kept_pairs.stale(state, wanted, kept, search_bench.kept_shape(ROWS)) == (
        f"outbox_handoff holds {ROWS - 1:,} rows, not {ROWS:,}"
    )
