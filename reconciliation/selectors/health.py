"""Reads for the health dashboard.

Every figure is an aggregate over indexed columns (GROUP BY state, workflow, workspace) or a capped
list, so the cost of the dashboard does not grow with the history. Callers pass the workspaces in
scope; `None` means every workspace (only /metrics, behind its token, does that).
"""

import statistics
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.db.models import Count, Min, QuerySet
from django.db.models.functions import TruncHour

from outbox.clock import db_time
from outbox.models import Attempt, Handoff, HandoffEvent, HandoffState
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
    retries_exhausted,
)
from reconciliation.selectors.findings import findings_by_kind, last_run, live_findings
from reconciliation.selectors.links import drilldown_url, findings_url, handoff_list_url
from reconciliation.selectors.needing_person import NEEDS_PERSON_FILTER, needing_person_condition
from reconciliation.selectors.scope import handoffs_scoped, scoped

S = HandoffState


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
    pairs = acknowledged_recently(handoffs, now=now).values_list(
        "attention_since", "acknowledged_at"
    )[:ACK_SAMPLE_CAP]
    durations = [ack_seconds(failed, ack) for failed, ack in pairs]
    waiting = handoffs.filter(state=S.NEEDS_ATTENTION, acknowledged_at__isnull=True).aggregate(
        n=Count("id"), oldest=Min("attention_since")
    )
    return AckTimes(
        count=len(durations),
        median_seconds=statistics.median(durations) if durations else None,
        worst_seconds=max(durations) if durations else None,
        unacknowledged=waiting["n"],
        oldest_unacknowledged=waiting["oldest"],
    )


def failure_rates(workspace_ids: Iterable[int] | None) -> list[dict]:
    """Per workflow and rule version: handoffs, how many ever needed attention, and the rate."""
    rows = (
        failure_rate_base(handoffs_scoped(workspace_ids))
        .order_by()
        .values("workflow", "rule_version")
        .annotate(**failure_counts())
        .order_by("workflow", "rule_version")
    )
    return [{**r, "rate": rate(r["failed"], r["total"])} for r in rows]


def hourly_series(
    workspace_ids: Iterable[int] | None, *, now: datetime, hours: int = 24
) -> list[dict]:
    """Deliveries and failed attempts per hour over the last `hours` hours, oldest first (24 GROUP BY rows)."""
    end = now.replace(minute=0, second=0, microsecond=0)
    start = end - timedelta(hours=hours - 1)
    delivered = dict(
        handoffs_scoped(workspace_ids)
        .filter(delivered_at__gte=start)
        .annotate(hour=TruncHour("delivered_at"))
        .order_by()
        .values_list("hour")
        .annotate(n=Count("id"))
    )
    failed = dict(
        failed_attempts(scoped(Attempt.objects.all(), workspace_ids, "handoff__workspace_id"))
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


def _state_counts(handoffs: QuerySet[Handoff]) -> tuple[dict[str, int], int]:
    """Handoffs by state, and how many need a person: one GROUP BY, the second as a filtered count."""
    rows = list(
        handoffs.order_by()
        .values_list("state")
        .annotate(n=Count("id"), needing=Count("id", filter=needing_person_condition()))
    )
    return {state: n for state, n, _needing in rows}, sum(needing for _state, _n, needing in rows)


def _figure(value, link: str) -> dict:
    return {"value": value, "link": link}


def _age_seconds(since: datetime | None, now: datetime) -> float | None:
    return (now - since).total_seconds() if since else None


def _handoff_figures(handoffs: QuerySet[Handoff], *, now: datetime, ws: int | None) -> dict:
    """The figures read from the handoffs themselves: states, the oldest waiting, retries exhausted."""
    by_state, needing = _state_counts(handoffs)
    oldest_pending = handoffs.filter(state=S.PENDING).aggregate(m=Min("created_at"))["m"]
    oldest_in_flight = handoffs.filter(state=S.IN_FLIGHT).aggregate(m=Min("updated_at"))["m"]

    def of_state(state: str) -> dict:
        return _figure(by_state.get(state, 0), handoff_list_url(state=state, workspace=ws))

    return {
        "completed": of_state(S.DELIVERED),
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
            needing, handoff_list_url(state=NEEDS_PERSON_FILTER, workspace=ws)
        ),
        "retry_exhausted": _figure(
            retries_exhausted(handoffs).count(),
            handoff_list_url(reason_code=RETRIES_EXHAUSTED, workspace=ws),
        ),
    }


def _activity_figures(scope: Iterable[int], *, ws: int | None) -> dict:
    """The figures read from attempts, operator events and findings."""
    duplicates = duplicate_preventions(
        scoped(Attempt.objects.all(), scope, "handoff__workspace_id")
    ).count()
    operator_actions = interventions(
        scoped(HandoffEvent.objects.all(), scope, "handoff__workspace_id")
    ).count()
    return {
        "duplicate_preventions": _figure(duplicates, drilldown_url("duplicates", ws)),
        "outcome_validation_failures": _figure(
            live_findings(scope).filter(outcome_validation=True).count(),
            findings_url(outcome_validation=1, workspace=ws),
        ),
        "manual_interventions": _figure(operator_actions, drilldown_url("interventions", ws)),
    }


def _ack_figures(ack: AckTimes, *, ws: int | None) -> dict:
    link = handoff_list_url(state=S.NEEDS_ATTENTION, workspace=ws)
    return {
        "ack_median_seconds": _figure(ack.median_seconds, link),
        "ack_worst_seconds": _figure(ack.worst_seconds, link),
        "unacknowledged": _figure(ack.unacknowledged, link),
    }


def _failure_rates_linked(scope: Iterable[int], *, ws: int | None) -> list[dict]:
    return [
        {
            **r,
            "link": handoff_list_url(state=S.NEEDS_ATTENTION, q=f"{r['workflow']}:", workspace=ws),
        }
        for r in failure_rates(scope)
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
    figures = {
        **_handoff_figures(handoffs_scoped(scope), now=now, ws=ws),
        **_activity_figures(scope, ws=ws),
        **_ack_figures(ack, ws=ws),
    }
    return {
        "now": now,
        "figures": figures,
        "ack": ack,
        "failure_rates": _failure_rates_linked(scope, ws=ws),
        "findings": _findings_linked(kinds, ws=ws),
        "findings_total": sum(kinds.values()),
        "last_run": last_run(ws),
        "series": hourly_series(scope, now=now),
    }


def duplicate_attempts(workspace_ids: list[int], *, limit: int = 100) -> QuerySet[Attempt]:
    return (
        duplicate_preventions(Attempt.objects.filter(handoff__workspace_id__in=workspace_ids))
        .select_related("handoff")
        .order_by("-started_at", "-id")[:limit]
    )


def manual_interventions(workspace_ids: list[int], *, limit: int = 100) -> QuerySet[HandoffEvent]:
    return (
        interventions(HandoffEvent.objects.filter(handoff__workspace_id__in=workspace_ids))
        .select_related("handoff")
        .order_by("-at", "-id")[:limit]
    )
