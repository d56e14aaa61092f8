"""bench/reconcile_bench.py --keep: `make bench` reconciles 10,000,000 keys on databases kept between runs
(bench/kept.py); they are reused only while made as a fresh fill would make them (the fill and its size, the
packages, every migration file applied to them; a file added since is migrated forward), both are there,
every index is valid and they hold the fill's rows, no more and no fewer."""

import os

import psycopg
import pytest

from bench import kept, reconcile_bench
from bench.harness import Bench

pytestmark = pytest.mark.postgres

ADMIN = f"dbname=postgres host={os.environ.get('PGHOST', '/var/run/postgresql')}"
KEYS = 50


def connect(name: str) -> psycopg.Connection:
    return psycopg.connect(ADMIN.replace("postgres", name, 1), autocommit=True)


@pytest.fixture
def pair():
    """A Bench on databases of this test alone (the process id apart) holding the shape a fill of KEYS keys
    leaves (KEYS handoffs, KEYS receiver tasks), marked as that fill marks them; dropped after."""
    prefix = f"recon_kept_test_{os.getpid()}"
    bench = Bench(source=f"{prefix}_source", delivery=f"{prefix}_delivery")
    with psycopg.connect(ADMIN, autocommit=True) as conn:
        for name in (bench.source, bench.delivery):
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
            conn.execute(f'CREATE DATABASE "{name}"')
    for name, table in (
        (bench.source, "outbox_handoff"),
        (bench.delivery, "delivery_receivertask"),
    ):
        with connect(name) as conn:
            conn.execute(f"CREATE TABLE {table} (id int PRIMARY KEY)")
            conn.execute(f"INSERT INTO {table} SELECT generate_series(1, {KEYS})")
    kept.write_mark(bench, {**reconcile_bench.kept_fill_mark(KEYS), "built_at": "then"})
    yield bench
    with psycopg.connect(ADMIN, autocommit=True) as conn:
        for name in (bench.source, bench.delivery):
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def why_stale(bench: Bench, wanted: dict | None = None, keys: int = KEYS) -> str:
    wanted = wanted or reconcile_bench.kept_fill_mark(keys)
    return kept.stale(kept.kept_state(bench), wanted, bench, reconcile_bench.kept_shape(keys))


def test_a_kept_pair_is_reused_while_its_mark_holds_and_refused_for_another_version(pair):
    assert kept.kept_state(pair)["built_at"] == "then"
    assert why_stale(pair) == ""
    wanted = reconcile_bench.kept_fill_mark(KEYS)
    # A migration added since: migrated forward, not refilled.
    added = {**wanted, "migrations": {**wanted["migrations"], "outbox/migrations/9999_new.py": "x"}}
    assert why_stale(pair, added) == ""
    # A migration applied to them changed, other packages, another fill version: refilled.
    applied = next(iter(wanted["migrations"]))
    edited = {**wanted, "migrations": {**wanted["migrations"], applied: "edited"}}
    assert why_stale(pair, edited).startswith("a migration applied to them changed")
    assert why_stale(pair, {**wanted, "packages": "another"}) == "other packages"
    assert why_stale(pair, {**wanted, "fill": "another"}) == "another fill or size"
    # No mark at all (a comment that is not ours reads as none).
    with psycopg.connect(ADMIN, autocommit=True) as conn:
        conn.execute(f"COMMENT ON DATABASE \"{pair.source}\" IS 'not json'")
    assert kept.kept_state(pair) is None
    assert why_stale(pair) == "no mark"


def test_a_kept_pair_of_another_size_is_refused(pair):
    # The mark of another size differs, and so would the rows it holds.
    assert why_stale(pair, keys=KEYS * 2) == "another fill or size"
    wanted = reconcile_bench.kept_fill_mark(KEYS)
    assert kept.stale(
        kept.kept_state(pair), wanted, pair, reconcile_bench.kept_shape(KEYS * 2)
    ) == (f"outbox_handoff holds {KEYS} rows, not {KEYS * 2}")


@pytest.mark.parametrize(
    ("which", "change", "table", "held"),
    [
        ("source", "DELETE FROM outbox_handoff WHERE id = 1", "outbox_handoff", KEYS - 1),
        (
            "delivery",
            "INSERT INTO delivery_receivertask VALUES (0)",
            "delivery_receivertask",
            KEYS + 1,
        ),
    ],
)
def test_a_kept_pair_whose_rows_are_not_the_fills_is_refused(pair, which, change, table, held):
    with connect(pair.source if which == "source" else pair.delivery) as conn:
        conn.execute(change)
    assert why_stale(pair) == f"{table} holds {held} rows, not {KEYS}"


def test_a_kept_pair_missing_a_database_or_with_an_invalid_index_is_refused(pair):
    with connect(pair.source) as conn:
        conn.execute("CREATE TABLE t (n int)")
        conn.execute("INSERT INTO t VALUES (1), (1)")
        with pytest.raises(psycopg.errors.UniqueViolation):
            conn.execute("CREATE UNIQUE INDEX CONCURRENTLY t_n ON t (n)")
    assert why_stale(pair) == "an invalid index"
    with psycopg.connect(ADMIN, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE "{pair.delivery}" WITH (FORCE)')
    assert why_stale(pair) == "a database is missing"
