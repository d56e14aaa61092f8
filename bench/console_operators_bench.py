"""The console under 20 operators at once, against gunicorn as `make run` serves it, with a large outbox.

    .venv/bin/python bench/console_operators_bench.py [--rows 10000000] [--operators 20] [--rounds 10]
        [--pairs 3] [--pair-rounds 1] [--json var/bench/console_operators.json]

Creates its own databases (`<BENCH_DB_PREFIX>_console_ops_source` and `_delivery`), fills the outbox with
`--rows` handoffs spread over a year (`bench/console_operators_fill.py`: most delivered, some cancelled,
superseded or needing attention, recent ones pending or uncertain; four workspaces, three destinations; their
events and recent attempts), in SQL with the table's indexes rebuilt after, and signs in `--operators`
operators of workspace 7. Then it starts gunicorn with `make run`'s options (2 workers, 4 threads each) and
measures each page in the same run:

- reference: one operator alone, each page `--rounds` × 2 times;
- concurrent: every operator in a thread of its own with its own session and keep-alive connection, each
  going round the pages (home, list, filtered lists, searches by request number and by action key, a handoff
  page, health, incidents, destinations) `--pair-rounds` times, the order shifted per operator so that they
  do not walk in step, each opening the next page as soon as the last arrived; in `--pairs` pairs
  (bench/pairs.py: back to back, the order alternating, a pair beside other work left out) with this
  machine's ceiling for that: the same operators asking `bench/console_ceiling.py`'s page in the pages'
  places, the least a console page must do (session and user read, one indexed query, a small template) on
  the same gunicorn. Twenty operators who never pause queue on 2 cores whatever a page costs: the product's
  worst page median over the ceiling's (median of the pairs) says how much of the wait is the product's
  pages. The concurrent figures pool every pair's product rounds;
- with `--also-think-ms N`: `--rounds` rounds again, each operator reading a page for 0.5 to 1.5 × N ms
  first.

Times are the client's (request sent to last byte read, over a local socket): what an operator waits for,
server queueing included. Prints median and p95 per page for both, and the figures as JSON for
`bench/report.py`. The aim (issue 26): median < 50 ms and p95 < 150 ms per page with 20 operators at
10,000,000 handoffs.

With `--keep` the filled databases are kept as `<BENCH_DB_PREFIX>_console_ops_kept_<rows>_<operators>_source`
and `_delivery`, marked with what made them (`bench/kept.py`), and never measured on: the pages write (each
operator's session, the search limit's slots, the last sign-in), so every run measures on a copy of them
(`CREATE DATABASE … TEMPLATE`), made while their mark, their rows and their age hold (`KEPT_HOURS`: the rows'
times are the fill's `now()`), else the run fills afresh and keeps that.
"""

import argparse
import os
import random
import statistics
import sys
import threading
import time
from pathlib import Path
from urllib.parse import quote

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench import console_operators_fill, kept  # noqa: E402
from bench.console_operators_fill import fill  # noqa: E402
from bench.harness import PYTHON, ROOT, Bench, write_json  # noqa: E402
from bench.pairs import (  # noqa: E402
    MIN_PAIRS,
    figure_json,
    measure_pairs,
    print_pair,
    watched,
    watched_line,
)

AIM_MEDIAN_MS, AIM_P95_MS = 50.0, 150.0
# A kept fill's rows are as old as the fill: after this long the pages' time filters (the list's age, a day's
# retry backoff, the last two days' pending and attempts) would read another mix than a fresh fill's.
KEPT_HOURS = 12
# What the kept databases rest on besides the fill's statements and the migrations: bump when the rows seeded
# beside them (workspaces, operators) change.
FILL_VERSION = "1"


def kept_fill_mark(rows: int, operators: int) -> dict:
    statements = [
        console_operators_fill.HANDOFFS_SQL,
        console_operators_fill.EVENTS_SQL,
        console_operators_fill.ATTEMPTS_SQL,
    ]
    return kept.kept_mark("\n".join([*statements, str(rows), str(operators), FILL_VERSION]))


def kept_shape(rows: int, operators: int, state: dict | None) -> dict[tuple[str, str], int]:
    """The rows a kept fill holds: the handoffs, their events and attempts as the fill counted them (their
    number depends on its `now()`), the operators, and no session."""
    counted = (state or {}).get("counted", {})
    return {
        ("source", "outbox_handoff"): rows,
        ("source", "outbox_handoffevent"): counted.get("outbox_handoffevent", -1),
        ("source", "outbox_attempt"): counted.get("outbox_attempt", -1),
        ("source", "auth_user"): operators,
        ("source", "django_session"): 0,
    }


# bench/console_ceiling.py's page (a path other than its would answer 404, and the run stops at once).
CEILING_PATH = "/bench/ceiling/"


def percentile(samples: list[float], share: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(round(share * (len(ordered) - 1))))]


def figures(samples: dict[str, list[float]]) -> dict[str, dict]:
    return {
        page: {
            "median_ms": round(statistics.median(times), 1),
            "p95_ms": round(percentile(times, 0.95), 1),
            "requests": len(times),
        }
        for page, times in samples.items()
    }


def start_web(bench: Bench) -> str:
    """gunicorn with the options of `scripts/run_local.sh` (make run), static files collected as it does,
    serving `config.wsgi` through `bench/console_ceiling.py` (the product's URLconf, unchanged, and after it
    the ceiling's page), on a port the kernel chose and the bench holds."""
    import subprocess

    subprocess.run(
        [PYTHON, "manage.py", "collectstatic", "--noinput", "-v0"],
        cwd=ROOT,
        env=bench.env,
        check=True,
    )
    port = bench.port()
    bench.spawn(
        [
            str(Path(PYTHON).with_name("gunicorn")),
            "bench.console_ceiling:application",
            "--bind",
            "fd://{fd}",
            "--workers",
            "2",
            "--threads",
            "4",
            "--timeout",
            "60",
        ],
        "console-operators-web.log",
        listen=port,
    )
    base = f"http://127.0.0.1:{port}"
    for _ in range(150):
        try:
            if httpx.get(f"{base}/healthz", timeout=1).status_code == 200:
                return base
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    raise RuntimeError("the web app did not start; see var/bench/console-operators-web.log")


def pages_for(
    handoff_id: int, page_2: str, request_number: int, action_key: str
) -> list[tuple[str, str]]:
    """What an operator on call opens: home, the list and its usual filters, a search by request number and
    by action key, a handoff, health, incidents, destinations."""
    return [
        ("home", "/"),
        ("list, no filter", "/handoffs/"),
        ("list, page 2", f"/handoffs/?after={page_2}"),
        ("list, needs attention", "/handoffs/?state=needs_attention"),
        ("list, retrying", "/handoffs/?state=retrying"),
        ("list, owner=me, older than 1 day", "/handoffs/?owner=me&age=1d"),
        ("list, request number", f"/handoffs/?q={request_number}"),
        ("search by action key", f"/handoffs/?q={quote(action_key)}"),
        ("handoff page", f"/handoffs/{handoff_id}/"),
        ("health", "/health/"),
        ("incidents", "/incidents/"),
        ("destinations", "/destinations/"),
    ]


# A page that takes longer is counted at this time (and the run goes on): it misses the aim either way.
REQUEST_TIMEOUT_SECONDS = 60.0


def timed_get(client: httpx.Client, url: str) -> float:
    """Milliseconds from the request to the last byte of a 200 answer (REQUEST_TIMEOUT_SECONDS if none)."""
    began = time.perf_counter()
    try:
        response = client.get(url)
    except httpx.HTTPError:  # a timeout, or a worker gunicorn cut at its own timeout
        return REQUEST_TIMEOUT_SECONDS * 1000
    if response.status_code != 200:
        raise RuntimeError(f"{url}: HTTP {response.status_code}")
    return (time.perf_counter() - began) * 1000


def operator_rounds(
    base: str,
    cookies: dict,
    pages: list[tuple[str, str]],
    rounds: int,
    shift: int,
    out: dict[str, list[float]],
    lock: threading.Lock,
    start: threading.Barrier | None = None,
    think: float = 0.0,
    warm: bool = True,
) -> None:
    """One operator's rounds; with `think` seconds, it reads each page for 0.5 to 1.5 × that before the next.
    With `warm`, each page once first, unmeasured (the server's first answers, this operator's connection)."""
    order = pages[shift % len(pages) :] + pages[: shift % len(pages)]
    rng = random.Random(shift)
    mine: dict[str, list[float]] = {}
    with httpx.Client(base_url=base, cookies=cookies, timeout=REQUEST_TIMEOUT_SECONDS) as client:
        for _name, url in order if warm else ():
            timed_get(client, url)
        if start is not None:
            start.wait()
        for _ in range(rounds):
            for name, url in order:
                mine.setdefault(name, []).append(timed_get(client, url))
                if think:
                    time.sleep(think * (0.5 + rng.random()))
    with lock:
        for name, times in mine.items():
            out.setdefault(name, []).extend(times)


def measure(
    base: str,
    sessions: list[dict],
    pages,
    rounds: int,
    think: float = 0.0,
    clock: dict | None = None,
    warm: bool = True,
) -> dict[str, list[float]]:
    """Every session's rounds at once; `clock` gets the seconds from the moment all were warm to the last
    answer (`seconds`)."""
    samples: dict[str, list[float]] = {}
    lock = threading.Lock()
    began: list[float] = []
    start = threading.Barrier(len(sessions), action=lambda: began.append(time.perf_counter()))
    threads = [
        threading.Thread(
            target=operator_rounds,
            args=(base, cookies, pages, rounds, n, samples, lock, start, think, warm),
        )
        for n, cookies in enumerate(sessions)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if clock is not None:
        clock["seconds"] = time.perf_counter() - began[0]
    return samples


def ceiling_pairs(
    base: str, sessions: list[dict], pages, rounds: int, pairs: int
) -> tuple[dict, dict[str, list[float]]]:
    """The operators going round the console's pages (the product) and the same operators asking the
    ceiling's page in the pages' places (`bench/console_ceiling.py`: the least a console page must do, on the
    same gunicorn), `rounds` each, back to back in `pairs` pairs (`bench/pairs.py`: alternating order, loaded
    pairs left out). Each side's rate is 1000 / its worst median of the pages' places (each place's own
    median, as the product's pages: the same statistic on both sides), so a pair's ratio is the ceiling's
    worst median over the product's. Only the first pair warms (the server is warm after it). Returns the
    paired figure as JSON and the product's samples of every pair, pooled."""
    ceiling = [(f"ceiling {n + 1}", CEILING_PATH) for n in range(len(pages))]
    runs: dict[tuple[int, str], dict] = {}
    pooled: dict[str, list[float]] = {}

    def run(index: int, side: str, asked) -> float:
        clock: dict = {}
        samples = measure(base, sessions, asked, rounds, clock=clock, warm=index == 0)
        pages_figures = figures(samples)
        worst = max(figure["median_ms"] for figure in pages_figures.values())
        served = sum(len(times) for times in samples.values())
        runs[(index, side)] = {
            "worst_median_ms": worst,
            "worst_p95_ms": max(figure["p95_ms"] for figure in pages_figures.values()),
            "pages_per_second": round(served / clock["seconds"], 1),
        }
        if side == "product":
            for name, times in samples.items():
                pooled.setdefault(name, []).extend(times)
        return 1000 / worst

    figure = measure_pairs(
        "console_operators_ceiling",
        lambda index: run(index, "ceiling", ceiling),
        lambda index: run(index, "product", pages),
        pairs=pairs,
        on_pair=print_pair,
    )
    return figure_json(figure, runs, ("ceiling", "product")), pooled


def print_report(report: dict, pages: list[tuple[str, str]], args) -> None:
    """The figures as a table: each page alone, with every operator at once, and (if measured) reading."""
    print(
        f"\n{'page':34} {'1 op median':>11} {'p95':>7} {args.operators:>5} ops median {'p95':>7}  aim"
    )
    for name, _url in pages:
        one, many = report["alone"][name], report["concurrent"][name]
        met = many["median_ms"] < AIM_MEDIAN_MS and many["p95_ms"] < AIM_P95_MS
        print(
            f"{name:34} {one['median_ms']:11.1f} {one['p95_ms']:7.1f} {many['median_ms']:16.1f} "
            f"{many['p95_ms']:7.1f}  {'met' if met else 'missed'}"
        )
    if "concurrent_thinking" in report:
        print(
            f"\n{args.operators} operators each reading a page ~{args.also_think_ms} ms before the next:"
        )
        for name, figure in report["concurrent_thinking"]["pages"].items():
            print(f"{name:34} median {figure['median_ms']:8.1f}  p95 {figure['p95_ms']:8.1f}")
    print(
        f"\n{args.rows:,} handoffs, {args.operators} operators × {args.pair_rounds} rounds of "
        f"{len(pages)} pages in each of {report['pairs']} pairs, gunicorn 2 workers × 4 threads, "
        f"PostgreSQL {report['postgres']}; "
        f"load average {report['load_average']} on {report['cores']} cores"
    )


def fill_all(bench: Bench, rows: int, operators: int) -> float:
    """The workspaces, the operators of workspace 7 and the outbox, into the databases Django is set up on."""
    from django.contrib.auth import get_user_model

    from approvals.models import Membership, Role, Workspace

    User = get_user_model()
    w7 = Workspace.objects.create(pk=7, name="Client onboarding")
    Workspace.objects.create(pk=8, name="Supplier onboarding")
    Workspace.objects.create(pk=9, name="Partner onboarding")
    Workspace.objects.create(pk=10, name="Staff onboarding")
    people = [User.objects.create_user(f"operator{n}") for n in range(operators)]
    Membership.objects.bulk_create(
        Membership(user=user, workspace=w7, role=Role.OPERATOR) for user in people
    )
    seconds = fill(bench, rows, people[0].pk)
    print(f"filled {rows:,} handoffs and their events in {seconds:.0f} s", flush=True)
    return seconds


def keep_filled(bench: Bench, kept_pair: Bench, wanted: dict, seconds: float) -> None:
    """The databases just filled, before any request, copied as the kept pair, marked with the counts of
    events and attempts the fill made (they depend on its `now()`)."""
    from django.db import connections

    from outbox.models import Attempt, HandoffEvent

    counted = {
        "outbox_handoffevent": HandoffEvent.objects.count(),
        "outbox_attempt": Attempt.objects.count(),
    }
    connections.close_all()
    kept.keep_copy(bench, kept_pair, {**wanted, "counted": counted}, seconds)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=10_000_000)
    parser.add_argument("--operators", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument(
        "--pairs",
        type=int,
        default=MIN_PAIRS,
        help="pairs of the operators on the console's pages and on the ceiling's page",
    )
    parser.add_argument(
        "--pair-rounds",
        type=int,
        default=1,
        help="rounds of each side of a pair; the concurrent figures pool the pairs' product rounds",
    )
    parser.add_argument("--json", type=Path)
    parser.add_argument(
        "--keep",
        action="store_true",
        help="keep the filled databases for later runs, and measure on a copy of them while they hold",
    )
    parser.add_argument(
        "--fill-only",
        action="store_true",
        help="with --keep: fill (or check) them, measure nothing",
    )
    parser.add_argument(
        "--also-think-ms",
        type=int,
        default=0,
        help="measure the operators once more, each reading a page for about this long before the next",
    )
    args = parser.parse_args()
    if args.fill_only and not args.keep:
        parser.error("--fill-only goes with --keep")

    bench = Bench(
        prefix="console_ops",
        DJANGO_ALLOWED_HOSTS="127.0.0.1,localhost",
        LOGIN_FAILURE_LIMIT="1000",
        # The pages' cost is measured, not the per-person limit on searches (10 in 10 s by default), which
        # 20 operators' rounds with no time to think went over: a 429 ended a round's thread. 200 in 10 s is
        # ten times what one operator's rounds ask; no more, since every limited call writes its limit's
        # slots if missing (`slot_take_for`, one INSERT of `limit` rows): at 100,000 each search cost 2.3 s.
        CALL_LIMIT_SEARCHES="200",
    )
    kept_pair = Bench(prefix=f"console_ops_kept_{args.rows}_{args.operators}")
    wanted = kept_fill_mark(args.rows, args.operators)
    state = kept.kept_state(kept_pair) if args.keep else None
    shape = kept_shape(args.rows, args.operators, state)
    why, turn = kept.copy_or_setup(kept_pair, bench, wanted, shape, KEPT_HOURS, args.keep)
    os.environ.update(bench.env)
    import django

    django.setup()
    from django.conf import settings
    from django.contrib.auth import get_user_model
    from django.db import connection
    from django.test import Client

    from outbox.models import Handoff

    User = get_user_model()
    if why:
        fill_seconds = fill_all(bench, args.rows, args.operators)
        if args.keep:
            keep_filled(bench, kept_pair, wanted, fill_seconds)
    else:
        fill_seconds = state.get("fill_seconds", 0)
    turn.close()
    if args.fill_only:
        return
    operators = [User.objects.get(username=f"operator{n}") for n in range(args.operators)]

    sessions = []
    for user in operators:
        client = Client()
        client.force_login(user)  # a database session, as a browser's sign-in leaves it
        sessions.append(
            {settings.SESSION_COOKIE_NAME: client.cookies[settings.SESSION_COOKIE_NAME].value}
        )
    target = (
        Handoff.objects.filter(workspace_id=7, state="needs_attention")
        .order_by("-created_at")
        .values_list("id", flat=True)
        .first()
    )
    at, pk = (
        Handoff.objects.filter(workspace_id=7)
        .order_by("-created_at", "-id")
        .values_list("created_at", "id")[49]
    )
    # A key of workspace 7 from the middle of the year, as an operator pastes it from an alert or a ticket.
    middle_key = (
        Handoff.objects.filter(workspace_id=7, source_id__gte=args.rows // 2)
        .order_by("source_id")
        .values_list("action_key", flat=True)
        .first()
    )
    pages = pages_for(target, f"{quote(at.isoformat())}_{pk}", args.rows // 2 + 1, middle_key)

    base = start_web(bench)
    try:
        with watched() as machine_alone:
            alone = measure(base, sessions[:1], pages, args.rounds * 2)
        with watched() as machine_together:
            ceiling, together = ceiling_pairs(base, sessions, pages, args.pair_rounds, args.pairs)
        thinking = (
            measure(base, sessions, pages, args.rounds, args.also_think_ms / 1000)
            if args.also_think_ms
            else None
        )
    finally:
        bench.stop()
    report = {
        "rows": args.rows,
        "operators": args.operators,
        "rounds": args.rounds,
        "pairs": len(ceiling["pairs"]),
        "pair_rounds": args.pair_rounds,
        "fill_seconds": round(fill_seconds),
        **({} if why else {"kept": {"built_at": state.get("built_at"), "name": kept_pair.source}}),
        "aim": {"median_ms": AIM_MEDIAN_MS, "p95_ms": AIM_P95_MS},
        "alone": figures(alone),
        "concurrent": figures(together),
        "ceiling": ceiling,
        **(
            {"concurrent_thinking": {"think_ms": args.also_think_ms, "pages": figures(thinking)}}
            if thinking
            else {}
        ),
        "postgres": connection.cursor().connection.info.server_version,
        "load_average": round(os.getloadavg()[0], 2),
        "cores": os.cpu_count(),
        "machine": {"alone": machine_alone, "concurrent": machine_together},
    }
    print(f"one operator: {watched_line(machine_alone)}")
    print(f"{args.operators} operators: {watched_line(machine_together)}")
    print_report(report, pages, args)
    print(f"\nthe product's worst median against the ceiling's page: {ceiling['describe']}")
    if args.json:
        write_json(args.json, report)


if __name__ == "__main__":
    main()
