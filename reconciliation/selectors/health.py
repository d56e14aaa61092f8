"""Reads for the health dashboard.

Its cost does not grow with the history: every figure reads a bounded part of the outbox, whatever the
number of settled handoffs (issue 26: 10,000,000 of them).

- Counts stop past `count_cap()` (setting `HEALTH_COUNT_CAP`, 999 as the header's count): each is
  `COUNT(*)` over a subquery with `LIMIT cap + 1`, and the page shows "999+" above the cap. All of them are
  one query.
- Counts of a working state read the partial index of open states; counts of operator actions and duplicate
  answers read their own indexes (an operator's action is `action > ''` with its person named, a range of
  the (action, at) index), each joined to its handoff for its workspace (an event carries none).
- Rates and the hourly series cover a window, read by an indexed time column: failure rates the handoffs
  created in the last `WINDOW` (the keyset index, per workspace), deliveries per hour the settled rows
  changed in the window (the retention index; `delivered_at` is never later than `updated_at`).
- The oldest waiting row is found per workspace at the head of the state index (one row read each).
- Time to acknowledgement reads the failures still needing attention (the backlog, not the history) and the
  acknowledged ones (indexed where set).

Callers pass the workspaces in scope; `None` means every workspace (only /metrics, behind its token, does
that).
"""

import statistics
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.core.cache import cache
from django.db import connections
from django.db.models import Count, Min, QuerySet
from django.db.models.functions import TruncHour

from lib.databases import compiled_once
from outbox.clock import db_time
from outbox.models import Attempt, Handoff, HandoffEvent, HandoffState
from outbox.models.handoffs import completing_case_condition, work_failed_condition
from reconciliation.models import FindingKind
from reconciliation.selectors.figures import (
    ACK_SAMPLE_CAP,
    RETRIES_EXHAUSTED,
    ack_seconds,
    acknowledged_recently,
    duplicate_preventions,
    failed_attempts,
    failure_counts,
    failure_rate_base,
    interventions,
    rate,
)
from reconciliation.selectors.findings import findings_by_kind, last_run, live_findings
from reconciliation.selectors.links import drilldown_url, findings_url, handoff_list_url
from reconciliation.selectors.needing_person import (
    COUNT_CAP,
    NEEDS_PERSON_FILTER,
    needing_person_counts_bounded,
)
from reconciliation.selectors.scope import attempts_scoped, events_scoped, handoffs_scoped

S = HandoffState
# A count on the dashboard stops past this many rows, as the header's count does ("999+"): past it the
# figure says "more than a person works through today" and reading further costs more the larger the backlog.
HEALTH_COUNT_CAP = COUNT_CAP
# Failure rates and the hourly series: what happened in this window, read by an indexed time column.
WINDOW = timedelta(hours=24)


def count_cap() -> int:
    return getattr(settings, "HEALTH_COUNT_CAP", HEALTH_COUNT_CAP)


def capped_counts(querysets: dict[str, QuerySet], *, cap: int | None = None) -> dict[str, int]:
    """Each queryset's row count, stopped past `cap` (cap + 1 means "more than cap"), in one query:
    `SELECT (SELECT COUNT(*) FROM (… LIMIT cap + 1)), …`, so no count reads more than cap + 1 rows."""
    cap = count_cap() if cap is None else cap
    return _counts_of(capped_sql(querysets, cap=cap), list(querysets))


def capped_sql(querysets: dict[str, QuerySet], *, cap: int) -> tuple[str, list]:
    """The statement of `capped_counts` and its parameters."""
    parts, params = [], []
    for queryset in querysets.values():
        limited = queryset.order_by().values("pk")[: cap + 1]
        sql, part_params = limited.query.get_compiler(using=limited.db).as_sql()
        # Django compiled the SQL (values travel as parameters); only the wrapping is added here.
        parts.append(f"(SELECT COUNT(*) FROM ({sql}) AS capped)")  # noqa: S608
        params.extend(part_params)
    return "SELECT " + ", ".join(parts), params


def _counts_of(statement: tuple[str, list], names: list[str]) -> dict[str, int]:
    if not names:
        return {}
    sql, params = statement
    with connections[Handoff.objects.db].cursor() as cursor:
        cursor.execute(sql, params)
        row = cursor.fetchone()
    return dict(zip(names, row, strict=True))


def count_text(value: int, cap: int) -> str:
    """A capped count as the page shows it: "999+" past the cap."""
    return f"{cap:,}+" if value > cap else f"{value:,}"


@dataclass(frozen=True)
class AckTimes:
    count: int
    median_seconds: float | None
    worst_seconds: float | None
    unacknowledged: int
    oldest_unacknowledged: datetime | None


def time_to_acknowledge(workspace_ids: Iterable[int] | None, *, now: datetime) -> AckTimes:
    """Failure (entering needs_attention) to acknowledgement, over failures of the last 30 days."""
    handoffs = handoffs_scoped(workspace_ids)
    # Both reads go through partial indexes (outbox 0016): the acknowledged failures by workspace and time,
    # the unacknowledged ones by workspace.
    pairs = acknowledged_recently(handoffs, now=now).values_list(
        "attention_since", "acknowledged_at"
    )[:ACK_SAMPLE_CAP]
    durations = [ack_seconds(failed, ack) for failed, ack in pairs]
    waiting = handoffs.filter(state=S.NEEDS_ATTENTION, acknowledged_at__isnull=True).aggregate(
        # COUNT(*), not COUNT(id): the unacknowledged index holds no id, and with it the count is read
        # from the index alone (1 ms against 15 ms at 10,000,000 handoffs).
        n=Count("*"),
        oldest=Min("attention_since"),
    )
    return AckTimes(
        count=len(durations),
        median_seconds=statistics.median(durations) if durations else None,
        worst_seconds=max(durations) if durations else None,
        unacknowledged=waiting["n"],
        oldest_unacknowledged=waiting["oldest"],
    )


def failure_rates(
    workspace_ids: Iterable[int] | None, *, now: datetime | None = None
) -> list[dict]:
    """Per workflow and rule version, over the handoffs created in the last `WINDOW`: how many, how many
    ever needed attention, and the rate."""
    since = (now or db_time()) - WINDOW
    rows = (
        failure_rate_base(handoffs_scoped(workspace_ids).filter(created_at__gte=since))
        .order_by()
        .values("workflow", "rule_version")
        .annotate(**failure_counts())
        .order_by("workflow", "rule_version")
    )
    return [{**r, "rate": rate(r["failed"], r["total"])} for r in rows]


def series_start(now: datetime, hours: int = 24) -> datetime:
    return now.replace(minute=0, second=0, microsecond=0) - timedelta(hours=hours - 1)


def delivered_by_hour(workspace_ids: Iterable[int] | None, *, start: datetime) -> dict:
    """Deliveries per hour since `start`, read from the delivered rows changed since then (`updated_at`, never
    earlier than `delivered_at`: the retention index), not from every delivered row."""
    return dict(
        handoffs_scoped(workspace_ids)
        .filter(state=S.DELIVERED, updated_at__gte=start, delivered_at__gte=start)
        .annotate(hour=TruncHour("delivered_at"))
        .order_by()
        .values_list("hour")
        .annotate(n=Count("id"))
    )


def delivered_outcomes(workspace_ids: Iterable[int] | None, *, start: datetime) -> dict[str, int]:
    """Of the steps delivered since `start` (the rows `delivered_by_hour` reads): those whose work the receiver
    reports failed, and the cases they completed (their last step, every step's work done). One query."""
    return (
        handoffs_scoped(workspace_ids)
        .filter(state=S.DELIVERED, updated_at__gte=start, delivered_at__gte=start)
        .aggregate(
            work_failed=Count("id", filter=work_failed_condition()),
            cases_completed=Count("id", filter=completing_case_condition()),
        )
    )


def hourly_series(
    workspace_ids: Iterable[int] | None,
    *,
    now: datetime,
    hours: int = 24,
    delivered: dict | None = None,
) -> list[dict]:
    """Deliveries (`delivered_by_hour`, unless given) and failed attempts (through the (outcome, started_at)
    index) per hour over the last `hours` hours, oldest first (24 GROUP BY rows)."""
    start = series_start(now, hours)
    if delivered is None:
        delivered = delivered_by_hour(workspace_ids, start=start)
    failed = dict(
        failed_attempts(attempts_scoped(workspace_ids))
        .filter(started_at__gte=start)
        .annotate(hour=TruncHour("started_at"))
        .order_by()
        .values_list("hour")
        .annotate(n=Count("id"))
    )
    series = []
    for i in range(hours):
        hour = start + timedelta(hours=i)
        series.append(
            {"hour": hour, "delivered": delivered.get(hour, 0), "failed": failed.get(hour, 0)}
        )
    return series


def _oldest(scope: Iterable[int], state: str, field: str) -> datetime | None:
    """The earliest `field` of the rows in `state`, per workspace through the head of an index, then the
    earliest of those (a MIN over `workspace_id IN (…)` reads every row of the state)."""
    firsts = [
        Handoff.objects.business().filter(workspace_id=ws, state=state).aggregate(m=Min(field))["m"]
        for ws in scope
    ]
    return min((first for first in firsts if first is not None), default=None)


def _figure(value, link: str, *, cap: int | None = None) -> dict:
    """A figure and the list behind it; a count read with a cap also carries its text ("999+")."""
    text = count_text(value, cap) if cap is not None else value
    return {"value": value, "link": link, "text": text, "capped": cap is not None and value > cap}


def _age_seconds(since: datetime | None, now: datetime) -> float | None:
    return (now - since).total_seconds() if since else None


def dashboard_counts(scope: list[int], *, cap: int) -> dict[str, int]:
    """`capped_counts` of `_counted`, its statement compiled once for these workspaces and cap
    (`compiled_once`: it names no time; building and compiling its seven querysets through the ORM took
    2.8 ms of CPU at each computation of the figures)."""
    names, statement = compiled_once(
        ("health-counts", tuple(scope), cap), lambda: _compiled_counts(scope, cap)
    )
    return _counts_of(statement, names)


def _compiled_counts(scope: list[int], cap: int) -> tuple[list[str], tuple[str, list]]:
    querysets = _counted(scope)
    return list(querysets), capped_sql(querysets, cap=cap)


def _counted(scope: Iterable[int]) -> dict[str, QuerySet]:
    """What the dashboard counts, each read no further than the cap (`capped_counts`)."""
    handoffs = handoffs_scoped(scope)
    return {
        S.PENDING: handoffs.filter(state=S.PENDING),
        S.IN_FLIGHT: handoffs.filter(state=S.IN_FLIGHT),
        S.UNCERTAIN: handoffs.filter(state=S.UNCERTAIN),
        S.NEEDS_ATTENTION: handoffs.filter(state=S.NEEDS_ATTENTION),
        # Retries exhausted and still needing attention: through the open-state index, not the history.
        RETRIES_EXHAUSTED: handoffs.filter(state=S.NEEDS_ATTENTION, reason_code=RETRIES_EXHAUSTED),
        "duplicates": duplicate_preventions(attempts_scoped(scope)),
        "interventions": interventions(events_scoped(scope)),
    }


def _handoff_figures(
    scope: list[int],
    counts: dict[str, int],
    *,
    delivered: int,
    outcomes: dict[str, int],
    cap: int,
    now: datetime,
    ws: int | None,
) -> dict:
    """The figures read from the handoffs themselves: states, the oldest waiting, retries exhausted; the
    delivered steps are those of the series' window (exact: the window bounds the read), with the ones among
    them whose work failed and the cases they completed."""
    needing = sum(needing_person_counts_bounded(scope, cap=cap).values())
    oldest_pending = _oldest(scope, S.PENDING, "created_at")
    oldest_in_flight = _oldest(scope, S.IN_FLIGHT, "updated_at")

    def of_state(state: str) -> dict:
        return _figure(counts[state], handoff_list_url(state=state, workspace=ws), cap=cap)

    return {
        "completed": _figure(delivered, handoff_list_url(state=S.DELIVERED, workspace=ws)),
        "work_failed": _figure(
            outcomes["work_failed"], findings_url(kind=FindingKind.WORK_FAILED, workspace=ws)
        ),
        "cases_completed": _figure(
            outcomes["cases_completed"], handoff_list_url(state=S.DELIVERED, workspace=ws)
        ),
        "pending": of_state(S.PENDING),
        "oldest_pending_seconds": _figure(
            _age_seconds(oldest_pending, now), handoff_list_url(state=S.PENDING, workspace=ws)
        ),
        "in_flight": of_state(S.IN_FLIGHT),
        "oldest_in_flight_seconds": _figure(
            _age_seconds(oldest_in_flight, now), handoff_list_url(state=S.IN_FLIGHT, workspace=ws)
        ),
        "uncertain": of_state(S.UNCERTAIN),
        "needs_attention": of_state(S.NEEDS_ATTENTION),
        "needing_person": _figure(
            needing, handoff_list_url(state=NEEDS_PERSON_FILTER, workspace=ws), cap=cap
        ),
        "retry_exhausted": _figure(
            counts[RETRIES_EXHAUSTED],
            handoff_list_url(reason_code=RETRIES_EXHAUSTED, workspace=ws),
            cap=cap,
        ),
    }


def _activity_figures(
    scope: Iterable[int], counts: dict[str, int], *, cap: int, ws: int | None
) -> dict:
    """The figures read from attempts, operator events and findings."""
    return {
        "duplicate_preventions": _figure(
            counts["duplicates"], drilldown_url("duplicates", ws), cap=cap
        ),
        "outcome_validation_failures": _figure(
            live_findings(scope).filter(outcome_validation=True).count(),
            findings_url(outcome_validation=1, workspace=ws),
        ),
        "manual_interventions": _figure(
            counts["interventions"], drilldown_url("interventions", ws), cap=cap
        ),
    }


def _ack_figures(ack: AckTimes, *, ws: int | None) -> dict:
    link = handoff_list_url(state=S.NEEDS_ATTENTION, workspace=ws)
    return {
        "ack_median_seconds": _figure(ack.median_seconds, link),
        "ack_worst_seconds": _figure(ack.worst_seconds, link),
        "unacknowledged": _figure(ack.unacknowledged, link),
    }


def _failure_rates_linked(scope: Iterable[int], *, now: datetime, ws: int | None) -> list[dict]:
    return [
        {
            **r,
            "link": handoff_list_url(state=S.NEEDS_ATTENTION, q=f"{r['workflow']}:", workspace=ws),
        }
        for r in failure_rates(scope, now=now)
    ]


def _findings_linked(kinds: dict[str, int], *, ws: int | None) -> list[dict]:
    return [
        {
            "kind": kind,
            "label": FindingKind(kind).label,
            "value": n,
            "link": findings_url(kind=kind, workspace=ws),
        }
        for kind, n in kinds.items()
    ]


def health_summary(
    workspace_ids: list[int], *, now: datetime | None = None, workspace: int | None = None
) -> dict:
    """Every figure of the health dashboard, each with the link to the list behind it."""
    # Ages and dwell times are measured against the stored times' own clock, the database's.
    now = now or db_time()
    scope = [workspace] if workspace is not None else workspace_ids
    ws = workspace
    kinds = findings_by_kind(scope)
    ack = time_to_acknowledge(scope, now=now)
    cap = count_cap()
    counts = dashboard_counts(scope, cap=cap)
    by_hour = delivered_by_hour(scope, start=series_start(now))
    series = hourly_series(scope, now=now, delivered=by_hour)
    # Every delivery since the series began, those of an hour after `now` too (the page's clock was read first).
    delivered = sum(by_hour.values())
    outcomes = delivered_outcomes(scope, start=series_start(now))
    figures = {
        **_handoff_figures(
            scope, counts, delivered=delivered, outcomes=outcomes, cap=cap, now=now, ws=ws
        ),
        **_activity_figures(scope, counts, cap=cap, ws=ws),
        **_ack_figures(ack, ws=ws),
    }
    return {
        "now": now,
        "figures": figures,
        "ack": ack,
        "count_cap": cap,
        "count_cap_text": f"{cap:,}",
        "window_hours": int(WINDOW.total_seconds() // 3600),
        "failure_rates": _failure_rates_linked(scope, now=now, ws=ws),
        "findings": _findings_linked(kinds, ws=ws),
        "findings_total": sum(kinds.values()),
        "last_run": last_run(ws),
        "series": series,
    }


def health_summary_shared(workspace_ids: list[int], *, workspace: int | None = None) -> dict:
    """`health_summary`, computed at most once per HEALTH_FIGURES_SECONDS for the same workspaces (and the
    same chosen workspace) and shared by everyone who may see them; the summary's `now` says when it was
    computed, and the page says so. The key is the scope itself, so nobody is served figures of a workspace
    that is not theirs."""
    seconds = settings.HEALTH_FIGURES_SECONDS
    if seconds <= 0:
        return health_summary(workspace_ids, workspace=workspace)
    scope = ",".join(str(ws) for ws in sorted(set(workspace_ids)))
    key = f"health-summary:{scope}:{'' if workspace is None else workspace}"
    summary = cache.get(key)
    if summary is None:
        summary = health_summary(workspace_ids, workspace=workspace)
        cache.set(key, summary, timeout=seconds)
    return summary


def duplicate_attempts(workspace_ids: list[int], *, limit: int = 100) -> QuerySet[Attempt]:
    return (
        duplicate_preventions(attempts_scoped(workspace_ids))
        .select_related("handoff")
        .order_by("-started_at", "-id")[:limit]
    )


def manual_interventions(workspace_ids: list[int], *, limit: int = 100) -> QuerySet[HandoffEvent]:
    return (
        interventions(events_scoped(workspace_ids))
        .select_related("handoff")
        .order_by("-at", "-id")[:limit]
    )
