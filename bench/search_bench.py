"""The console's search by client name beside its plain list page, at a large outbox (issue 39, "Find by what
people know": search within 2x of the list).

    .venv/bin/python bench/search_bench.py [--rows 1000000] [--repeat 30] [--fill-only]

Creates its own databases (`<BENCH_DB_PREFIX>_search_source` and `_delivery`) and fills the outbox with
`--rows` handoffs (each with the search text recording writes: key, request, client name, e-mail) as fast as
PostgreSQL takes them (`harness.bulk_fill_split`): its secondary indexes dropped, one INSERT … SELECT over
generate_series per core side by side, then every index (the GIN one of the words' starts first, the
longest) rebuilt by sorting, one a core at once, and the table ANALYZEd. Then it requests the list page and
the list page searching a client's name through Django's whole middleware stack in-process, and prints the
median and 95th percentile of each, their ratios, each page's CPU a request (this process's and its
PostgreSQL backend's, the pages taking turns: a figure the machine's load does not move), and the fill's and
the indexes' seconds.

10,000,000 rows is the issue's aim, and `make bench` runs it with `--keep`: the filled databases
(`<BENCH_DB_PREFIX>_search_kept_<rows>_source` and `_delivery`) stay after the run, marked (the source's
comment) with what made them: the fill statement and its size, the installed packages and each migration
file applied. A later run whose mark still holds migrates them forward (a migration added since runs on the
10,000,000 rows, as it would in production) and only measures; a changed fill, package or applied migration,
an invalid index, a missing mark or another count of handoffs than the fill's fills them afresh, saying
why (`bench/kept.py`, as the other kept sections). The first run on a machine pays the fill and the
builds (about 12 minutes idle), later ones about 10 seconds (docs/benchmarks.md, "Search by client
name")."""

import argparse
import gc
import json
import os
import sys
import time
from pathlib import Path

import psycopg
import psycopg.sql

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench import kept  # noqa: E402
from bench.console_bench import measure  # noqa: E402
from bench.harness import Bench, bulk_fill_split, dsn  # noqa: E402
from bench.pairs import watched, watched_line  # noqa: E402

# The index the search reads (outbox migration 0032): the longest build.
WORDS_INDEX = "handoff_search_words_idx"
# Issue 39's aim: the search within twice the plain list's time.
AIM_RATIO = 2.0
# The bounds are cast: psycopg sends an integer under 32,768 as a smallint, and generate_series has no single
# smallint form (PostgreSQL refused every fill of fewer rows as ambiguous).
FILL_SQL = """
INSERT INTO outbox_handoff (id, action_key, workflow, workspace_id, source_ref, source_id, rule_version, payload,
    payload_hash, destination, state, attempts, attempts_in_run, next_attempt_at, lease_owner, fencing_epoch,
    destination_id, failure_class, reason_code, last_error, created_at, updated_at, delivered_at,
    instance_key, step, step_index, kind, plan, compensation_state, compensation_operation, work_status, receipt,
    search_text)
SELECT n, 'onboarding:7:' || n || ':1', 'onboarding', 7, 'request ' || n || ' revision 1', n, 'onboarding-v1',
    jsonb_build_object('client_name', 'Client ' || n, 'contact_email', 'c' || n || '@example.com'),
    md5(n::text) || md5(n::text), 'receiver', 'delivered', 1, 1, created, '', 1, md5(n::text), '', '', '',
    created, created, created, '', '', 0, 'action', '[]'::jsonb, '', '', '', '{}'::jsonb,
    'onboarding:7:' || n || ':1 | request ' || n || ' revision 1 | client ' || n || ' | c' || n || '@example.com'
FROM (SELECT n, now() - (n * interval '3 seconds') AS created
      FROM generate_series(%(first)s::integer, %(last)s::integer) AS n) AS g
"""


# What a kept filled database rests on besides its migrations: bump when the seed rows below change.
SEED_VERSION = "1"
# How long a bench run waits for another holding the kept databases (a cold build, about 12 minutes idle).
KEPT_LOCK = "SELECT pg_advisory_lock(hashtext('search_kept'))"


def kept_mark(rows: int) -> dict:
    """What a kept filled database must have been made with to be reused (`bench/kept.py`): the fill and its
    size, the installed packages, and each migration file (a file added since is migrated forward; a changed
    one refills). The fill's digest is of the same text as before kept.py, so marks made then still hold."""
    return kept.kept_mark(f"{FILL_SQL}{rows}{SEED_VERSION}")


def kept_shape(rows: int) -> dict[tuple[str, str], int]:
    """The rows a kept fill holds and a run leaves as they are: `rows` handoffs (a run signs in and searches,
    writing sessions and limit slots beside them)."""
    return {("source", "outbox_handoff"): rows}


def fill(bench: Bench, rows: int) -> dict:
    """Both databases afresh, the operator and her workspace, and `rows` handoffs with every index built."""
    bench.setup()
    from django.contrib.auth import get_user_model

    from approvals.models import Membership, Role, Workspace

    workspace = Workspace.objects.create(pk=7, name="Client onboarding")
    olga = get_user_model().objects.create_user("olga")
    Membership.objects.create(user=olga, workspace=workspace, role=Role.OPERATOR)
    filled, indexed, builds = bulk_fill_split(dsn(bench.source), "outbox_handoff", FILL_SQL, rows)
    print(
        f"filled {rows} handoffs in {filled:.1f}s ({rows / filled:,.0f} rows/s); "
        f"their {len(builds)} indexes built and ANALYZEd in {indexed:.1f}s ({WORDS_INDEX} "
        f"{builds.get(WORDS_INDEX, 0):.1f}s; the others {sum(builds.values()) - builds.get(WORDS_INDEX, 0):.1f}s "
        f"together)"
    )
    return {
        "fill_seconds": filled,
        "index_seconds": indexed,
        "words_index_seconds": builds.get(WORDS_INDEX, 0),
        "built_at": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "built_load": f"{os.getloadavg()[0]:.1f}",
    }


def prepare(bench: Bench, rows: int, keep: bool) -> dict:
    """The filled databases: kept ones reused (migrated forward) when their mark holds, else filled afresh (and
    marked, with what the fill took, when kept). Returns the fill's figures and how the databases were had."""
    began = time.monotonic()
    wanted = kept_mark(rows) if keep else {}
    state = kept.kept_state(bench) if keep else None
    why = kept.stale(state, wanted, bench, kept_shape(rows)) if keep else "not kept"
    if not why:
        bench._migrate([bench.source, bench.delivery])
        kept.write_mark(bench, {**state, "migrations": wanted["migrations"]})
        print(f"reused the kept databases filled {state['built_at']}, migrated forward")
        return {**state["built"], "reused": True, "prepare_seconds": time.monotonic() - began}
    if keep:
        print(f"kept databases filled afresh ({why})", flush=True)
    built = fill(bench, rows)
    built["prepare_seconds"] = time.monotonic() - began
    if keep:
        kept.write_mark(bench, {**wanted, "built_at": built["built_at"], "built": built})
    return {**built, "reused": False}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=30)
    parser.add_argument("--json", help="write the figures here (bench/search_report.py reads them)")
    parser.add_argument(
        "--keep",
        action="store_true",
        help="keep the filled databases for the next run, and reuse them when made as this one would",
    )
    parser.add_argument(
        "--fill-only",
        action="store_true",
        help="fill and index (or reuse the kept databases), measure nothing",
    )
    args = parser.parse_args()

    # One person asks every page `--repeat` times: the search's per-person limit (10 in 10 s) is raised just
    # enough to answer none of them 429. Not to a million: a search writes its limit's slots when missing,
    # one statement of `limit` rows every call, which would be the figure instead of the search.
    bench = Bench(
        prefix=f"search_kept_{args.rows}" if args.keep else "search",
        DJANGO_ALLOWED_HOSTS="testserver",
        CALL_LIMIT_SEARCHES=str(4 * args.repeat + 10),
    )
    os.environ.update(bench.env)
    import django

    django.setup()
    from django.conf import settings
    from django.contrib.auth import get_user_model
    from django.db import connection, connections
    from django.test import Client

    settings.STORAGES = {
        **settings.STORAGES,
        "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"},
    }
    # Two runs on one cluster take turns on the kept databases (one would drop what the other measures).
    with psycopg.connect(dsn("postgres"), autocommit=True) as lock:
        lock.execute(KEPT_LOCK)
        prepared = prepare(bench, args.rows, args.keep)
        connections.close_all()
        if not args.fill_only:
            measured = measure_pages(Client(), get_user_model().objects.get(username="olga"), args)
            report(args, prepared, measured, connection)


def measure_pages(operator, olga, args: argparse.Namespace) -> dict:
    operator.force_login(olga)
    # A client's name as support staff type it: the client of a handoff in the middle of the table.
    needle = f"Client {args.rows // 2 + 7}"
    pages = [("list, no filter", "/handoffs/"), (f"search {needle!r}", f"/handoffs/?q={needle}")]
    for _name, url in pages:
        operator.get(url)  # templates compiled, code imported, the pages' blocks read once
    gc.freeze()
    print(f"\n{'page':40} {'median ms':>10} {'p95 ms':>10}  status")
    figures = {}
    with watched() as machine:
        for name, url in pages:
            median, p95, status = measure(operator, url, args.repeat)
            figures[name] = {"median_ms": median, "p95_ms": p95, "status": status}
            print(f"{name:40} {median:10.1f} {p95:10.1f}  {status}")
    cpu = cpu_per_request(operator, pages, args.repeat)
    for name, ms in cpu.items():
        figures[name]["cpu_ms"] = ms
    print(
        "CPU a request (this process and its PostgreSQL backend, the pages interleaved): "
        + ", ".join(f"{name} {ms:.1f} ms" for name, ms in cpu.items())
    )
    return {"pages": figures, "machine": watched_line(machine)}


def cpu_per_request(operator, pages: list[tuple[str, str]], repeat: int) -> dict[str, float]:
    """Each page's CPU a request, this process's and its PostgreSQL backend's (/proc, in clock ticks, so
    averaged over `repeat` requests), the pages taking turns: what a loaded machine does not move, where the
    wall-clock times above wait for the CPU as much as they use it."""
    from django.db import connection

    tick = os.sysconf("SC_CLK_TCK")

    def backend() -> float:
        stat = Path(f"/proc/{connection.connection.info.backend_pid}/stat").read_text()
        fields = stat.rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / tick

    spent = {name: 0.0 for name, _ in pages}
    for _ in range(repeat):
        for name, url in pages:
            began = time.process_time() + backend()
            operator.get(url)
            spent[name] += time.process_time() + backend() - began
    return {name: 1000 * seconds / repeat for name, seconds in spent.items()}


def report(args: argparse.Namespace, prepared: dict, measured: dict, connection) -> None:
    figures = measured["pages"]
    plain, search = (f["median_ms"] for f in figures.values())
    plain_p95, search_p95 = (f["p95_ms"] for f in figures.values())
    plain_cpu, search_cpu = (f["cpu_ms"] for f in figures.values())
    print(
        f"\nsearch / list: median {search / plain:.2f}x, p95 {search_p95 / plain_p95:.2f}x "
        f"(aim: within {AIM_RATIO:g}x)"
    )
    print(measured["machine"])
    print(
        f"{args.rows} handoffs, {args.repeat} requests per page, PostgreSQL "
        f"{connection.cursor().connection.info.server_version}, in-process (no network); "
        f"load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores"
    )
    if args.json:
        Path(args.json).write_text(
            json.dumps(
                {
                    "rows": args.rows,
                    "repeat": args.repeat,
                    "fill_seconds": prepared["fill_seconds"],
                    "index_seconds": prepared["index_seconds"],
                    "words_index_seconds": prepared.get("words_index_seconds"),
                    "built_at": prepared.get("built_at"),
                    "built_load": prepared.get("built_load"),
                    "kept": args.keep,
                    "reused": prepared["reused"],
                    "prepare_seconds": prepared["prepare_seconds"],
                    "pages": figures,
                    "ratio": search / plain,
                    "ratio_p95": search_p95 / plain_p95,
                    "ratio_cpu": search_cpu / plain_cpu,
                    "aim": AIM_RATIO,
                    "met": max(search / plain, search_p95 / plain_p95) <= AIM_RATIO,
                    "machine": measured["machine"],
                    "command": " ".join(["bench/search_bench.py", *sys.argv[1:]]),
                    "measured_at": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
                },
                indent=2,
            )
        )


if __name__ == "__main__":
    main()
