"""Filled databases a bench section keeps between runs, when their fill does not fit `make bench`'s 20 minutes.

The kept pair (`<BENCH_DB_PREFIX>_<name>_source` and `_delivery`) is marked, as the source's database comment,
with what made it: a digest of the fill (its statements and size, and a version for what they seed), of the
installed packages, and of each migration file applied. A later run reuses the pair only while the mark holds
(a migration file added since is migrated forward on the filled rows, as in production; a changed one, another
fill or size, other packages refill), both databases are there, every index of the source is valid (a build
interrupted CONCURRENTLY leaves an invalid one) and the filled tables hold the rows the fill made (a run that
died halfway, or anything that wrote into them since, refills). `bench/reconcile_bench.py --keep` keeps its
10,000,000 keys this way; `make bench-reconcile-10m` fills them ahead of a run."""

import hashlib
import importlib.metadata
import json

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


def stale(state: dict | None, wanted: dict, bench: Bench, rows: dict[tuple[str, str], int]) -> str:
    """Why the kept pair cannot be reused as `wanted` would make it ('' when it can). `rows` maps
    (which database, "source" or "delivery"; table) to the rows the fill put there: the shape checked."""
    if not state:
        return "no mark"
    if state.get("fill") != wanted["fill"]:
        return "another fill or size"
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
