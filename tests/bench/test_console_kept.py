"""bench/console_bench.py and bench/console_operators_bench.py --keep: `make bench` measures the console's pages
on a copy of a 1,000,000-handoff fill kept between runs (bench/kept.py), never on the kept databases themselves
(the pages write sessions, limit slots, last sign-ins). The copy is made only while the kept pair is as a fresh
fill would make it (its mark, every row the fill left and no session, younger than KEPT_HOURS); a stale one is
refused with its reason and no copy is made."""

import os
import time

import psycopg
import pytest

from bench import console_bench, console_operators_bench, kept
from bench.harness import Bench

pytestmark = pytest.mark.postgres

ADMIN = f"dbname=postgres host={os.environ.get('PGHOST', '/var/run/postgresql')}"
ROWS = 40
OPERATORS = 3


def connect(name: str) -> psycopg.Connection:
    return psycopg.connect(ADMIN.replace("postgres", name, 1), autocommit=True)


def drop(*names: str) -> None:
    with psycopg.connect(ADMIN, autocommit=True) as conn:
        for name in names:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def make_pair(bench: Bench, shape: dict[tuple[str, str], int]) -> None:
    """`bench`'s two databases holding `shape`'s rows (one integer column a table)."""
    drop(bench.source, bench.delivery)
    with psycopg.connect(ADMIN, autocommit=True) as conn:
        for name in (bench.source, bench.delivery):
            conn.execute(f'CREATE DATABASE "{name}"')
    for (which, table), count in shape.items():
        with connect(bench.source if which == "source" else bench.delivery) as conn:
            conn.execute(f"CREATE TABLE {table} (id int PRIMARY KEY)")
            conn.execute(f"INSERT INTO {table} SELECT generate_series(1, {count})")


@pytest.fixture
def pairs():
    """A kept pair shaped and marked as console_bench's fill of ROWS leaves it, and a work pair's names; both
    of this test alone (the process id apart), dropped after."""
    prefix = f"console_kept_test_{os.getpid()}"
    kept_pair = Bench(source=f"{prefix}_source", delivery=f"{prefix}_delivery")
    work = Bench(source=f"{prefix}_work_source", delivery=f"{prefix}_work_delivery")
    make_pair(kept_pair, console_bench.kept_shape(ROWS))
    kept.write_mark(
        kept_pair,
        {**console_bench.kept_fill_mark(ROWS), "built_at": "then", "built_epoch": time.time()},
    )
    yield kept_pair, work
    drop(kept_pair.source, kept_pair.delivery, work.source, work.delivery)


def prepare(kept_pair: Bench, work: Bench, rows: int = ROWS) -> str:
    return kept.prepare_copy(
        kept_pair,
        work,
        console_bench.kept_fill_mark(rows),
        console_bench.kept_shape(rows),
        console_bench.KEPT_HOURS,
    )


def handoffs(name: str) -> int:
    with connect(name) as conn:
        return conn.execute("SELECT count(*) FROM outbox_handoff").fetchone()[0]


def test_a_kept_console_fill_is_copied_and_the_runs_writes_stay_in_the_copy(pairs):
    kept_pair, work = pairs
    assert prepare(kept_pair, work) == ""
    assert handoffs(work.source) == ROWS
    # The run signs its operators in on the copy: the kept pair is untouched and copied again next time.
    with connect(work.source) as conn:
        conn.execute("INSERT INTO django_session VALUES (1)")
    assert prepare(kept_pair, work) == ""
    with connect(work.source) as conn:
        assert conn.execute("SELECT count(*) FROM django_session").fetchone()[0] == 0


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        ("INSERT INTO django_session VALUES (1)", "django_session holds 1 rows, not 0"),
        ("DELETE FROM outbox_attempt WHERE id = 1", "outbox_attempt holds 5 rows, not 6"),
        (
            "INSERT INTO outbox_handoffevent VALUES (0)",
            f"outbox_handoffevent holds {ROWS + 7} rows, not {ROWS + 6}",
        ),
    ],
)
def test_a_kept_console_fill_a_run_wrote_into_is_refused_and_not_copied(pairs, change, reason):
    kept_pair, work = pairs
    with connect(kept_pair.source) as conn:
        conn.execute(change)
    assert prepare(kept_pair, work) == reason
    with psycopg.connect(ADMIN, autocommit=True) as conn:
        assert not conn.execute(
            "SELECT 1 FROM pg_database WHERE datname = %s", (work.source,)
        ).fetchone()


def test_a_kept_console_fill_too_old_or_of_another_size_is_refused(pairs):
    kept_pair, work = pairs
    assert prepare(kept_pair, work, rows=ROWS * 2) == "another fill or size"
    old = time.time() - (console_bench.KEPT_HOURS + 1) * 3600
    state = kept.kept_state(kept_pair)
    kept.write_mark(kept_pair, {**state, "built_epoch": old})
    assert prepare(kept_pair, work) == (
        f"filled over {console_bench.KEPT_HOURS} hours ago, its rows' times have moved"
    )
    kept.write_mark(kept_pair, {key: value for key, value in state.items() if key != "built_epoch"})
    assert prepare(kept_pair, work).startswith("filled over")


def test_a_kept_operators_fill_is_checked_against_the_counts_its_fill_made(pairs):
    kept_pair, work = pairs
    counted = {"outbox_handoffevent": ROWS + 3, "outbox_attempt": 7}
    mark = {
        **console_operators_bench.kept_fill_mark(ROWS, OPERATORS),
        "counted": counted,
        "built_epoch": time.time(),
    }
    shape = console_operators_bench.kept_shape(ROWS, OPERATORS, mark)
    make_pair(kept_pair, shape)
    kept.write_mark(kept_pair, mark)

    def prepare_ops(operators: int = OPERATORS) -> str:
        state = kept.kept_state(kept_pair)
        return kept.prepare_copy(
            kept_pair,
            work,
            console_operators_bench.kept_fill_mark(ROWS, operators),
            console_operators_bench.kept_shape(ROWS, operators, state),
            console_operators_bench.KEPT_HOURS,
        )

    assert prepare_ops() == ""
    assert handoffs(work.source) == ROWS
    assert prepare_ops(operators=OPERATORS + 1) == "another fill or size"
    with connect(kept_pair.source) as conn:
        conn.execute("INSERT INTO django_session VALUES (1)")
    assert prepare_ops() == "django_session holds 1 rows, not 0"
    # A mark without the fill's counts (a fill that died before counting) is never reused.
    kept.write_mark(kept_pair, {key: value for key, value in mark.items() if key != "counted"})
    with connect(kept_pair.source) as conn:
        conn.execute("DELETE FROM django_session")
    assert prepare_ops() == f"outbox_handoffevent holds {ROWS + 3} rows, not -1"
