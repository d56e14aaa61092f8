"""Filled databases a bench section keeps between runs, when their fill does not fit `make bench`'s 20 minutes.

The kept pair (`<BENCH_DB_PREFIX>_<name>_source` and `_delivery`) is marked, as the source's database comment,
with what made it: a digest of the fill (its statements and size, and a version for what they seed), of the
installed packages, and of each migration file applied. A later run reuses the pair only while the mark holds
(a migration file added since is migrated forward on the filled rows, as in production; a changed one, another
fill or size, other packages refill), both databases are there, every index of the source is valid (a build
interrupted CONCURRENTLY leaves an invalid one) and the filled tables hold the rows the fill made (a run that
died halfway, or anything that wrote into them since, refills). `bench/reconcile_bench.py --keep` keeps its
10,000,000 keys this way; `make bench-reconcile-10m` fills them ahead of a run.

A section whose run writes into its databases (the console's: sessions, limit slots, last sign-ins) never
measures on the kept pair: `copy_or_setup` makes its databases copies of it while it holds, or sets them up for
a fill that `keep_copy` then copies as the kept pair before the first request (`bench/console_bench.py`,
`bench/console_operators_bench.py --keep`; `make bench-console-kept`)."""

import hashlib
import importlib.metadata
import json
import time

import psycopg
import psycopg.sql

from bench.harness import ROOT, Bench, dsn


def kept_mark(fill: str) -> dict:
    """What a kept pair must have been made with to be reused: `fill` (the statements and size that fill it,
    and the version of anything else they seed), the installed packages, and each migration file's digest."""
    packages = sorted(
        f"{dist.metadata['Name']}=={dist.version}" for dist in importlib.metadata.distributions()
    )
    return {
        "fill": hashlib.sha256(fill.encode()).hexdigest()[:16],
        "packages": hashlib.sha256("\n".join(packages).encode()).hexdigest()[:16],
        "migrations": {
            str(path.relative_to(ROOT)): hashlib.sha256(path.read_bytes()).hexdigest()[:16]
            for path in sorted(ROOT.glob("*/migrations/*.py"))
        },
    }


def kept_state(bench: Bench) -> dict | None:
    """The mark of the kept source database (its comment, written once filled), or None."""
    with psycopg.connect(dsn("postgres"), autocommit=True) as conn:
        row = conn.execute(
            "SELECT shobj_description(oid, 'pg_database') FROM pg_database WHERE datname = %s",
            (bench.source,),
        ).fetchone()
    try:
        state = json.loads(row[0]) if row and row[0] else None
    except ValueError:
        return None
    return state if isinstance(state, dict) else None


def stale(
    state: dict | None,
    wanted: dict,
    bench: Bench,
    rows: dict[tuple[str, str], int],
    max_hours: float | None = None,
) -> str:
    """Why the kept pair cannot be reused as `wanted` would make it ('' when it can). `rows` maps
    (which database, "source" or "delivery"; table) to the rows the fill put there: the shape checked. With
    `max_hours`, a fill older than that is refused too (one whose rows' times are its `now()`)."""
    if not state:
        return "no mark"
    if state.get("fill") != wanted["fill"]:
        return "another fill or size"
    if max_hours is not None:
        age = (time.time() - state.get("built_epoch", 0)) / 3600
        if age > max_hours:
            return f"filled over {max_hours:g} hours ago, its rows' times have moved"
    if state.get("packages") != wanted["packages"]:
        return "other packages"
    current = wanted["migrations"]
    edited = [
        path for path, digest in state.get("migrations", {}).items() if current.get(path) != digest
    ]
    if edited:
        return f"a migration applied to them changed or is gone ({edited[0]})"
    with psycopg.connect(dsn("postgres"), autocommit=True) as conn:
        there = {
            name
            for (name,) in conn.execute(
                "SELECT datname FROM pg_database WHERE datname IN (%s, %s)",
                (bench.source, bench.delivery),
            )
        }
    if there != {bench.source, bench.delivery}:
        return "a database is missing"
    with psycopg.connect(dsn(bench.source), autocommit=True) as conn:
        (invalid,) = conn.execute("SELECT count(*) FROM pg_index WHERE NOT indisvalid").fetchone()
    if invalid:
        return "an invalid index"
    for (which, table), count in rows.items():
        name = bench.source if which == "source" else bench.delivery
        with psycopg.connect(dsn(name), autocommit=True) as conn:
            (held,) = conn.execute(
                psycopg.sql.SQL("SELECT count(*) FROM {}").format(psycopg.sql.Identifier(table))
            ).fetchone()
        if held != count:
            return f"{table} holds {held:,} rows, not {count:,}"
    return ""


def write_mark(bench: Bench, state: dict) -> None:
    with psycopg.connect(dsn("postgres"), autocommit=True) as conn:
        conn.execute(
            psycopg.sql.SQL("COMMENT ON DATABASE {} IS {}").format(
                psycopg.sql.Identifier(bench.source), psycopg.sql.Literal(json.dumps(state))
            )
        )


def copy_pair(origin: Bench, copy: Bench) -> float:
    """`copy`'s two databases afresh as copies of `origin`'s files (`CREATE DATABASE … TEMPLATE … STRATEGY
    FILE_COPY`: a checkpoint and a copy of the directory, rather than the default's every page through the WAL);
    nothing may be connected to `origin`'s. Returns seconds."""
    began = time.monotonic()
    with psycopg.connect(dsn("postgres"), autocommit=True) as conn:
        for template, name in ((origin.source, copy.source), (origin.delivery, copy.delivery)):
            conn.execute(
                psycopg.sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(
                    psycopg.sql.Identifier(name)
                )
            )
            conn.execute(
                psycopg.sql.SQL("CREATE DATABASE {} TEMPLATE {} STRATEGY FILE_COPY").format(
                    psycopg.sql.Identifier(name), psycopg.sql.Identifier(template)
                )
            )
    return time.monotonic() - began


def prepare_copy(
    kept: Bench,
    work: Bench,
    wanted: dict,
    rows: dict[tuple[str, str], int],
    max_hours: float | None = None,
) -> str:
    """For a section whose run writes into its databases (sessions, per-person limits' slots, last sign-ins):
    the kept pair is never measured on, only copied. While it holds (`stale`), `work` is made a copy of it
    (migrated forward first when a migration file was added since) and '' is returned; else the reason, and
    the section fills `work` afresh and hands it over with `keep_copy` before its first request."""
    state = kept_state(kept)
    why = stale(state, wanted, kept, rows, max_hours)
    if why:
        return why
    if state["migrations"] != wanted["migrations"]:
        kept._migrate([kept.source, kept.delivery])
        write_mark(kept, {**state, "migrations": wanted["migrations"]})
    seconds = copy_pair(kept, work)
    print(
        f"kept databases {kept.source} and {kept.delivery} reused (filled {state.get('built_at')} in "
        f"{state.get('fill_seconds', 0):.0f} s), copied in {seconds:.1f} s",
        flush=True,
    )
    return ""


# Two runs on one cluster take turns on a kept pair (one would refill what the other copies or measures).
KEPT_LOCK = "SELECT pg_advisory_lock(hashtext(%s))"


def copy_or_setup(
    kept: Bench,
    work: Bench,
    wanted: dict,
    rows: dict[tuple[str, str], int],
    max_hours: float | None,
    keep: bool,
) -> tuple[str, psycopg.Connection]:
    """`work` as a copy of the kept pair while it holds (`prepare_copy`), else set up afresh for a fill (always
    without `keep`). Returns why a fill is needed ('' for a copy) and the connection holding the turn on the
    kept pair: close it once the pair is copied, or refilled by `keep_copy`."""
    turn = psycopg.connect(dsn("postgres"), autocommit=True)
    why = "not kept"
    if keep:
        turn.execute(KEPT_LOCK, (kept.source,))
        why = prepare_copy(kept, work, wanted, rows, max_hours)
        if why:
            print(f"kept databases filled afresh ({why}) ...", flush=True)
    if why:
        work.setup()
    return why, turn


def keep_copy(work: Bench, kept: Bench, wanted: dict, fill_seconds: float) -> None:
    """`work`, just filled and not yet measured on (nothing connected to it), copied as the kept pair and
    marked with `wanted`."""
    seconds = copy_pair(work, kept)
    built_at = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    write_mark(
        kept,
        {**wanted, "built_at": built_at, "built_epoch": time.time(), "fill_seconds": fill_seconds},
    )
    print(f"kept as {kept.source} and {kept.delivery} (copied in {seconds:.1f} s)", flush=True)
