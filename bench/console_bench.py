"""Server time of the console's list and detail pages with 100,000 handoffs in PostgreSQL.

    .venv/bin/python bench/console_bench.py [--rows 100000] [--repeat 30]

Creates its own databases (`<BENCH_DB_PREFIX>_console_source` and `_delivery`), fills the outbox with
`--rows` handoffs spread over 30 days and several states (one event each; the measured handoff has a
full timeline) in SQL with the indexes rebuilt after (`harness.bulk_fill`), vacuums and analyzes it, then
requests each page through Django's full middleware stack in-process (the test client: no network, no
browser) and prints the median and 95th percentile per page in milliseconds.

With `--keep` the filled databases are kept as `<BENCH_DB_PREFIX>_console_kept_<rows>_source` and `_delivery`,
marked with what made them (`bench/kept.py`), and never measured on: the pages write (each operator's session,
the search limit's slots, the last sign-in), so every run measures on a copy of them (`CREATE DATABASE …
TEMPLATE`), made while their mark, their rows and their age hold (`KEPT_HOURS`: the rows' times are the fill's
`now()`), else the run fills afresh and keeps that.
"""

import argparse
import gc
import os
import statistics
import sys
import time
from pathlib import Path
from urllib.parse import quote

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench import kept  # noqa: E402
from bench.harness import Bench, bulk_fill, dsn  # noqa: E402
from bench.pairs import watched, watched_line  # noqa: E402

FILL_SQL = """
INSERT INTO outbox_handoff (action_key, workflow, workspace_id, source_ref, source_id, rule_version, payload,
    payload_hash, destination, state, attempts, attempts_in_run, next_attempt_at, lease_owner, fencing_epoch,
    destination_id, failure_class, reason_code, last_error, created_at, updated_at, delivered_at, owner_id,
    instance_key, step, step_index, kind, plan, compensation_state, compensation_operation, work_status, receipt)
SELECT 'onboarding:' || ws || ':' || n || ':1', 'onboarding', ws, 'request ' || n || ' revision 1', n,
    'onboarding-v1', ('{"client_name":"Client ' || n || '","plan":"standard"}')::jsonb, md5(n::text) || md5(n::text),
    'receiver', st,
    CASE WHEN st = 'pending' AND n %% 2 = 0 THEN 3 ELSE 1 END, 1,
    CASE WHEN st = 'pending' AND n %% 2 = 0 THEN now() + interval '1 day' ELSE now() END,
    '', 1,
    CASE WHEN st = 'delivered' THEN md5(n::text) ELSE '' END,
    CASE st WHEN 'needs_attention' THEN 'transient' WHEN 'uncertain' THEN 'uncertain'
            WHEN 'pending' THEN 'transient' ELSE '' END,
    CASE st WHEN 'needs_attention' THEN 'retries_exhausted' WHEN 'uncertain' THEN 'response_lost'
            WHEN 'pending' THEN 'http_503' ELSE '' END,
    '', created, created, CASE WHEN st = 'delivered' THEN created ELSE NULL END,
    CASE WHEN n %% 3 = 0 THEN %(owner)s ELSE NULL END,
    '', '', 0, 'action', '[]'::jsonb, '', '', '', '{}'::jsonb
FROM (
    SELECT n, CASE WHEN n %% 10 = 0 THEN 8 ELSE 7 END AS ws,
        CASE WHEN n %% 100 < 90 THEN 'delivered' WHEN n %% 100 < 95 THEN 'needs_attention'
             WHEN n %% 100 < 98 THEN 'pending' ELSE 'uncertain' END AS st,
        now() - (n * interval '25 seconds') AS created
    FROM generate_series(1, %(rows)s) AS n
) AS g
"""

EVENTS_SQL = """
INSERT INTO outbox_handoffevent (handoff_id, from_state, to_state, actor_label, action, reason, at)
SELECT id, '', 'pending', 'alice', '', 'approved; handoff recorded', created_at FROM outbox_handoff
"""


def measure(client, url: str, repeat: int, **headers) -> tuple[float, float, int]:
    client.get(url, **headers)  # warm caches and connections
    samples = []
    status = 0
    for _ in range(repeat):
        start = time.perf_counter()
        response = client.get(url, **headers)
        samples.append((time.perf_counter() - start) * 1000)
        status = response.status_code
    samples.sort()
    p95 = samples[min(len(samples) - 1, int(round(0.95 * (len(samples) - 1))))]
    return statistics.median(samples), p95, status


# A kept fill's rows are as old as the fill: after this long the pages' time filters (the list's age, a day's
# retry backoff) would read another mix than a fresh fill's, so it is filled afresh.
KEPT_HOURS = 12
# What the kept databases rest on besides the two statements and the migrations: bump when the rows seeded
# beside them (people, requests, the measured handoff's attempts) change.
FILL_VERSION = "1"
REQUESTS = 200
TARGET_ATTEMPTS = 6


def kept_fill_mark(rows: int) -> dict:
    return kept.kept_mark("\n".join([FILL_SQL, EVENTS_SQL, str(rows), FILL_VERSION]))


def kept_shape(rows: int) -> dict[tuple[str, str], int]:
    """The rows a kept fill holds: the handoffs, one event each and the measured one's, its attempts, the
    approvers' requests, the three people, and no session."""
    return {
        ("source", "outbox_handoff"): rows,
        ("source", "outbox_handoffevent"): rows + TARGET_ATTEMPTS,
        ("source", "outbox_attempt"): TARGET_ATTEMPTS,
        ("source", "approvals_request"): REQUESTS,
        ("source", "auth_user"): 3,
        ("source", "django_session"): 0,
    }


def fill(rows: int) -> float:
    """The people, the approvers' requests, the outbox and the measured handoff's history, into the databases
    Django is set up on. Returns seconds."""
    from django.contrib.auth import get_user_model
    from django.db import connection

    from approvals.models import Membership, Request, RequestState, Role, Workspace
    from outbox.models import Attempt, Handoff, HandoffEvent

    started = time.perf_counter()
    User = get_user_model()
    w7 = Workspace.objects.create(pk=7, name="Client onboarding")
    Workspace.objects.create(pk=8, name="Supplier onboarding")
    olga = User.objects.create_user("olga")
    alice = User.objects.create_user("alice")
    bob = User.objects.create_user("bob")
    Membership.objects.create(user=olga, workspace=w7, role=Role.OPERATOR)
    Membership.objects.create(user=alice, workspace=w7, role=Role.APPROVER)
    for number in range(1, REQUESTS + 1):
        Request.objects.create(
            workspace=w7,
            number=100_000 + number,
            payload={"client_name": "c", "plan": "starter"},
            payload_hash="0" * 64,
            state=RequestState.AWAITING_APPROVAL,
            requested_by=bob,
        )
    source = connection.settings_dict["NAME"]
    # `harness.bulk_fill`: each table's indexes dropped for its INSERT … SELECT and rebuilt after, one a core at
    # once (2026-12-06, 2 interleaved pairs at loads 6-8: 59 s and 36 s against 90 s and 68 s with the indexes
    # in place), then vacuumed and analyzed, as a long-lived outbox is: autovacuum otherwise took each freshly
    # filled table during the pages' measurement (a core of two; the events' table 25 s into it), and plans
    # depend on the visibility map it sets (with it, the header's count read the outbox sequentially).
    bulk_fill(dsn(source), "outbox_handoff", FILL_SQL % {"rows": rows, "owner": olga.pk})
    bulk_fill(dsn(source), "outbox_handoffevent", EVENTS_SQL)
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE")
    print(
        f"filled {Handoff.objects.count()} handoffs and {HandoffEvent.objects.count()} events "
        f"in {time.perf_counter() - started:.1f}s"
    )
    target = measured_handoff()
    for number in range(1, TARGET_ATTEMPTS + 1):
        Attempt.objects.create(
            handoff=target,
            number=number,
            fencing_epoch=number,
            worker="bench:1",
            started_at=target.created_at,
            finished_at=target.created_at,
            outcome="failed",
            failure_class="transient",
            reason_code="http_503",
            status_code=503,
            latency_ms=40,
        )
        HandoffEvent.objects.create(
            handoff=target,
            from_state="in_flight",
            to_state="pending",
            actor_label="bench:1",
            reason="transient failure (http_503)",
        )
    return time.perf_counter() - started


def measured_handoff():
    from outbox.models import Handoff

    return (
        Handoff.objects.filter(workspace_id=7, state="needs_attention")
        .order_by("-created_at", "-id")
        .first()
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=30)
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
    args = parser.parse_args()
    if args.fill_only and not args.keep:
        parser.error("--fill-only goes with --keep")

    # Every page is requested `--repeat` times (and once to warm) by one user: the search's per-person limit
    # (CALL_LIMITS) would answer most of them 429, which is not the page's time. The limit is as many slots as the
    # searches made, no more: each slot is a row written on the limit's first use (slot_take_for), and a limit of
    # a million made the first search write a million rows.
    bench = Bench(
        prefix="console",
        DJANGO_ALLOWED_HOSTS="testserver",
        CALL_LIMIT_SEARCHES=str(args.repeat + 11),
    )
    kept_pair = Bench(prefix=f"console_kept_{args.rows}")
    wanted = kept_fill_mark(args.rows)
    why, turn = kept.copy_or_setup(
        kept_pair, bench, wanted, kept_shape(args.rows), KEPT_HOURS, args.keep
    )
    os.environ.update(bench.env)
    import django

    django.setup()
    from django.conf import settings
    from django.contrib.auth import get_user_model
    from django.db import connection, connections
    from django.test import Client

    from outbox.models import Handoff

    if why:
        fill_seconds = fill(args.rows)
        if args.keep:
            connections.close_all()
            kept.keep_copy(bench, kept_pair, wanted, fill_seconds)
    turn.close()
    if args.fill_only:
        return

    # No collectstatic for a benchmark: plain static URLs.
    settings.STORAGES = {
        **settings.STORAGES,
        "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"},
    }
    User = get_user_model()
    olga = User.objects.get(username="olga")
    alice = User.objects.get(username="alice")
    target = measured_handoff()

    operator, approver = Client(), Client()
    operator.force_login(olga)
    approver.force_login(alice)
    newest_first = (
        Handoff.objects.filter(workspace_id=7)
        .order_by("-created_at", "-id")
        .values_list("created_at", "id")
    )
    page_2 = newest_first[49]
    deep = newest_first[int(args.rows * 0.8)]
    pages = [
        ("list, no filter", operator, "/handoffs/", {}),
        (
            "list, page 2",
            operator,
            f"/handoffs/?after={quote(page_2[0].isoformat())}_{page_2[1]}",
            {},
        ),
        (
            "list, deep page (80% down)",
            operator,
            f"/handoffs/?after={quote(deep[0].isoformat())}_{deep[1]}",
            {},
        ),
        ("list, needs attention", operator, "/handoffs/?state=needs_attention", {}),
        ("list, retrying", operator, "/handoffs/?state=retrying", {}),
        ("list, owner=me, older than 1 day", operator, "/handoffs/?owner=me&age=1d", {}),
        ("list, request number", operator, "/handoffs/?q=54321", {}),
        (
            "list, htmx results only",
            operator,
            "/handoffs/?state=attention",
            {"HTTP_HX_REQUEST": "true"},
        ),
        ("detail", operator, f"/handoffs/{target.pk}/", {}),
        ("detail, htmx panel", operator, f"/handoffs/{target.pk}/", {"HTTP_HX_REQUEST": "true"}),
        ("approvals queue", approver, "/approvals/", {}),
    ]
    for _name, client, url, headers in pages:
        client.get(url, **headers)  # each page's templates compiled and its code imported
    # As config/wsgi.py does in every web process once start-up is done.
    gc.freeze()
    print(f"\n{'page':40} {'median ms':>10} {'p95 ms':>10}  status")
    with watched() as machine:
        for name, client, url, headers in pages:
            median, p95, status = measure(client, url, args.repeat, **headers)
            print(f"{name:40} {median:10.1f} {p95:10.1f}  {status}")
    print(f"\n{watched_line(machine)}")
    print(
        f"\n{args.rows} handoffs, {args.repeat} requests per page, PostgreSQL "
        f"{connection.cursor().connection.info.server_version}, in-process (no network); "
        f"load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores"
    )


if __name__ == "__main__":
    main()
